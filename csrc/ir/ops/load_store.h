// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = in, axis by axis; where their shardings differ it becomes a
// communication (or, for a replicated input and a sharded output, a local
// slice).
class LoadStoreOp : public TensorOp {
 public:
  LoadStoreOp(IrContainer* container, TensorView* out, TensorView* in);

  TensorView* in() const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;
};

TensorView* set(TensorView* in);

} // namespace mdfuser
