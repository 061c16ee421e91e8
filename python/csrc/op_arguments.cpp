// SPDX-License-Identifier: MIT
#include "op_arguments.h"

namespace py = pybind11;

namespace mdfuser::python {

namespace {

// rng_seed or rng_offset: None, an int, or an integer define_scalar of
// `fusion` (a constant, or a scalar input given at each execute).
Val* toSeedPart(Fusion& fusion, const py::handle& h, std::string_view what) {
  if (h.is_none()) {
    return nullptr;
  }
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {
    return fusion.create<Literal>(toInt64(h, what), DataType::Int);
  }
  if (py::isinstance<Literal>(h)) {
    auto* l = h.cast<Literal*>();
    MDF_USER_CHECK(
        l->container() == &fusion,
        what,
        " ",
        l->toString(),
        " belongs to another FusionDefinition; use values of this one");
    if (isIntegralType(l->dtype())) {
      return l;
    }
  }
  MDF_TYPE_CHECK(
      false,
      what,
      " must be an int or an integer define_scalar, got ",
      describe(h));
  return nullptr;
}

} // namespace

std::string describe(const py::handle& h) {
  return std::string(py::repr(h)) + " (" +
         std::string(py::str(py::type::handle_of(h).attr("__name__"))) + ")";
}

int64_t toInt64(const py::handle& h, std::string_view what) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  MDF_USER_CHECK(
      overflow == 0,
      what,
      " ",
      std::string(py::repr(h)),
      " does not fit in 64 bits");
  if (value == -1 && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  return static_cast<int64_t>(value);
}

Val* toVal(
    Fusion& fusion, const py::handle& h, std::string_view op, size_t index) {
  MDF_TYPE_CHECK(
      !h.is_none(),
      op,
      ": operand ",
      index,
      " must be a tensor or a number, got None");
  if (py::isinstance<Val>(h)) {
    Val* val = h.cast<Val*>();
    MDF_USER_CHECK(
        val->container() == &fusion,
        op,
        ": operand ",
        index,
        " ",
        val->toString(),
        " belongs to another FusionDefinition; use values of this one");
    return val;
  }
  if (py::isinstance<py::bool_>(h)) {
    return fusion.create<Literal>(h.cast<bool>(), DataType::Bool);
  }
  if (py::isinstance<py::int_>(h)) {
    return fusion.create<Literal>(
        toInt64(h, detail::concat(op, ": operand ", index)), DataType::Int);
  }
  if (py::isinstance<py::float_>(h)) {
    return fusion.create<Literal>(h.cast<double>(), DataType::Double);
  }
  MDF_TYPE_CHECK(
      false,
      op,
      ": operand ",
      index,
      " must be a TensorView, a scalar of this fusion or a Python number, got ",
      describe(h),
      py::hasattr(h, "data_ptr")
          ? "; torch tensors are passed to execute, not to operations"
          : "");
  return nullptr;
}

TensorView* toTensor(
    Fusion& fusion, const py::handle& h, std::string_view op, size_t index) {
  Val* val = toVal(fusion, h, op, index);
  auto* tv = dynamic_cast<TensorView*>(val);
  MDF_TYPE_CHECK(
      tv != nullptr,
      op,
      ": operand ",
      index,
      " must be a tensor, got ",
      val->toString());
  return tv;
}

Scalar* toExtent(Fusion& fusion, const py::handle& h, std::string_view op) {
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {
    return constant(&fusion, toInt64(h, detail::concat(op, ": extent")));
  }
  if (py::isinstance<Scalar>(h)) {
    auto* s = h.cast<Scalar*>();
    MDF_USER_CHECK(
        s->container() == &fusion,
        op,
        ": extent ",
        s->toString(),
        " belongs to another FusionDefinition");
    return s;
  }
  if (py::isinstance<Literal>(h)) {
    auto* l = h.cast<Literal*>();
    MDF_TYPE_CHECK(
        !l->isSymbolic(),
        op,
        ": an extent cannot be the scalar input ",
        l->toString(),
        "; extents are ints, define_scalar constants or tensor sizes");
    MDF_TYPE_CHECK(
        std::holds_alternative<int64_t>(l->value()),
        op,
        ": extents are integers, got ",
        l->toString());
    return constant(&fusion, std::get<int64_t>(l->value()));
  }
  MDF_TYPE_CHECK(false, op, ": extents are ints or Scalars, got ", describe(h));
  return nullptr;
}

std::vector<Scalar*> toExtents(
    Fusion& fusion, const py::handle& seq, std::string_view op) {
  MDF_TYPE_CHECK(
      py::isinstance<py::sequence>(seq) && !py::isinstance<py::str>(seq),
      op,
      ": expected a list of extents, got ",
      describe(seq));
  std::vector<Scalar*> result;
  for (const py::handle& h : seq) {
    result.push_back(toExtent(fusion, h, op));
  }
  return result;
}

std::vector<int64_t> toInts(const py::handle& h, std::string_view what) {
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {
    return {toInt64(h, what)};
  }
  MDF_TYPE_CHECK(
      py::isinstance<py::sequence>(h),
      what,
      " must be a list of ints, got ",
      describe(h));
  std::vector<int64_t> result;
  for (const py::handle& x : h) {
    MDF_TYPE_CHECK(
        py::isinstance<py::int_>(x) && !py::isinstance<py::bool_>(x),
        what,
        " must be a list of ints, got ",
        describe(x));
    result.push_back(toInt64(x, what));
  }
  return result;
}

DataType toDtype(const py::handle& h, std::string_view op) {
  MDF_TYPE_CHECK(
      py::isinstance<DataType>(h),
      op,
      ": dtype must be an mdfuser.DataType, got ",
      describe(h));
  return h.cast<DataType>();
}

std::optional<RngSeed> toRngSeed(
    Fusion& fusion,
    const py::handle& seed,
    const py::handle& offset,
    std::string_view op) {
  const std::string name(op);
  Val* s = toSeedPart(fusion, seed, name + ": rng_seed");
  Val* o = toSeedPart(fusion, offset, name + ": rng_offset");
  MDF_USER_CHECK(
      (s == nullptr) == (o == nullptr),
      op,
      ": rng_seed and rng_offset must be given together, got rng_seed=",
      std::string(py::repr(seed)),
      " and rng_offset=",
      std::string(py::repr(offset)));
  if (s == nullptr) {
    return std::nullopt;
  }
  return RngSeed{s, o};
}

} // namespace mdfuser::python
