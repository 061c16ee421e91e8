// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Makes every compute operation local, leaving data movement to single-
// input sets and sums that one collective implements.
//
// For each compute operation, the producers' claims (multidevice/
// output_sharding.h) give the sharding it can compute locally:
//  - a producer that disagrees is resharded first: `p2 = set(p)` laid out
//    as the claims need (reused by every operation needing the same);
//  - an output the user laid out otherwise is computed into a new tensor
//    with the claimed sharding and moved: `out = set(natural)`;
//  - a reduction over an axis sharded across devices is split (rFactor)
//    into a local operation and a sum over the devices:
//      partial = op(...)   // rK split into ideviceIdx.x{d}rf, rS{K/d}rf
//      out = sum(partial)  // over rdeviceIdx.x{d}: a collective
//    (max/min for max/min reductions). When out is sharded on the same
//    device type elsewhere, the sum's device axis is serial and the sum
//    becomes a ReduceScatter. A linear with bias adds the bias after the
//    sum.
//
// Assumes propagateShardings ran. Guarantees that every operation that
// moves data is a set or a sum over device axes.
void decomposeReshardings(Fusion* fusion);

} // namespace mdfuser
