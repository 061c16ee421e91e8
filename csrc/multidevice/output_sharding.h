// SPDX-License-Identifier: MIT
#pragma once

#include <set>
#include <vector>

#include "ir/ops/tensor_op.h"
#include "multidevice/sharding.h"

namespace mdfuser {

// The sharding an operation's outputs get from its producers, one device
// parallel type at a time: the first producer, in the operation's
// shardingPriority(), that is sharded on that type along an axis the
// output keeps claims it; failing that, the first sharded along an axis
// the operation reduces. The output is then sharded like that producer
// along the mapped axis, or holds partial results when the mapped axis is
// one the operation reduces. A producer claims no axis that its split
// cannot cut evenly (splitsEvenly: a reshape's part of 4 cannot hold a
// split across 8 devices). Producers that disagree with the claims are
// resharded before the operation (a set in front of it).
struct Claim {
  ParallelType parallel_type;
  const TensorView* producer;
  // The producer's parallel axis, traced to its logical domain.
  ParallelAxis axis;
  // The producer axis maps to a reduction axis of the output.
  bool partial;
};

// Where `pt` shards `producer`'s data: its parallel axis traced to the
// logical domain, or nothing when it has none or it is a reduction axis
// (the producer was reduced over those devices and holds whole values).
ParallelAxis producerAxis(const TensorView* producer, ParallelType pt);

// The claims of `op`'s producers that live on `mesh`, for its first output.
std::vector<Claim> outputClaims(const TensorOp* op, const DeviceMesh& mesh);

// The axis of `consumer` (one of op's outputs) that `claim` lands on, or
// nullptr when that output does not index it.
IterDomain* claimedAxis(
    const TensorOp* op, const Claim& claim, const TensorView* consumer);

// Whether `consumer`'s device sharding is the one the claims give it.
bool matchesClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* consumer);

// Whether `producer` (a tensor input of op) is laid out as the claims need
// it: on `mesh` (by default `consumer`'s), sharded like a claim along each
// claimed axis it indexes, replicated on every other device parallel type.
bool conformsToClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* producer,
    const TensorView* consumer,
    const DeviceMesh* mesh = nullptr);

// Replays how `from`'s axis `from_axis` (a logical axis) is cut into loop
// axes onto `to`'s loop axis `to_axis`, which must not have been split: the
// chain of splits (each of the inner part of the previous), with the
// parallel types in `taken` kept and the others serial. Splits below the
// last taken parallel axis are not replayed.
void replayAxis(
    const TensorView* from,
    const IterDomain* from_axis,
    TensorView* to,
    IterDomain* to_axis,
    const std::set<ParallelType>& taken);

// Drops `tv`'s reduction axes from its logical and loop domains (and its
// root domain), as when a sum's output becomes the output of a copy.
void dropReductions(TensorView* tv);

// Gives `target` the device shardings the claims land on `consumer` (an
// output of `op`); `target` is `consumer` itself or a tensor whose logical
// axes correspond one to one to consumer's root (or logical) axes. A
// stream split on the same chain as a claimed device split comes along
// when `target` has none. Axes already split are left alone.
void applyClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* consumer,
    TensorView* target);

// Whether the stream axis of `tv` can be carried to a tensor that takes
// `taken_devices` of the device axes on the same chain: every device split
// above the stream split must come along.
bool streamCanFollow(
    const ParallelAxis& stream, const std::set<ParallelType>& taken_devices);

} // namespace mdfuser
