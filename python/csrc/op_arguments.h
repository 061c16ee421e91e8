// SPDX-License-Identifier: MIT
#pragma once

// The Python arguments of the operations' bindings made values of the
// fusion: operands, extents, attributes, dtypes and random seeds, each a
// TypeError or ValueError naming the operation and the argument when it
// does not fit.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <pybind11/pybind11.h>

#include "ir/errors.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"

namespace mdfuser::python {

// The value and its Python type, for messages: "3.5 (float)".
std::string describe(const pybind11::handle& h);

// A Python int as int64_t; ValueError naming `what` when it does not fit.
int64_t toInt64(const pybind11::handle& h, std::string_view what);

// An operand: a value of `fusion`, or a Python number made a literal of it.
Val* toVal(
    Fusion& fusion,
    const pybind11::handle& h,
    std::string_view op,
    size_t index);
// The same, a tensor.
TensorView* toTensor(
    Fusion& fusion,
    const pybind11::handle& h,
    std::string_view op,
    size_t index);

// A static or symbolic extent: an int, or a Scalar of the fusion.
Scalar* toExtent(
    Fusion& fusion, const pybind11::handle& h, std::string_view op);
std::vector<Scalar*> toExtents(
    Fusion& fusion, const pybind11::handle& seq, std::string_view op);

// An int or a list of ints.
std::vector<int64_t> toInts(const pybind11::handle& h, std::string_view what);

// A dtype argument: TypeError unless it is an mdfuser.DataType.
DataType toDtype(const pybind11::handle& h, std::string_view op);

// rng_seed and rng_offset, both None or both given: ints or integer
// define_scalars of `fusion` (constants, or scalar inputs given at each
// execute).
std::optional<RngSeed> toRngSeed(
    Fusion& fusion,
    const pybind11::handle& seed,
    const pybind11::handle& offset,
    std::string_view op);

// A compile-time attribute given as a Python value, a literal or None.
template <typename T>
std::optional<T> attribute(const pybind11::handle& h, std::string_view what) {
  if (h.is_none()) {
    return std::nullopt;
  }
  if (pybind11::isinstance<Literal>(h)) {
    const auto* l = h.cast<Literal*>();
    MDF_TYPE_CHECK(
        !l->isSymbolic(),
        what,
        " must be known when the fusion is defined, not the scalar input ",
        l->toString());
    return std::visit([](auto x) { return static_cast<T>(x); }, l->value());
  }
  try {
    return h.cast<T>();
  } catch (const pybind11::cast_error&) {
    MDF_TYPE_CHECK(false, what, " must be a number or None, got ", describe(h));
  }
  return std::nullopt;
}

// The bindings return the fusion's values by reference: the fusion owns
// them.
inline constexpr auto kRef = pybind11::return_value_policy::reference;

} // namespace mdfuser::python
