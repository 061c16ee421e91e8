// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <vector>

#include "ir/fusion.h"
#include "ir/ops/tensor_op.h"
#include "ir/parallel_type.h"

namespace mdfuser::hir {

// How lowering groups a fusion's operations into the scopes of the host
// program: Stream loops, and the top level.

// The device parallel type along which `op`, a set, gathers a producer
// whose parts are exactly the output's stream chunks:
//
//   x [device{d}, t/d, ...]  --set-->  y [stream{d}, t/d, ...]
//
// (the same axis, both outermost outer splits into d parts, d the team's
// size, y replicated along the device type): stream chunk i is device i's
// part, which one Broadcast from device i gives every device. nullopt for
// any other operation.
std::optional<ParallelType> chunksAreDeviceParts(const TensorOp* op);

// The number of stream chunks `op` runs in, or nullptr when it runs whole.
Scalar* streamParts(const TensorOp* op);

// One scope of the program: a Stream loop over `parts` chunks, or, without
// `parts`, operations at the top level.
struct Segment {
  Scalar* parts = nullptr;
  std::vector<TensorOp*> ops;
};

// Groups `exprs`, in topological order, into the scopes they are lowered
// into, in program order. A run of operations split on the same stream axis
// becomes one Stream loop. An operation without a stream split that reads
// nothing the loop writes (the upcast of a layer_norm's weight, a bias
// broadcast to every chunk) does not end the loop: it is loop-invariant and
// runs once, in front of it. The first operation that reads what the loop
// writes without being split like it (a sum over the chunked axis) ends
// the loop, as does one split into another number of chunks.
std::vector<Segment> segmentsOf(const std::vector<TensorOp*>& exprs);

// A stream split on a fusion input that no operation runs in (each one
// that reads the input reduces the split axis, or runs whole) would do
// nothing: the user asked for chunks and would get none. A user error
// naming the axis and the operations.
void checkInputStreamSplitsRun(
    const Fusion& fusion, const std::vector<TensorOp*>& exprs);

// The position of `id` in `ids`; an internal error when it is not there.
int64_t position(const std::vector<IterDomain*>& ids, const IterDomain* id);

} // namespace mdfuser::hir
