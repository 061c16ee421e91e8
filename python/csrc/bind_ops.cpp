// SPDX-License-Identifier: MIT
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"

namespace py = pybind11;

namespace mdfuser::python {

namespace {

std::string describe(const py::handle& h) {
  return std::string(py::repr(h)) + " (" +
         std::string(py::str(py::type::handle_of(h).attr("__name__"))) + ")";
}

// A Python int as int64_t; ValueError naming `what` when it does not fit.
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

// An operand: a value of `fusion`, or a Python number made a literal of it.
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

// A static or symbolic extent: an int, or a Scalar of the fusion.
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

// A compile-time attribute given as a Python value, a literal or None.
template <typename T>
std::optional<T> attribute(const py::handle& h, std::string_view what) {
  if (h.is_none()) {
    return std::nullopt;
  }
  if (py::isinstance<Literal>(h)) {
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
  } catch (const py::cast_error&) {
    MDF_TYPE_CHECK(false, what, " must be a number or None, got ", describe(h));
  }
  return std::nullopt;
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

// A dtype argument: TypeError unless it is an mdfuser.DataType.
DataType toDtype(const py::handle& h, std::string_view op) {
  MDF_TYPE_CHECK(
      py::isinstance<DataType>(h),
      op,
      ": dtype must be an mdfuser.DataType, got ",
      describe(h));
  return h.cast<DataType>();
}

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

constexpr auto kRef = py::return_value_policy::reference;

} // namespace

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

