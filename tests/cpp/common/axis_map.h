// SPDX-License-Identifier: MIT
#pragma once

// Readable forms of axes and axis maps for the operation tests.

#include <string>
#include <utility>
#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser::test {

using AxisPairs = std::vector<std::pair<IterDomain*, IterDomain*>>;

// The (producer, consumer) pairs of `map`, exact or not.
inline AxisPairs pairs(const std::vector<AxisMapping>& map) {
  AxisPairs result;
  for (const AxisMapping& m : map) {
    result.emplace_back(m.producer, m.consumer);
  }
  return result;
}

// Per pair of `map`: whether it is exact.
inline std::vector<bool> exactness(const std::vector<AxisMapping>& map) {
  std::vector<bool> result;
  for (const AxisMapping& m : map) {
    result.push_back(m.exact);
  }
  return result;
}

// "2 r3 b1 b{1 ex i0}": the extents of `ids`, r for a reduction and b for
// a broadcast axis.
inline std::string extents(const std::vector<IterDomain*>& ids) {
  std::string s;
  for (IterDomain* id : ids) {
    std::string extent = id->extent()->toString();
    if (id->isExpanded()) {
      extent = "{1 ex " + extent + "}";
    }
    s += (s.empty() ? "" : " ") +
         std::string(
             id->isReduction()   ? "r"
             : id->isBroadcast() ? "b"
                                 : "") +
         extent;
  }
  return s;
}

// The operation that defines `tv`.
inline TensorOp* definitionOf(const TensorView* tv) {
  return static_cast<TensorOp*>(tv->definition());
}

} // namespace mdfuser::test
