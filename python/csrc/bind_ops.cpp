// SPDX-License-Identifier: MIT
// The operations' bindings: pointwise, creation and reductions here, the
// layout operations in bind_shape_ops.cpp, matmuls and attention in
// bind_matmul_ops.cpp.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "op_arguments.h"

namespace py = pybind11;

namespace mdfuser::python {

void bindOps(py::module_& m) {
  m.def(
      "_pointwise_ops",
      [](int arity) {
        std::vector<std::string> names;
        for (const OpInfo* info : pointwiseOps(arity)) {
          names.emplace_back(info->name);
        }
        return names;
      },
      py::arg("arity"),
      "The names of the pointwise operations of `arity` operands bound from "
      "the operation table, in table order.");
  for (const OpInfo* info : pointwiseOps(1)) {
    const OpType type = info->type;
    const std::string name(info->name);
    m.def(
        name.c_str(),
        [type, name](Fusion& fusion, const py::handle& x) {
          return unaryOp(type, toVal(fusion, x, name, 0));
        },
        py::arg("fusion"),
        py::arg("x"),
        kRef);
  }
  for (const OpInfo* info : pointwiseOps(2)) {
    const OpType type = info->type;
    const std::string name(info->name);
    m.def(
        name.c_str(),
        [type, name](Fusion& fusion, const py::handle& a, const py::handle& b) {
          return binaryOp(
              type, toVal(fusion, a, name, 0), toVal(fusion, b, name, 1));
        },
        py::arg("fusion"),
        py::arg("lhs"),
        py::arg("rhs"),
        kRef);
  }
  m.def(
      "gelu",
      [](Fusion& fusion, const py::handle& x, const std::string& approximate) {
        MDF_USER_CHECK(
            approximate == "none" || approximate == "tanh",
            "gelu: approximate must be 'none' or 'tanh', got '",
            approximate,
            "'");
        return unaryOp(
            approximate == "tanh" ? OpType::GeluTanh : OpType::Gelu,
            toVal(fusion, x, "gelu", 0));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("approximate") = "none",
      kRef,
      "GELU, exact (erf) or with the tanh approximation, as "
      "torch.nn.functional.gelu.");
  m.def(
      "where",
      [](Fusion& fusion,
         const py::handle& condition,
         const py::handle& a,
         const py::handle& b) {
        return where(
            toVal(fusion, condition, "where", 0),
            toVal(fusion, a, "where", 1),
            toVal(fusion, b, "where", 2));
      },
      py::arg("fusion"),
      py::arg("condition"),
      py::arg("x"),
      py::arg("y"),
      kRef);
  m.def(
      "cast",
      [](Fusion& fusion, const py::handle& x, const py::handle& dtype) {
        MDF_TYPE_CHECK(
            py::isinstance<DataType>(dtype),
            "cast: dtype must be an mdfuser.DataType, got ",
            describe(dtype));
        return cast(toVal(fusion, x, "cast", 0), dtype.cast<DataType>());
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("dtype"),
      kRef);

  m.def(
      "clamp",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& min,
         const py::handle& max) {
        return clamp(
            toVal(fusion, x, "clamp", 0),
            min.is_none() ? nullptr : toVal(fusion, min, "clamp", 1),
            max.is_none() ? nullptr : toVal(fusion, max, "clamp", 2));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("min") = py::none(),
      py::arg("max") = py::none(),
      kRef,
      "torch.clamp: each element limited to [min, max]; either bound may be "
      "None. Promotes over all three as torch does.");
  m.def(
      "expand",
      [](Fusion& fusion, const py::handle& x, const py::handle& shape) {
        return expand(
            toTensor(fusion, x, "expand", 0),
            toExtents(fusion, shape, "expand"));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("shape"),
      kRef,
      "torch's expand: axes of extent 1 stretch to shape[i]; -1 keeps an "
      "axis.");
  m.def(
      "full",
      [](Fusion& fusion,
         const py::handle& shape,
         const py::handle& fill_value,
         const py::handle& dtype) {
        return full(
            &fusion,
            toExtents(fusion, shape, "full"),
            toVal(fusion, fill_value, "full", 1),
            toDtype(dtype, "full"));
      },
      py::arg("fusion"),
      py::arg("shape"),
      py::arg("fill_value"),
      py::arg("dtype"),
      kRef,
      "torch.full: a tensor of global `shape` holding `fill_value` as "
      "`dtype`.");
  m.def(
      "iota",
      [](Fusion& fusion,
         const py::handle& length,
         const py::handle& start,
         const py::handle& step,
         const py::handle& dtype) {
        return iota(
            &fusion,
            toExtent(fusion, length, "iota"),
            start.is_none() ? nullptr : toVal(fusion, start, "iota", 1),
            step.is_none() ? nullptr : toVal(fusion, step, "iota", 2),
            toDtype(dtype, "iota"));
      },
      py::arg("fusion"),
      py::arg("length"),
      py::arg("start") = py::none(),
      py::arg("step") = py::none(),
      py::arg("dtype") = DataType::Int,
      kRef,
      "[start, start + step, ...] of `length` elements; start 0 and step 1 "
      "by default.");
  for (const OpType type : {OpType::Uniform, OpType::Normal}) {
    const std::string name(opName(type));
    const bool is_uniform = type == OpType::Uniform;
    m.def(
        name.c_str(),
        [type, name](
            Fusion& fusion,
            const py::handle& a,
            const py::handle& b,
            const py::handle& shape,
            const py::handle& dtype,
            const py::handle& rng_seed,
            const py::handle& rng_offset) {
          auto* builder = type == OpType::Uniform ? uniform : normal;
          return builder(
              &fusion,
              toVal(fusion, a, name, 0),
              toVal(fusion, b, name, 1),
              toExtents(fusion, shape, name),
              toDtype(dtype, name),
              toRngSeed(fusion, rng_seed, rng_offset, name));
        },
        py::arg("fusion"),
        py::arg(is_uniform ? "minval" : "mean"),
        py::arg(is_uniform ? "maxval" : "std"),
        py::arg("shape"),
        py::arg("dtype") = DataType::Float,
        py::arg("rng_seed") = py::none(),
        py::arg("rng_offset") = py::none(),
        kRef,
        is_uniform
            ? "Uniform random values in [minval, maxval) of global `shape`. "
              "With rng_seed and rng_offset the values are a function of them "
              "alone; without, each execute draws new ones. Every device "
              "holds its part of one global tensor."
            : "Normal random values of global `shape`. With rng_seed and "
              "rng_offset the values are a function of them alone; without, "
              "each execute draws new ones. Every device holds its part of "
              "one global tensor.");
  }
  m.def(
      "set",
      [](Fusion& fusion, const py::handle& x) {
        return set(toTensor(fusion, x, "set", 0));
      },
      py::arg("fusion"),
      py::arg("x"),
      kRef);

  for (const OpType type : {OpType::Sum, OpType::Max, OpType::Min}) {
    const std::string name(opName(type));
    m.def(
        ("_" + name).c_str(),
        [type, name](
            Fusion& fusion,
            const py::handle& x,
            const py::handle& dims,
            bool keepdim,
            DataType dtype,
            bool empty_is_identity) {
          return reduce(
              type,
              toTensor(fusion, x, name, 0),
              dims.is_none() ? std::vector<int64_t>{}
                             : toInts(dims, name + ": dims"),
              keepdim,
              dtype,
              empty_is_identity);
        },
        py::arg("fusion"),
        py::arg("x"),
        py::arg("dims"),
        py::arg("keepdim"),
        py::arg("dtype"),
        py::arg("empty_is_identity") = false,
        kRef);
  }
  m.def(
      "_mean",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& dims,
         bool keepdim) {
        return mean(
            toTensor(fusion, x, "mean", 0),
            dims.is_none() ? std::vector<int64_t>{}
                           : toInts(dims, "mean: dims"),
            keepdim);
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("dims"),
      py::arg("keepdim"),
      kRef);
  m.def(
      "_var_mean",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& dims,
         int64_t correction,
         bool keepdim) {
        auto [var, mean] = varMean(
            toTensor(fusion, x, "var_mean", 0),
            dims.is_none() ? std::vector<int64_t>{}
                           : toInts(dims, "var_mean: dims"),
            correction,
            keepdim);
        return py::make_tuple(py::cast(var, kRef), py::cast(mean, kRef));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("dims"),
      py::arg("correction"),
      py::arg("keepdim"));
  bindShapeOps(m);
  bindMatmulOps(m);
}

} // namespace mdfuser::python