  m.def(
      "broadcast_in_dim",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& shape,
         const py::handle& broadcast_dims) {
        return broadcastInDim(
            toTensor(fusion, x, "broadcast_in_dim", 0),
            toExtents(fusion, shape, "broadcast_in_dim"),
            toInts(broadcast_dims, "broadcast_in_dim: broadcast_dims"));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("shape"),
      py::arg("broadcast_dims"),
      kRef);
  m.def(
      "broadcast",
      [](Fusion& fusion, const py::handle& x, const std::vector<bool>& is_new) {
        return broadcast(toTensor(fusion, x, "broadcast", 0), is_new);
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("is_broadcast_dim"),
      kRef);
  m.def(
      "reshape",
      [](Fusion& fusion, const py::handle& x, const py::handle& shape) {
        return reshape(
            toTensor(fusion, x, "reshape", 0),
            toExtents(fusion, shape, "reshape"));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("new_shape"),
      kRef);
  m.def(
      "permute",
      [](Fusion& fusion, const py::handle& x, const py::handle& dims) {
        return permute(
            toTensor(fusion, x, "permute", 0), toInts(dims, "permute: dims"));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("dims"),
      kRef);
  m.def(
      "squeeze",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& dims,
         bool squeeze_expanded) {
        return squeeze(
            toTensor(fusion, x, "squeeze", 0),
            toInts(dims, "squeeze: dims"),
            squeeze_expanded);
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("dims"),
      py::arg("squeeze_expanded") = false,
      kRef);
  m.def(
      "slice",
      [](Fusion& fusion,
         const py::handle& x,
         const py::handle& starts,
         const py::handle& ends,
         const py::handle& strides,
         const py::handle& /*manual_normalization*/) {
        return slice(
            toTensor(fusion, x, "slice", 0),
            toExtents(fusion, starts, "slice"),
            toExtents(fusion, ends, "slice"),
            strides.is_none() ? std::vector<int64_t>{}
                              : toInts(strides, "slice: strides"));
      },
      py::arg("fusion"),
      py::arg("x"),
      py::arg("start_indices"),
      py::arg("end_indices"),
      py::arg("strides") = py::none(),
      py::arg("manual_normalization") = false,
      kRef);
  m.def(
      "cat",
      [](Fusion& fusion,
         const py::handle& tensors,
         int64_t dim,
         const py::handle& /*manual_padding*/) {
        MDF_TYPE_CHECK(
            py::isinstance<py::sequence>(tensors),
            "cat: expected a list of tensors, got ",
            describe(tensors));
        std::vector<TensorView*> tvs;
        size_t i = 0;
        for (const py::handle& h : tensors) {
          tvs.push_back(toTensor(fusion, h, "cat", i++));
        }
        return cat(tvs, dim);
      },
      py::arg("fusion"),
      py::arg("tensors"),
      py::arg("dim") = 0,
      py::arg("manual_padding") = false,
      kRef);
  m.def(
      "linear",
      [](Fusion& fusion,
         const py::handle& input,
         const py::handle& weight,
         const py::handle& bias) {
        return linear(
            toTensor(fusion, input, "linear", 0),
            toTensor(fusion, weight, "linear", 1),
            bias.is_none() ? nullptr : toTensor(fusion, bias, "linear", 2));
      },
      py::arg("fusion"),
      py::arg("input"),
      py::arg("weight"),
      py::arg("bias") = py::none(),
      kRef);
  m.def(
      "matmul",
      [](Fusion& fusion, const py::handle& a, const py::handle& b) {
        return matmul(
            toTensor(fusion, a, "matmul", 0), toTensor(fusion, b, "matmul", 1));
      },
      py::arg("fusion"),
      py::arg("a"),
      py::arg("b"),
      kRef);
  m.def(
      "grouped_mm",
      [](Fusion& fusion,
         const py::handle& mat1,
         const py::handle& mat2,
         const py::handle& offsets) {
        return groupedMm(
            toTensor(fusion, mat1, "grouped_mm", 0),
            toTensor(fusion, mat2, "grouped_mm", 1),
            toTensor(fusion, offsets, "grouped_mm", 2));
      },
      py::arg("fusion"),
      py::arg("mat1"),
      py::arg("mat2"),
      py::arg("offsets"),
      kRef,
      "Grouped matmul (torch._grouped_mm): mat1 [M, K] @ mat2 [G, K, N] -> "
      "[M, N], mat1 [G, M, K] @ mat2 [K, N] -> [M, N], or mat1 [M, K] @ mat2 "
      "[K, N] -> [G, M, N], groups cut from the ragged axis by offsets (Int32 "
      "[G], cumulative ends).");
  m.def(
      "sdpfa_fwd",
      [](Fusion& fusion,
         const py::handle& query,
         const py::handle& key,
         const py::handle& value,
         const py::handle& dropout_p,
         const py::handle& is_causal,
         const py::handle& scale) {
        SdpaOptions options;
        options.is_causal =
            attribute<bool>(is_causal, "sdpfa_fwd: is_causal").value_or(false);
        options.scale = attribute<double>(scale, "sdpfa_fwd: scale");
        SdpaFwdResult r = sdpfaFwd(
            toTensor(fusion, query, "sdpfa_fwd", 0),
            toTensor(fusion, key, "sdpfa_fwd", 1),
            toTensor(fusion, value, "sdpfa_fwd", 2),
            attribute<double>(dropout_p, "sdpfa_fwd: dropout_p").value_or(0.0),
            options);
        return py::make_tuple(
            py::cast(r.output, kRef),
            py::cast(r.log_sumexp, kRef),
            py::cast(r.philox_seed, kRef),
            py::cast(r.philox_offset, kRef));
      },
      py::arg("fusion"),
      py::arg("query"),
      py::arg("key"),
      py::arg("value"),
      py::arg("dropout_p") = py::none(),
      py::arg("is_causal") = py::none(),
      py::arg("scale") = py::none(),
      "Scaled dot-product (flash) attention: returns (output, log_sumexp, "
      "philox_seed, philox_offset).");
  m.def(
      "sdpfa_bwd",
      [](Fusion& fusion,
         const py::handle& grad_output,
         const py::handle& query,
         const py::handle& key,
         const py::handle& value,
         const py::handle& output,
         const py::handle& log_sumexp,
         const py::handle& dropout_p,
         const py::handle& is_causal,
         const py::handle& philox_seed,
         const py::handle& philox_offset,
         const py::handle& scale) {
        SdpaOptions options;
        options.is_causal =
            attribute<bool>(is_causal, "sdpfa_bwd: is_causal").value_or(false);
        options.scale = attribute<double>(scale, "sdpfa_bwd: scale");
        auto philox = [&](const py::handle& h, size_t index) {
          return h.is_none() ? nullptr
                             : toTensor(fusion, h, "sdpfa_bwd", index);
        };
        SdpaBwdResult r = sdpfaBwd(
            toTensor(fusion, grad_output, "sdpfa_bwd", 0),
            toTensor(fusion, query, "sdpfa_bwd", 1),
            toTensor(fusion, key, "sdpfa_bwd", 2),
            toTensor(fusion, value, "sdpfa_bwd", 3),
            toTensor(fusion, output, "sdpfa_bwd", 4),
            toTensor(fusion, log_sumexp, "sdpfa_bwd", 5),
            philox(philox_seed, 8),
            philox(philox_offset, 9),
            attribute<double>(dropout_p, "sdpfa_bwd: dropout_p").value_or(0.0),
            options);
        return py::make_tuple(
            py::cast(r.grad_query, kRef),
            py::cast(r.grad_key, kRef),
            py::cast(r.grad_value, kRef));
      },
      py::arg("fusion"),
      py::arg("grad_output"),
      py::arg("query"),
      py::arg("key"),
      py::arg("value"),
      py::arg("output"),
      py::arg("log_sumexp"),
      py::arg("dropout_p"),
      py::arg("is_causal"),
      py::arg("philox_seed"),
      py::arg("philox_offset"),
      py::arg("scale"),
      "The gradients of sdpfa_fwd: returns (grad_query, grad_key, "
      "grad_value).");
}

} // namespace mdfuser::python
