// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/ops/tensor_op.h"
#include "ir/tensor_view.h"

namespace mdfuser {

// How one parallel type is applied to a tensor: the loop axis that carries
// it, the domain axis it comes from and the split that produced it.
//
// mdfuser supports loop axes cut from a tensor axis by a chain of splits,
// each splitting the inner part of the previous one, with the parallel axis
// the outer part of its split:
//
//   n -> [P1{f1}, n1],  n1 -> [P2{f2}, n2],  ...
//
// so that [stream{s}, device{d}, rest] gives each device, in each of the
// s stream chunks, a contiguous run of n / (s * d) elements, and
// [device{d}, stream{s}, rest] chunks each device's contiguous shard. The
// outer parts of the splits above the parallel axis are in `above`.
struct ParallelAxis {
  IterDomain* loop = nullptr;
  IterDomain* source = nullptr;
  // The split one of whose outputs is `loop`; nullptr when the domain axis
  // itself is parallelized.
  Split* split = nullptr;
  // The outer parts of the splits between `split` and `source`, outermost
  // first.
  std::vector<IterDomain*> above;

  explicit operator bool() const {
    return loop != nullptr;
  }
  // Whether `loop` is the outer part of its split (or the domain axis).
  bool isOuter() const {
    return split == nullptr || split->outer() == loop;
  }
  // Extent of the parallel loop axis: number of devices or of stream chunks.
  Scalar* parts() const {
    return loop->extent();
  }
  // Extent of one part: the other output of the split, or 1.
  Scalar* partExtent() const;
};

// The loop axis of `tv` parallelized on `pt`, or nullptr.
IterDomain* loopAxis(const TensorView* tv, ParallelType pt);

// Whether `op` runs in a stream loop: its output or a tensor input has a
// loop axis parallelized on streams.
bool inStreamLoop(const TensorOp* op);

// Where `pt` is applied to `tv`, traced back to `domain` (tv's logical or
// root domain). Empty when `tv` has no `pt` axis. User error when the loop
// axis derives from the domain in a way mdfuser does not support (a merge,
// or through the outer part of a split).
ParallelAxis findParallelAxis(
    const TensorView* tv,
    ParallelType pt,
    const std::vector<IterDomain*>& domain);

// The device parallel types `tv` is sharded on, in the order x, y, z
// (including device-parallel reduction axes).
std::vector<ParallelType> deviceParallelTypes(const TensorView* tv);
bool isSharded(const TensorView* tv);

// Per non-reduction logical axis of `tv`, its extent in one device's local
// tensor: the global extent divided by the devices it is sharded over; 1
// for broadcast axes (they hold one element even when expanded).
std::vector<Scalar*> localExtents(const TensorView* tv);

// Per non-reduction logical axis of `tv`, the device parallel type it is
// sharded on, or Serial (the innermost one when several).
std::vector<ParallelType> shardingOfLogicalAxes(const TensorView* tv);

// Where axis `id` of `tv` (a loop axis, or any part a split cut) lies in
// the layout of the tensor's elements: the number of the logical axis it
// derives from, then the part of each split taken down to it (0 the outer,
// 1 the inner), outermost first, so that lexicographic order is layout
// order. Nothing when a merge lies between.
std::optional<std::vector<int64_t>> layoutPlace(
    const TensorView* tv, const IterDomain* id);

// Why a local tensor laid out in the order of `allocation` (axes of `tv`,
// its loop or its logical domain) would not be mdfuser's layout of it, or
// "": mdfuser holds every local tensor in the order of its logical axes,
// each axis's parts outermost first, device-parallel parts (one element
// here) anywhere.
std::string allocationMismatch(
    const TensorView* tv, const std::vector<IterDomain*>& allocation);

// The part of `tv`'s stream-split axis that iteration `index` of its stream
// loop covers: local axis `axis`, elements [start, start + length). The last
// chunks may be short or empty when the axis does not divide evenly.
struct StreamChunk {
  int64_t axis;
  Scalar* start;
  Scalar* length;
};
StreamChunk streamChunk(const TensorView* tv, Scalar* index);

// Whether two parallel axes cut their tensor axes into the same parts:
// equal numbers of parts and equal splits above them. Their tensor axes
// are compared by the caller.
bool sameLayout(const ParallelAxis& a, const ParallelAxis& b);

// Where two extents must divide evenly for `tv`'s device splits to give
// every device an equal part: each split on the way to a device axis
// (dividend, divisor). Stream splits below the last device split may be
// uneven.
struct EvenSplit {
  Scalar* dividend;
  Scalar* divisor;
  IterDomain* axis;
};
std::vector<EvenSplit> evenSplitsNeeded(const TensorView* tv);

// Whether the splits that cut `pa` out of its source axis, replayed on an
// axis of extent `extent`, would each divide evenly. True unless the
// extent and the factors are constants that show otherwise: a reshape
// that splits a sharded axis of 8 into (4, 2) cannot carry a split across
// 8 devices onto its axis of 4.
bool splitsEvenly(const ParallelAxis& pa, const Scalar* extent);

// The consumer axis each producer axis maps to in `op`, or nothing.
IterDomain* mappedAxis(
    const TensorOp* op,
    const TensorView* producer,
    const TensorView* consumer,
    const IterDomain* producer_axis);

// True when `op` is a reduction over axes that its input holds across
// devices only: the cross-device half of an rFactored reduction, which
// becomes an Allreduce, ReduceScatter or Reduce.
bool isDeviceSum(const TensorOp* op);

// True when `op` moves data between devices: a producer lives on another
// mesh than `consumer`, is sharded on an axis the consumer does not index
// or indexes differently, is replicated where the consumer is sharded, or
// the consumer reduces over a device-parallel axis.
bool isResharding(const TensorOp* op, const TensorView* consumer);
// For every output.
bool isResharding(const TensorOp* op);

} // namespace mdfuser
