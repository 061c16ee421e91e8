// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// The ring decompositions of a GEMM and the collective beside it, which
// lowering emits in place of the collective when asked to
// (LoweringOptions::ring_decomposition; doc/host_ir.md shows the programs).
//
// A ring runs over a team of d devices. Each step is a CollectivePermute
// (every member sends to the next and receives from the previous) and a
// GEMM on one of the d parts of the tokens, the part a step works on being
// a RingChunk view whose index depends on the step and on this device, so
// that every device starts on a different part. Parts are ceilDiv(extent,
// d) long; trailing ones may be short or empty. The direct reduce-scatter
// and allreduce below are no rings: their steps shift by 1 .. d - 1
// places, each device sending every other its part.
struct Ring {
  HostIrContainer& hic;
  // Where the statements go.
  Scope& scope;
  std::vector<int64_t> team;
  // This device's position in `team`.
  int64_t me;
  CommunicatorBackend backend;
};

// gathered = allgather(in) along `axis`, then out = linear(gathered, weight,
// bias), whose `out_axis` indexes gathered's `axis`, of extent `extent` in
// both. Step j works on part (me - j) mod d, held since step j - 1 (its own
// part, copied into gathered, at step 0), while it moves to the next device.
void emitAllgatherLinear(
    const Ring& ring,
    TensorView* in,
    TensorView* gathered,
    int64_t axis,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    TensorView* weight,
    TensorView* bias);

// out = part `me` of the sum over the team of linear(in, weight), cut along
// in's `in_axis`, whose part is out's `part_extent` long. Step j computes
// the partial sum of part (me - 1 - j) mod d, adding (as the C operand of
// the GEMM, an addmm) the partial sum the previous device sent into
// `receive`, a buffer of out's shape, and sends it on; the last step leaves
// part `me` fully reduced in out.
void emitLinearReduceScatter(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    TensorView* receive,
    Scalar* part_extent);

// The same reduce-scatter, direct: at step j = 1 .. d - 1 this device
// computes its partial sum of part me + j into sends[j - 1] and sends it
// straight to device me + j (a CollectivePermute of shift j), receiving
// device me - j's partial sum of part me into receives[j - 1]; the steps'
// moves depend on no other device's, so each overlaps the next step's
// GEMM. Then out = this device's own partial sum plus the arrivals: over
// three devices or more its GEMM adds receives[0] as its C operand; at
// d = 2 it runs beside the one move and adds its arrival after (where the
// ring's last GEMM waits for the move). The buffers have out's shape.
void emitDirectLinearReduceScatter(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    const std::vector<TensorView*>& sends,
    const std::vector<TensorView*>& receives,
    Scalar* part_extent);

// out = the sum over the team of linear(in, weight): the reduce-scatter
// ring, then an allgather ring of the reduced parts, both cut along in's
// `in_axis` and out's `out_axis`, of extent `extent`. Peers' parts arrive in
// `receive`: out itself, where each part's partial sum is received into and
// accumulated in place in out's part; or a buffer of out's shape (one that
// can live in symmetric memory where out cannot), where out's part p still
// accumulates part p's partial sum and sends it from there, the GEMMs adding
// what `receive` holds, and each reduced part arriving in the allgather is
// copied into out. The part this device reduces is computed into out and
// never copied.
void emitLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    TensorView* receive);

// The same allreduce, direct: the direct reduce-scatter above on out's
// parts (this device's partial sum of part me + j computed into out's part
// me + j and sent from there, device me - j's partial sum of part me
// arriving in receives[j - 1] at part me), then each device's reduced part
// sent straight to every other (shift j), landing in `gathered` at its
// part; no move waits for another device's. `receives` are d - 1 buffers
// of out's shape; `gathered` is out itself where out can receive (as
// `receive` above), else receives[0], whose other parts the reduce-scatter
// leaves free, and each reduced part arriving there is copied into out.
// Parts need not be equal: trailing ones may be short or empty.
void emitDirectLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    const std::vector<TensorView*>& receives,
    TensorView* gathered);

// The same allreduce over two devices, exchanged: out = linear(in, weight)
// whole, sent to the other device in one move, landing in its `receive`
// (a buffer of out's shape), and the other's partial sum, arriving in this
// device's `receive`, added to it. Each device moves as much as the
// reduce-scatter and the allgather move together, but no move waits for a
// sum of arrivals, and the two devices add in the two orders of one
// commutative sum, so that they agree bit for bit.
void emitExchangedLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    TensorView* receive);

} // namespace mdfuser::hir
