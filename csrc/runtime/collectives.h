// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "multidevice/communication_type.h"
#include "runtime/pending_collective.h"

namespace c10d {
class Backend;
} // namespace c10d

namespace mdfuser {

// One collective as the evaluator posts it: the type, who takes part, and
// this rank's bound buffers. Tensors are this rank's local buffers; they may
// be views (stream chunks) and need not be contiguous.
//
// `senders` hold input data, `receivers` get output data, both in mesh
// order; `team` is the group the backend was created for (ranks in team
// order, every sender and receiver among them). A rank that is not a sender
// leaves `in` undefined, one that is not a receiver leaves `out` undefined.
// With m senders and n receivers, per type:
//
//   Allreduce      senders == receivers == team; out = sum of every in
//                  (in and out have one shape; they may be the same tensor)
//   ReduceScatter  senders == receivers; in is whole along `axis`, out holds
//                  part i (of n equal parts along `axis`) of the sum on
//                  receiver i
//   Allgather      senders == receivers; in holds part i along `axis`, out
//                  is whole: the parts of every sender in order
//   AllToAll       senders == receivers; in holds part i along `axis` and
//                  is whole along `out_axis`; out is whole along `axis` and
//                  holds part i along `out_axis`
//   Broadcast      one sender (the root); out = the root's in on every
//                  receiver
//   Scatter        one sender (the root); in is whole along `axis`; out on
//                  receiver i is part i of n along `axis`
//   Gather         one receiver (the root); out is whole along `axis`: the
//                  in of every sender in order
//   Reduce         one receiver (the root); out = sum of every sender's in
//   SendRecv       one sender and one receiver (different ranks); out = in
//   CollectivePermute
//                  senders == receivers == team; each member sends its in to
//                  the member `shift` places after it (team order, wrapping
//                  round; 1: the next) and receives the in of the member
//                  `shift` places before it into its out. in and out
//                  may differ in shape (the ring's chunks of an uneven axis):
//                  out has the shape of the previous member's in
//
// The root of a rooted collective may or may not also be a receiver
// (Broadcast, Scatter) or a sender (Gather, Reduce). "sum" is `op`: SUM,
// MAX or MIN.
struct CollectiveRequest {
  CommunicationType type = CommunicationType::Allreduce;
  std::vector<int64_t> team;
  std::vector<int64_t> senders;
  std::vector<int64_t> receivers;
  int64_t rank = 0;
  c10d::ReduceOp::RedOpType op = c10d::ReduceOp::SUM;
  // The local axis split into parts (see above); unused by Allreduce,
  // Broadcast, Reduce, SendRecv and CollectivePermute.
  int64_t axis = 0;
  // AllToAll only: the axis that is whole in `in` and split in `out`.
  int64_t out_axis = 0;
  // CollectivePermute only: how many places on each member sends.
  int64_t shift = 1;
  at::Tensor in;
  at::Tensor out;
};

// Posts `request` on `backend`, created for `request.team`. Checks the
// request (internal errors: the lowering produced it) and the buffer
// shapes.
PendingCollective postCollective(
    c10d::Backend& backend, const CollectiveRequest& request);

} // namespace mdfuser
