// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Takes the swizzle1d schedule of the reference system's collective-permute
// form of the column-parallel linear:
//
//   x [device{d}, t/d, h]  --set-->  g [stream{d} swizzle1d(mesh_x), t/d, h]
//
// g gathers x, and each device starts on the part it holds and then takes
// the others' in turn, one per stream step. mdfuser carries that schedule
// as its ring of CollectivePermutes (host_ir/ring_decomposition.h): where
// g's only use is a linear's input, lowering makes the pair one allgather
// ring, whatever LoweringOptions::ring_decomposition says; otherwise the
// gather stays an allgather. This pass checks each swizzled axis and makes
// it serial, so that the stream split (the ring's steps) does not
// propagate to the linear: the swizzle mark stays on the axis for lowering.
//
// User errors, naming the tensor and axis: a swizzled axis that is not
// stream-parallel; a swizzled tensor not defined by a set whose input is
// split across the swizzle's mesh axis, along the same axis and into the
// same number of parts, into a tensor replicated along it.
void prepareSwizzledGathers(Fusion* fusion);

// Whether `tv` has a swizzled loop axis (prepareSwizzledGathers has made it
// serial): its gather is to be a ring.
bool hasSwizzledGather(const TensorView* tv);

} // namespace mdfuser
