// SPDX-License-Identifier: MIT
//
// The ring decompositions' programs (host_ir/ring_decomposition.h), built
// directly and run over Gloo on CPU tensors. ctest runs this binary under
// `mpirun -np 2` and `mpirun -np 3`. Every rank builds the global operands
// from the same seed and checks its result exactly against ATen on them.

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/program_builder.h"
#include "common/world.h"
#include "host_ir/ring_decomposition.h"
#include "runtime/communicator.h"
#include "runtime/evaluator.h"

namespace mdfuser {
namespace {

using test::world;

at::Tensor integers(std::vector<int64_t> shape, int64_t seed) {
  // Small integers keep float sums exact, so results compare exactly.
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randint(-3, 4, shape, gen, at::kFloat);
}

std::vector<Scalar*> constants(
    hir::HostIrContainer& hic, const std::vector<int64_t>& shape) {
  std::vector<Scalar*> result;
  for (int64_t extent : shape) {
    result.push_back(constant(hic.ir(), extent));
  }
  return result;
}

// The row-parallel linear's allreduce ring over the world: this rank holds
// columns [rank * k, (rank + 1) * k) of x [t, d * k] and of w [n, d * k];
// every rank gets x @ w^T. `apart` receives peers' parts in a buffer of
// their own, as on the CUDA backend when the result is the program's output.
void runLinearAllreduce(int64_t t, bool apart, int64_t seed) {
  const int64_t d = world->size();
  const int64_t me = world->rank();
  const int64_t k = 3;
  const int64_t n = 4;
  test::ProgramBuilder b;
  TensorView* x = b.input({t, k});
  TensorView* w = b.input({n, k});
  TensorView* out = b.tensor({t, n});
  TensorView* receive = apart ? b.tensor({t, n}) : out;
  b.output(out);
  std::unique_ptr<hir::HostIrContainer> hic = b.build();
  hic->topLevel().pushBack(
      hic->create<hir::Allocate>(out, constants(*hic, {t, n})));
  if (apart) {
    hic->topLevel().pushBack(
        hic->create<hir::Allocate>(receive, constants(*hic, {t, n})));
  }
  std::vector<int64_t> team(d);
  for (int64_t i = 0; i < d; ++i) {
    team[i] = i;
  }
  hir::emitLinearAllreduce(
      hir::Ring{
          *hic, hic->topLevel(), team, me, hir::CommunicatorBackend::kGloo},
      x,
      0,
      w,
      out,
      0,
      constant(hic->ir(), t),
      receive);

  const at::Tensor full_x = integers({t, d * k}, seed);
  const at::Tensor full_w = integers({n, d * k}, seed + 1);
  HostIrEvaluator evaluator(*hic, c10::Device(c10::kCPU), world);
  const std::vector<at::Tensor> result = evaluator.run(
      {full_x.narrow(1, me * k, k).contiguous(),
       full_w.narrow(1, me * k, k).contiguous()},
      {});
  const at::Tensor expected = at::matmul(full_x, full_w.t());
  EXPECT_TRUE(at::equal(result.at(0), expected))
      << "t = " << t << ", apart = " << apart << "\n"
      << result.at(0) << "\n"
      << expected << "\n"
      << hic->toString();
}

TEST(RingDecomposition, LinearAllreduceInPlaceEqualsTheUnshardedLinear) {
  const int64_t d = world->size();
  // Even parts, a short last part, and parts of one row or none.
  for (int64_t t : {2 * d, 2 * d + 1, d - 1, int64_t{1}}) {
    runLinearAllreduce(t, /*apart=*/false, 10 + t);
  }
}

TEST(RingDecomposition, LinearAllreduceReceivingApartEqualsTheUnshardedLinear) {
  // Every part but this device's arrives in the receive buffer and is
  // copied out; this device's is computed in the output.
  const int64_t d = world->size();
  for (int64_t t : {2 * d, 2 * d + 1, d - 1, int64_t{1}}) {
    runLinearAllreduce(t, /*apart=*/true, 20 + t);
  }
}

} // namespace
} // namespace mdfuser

int main(int argc, char** argv) {
  return mdfuser::test::runWorldTests(argc, argv, 2, 3);
}
