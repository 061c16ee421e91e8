// SPDX-License-Identifier: MIT
#include "ir/ops/load_store.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

LoadStoreOp::LoadStoreOp(
    IrContainer* container, TensorView* out, TensorView* in)
    : TensorOp(container, OpType::Set, {in}, {out}) {}

TensorView* LoadStoreOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> LoadStoreOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in(), producer->toString(), " is not an operand");
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  return mapAxisByAxis(producer, consumer);
}

TensorOp* LoadStoreOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<LoadStoreOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]));
}

TensorView* set(TensorView* in) {
  ops::requireTensor(in, "set", "input");
  ops::requireSameFusion({in}, "set");
  std::vector<IterDomain*> out_ids;
  for (IterDomain* id : in->logicalNoReductions()) {
    out_ids.push_back(ops::freshAxis(id, id->iterType()));
  }
  TensorView* out = ops::newTensor(in->container(), out_ids, in->dtype());
  in->container()->create<LoadStoreOp>(out, in)->registerAsDefinition();
  return out;
}

} // namespace mdfuser
