// SPDX-License-Identifier: MIT
#include "runtime/copy_plan.h"

#include "ir/errors.h"

namespace mdfuser {

namespace {

struct Axis {
  int64_t size;
  int64_t src_stride;
  int64_t dst_stride;
};

// The axes of more than one element, outermost first, with the axes that
// both views lay out one after the other merged.
std::vector<Axis> mergedAxes(
    const std::vector<int64_t>& sizes,
    const std::vector<int64_t>& src_strides,
    const std::vector<int64_t>& dst_strides) {
  std::vector<Axis> axes;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) {
      continue;
    }
    MDF_CHECK(
        src_strides[i] > 0 && dst_strides[i] > 0,
        "a row copy needs positive strides; axis ",
        i,
        " of ",
        sizes[i],
        " elements has strides ",
        src_strides[i],
        " and ",
        dst_strides[i]);
    Axis axis{sizes[i], src_strides[i], dst_strides[i]};
    if (!axes.empty()) {
      Axis& outer = axes.back();
      if (outer.src_stride == axis.src_stride * axis.size &&
          outer.dst_stride == axis.dst_stride * axis.size) {
        outer = Axis{outer.size * axis.size, axis.src_stride, axis.dst_stride};
        continue;
      }
    }
    axes.push_back(axis);
  }
  return axes;
}

} // namespace

std::vector<RowCopy> planRowCopies(
    const std::vector<int64_t>& sizes,
    const std::vector<int64_t>& src_strides,
    const std::vector<int64_t>& dst_strides,
    int64_t element_size) {
  MDF_CHECK(
      src_strides.size() == sizes.size() && dst_strides.size() == sizes.size(),
      "a row copy needs a stride per axis: ",
      sizes.size(),
      " axes, ",
      src_strides.size(),
      " and ",
      dst_strides.size(),
      " strides");
  for (int64_t size : sizes) {
    if (size == 0) {
      return {};
    }
  }
  std::vector<Axis> axes = mergedAxes(sizes, src_strides, dst_strides);

  // The row: the innermost axis when both views hold it contiguously, one
  // element otherwise (the innermost axis then gives the rows).
  RowCopy row;
  row.width = element_size;
  if (!axes.empty() && axes.back().src_stride == 1 &&
      axes.back().dst_stride == 1) {
    row.width = axes.back().size * element_size;
    axes.pop_back();
  }
  if (!axes.empty()) {
    row.height = axes.back().size;
    row.src_pitch = axes.back().src_stride * element_size;
    row.dst_pitch = axes.back().dst_stride * element_size;
    axes.pop_back();
  } else {
    row.src_pitch = row.width;
    row.dst_pitch = row.width;
  }

  // One copy of the rows per index of the remaining axes.
  std::vector<RowCopy> copies{row};
  for (auto axis = axes.rbegin(); axis != axes.rend(); ++axis) {
    std::vector<RowCopy> more;
    more.reserve(copies.size() * axis->size);
    for (int64_t i = 0; i < axis->size; ++i) {
      for (RowCopy copy : copies) {
        copy.src_offset += i * axis->src_stride * element_size;
        copy.dst_offset += i * axis->dst_stride * element_size;
        more.push_back(copy);
      }
    }
    copies = std::move(more);
  }
  return copies;
}

} // namespace mdfuser
