// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

namespace mdfuser {

// One copy of `height` rows of `width` bytes, the rows `src_pitch` and
// `dst_pitch` bytes apart, from byte `src_offset` of the source to byte
// `dst_offset` of the destination: what cudaMemcpy2DAsync takes.
struct RowCopy {
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t width = 0;
  int64_t height = 1;
  int64_t src_pitch = 0;
  int64_t dst_pitch = 0;

  bool operator==(const RowCopy&) const = default;
};

// The row copies that copy a source view of `sizes` with `src_strides`
// into a destination view of the same sizes with `dst_strides` (strides in
// elements of `element_size` bytes, as torch's). Axes of one element are
// dropped and axes that both views lay out one after the other are merged,
// so that a contiguous pair is one row, a part cut from a middle axis of
// both (a ring's chunk of a batched tensor) one copy of a row per outer
// index, and only axes beyond the two innermost that stay separate add
// copies. Empty when the views hold no element. Strides must be positive
// on every axis of more than one element.
std::vector<RowCopy> planRowCopies(
    const std::vector<int64_t>& sizes,
    const std::vector<int64_t>& src_strides,
    const std::vector<int64_t>& dst_strides,
    int64_t element_size);

} // namespace mdfuser
