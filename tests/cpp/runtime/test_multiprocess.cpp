// SPDX-License-Identifier: MIT
//
// Run under `mpirun -np 2` (ctest does): two processes, CPU tensors, Gloo.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "common/row_parallel.h"
#include "common/world.h"
#include "runtime/communicator.h"
#include "runtime/executor_cache.h"

namespace mdfuser {
namespace {

using test::world;

TEST(Multiprocess, GlooAllreduceSumsOverTheTeam) {
  c10d::Backend& gloo = world->backend({0, 1}, hir::CommunicatorBackend::kGloo);
  std::vector<at::Tensor> buffers = {
      at::full({4}, static_cast<double>(world->rank() + 1))};
  gloo.allreduce(buffers)->wait();
  EXPECT_TRUE(at::equal(buffers[0], at::full({4}, 3.0)));
}

TEST(Multiprocess, BackendsAreCachedPerTeam) {
  c10d::Backend* first =
      &world->backend({0, 1}, hir::CommunicatorBackend::kGloo);
  c10d::Backend* second =
      &world->backend({0, 1}, hir::CommunicatorBackend::kGloo);
  EXPECT_EQ(first, second);
}

TEST(Multiprocess, BarrierReturnsOnEveryRank) {
  world->barrier();
  world->barrier();
}

// The same full tensors on every rank, from the indices alone.
at::Tensor pattern(int64_t rows, int64_t cols, int64_t salt) {
  at::Tensor i = at::arange(rows).unsqueeze(1);
  at::Tensor j = at::arange(cols).unsqueeze(0);
  return ((i * 7 + j * 3 + salt) % 5 - 2).to(at::kFloat);
}

TEST(Multiprocess, RowParallelLinearEqualsTheUnshardedLinear) {
  const int64_t h = 4;
  const int64_t d = world->size();
  const int64_t r = world->rank();
  for (int64_t s : {1, 3}) {
    std::unique_ptr<Fusion> fusion =
        test::makeRowParallelLinear(h, d, s, DataType::Float);
    FusionExecutorCache cache(*fusion);
    for (int64_t t : {6, 7, 2}) {
      at::Tensor inp = pattern(t, 4 * h, 1);
      at::Tensor w = pattern(h, 4 * h, 2);
      const int64_t k = 4 * h / d;
      std::vector<at::Tensor> out = cache.run(
          {inp.narrow(1, r * k, k).contiguous(),
           w.narrow(1, r * k, k).contiguous()},
          *world);
      EXPECT_TRUE(at::equal(out[0], at::linear(inp, w)))
          << "s = " << s << ", t = " << t << " on rank " << r;
    }
  }
}

} // namespace
} // namespace mdfuser

int main(int argc, char** argv) {
  return mdfuser::test::runWorldTests(argc, argv, 2, 2);
}
