// SPDX-License-Identifier: MIT
//
// Every collective type of postCollective, CPU tensors over Gloo. ctest runs
// this binary under `mpirun -np 2` and `mpirun -np 3`. Each rank builds every
// rank's input from its rank number and checks its own result exactly.

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "common/expect_error.h"
#include "common/world.h"
#include "runtime/collectives.h"
#include "runtime/communicator.h"

namespace mdfuser {
namespace {

using test::world;

using Op = c10d::ReduceOp::RedOpType;
constexpr Op kOps[] = {
    c10d::ReduceOp::SUM, c10d::ReduceOp::MAX, c10d::ReduceOp::MIN};
constexpr double kUnwritten = -99.0;

const char* opName(Op op) {
  switch (op) {
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::MIN:
      return "MIN";
    default:
      return "SUM";
  }
}

std::vector<int64_t> worldTeam() {
  std::vector<int64_t> team(world->size());
  std::iota(team.begin(), team.end(), 0);
  return team;
}

// The world's ranks from rank 1 on: team positions differ from ranks, as
// for a mesh that lists its devices in another order.
std::vector<int64_t> rotatedTeam() {
  std::vector<int64_t> team = worldTeam();
  std::rotate(team.begin(), team.begin() + 1, team.end());
  return team;
}

std::vector<int64_t> without(std::vector<int64_t> ranks, int64_t rank) {
  std::erase(ranks, rank);
  return ranks;
}

bool contains(const std::vector<int64_t>& ranks, int64_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// Rank `rank`'s data: small integers of either sign, different per rank.
at::Tensor data(
    int64_t rank, at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) {
  const int64_t numel = c10::multiply_integers(shape);
  return ((at::arange(numel) * 7 + rank) % 11 - 5).to(dtype).view(shape);
}

// `shape` with dimension `axis` multiplied by `n`.
std::vector<int64_t> times(at::IntArrayRef shape, int64_t axis, int64_t n) {
  std::vector<int64_t> result = shape.vec();
  result[axis] *= n;
  return result;
}

at::Tensor reduceAll(const std::vector<at::Tensor>& tensors, Op op) {
  at::Tensor stacked = at::stack(tensors);
  switch (op) {
    case c10d::ReduceOp::MAX:
      return stacked.amax(0);
    case c10d::ReduceOp::MIN:
      return stacked.amin(0);
    default:
      return stacked.sum(0);
  }
}

// A rank's buffer: the tensor itself, or (narrow) a non-contiguous view of a
// bigger one whose other elements hold kUnwritten, so a test can check that
// nothing outside the view was written.
struct Buffer {
  at::Tensor base;
  at::Tensor view;
};

Buffer buffer(at::IntArrayRef shape, bool narrow, at::ScalarType dtype) {
  std::vector<int64_t> base_shape = shape.vec();
  base_shape.back() += narrow ? 3 : 0;
  Buffer b;
  b.base = at::full(base_shape, kUnwritten, at::dtype(dtype));
  b.view = narrow ? b.base.narrow(-1, 1, shape.back()) : b.base;
  return b;
}

Buffer input(const at::Tensor& values, bool narrow) {
  Buffer b = buffer(values.sizes(), narrow, values.scalar_type());
  b.view.copy_(values);
  return b;
}

Buffer output(at::IntArrayRef shape, bool narrow, at::ScalarType dtype) {
  return buffer(shape, narrow, dtype);
}

// `b` holds `values` in its view and is unwritten elsewhere.
::testing::AssertionResult holds(const Buffer& b, const at::Tensor& values) {
  Buffer expected = input(values, !b.view.is_same(b.base));
  if (at::equal(b.base, expected.base)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "rank " << world->rank() << " holds\n"
                                       << b.base << "\nexpected\n"
                                       << expected.base;
}

// Posts `request` on the Gloo backend of its team and waits.
void run(const CollectiveRequest& request) {
  c10d::Backend& gloo =
      world->backend(request.team, hir::CommunicatorBackend::kGloo);
  postCollective(gloo, request).wait();
}

CollectiveRequest request(
    CommunicationType type,
    std::vector<int64_t> team,
    std::vector<int64_t> senders,
    std::vector<int64_t> receivers) {
  CollectiveRequest r;
  r.type = type;
  r.team = std::move(team);
  r.senders = std::move(senders);
  r.receivers = std::move(receivers);
  r.rank = world->rank();
  return r;
}

TEST(Collectives, AllreduceReducesOverTheTeam) {
  const std::vector<int64_t> team = worldTeam();
  const std::vector<int64_t> shape = {3, 4};
  for (Op op : kOps) {
    std::vector<at::Tensor> all;
    for (int64_t k : team) {
      all.push_back(data(k, shape));
    }
    const at::Tensor expected = reduceAll(all, op);
    for (bool narrow : {false, true}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(
            ::testing::Message() << "op " << opName(op) << ", narrow " << narrow
                                 << ", in place " << in_place);
        CollectiveRequest r =
            request(CommunicationType::Allreduce, team, team, team);
        r.op = op;
        Buffer in = input(all[world->rank()], narrow);
        Buffer out = in_place ? in : output(shape, narrow, at::kFloat);
        r.in = in.view;
        r.out = out.view;
        run(r);
        EXPECT_TRUE(holds(out, expected));
        if (!in_place) {
          EXPECT_TRUE(holds(in, all[world->rank()]));
        }
      }
    }
  }
}

TEST(Collectives, ReduceScatterLeavesPartIOfTheReductionOnRankI) {
  const std::vector<int64_t> team = worldTeam();
  const int64_t n = world->size();
  const std::vector<int64_t> part = {2, 3, 4};
  for (int64_t axis : {0, 1, 2}) {
    for (Op op : kOps) {
      std::vector<at::Tensor> all;
      for (int64_t k : team) {
        all.push_back(data(k, times(part, axis, n)));
      }
      const at::Tensor expected =
          reduceAll(all, op).chunk(n, axis)[world->rank()];
      for (bool narrow : {false, true}) {
        SCOPED_TRACE(
            ::testing::Message() << "axis " << axis << ", op " << opName(op)
                                 << ", narrow " << narrow);
        CollectiveRequest r =
            request(CommunicationType::ReduceScatter, team, team, team);
        r.op = op;
        r.axis = axis;
        Buffer in = input(all[world->rank()], narrow);
        Buffer out = output(part, narrow, at::kFloat);
        r.in = in.view;
        r.out = out.view;
        run(r);
        EXPECT_TRUE(holds(out, expected));
        EXPECT_TRUE(holds(in, all[world->rank()]));
      }
    }
  }
}

TEST(Collectives, AllgatherConcatenatesTheParts) {
  const std::vector<int64_t> team = worldTeam();
  const std::vector<int64_t> part = {2, 3, 4};
  for (int64_t axis : {0, 1, 2}) {
    std::vector<at::Tensor> all;
    for (int64_t k : team) {
      all.push_back(data(k, part));
    }
    for (bool narrow : {false, true}) {
      SCOPED_TRACE(
          ::testing::Message() << "axis " << axis << ", narrow " << narrow);
      CollectiveRequest r =
          request(CommunicationType::Allgather, team, team, team);
      r.axis = axis;
      Buffer in = input(all[world->rank()], narrow);
      Buffer out = output(times(part, axis, world->size()), narrow, at::kFloat);
      r.in = in.view;
      r.out = out.view;
      run(r);
      EXPECT_TRUE(holds(out, at::cat(all, axis)));
      EXPECT_TRUE(holds(in, all[world->rank()]));
    }
  }
}

// The team's order, not the ranks', numbers the parts.
TEST(Collectives, AllgatherOrdersThePartsByTeamPosition) {
  std::vector<int64_t> team = worldTeam();
  std::reverse(team.begin(), team.end());
  std::vector<at::Tensor> all;
  for (int64_t k : team) {
    all.push_back(data(k, {2, 3}));
  }
  CollectiveRequest r = request(CommunicationType::Allgather, team, team, team);
  Buffer in = input(data(world->rank(), {2, 3}), false);
  Buffer out = output({2 * world->size(), 3}, false, at::kFloat);
  r.in = in.view;
  r.out = out.view;
  run(r);
  EXPECT_TRUE(holds(out, at::cat(all, 0)));
}

// Rank i holds block row i of a global tensor and ends with block column i.
TEST(Collectives, AllToAllTransposesTheBlocks) {
  const std::vector<int64_t> team = worldTeam();
  const int64_t n = world->size();
  const std::vector<int64_t> part = {2, 3, 4};
  const std::pair<int64_t, int64_t> axes[] = {{0, 1}, {1, 0}, {2, 0}, {1, 2}};
  for (auto [axis, out_axis] : axes) {
    const at::Tensor global = data(7, times(times(part, axis, n), out_axis, n));
    for (bool narrow : {false, true}) {
      SCOPED_TRACE(
          ::testing::Message() << "axis " << axis << ", out_axis " << out_axis
                               << ", narrow " << narrow);
      CollectiveRequest r =
          request(CommunicationType::AllToAll, team, team, team);
      r.axis = axis;
      r.out_axis = out_axis;
      const at::Tensor mine = global.chunk(n, axis)[world->rank()];
      Buffer in = input(mine, narrow);
      Buffer out = output(times(part, axis, n), narrow, at::kFloat);
      r.in = in.view;
      r.out = out.view;
      run(r);
      EXPECT_TRUE(holds(out, global.chunk(n, out_axis)[world->rank()]));
      EXPECT_TRUE(holds(in, mine));
    }
  }
}

// The rooted collectives run on a rotated team, every rank in turn the root,
// first among the receivers (senders), then outside them: with three ranks,
// root 2 broadcasts to {0, 1} (team order {1, 0}), and so on.
TEST(Collectives, BroadcastCopiesTheRootsInput) {
  const std::vector<int64_t> team = rotatedTeam();
  for (int64_t root : team) {
    for (bool root_receives : {true, false}) {
      for (bool narrow : {false, true}) {
        SCOPED_TRACE(
            ::testing::Message() << "root " << root << ", root receives "
                                 << root_receives << ", narrow " << narrow);
        const std::vector<int64_t> receivers =
            root_receives ? team : without(team, root);
        CollectiveRequest r =
            request(CommunicationType::Broadcast, team, {root}, receivers);
        const at::Tensor values = data(root, {3, 4});
        Buffer in = input(values, narrow);
        Buffer out = output({3, 4}, narrow, at::kFloat);
        if (world->rank() == root) {
          r.in = in.view;
        }
        if (contains(receivers, world->rank())) {
          r.out = out.view;
        }
        run(r);
        EXPECT_TRUE(holds(out, r.out.defined() ? values : out.view));
        EXPECT_TRUE(holds(in, values));
      }
    }
  }
}

TEST(Collectives, ScatterSendsPartIToReceiverI) {
  const std::vector<int64_t> team = rotatedTeam();
  const std::vector<int64_t> part = {2, 3};
  for (int64_t root : team) {
    for (bool root_receives : {true, false}) {
      const std::vector<int64_t> receivers =
          root_receives ? team : without(team, root);
      const auto n = static_cast<int64_t>(receivers.size());
      for (int64_t axis : {0, 1}) {
        for (bool narrow : {false, true}) {
          SCOPED_TRACE(
              ::testing::Message()
              << "root " << root << ", root receives " << root_receives
              << ", axis " << axis << ", narrow " << narrow);
          CollectiveRequest r =
              request(CommunicationType::Scatter, team, {root}, receivers);
          r.axis = axis;
          const at::Tensor whole = data(root, times(part, axis, n));
          Buffer in = input(whole, narrow);
          Buffer out = output(part, narrow, at::kFloat);
          const int64_t i =
              std::find(receivers.begin(), receivers.end(), world->rank()) -
              receivers.begin();
          if (world->rank() == root) {
            r.in = in.view;
          }
          if (i < n) {
            r.out = out.view;
          }
          run(r);
          if (i < n) {
            EXPECT_TRUE(holds(out, whole.chunk(n, axis)[i]));
          }
          EXPECT_TRUE(holds(in, whole));
        }
      }
    }
  }
}

TEST(Collectives, GatherConcatenatesTheSendersOnTheRoot) {
  const std::vector<int64_t> team = rotatedTeam();
  const std::vector<int64_t> part = {2, 3};
  for (int64_t root : team) {
    for (bool root_sends : {true, false}) {
      const std::vector<int64_t> senders =
          root_sends ? team : without(team, root);
      std::vector<at::Tensor> all;
      for (int64_t k : senders) {
        all.push_back(data(k, part));
      }
      for (int64_t axis : {0, 1}) {
        for (bool narrow : {false, true}) {
          SCOPED_TRACE(
              ::testing::Message()
              << "root " << root << ", root sends " << root_sends << ", axis "
              << axis << ", narrow " << narrow);
          CollectiveRequest r =
              request(CommunicationType::Gather, team, senders, {root});
          r.axis = axis;
          Buffer in = input(data(world->rank(), part), narrow);
          Buffer out = output(
              times(part, axis, static_cast<int64_t>(all.size())),
              narrow,
              at::kFloat);
          if (contains(senders, world->rank())) {
            r.in = in.view;
          }
          if (world->rank() == root) {
            r.out = out.view;
          }
          run(r);
          if (world->rank() == root) {
            EXPECT_TRUE(holds(out, at::cat(all, axis)));
          }
          EXPECT_TRUE(holds(in, data(world->rank(), part)));
        }
      }
    }
  }
}

// A root outside the senders must contribute the identity: all-negative
// entries catch a 0 contributed to MAX, all-positive ones a 0 to MIN.
TEST(Collectives, ReduceReducesTheSendersOnTheRoot) {
  const std::vector<int64_t> team = rotatedTeam();
  const std::vector<int64_t> shape = {4, 5};
  for (int64_t root : team) {
    for (bool root_sends : {true, false}) {
      const std::vector<int64_t> senders =
          root_sends ? team : without(team, root);
      for (at::ScalarType dtype : {at::kFloat, at::kLong}) {
        std::vector<at::Tensor> all;
        for (int64_t k : senders) {
          all.push_back(data(k, shape, dtype));
        }
        const at::Tensor mine = data(world->rank(), shape, dtype);
        for (Op op : kOps) {
          const at::Tensor expected = reduceAll(all, op);
          if (!root_sends) {
            ASSERT_TRUE(
                (expected < 0).any().item<bool>() &&
                (expected > 0).any().item<bool>());
          }
          for (bool narrow : {false, true}) {
            SCOPED_TRACE(
                ::testing::Message()
                << "root " << root << ", root sends " << root_sends
                << ", dtype " << dtype << ", op " << opName(op) << ", narrow "
                << narrow);
            CollectiveRequest r =
                request(CommunicationType::Reduce, team, senders, {root});
            r.op = op;
            Buffer in = input(mine, narrow);
            Buffer out = output(shape, narrow, dtype);
            if (contains(senders, world->rank())) {
              r.in = in.view;
            }
            if (world->rank() == root) {
              r.out = out.view;
            }
            run(r);
            EXPECT_TRUE(
                holds(out, world->rank() == root ? expected : out.view));
            EXPECT_TRUE(holds(in, mine));
          }
        }
      }
    }
  }
}

// With three ranks, the third one of the team takes no part and gets
// nothing to wait for.
TEST(Collectives, SendRecvCopiesBetweenTwoRanks) {
  const std::vector<int64_t> team = rotatedTeam();
  for (int64_t src : team) {
    for (int64_t dst : without(team, src)) {
      for (bool narrow : {false, true}) {
        SCOPED_TRACE(
            ::testing::Message()
            << src << " -> " << dst << ", narrow " << narrow);
        CollectiveRequest r =
            request(CommunicationType::SendRecv, team, {src}, {dst});
        Buffer in = input(data(src, {3, 4}), narrow);
        Buffer out = output({3, 4}, narrow, at::kFloat);
        if (world->rank() == src) {
          r.in = in.view;
        }
        if (world->rank() == dst) {
          r.out = out.view;
        }
        c10d::Backend& gloo =
            world->backend(team, hir::CommunicatorBackend::kGloo);
        PendingCollective pending = postCollective(gloo, r);
        EXPECT_EQ(
            pending.empty(), world->rank() != src && world->rank() != dst);
        pending.wait();
        EXPECT_TRUE(
            holds(out, world->rank() == dst ? data(src, {3, 4}) : out.view));
        EXPECT_TRUE(holds(in, data(src, {3, 4})));
      }
    }
  }
}

// Each member's input lands on the next member of the team, in team order,
// the last member's on the first. Inputs differ in length from member to
// member, as the chunks of an uneven axis do in a ring.
TEST(Collectives, CollectivePermuteShiftsToTheNextMember) {
  for (const std::vector<int64_t>& team : {worldTeam(), rotatedTeam()}) {
    const auto n = static_cast<int64_t>(team.size());
    const int64_t me =
        std::find(team.begin(), team.end(), world->rank()) - team.begin();
    const int64_t previous = team[(me + n - 1) % n];
    auto rows = [](int64_t rank) { return rank % 2 + 1; };
    for (bool narrow : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "narrow " << narrow);
      CollectiveRequest r =
          request(CommunicationType::CollectivePermute, team, team, team);
      Buffer in = input(data(world->rank(), {rows(world->rank()), 4}), narrow);
      Buffer out = output({rows(previous), 4}, narrow, at::kFloat);
      r.in = in.view;
      r.out = out.view;
      run(r);
      EXPECT_TRUE(holds(out, data(previous, {rows(previous), 4})));
      EXPECT_TRUE(holds(in, data(world->rank(), {rows(world->rank()), 4})));
    }
  }
}

// With a shift s, each member's input lands on the member s places on, and
// the member s places back's arrives: every shift of the team, one after the
// other (a direct reduce-scatter's steps).
TEST(Collectives, CollectivePermuteShiftsByAnyPlaces) {
  for (const std::vector<int64_t>& team : {worldTeam(), rotatedTeam()}) {
    const auto n = static_cast<int64_t>(team.size());
    const int64_t me =
        std::find(team.begin(), team.end(), world->rank()) - team.begin();
    for (int64_t shift = 1; shift < n; ++shift) {
      SCOPED_TRACE(::testing::Message() << "shift " << shift);
      const int64_t from = team[(me + n - shift) % n];
      CollectiveRequest r =
          request(CommunicationType::CollectivePermute, team, team, team);
      r.shift = shift;
      Buffer in = input(data(world->rank(), {2, 3}), false);
      Buffer out = output({2, 3}, false, at::kFloat);
      r.in = in.view;
      r.out = out.view;
      run(r);
      EXPECT_TRUE(holds(out, data(from, {2, 3})));
    }
    if (n > 1) {
      // A shift of the whole team names no other member.
      CollectiveRequest r =
          request(CommunicationType::CollectivePermute, team, team, team);
      r.shift = n;
      r.in = at::zeros({2});
      r.out = at::zeros({2});
      c10d::Backend& gloo =
          world->backend(team, hir::CommunicatorBackend::kGloo);
      EXPECT_INTERNAL_ERROR(
          postCollective(gloo, r), "shifts by 1 to " + std::to_string(n - 1));
    }
  }
}

// A team that is a part of the world: the others post nothing.
TEST(Collectives, AllreduceOverASubteam) {
  const std::vector<int64_t> team = {0, world->size() - 1};
  if (!contains(team, world->rank())) {
    return;
  }
  CollectiveRequest r = request(CommunicationType::Allreduce, team, team, team);
  Buffer in = input(data(world->rank(), {3}), false);
  Buffer out = output({3}, false, at::kFloat);
  r.in = in.view;
  r.out = out.view;
  run(r);
  EXPECT_TRUE(holds(out, data(0, {3}) + data(world->size() - 1, {3})));
}

// No backend call: the result is there at once, and nothing is pending.
TEST(Collectives, ATeamOfOneCopiesLocally) {
  const std::vector<int64_t> team = {world->rank()};
  c10d::Backend& gloo = world->backend(team, hir::CommunicatorBackend::kGloo);
  // Every type but SendRecv, which needs two ranks; a CollectivePermute
  // sends to itself.
  for (CommunicationType type :
       {CommunicationType::Allreduce,
        CommunicationType::ReduceScatter,
        CommunicationType::Allgather,
        CommunicationType::AllToAll,
        CommunicationType::Broadcast,
        CommunicationType::Scatter,
        CommunicationType::Gather,
        CommunicationType::Reduce,
        CommunicationType::CollectivePermute}) {
    SCOPED_TRACE(::testing::Message() << type);
    CollectiveRequest r = request(type, team, team, team);
    r.axis = 1;
    Buffer in = input(data(world->rank(), {2, 3}), true);
    Buffer out = output({2, 3}, true, at::kFloat);
    r.in = in.view;
    r.out = out.view;
    PendingCollective pending = postCollective(gloo, r);
    EXPECT_TRUE(pending.empty());
    pending.wait();
    EXPECT_TRUE(holds(out, data(world->rank(), {2, 3})));
  }
}

// Every rank fails the same check before posting anything.
TEST(Collectives, MalformedRequestsAreInternalErrors) {
  const std::vector<int64_t> team = worldTeam();
  c10d::Backend& gloo = world->backend(team, hir::CommunicatorBackend::kGloo);
  CollectiveRequest r = request(CommunicationType::Allgather, team, team, team);
  r.in = at::zeros({2, 3});
  r.out = at::zeros({2 * world->size() + 1, 3});
  EXPECT_INTERNAL_ERROR(
      postCollective(gloo, r),
      "Allgather on rank " + std::to_string(world->rank()) + ": out has shape");

  r.out = at::Tensor();
  EXPECT_INTERNAL_ERROR(
      postCollective(gloo, r), "a receiver needs an output buffer");

  CollectiveRequest broadcast =
      request(CommunicationType::Broadcast, team, {0, 1}, team);
  broadcast.in = at::zeros({2});
  broadcast.out = at::zeros({2});
  if (world->rank() > 1) {
    broadcast.in = at::Tensor();
  }
  EXPECT_INTERNAL_ERROR(postCollective(gloo, broadcast), "expected one root");

  // Rank 1 is in the team but neither the root nor a receiver.
  broadcast.senders = {0};
  broadcast.receivers = {0};
  broadcast.in = world->rank() == 0 ? at::zeros({2}) : at::Tensor();
  broadcast.out = world->rank() == 0 ? at::zeros({2}) : at::Tensor();
  EXPECT_INTERNAL_ERROR(
      postCollective(gloo, broadcast), "team member 1 of (0 1");
}

} // namespace
} // namespace mdfuser

int main(int argc, char** argv) {
  return mdfuser::test::runWorldTests(argc, argv, 2, 3);
}
