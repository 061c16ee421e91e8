// SPDX-License-Identifier: MIT
//
// Each collective type mapped onto c10d primitives, posted through a
// Posting (runtime/collective_posting.h).
#include "runtime/collectives.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include <ATen/Dispatch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/collective_posting.h"

namespace mdfuser {

// Both backends get the same primitives: Gloo in torch 2.11 implements
// every one used here (the base variants of reduce-scatter and allgather
// included) for SUM, MAX and MIN, which test_collectives checks. The CPU
// path differs only where Gloo writes into a buffer it should just read (see
// postReduce). NCCL needs contiguous buffers, so both backends get them:
// non-contiguous buffers and parts along an inner axis are staged.
namespace {

using collectives_detail::indexIn;
using collectives_detail::listString;
using collectives_detail::Posting;
using collectives_detail::Works;

// `t` as its `n` equal parts along `axis`, stacked: [n, ...part...]. A view.
at::Tensor partsOf(const at::Tensor& t, int64_t axis, int64_t n) {
  return t.unflatten(axis, {n, t.size(axis) / n}).movedim(axis, 0);
}

// c10d buffers are passed flat so that every backend splits them the same
// way (Gloo's base variants chunk along the outermost axis and compare
// shapes; NCCL only counts elements).
at::Tensor flat(const at::Tensor& contiguous) {
  return contiguous.view({-1});
}

// What `op` leaves unchanged: the contribution of a root that sends nothing.
c10::Scalar identity(c10d::ReduceOp::RedOpType op, at::ScalarType dtype) {
  if (op == c10d::ReduceOp::SUM) {
    return 0;
  }
  const bool max = op == c10d::ReduceOp::MAX;
  if (at::isFloatingType(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    return max ? -inf : inf;
  }
  if (dtype == at::kBool) {
    return !max;
  }
  c10::Scalar result;
  AT_DISPATCH_INTEGRAL_TYPES(dtype, "identity", [&] {
    result = max ? std::numeric_limits<scalar_t>::lowest()
                 : std::numeric_limits<scalar_t>::max();
  });
  return result;
}

Works postAllreduce(Posting& p) {
  p.expectWholeTeam();
  p.expectSameShape();
  if (p.alone()) {
    return p.local();
  }
  std::vector<at::Tensor> buffers = {p.inPlace(p.request.in, p.request.out)};
  c10d::AllreduceOptions options;
  options.reduceOp = p.request.op;
  return {p.backend.allreduce(buffers, options)};
}

Works postReduceScatter(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  p.expectParts(r.in, "in", r.out, "out", r.axis, p.size);
  if (p.alone()) {
    return p.local();
  }
  // c10d sends the i-th slice of the flat input to team index i.
  at::Tensor in = flat(p.input(partsOf(r.in, r.axis, p.size)));
  at::Tensor out = flat(p.output(r.out));
  c10d::ReduceScatterOptions options;
  options.reduceOp = r.op;
  return {p.backend._reduce_scatter_base(out, in, options)};
}

Works postAllgather(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  p.expectParts(r.out, "out", r.in, "in", r.axis, p.size);
  if (p.alone()) {
    return p.local();
  }
  at::Tensor in = flat(p.input(r.in));
  at::Tensor out = flat(p.output(partsOf(r.out, r.axis, p.size)));
  return {p.backend._allgather_base(out, in)};
}

Works postAllToAll(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  MDF_CHECK(
      r.axis != r.out_axis, p.where(), "axis and out_axis are both ", r.axis);
  // in and out are both n parts of one block: in along axis, out along
  // out_axis.
  p.expectSplits(r.in, "in", r.out_axis, p.size);
  p.expectParts(
      r.out,
      "out",
      partsOf(r.in, r.out_axis, p.size).select(0, 0),
      "a part of in along out_axis",
      r.axis,
      p.size);
  if (p.alone()) {
    return p.local();
  }
  // Part j of in along out_axis goes to team index j, whose part of out
  // along axis it becomes.
  at::Tensor in = flat(p.input(partsOf(r.in, r.out_axis, p.size)));
  at::Tensor out = flat(p.output(partsOf(r.out, r.axis, p.size)));
  std::vector<int64_t> equal_splits;
  return {p.backend.alltoall_base(out, in, equal_splits, equal_splits)};
}

Works postBroadcast(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.senders.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.senders[0];
  p.expectRootAnd(root, r.receivers, "receivers");
  if (p.is_sender && p.is_receiver) {
    p.expectSameShape();
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::BroadcastOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<at::Tensor> buffers;
  if (p.is_sender) {
    // The root broadcasts from its input (c10d leaves it unchanged) and, when
    // it is also a receiver, has its result at hand.
    buffers = {p.input(r.in)};
    if (p.is_receiver && !r.out.is_same(r.in)) {
      r.out.copy_(r.in);
    }
  } else {
    buffers = {p.output(r.out)};
  }
  return {p.backend.broadcast(buffers, options)};
}

Works postScatter(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.senders.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.senders[0];
  p.expectRootAnd(root, r.receivers, "receivers");
  const auto n = static_cast<int64_t>(r.receivers.size());
  if (p.is_sender) {
    p.expectSplits(r.in, "in", r.axis, n);
  }
  if (p.is_sender && p.is_receiver) {
    p.expectParts(r.in, "in", r.out, "out", r.axis, n);
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::ScatterOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<at::Tensor> outputs;
  if (p.is_sender) {
    const at::Tensor parts = p.input(partsOf(r.in, r.axis, n));
    // c10d scatters to the whole team: a root outside the receivers sends
    // itself a dummy part (part 0) into scratch.
    inputs.emplace_back();
    for (int64_t rank : r.team) {
      inputs[0].push_back(
          parts[std::max<int64_t>(indexIn(r.receivers, rank), 0)]);
    }
    outputs = {p.is_receiver ? p.output(r.out) : p.scratch(parts[0].sizes())};
  } else {
    outputs = {p.output(r.out)};
  }
  return {p.backend.scatter(outputs, inputs, options)};
}

Works postGather(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.receivers.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.receivers[0];
  p.expectRootAnd(root, r.senders, "senders");
  const auto m = static_cast<int64_t>(r.senders.size());
  if (p.is_receiver) {
    p.expectSplits(r.out, "out", r.axis, m);
  }
  if (p.is_sender && p.is_receiver) {
    p.expectParts(r.out, "out", r.in, "in", r.axis, m);
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::GatherOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<std::vector<at::Tensor>> outputs;
  std::vector<at::Tensor> inputs;
  if (p.is_receiver) {
    const at::Tensor parts = p.output(partsOf(r.out, r.axis, m));
    // c10d gathers from the whole team: a root outside the senders
    // contributes a dummy part, which it drops.
    outputs.emplace_back();
    for (int64_t rank : r.team) {
      const int64_t i = indexIn(r.senders, rank);
      outputs[0].push_back(i >= 0 ? parts[i] : p.scratch(parts[0].sizes()));
    }
    inputs = {p.is_sender ? p.input(r.in) : p.scratch(parts[0].sizes())};
  } else {
    inputs = {p.input(r.in)};
  }
  return {p.backend.gather(outputs, inputs, options)};
}

Works postReduce(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.receivers.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.receivers[0];
  p.expectRootAnd(root, r.senders, "senders");
  if (p.is_sender && p.is_receiver) {
    p.expectSameShape();
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::ReduceOptions options;
  options.rootRank = p.teamIndex(root);
  options.reduceOp = r.op;
  std::vector<at::Tensor> buffers;
  if (p.is_receiver && p.is_sender) {
    buffers = {p.inPlace(r.in, r.out)};
  } else if (p.is_receiver) {
    // A root outside the senders contributes the identity of the op.
    buffers = {p.output(r.out).fill_(identity(r.op, r.out.scalar_type()))};
  } else if (p.backend.getBackendName() == "gloo") {
    // Gloo's reduce (torch 2.11) leaves partial results in the buffers of
    // the other ranks; this sender reduces a copy to keep its input intact.
    // NCCL only reads them.
    buffers = {p.copy(r.in)};
  } else {
    buffers = {p.input(r.in)};
  }
  return {p.backend.reduce(buffers, options)};
}

Works postSendRecv(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK(
      r.senders.size() == 1 && r.receivers.size() == 1 &&
          r.senders[0] != r.receivers[0],
      p.where(),
      "expected one sender and one other receiver, got senders ",
      listString(r.senders),
      " and receivers ",
      listString(r.receivers));
  constexpr int kTag = 0;
  if (p.is_sender) {
    std::vector<at::Tensor> buffers = {p.input(r.in)};
    return {p.backend.send(buffers, p.teamIndex(r.receivers[0]), kTag)};
  }
  if (p.is_receiver) {
    std::vector<at::Tensor> buffers = {p.output(r.out)};
    return {p.backend.recv(buffers, p.teamIndex(r.senders[0]), kTag)};
  }
  // A team member between neither: nothing to do.
  return {};
}

// Point to point, both directions posted together. NCCL runs them as one
// group, so that no member's send waits for a receive queued behind it;
// Gloo's send does not wait for the receiver.
Works postCollectivePermute(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  MDF_CHECK(
      r.in.dtype() == r.out.dtype(),
      p.where(),
      "in is ",
      r.in.dtype(),
      " but out is ",
      r.out.dtype());
  if (p.alone()) {
    MDF_CHECK(
        r.in.sizes() == r.out.sizes(),
        p.where(),
        "a team of one receives its own in, of shape ",
        r.in.sizes(),
        ", into out of shape ",
        r.out.sizes());
    return p.local();
  }
  constexpr int kTag = 1;
  MDF_CHECK(
      r.shift >= 1 && r.shift < p.size,
      p.where(),
      "a team of ",
      p.size,
      " shifts by 1 to ",
      p.size - 1,
      " places, not ",
      r.shift);
  const int next = static_cast<int>((p.me + r.shift) % p.size);
  const int previous = static_cast<int>((p.me + p.size - r.shift) % p.size);
  std::vector<at::Tensor> send = {p.input(r.in)};
  std::vector<at::Tensor> recv = {p.output(r.out)};
  if (p.backend.getBackendName() == "nccl") {
    p.backend.startCoalescing();
    p.backend.send(send, next, kTag);
    p.backend.recv(recv, previous, kTag);
    return {p.backend.endCoalescing()};
  }
  return {
      p.backend.send(send, next, kTag), p.backend.recv(recv, previous, kTag)};
}

Works post(Posting& p) {
  switch (p.request.type) {
    case CommunicationType::Allreduce:
      return postAllreduce(p);
    case CommunicationType::ReduceScatter:
      return postReduceScatter(p);
    case CommunicationType::Allgather:
      return postAllgather(p);
    case CommunicationType::AllToAll:
      return postAllToAll(p);
    case CommunicationType::Broadcast:
      return postBroadcast(p);
    case CommunicationType::Scatter:
      return postScatter(p);
    case CommunicationType::Gather:
      return postGather(p);
    case CommunicationType::Reduce:
      return postReduce(p);
    case CommunicationType::SendRecv:
      return postSendRecv(p);
    case CommunicationType::CollectivePermute:
      return postCollectivePermute(p);
  }
  MDF_UNREACHABLE(
      "unknown CommunicationType ", static_cast<int>(p.request.type));
}

} // namespace

PendingCollective postCollective(
    c10d::Backend& backend, const CollectiveRequest& request) {
  Posting posting(backend, request);
  Works works = post(posting);
  return posting.finish(std::move(works));
}

} // namespace mdfuser
