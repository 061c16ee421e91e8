// SPDX-License-Identifier: MIT
#include "runtime/kernels.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <c10/util/accumulate.h>

#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/grouped_mm_kernel.h"
#include "runtime/kernel_buffers.h"
#include "runtime/matmul_kernels.h"
#include "runtime/rng_mix.h"
#include "runtime/sdpa_kernels.h"
#include "runtime/tensor_types.h"

namespace mdfuser {

namespace {

using Kernel = void (*)(KernelCall&);

// Operand i as a tensor: the bound tensor, or a literal or extent as a
// 0-dimensional "wrapped number", which takes part in type promotion as a
// Python number does.
at::Tensor operand(const KernelCall& call, size_t i) {
  if (call.tensors[i].defined()) {
    return call.tensors[i];
  }
  at::Tensor t = at::scalar_tensor(
      call.scalars[i],
      at::TensorOptions()
          .device(call.outputs.at(0).device())
          .dtype(
              call.scalars[i].isFloatingPoint()
                  ? at::kDouble
                  : (call.scalars[i].isBoolean() ? at::kBool : at::kLong)));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Tensor operand i with its expanded broadcast axes at their full extent,
// for operations that need the repeated elements: a reduction over such an
// axis, a concatenation. Everywhere else an expanded axis stays one element
// wide, as in its buffer and in the buffers of outputs that keep it
// broadcast. `only`, when given, lists the axes to expand.
at::Tensor expanded(
    const KernelCall& call,
    size_t i,
    const std::vector<int64_t>* only = nullptr) {
  const at::Tensor& t = call.tensors.at(i);
  const auto* tv = static_cast<const TensorView*>(call.op.input(i));
  const std::vector<IterDomain*> ids = tv->logicalNoReductions();
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  bool any = false;
  for (size_t a = 0; a < ids.size() && a < shape.size(); ++a) {
    const bool wanted =
        only == nullptr ||
        std::find(only->begin(), only->end(), static_cast<int64_t>(a)) !=
            only->end();
    if (ids[a]->isExpanded() && wanted) {
      shape[a] = call.extents.evaluate(ids[a]->extent());
      any = true;
    }
  }
  return any ? t.expand(shape) : t;
}

at::Tensor& out0(KernelCall& call) {
  return call.outputs.at(0);
}

// ---------------------------------------------------------------- pointwise

// The operands of a pointwise operation, such that ATen computes in the
// operation's computation dtype (nvFuser's promotion) where it would compute
// in torch's: ATen promotes as torch does, where Half + Half is Half and
// an Int tensor times a Double scalar is Float. One operand with
// dimensions in the computation dtype makes ATen promote to it (the others
// are never wider), so at most one is converted; on CUDA the kernel casts
// the others as it reads them. An operation that writes a narrower dtype
// than it computes in (a cast folded into it by FoldCasts) runs as ATen's
// kernel of that dtype, which computes in Float and rounds once.
std::vector<at::Tensor> pointwiseOperands(const KernelCall& call) {
  const auto& op = static_cast<const PointwiseOp&>(call.op);
  std::vector<at::Tensor> operands;
  operands.reserve(call.op.inputs().size());
  for (size_t i = 0; i < call.op.inputs().size(); ++i) {
    operands.push_back(operand(call, i));
  }
  const DataType out_dtype = op.out()->dtype();
  if (op.type() == OpType::Cast ||
      (out_dtype != DataType::Bool && out_dtype != op.computationDtype())) {
    return operands;
  }
  const at::ScalarType compute = toScalarType(op.computationDtype());
  // where's condition is no operand of the computation.
  const size_t first = op.type() == OpType::Where ? 1 : 0;
  std::optional<size_t> to_convert;
  for (size_t i = first; i < operands.size(); ++i) {
    if (call.tensors[i].defined() && operands[i].dim() > 0) {
      if (operands[i].scalar_type() == compute) {
        return operands;
      }
      if (!to_convert) {
        to_convert = i;
      }
    }
  }
  if (to_convert) {
    operands[*to_convert] = operands[*to_convert].to(compute);
    return operands;
  }
  // Zero-dimensional operands and scalars alone: every one of them, as
  // tensors (ATen promotes a wrapped Double number to Float).
  for (size_t i = first; i < operands.size(); ++i) {
    if (operands[i].scalar_type() != compute ||
        operands[i].unsafeGetTensorImpl()->is_wrapped_number()) {
      operands[i] =
          operands[i].to(compute, /*non_blocking=*/false, /*copy=*/true);
    }
  }
  return operands;
}

template <at::Tensor& (*F)(at::Tensor&, const at::Tensor&)>
void unary(KernelCall& call) {
  const std::vector<at::Tensor> operands = pointwiseOperands(call);
  F(out0(call), operands[0]);
}

template <at::Tensor& (*F)(at::Tensor&, const at::Tensor&, const at::Tensor&)>
void binary(KernelCall& call) {
  const std::vector<at::Tensor> operands = pointwiseOperands(call);
  F(out0(call), operands[0], operands[1]);
}

at::Tensor& addOut(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  return at::add_out(out, a, b);
}
at::Tensor& subOut(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  return at::sub_out(out, a, b);
}
at::Tensor& divOut(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  return at::div_out(out, a, b);
}
at::Tensor& powOut(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  return at::pow_out(out, a, b);
}
at::Tensor& reluOut(at::Tensor& out, const at::Tensor& x) {
  return at::clamp_min_out(out, x, 0);
}
at::Tensor& geluOut(at::Tensor& out, const at::Tensor& x) {
  return at::gelu_out(out, x, "none");
}
at::Tensor& geluTanhOut(at::Tensor& out, const at::Tensor& x) {
  return at::gelu_out(out, x, "tanh");
}
at::Tensor& castOut(at::Tensor& out, const at::Tensor& x) {
  return out.copy_(x);
}

void whereKernel(KernelCall& call) {
  const std::vector<at::Tensor> operands = pointwiseOperands(call);
  at::where_out(out0(call), operands[0], operands[1], operands[2]);
}

void clampKernel(KernelCall& call) {
  const std::vector<at::Tensor> operands = pointwiseOperands(call);
  at::clamp_out(
      out0(call),
      operands[0],
      std::optional<at::Tensor>(operands[1]),
      std::optional<at::Tensor>(operands[2]));
}

// ---------------------------------------------------------------- creation

// full writes whatever part of its output this device (and stream chunk)
// holds: every element is the same.
void fullKernel(KernelCall& call) {
  out0(call).fill_(call.scalars.at(0));
}

// The operations whose values depend on the position write their whole
// output (decomposeShardedCreations sees to it).
void requireWhole(const KernelCall& call) {
  const std::vector<IterDomain*>& ids = call.op.out()->logical();
  const at::Tensor& out = call.outputs.at(0);
  MDF_CHECK_EQ(static_cast<size_t>(out.dim()), ids.size());
  for (size_t a = 0; a < ids.size(); ++a) {
    MDF_CHECK_EQ(
        out.size(static_cast<int64_t>(a)),
        call.extents.evaluate(ids[a]->extent()),
        call.op.opName(),
        " must write its whole output");
  }
}

void iotaKernel(KernelCall& call) {
  requireWhole(call);
  at::Tensor& out = out0(call);
  const bool integral = c10::isIntegralType(out.scalar_type(), false);
  const auto options = at::TensorOptions()
                           .device(out.device())
                           .dtype(integral ? at::kLong : at::kDouble);
  // start + i * step in int64 or double, rounded once into the dtype.
  at::Tensor values = at::arange(out.size(0), options);
  if (integral) {
    values.mul_(call.scalars.at(1).toLong()).add_(call.scalars.at(0).toLong());
  } else {
    values.mul_(call.scalars.at(1).toDouble())
        .add_(call.scalars.at(0).toDouble());
  }
  out.copy_(values);
}

uint64_t seedOf(const KernelCall& call) {
  const auto& op = static_cast<const CreationOp&>(call.op);
  if (op.rng().has_value()) {
    // Read at run time: either may be a scalar input.
    const size_t i = op.seedIndex();
    return mixSeed(
        mixSeed(static_cast<uint64_t>(call.scalars.at(i).toLong())) ^
        static_cast<uint64_t>(call.scalars.at(i + 1).toLong()));
  }
  return mixSeed(
      call.rng_base ^ mixSeed(static_cast<uint64_t>(op.out()->name())));
}

void randomKernel(KernelCall& call) {
  requireWhole(call);
  at::Tensor& out = out0(call);
  // A generator of torch's kind for the device, of its own: the default
  // generator's state is left as it was.
  at::Generator generator;
  {
    at::Generator global = at::globalContext().defaultGenerator(out.device());
    std::lock_guard<std::mutex> lock(global.mutex());
    generator = global.clone();
  }
  generator.set_current_seed(seedOf(call));
  // Drawn in row-major order whatever the buffer's layout, so that every
  // device draws the same global tensor.
  at::Tensor values = out.is_contiguous()
                          ? out
                          : at::empty_like(out, at::MemoryFormat::Contiguous);
  const double a = call.scalars.at(0).toDouble();
  const double b = call.scalars.at(1).toDouble();
  if (call.op.type() == OpType::Uniform) {
    values.uniform_(a, b, generator);
  } else {
    values.normal_(a, b, generator);
  }
  if (!values.is_same(out)) {
    out.copy_(values);
  }
}

// --------------------------------------------------------------- reductions

std::vector<int64_t> withoutDims(
    at::IntArrayRef sizes, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end()) {
      shape.push_back(sizes[i]);
    }
  }
  return shape;
}

void reduction(KernelCall& call) {
  const std::vector<int64_t>& dims =
      static_cast<const ReductionOp&>(call.op).reducedDims();
  const at::Tensor in = expanded(call, 0, &dims);
  at::Tensor out = viewAs(out0(call), withoutDims(in.sizes(), dims));
  switch (call.op.type()) {
    case OpType::Sum:
      at::sum_out(out, in, dims, false, out.scalar_type());
      return;
    case OpType::Max:
    case OpType::Min: {
      const bool max = call.op.type() == OpType::Max;
      if (out.numel() == 0) {
        // Nothing to write (ATen refuses an empty reduced axis even then).
        return;
      }
      if (in.numel() == 0) {
        // Over an empty axis: the identity, where the op says so (input
        // binding refuses the others, as torch does).
        MDF_CHECK(
            static_cast<const ReductionOp&>(call.op).emptyIsIdentity(),
            call.op.opName(),
            " over an empty axis reached its kernel");
        if (at::isFloatingType(out.scalar_type())) {
          out.fill_(
              max ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity());
        } else {
          AT_DISPATCH_INTEGRAL_TYPES_AND(
              at::kBool, out.scalar_type(), "empty_identity", [&] {
                out.fill_(
                    max ? std::numeric_limits<scalar_t>::lowest()
                        : std::numeric_limits<scalar_t>::max());
              });
        }
        return;
      }
      if (max) {
        at::amax_out(out, in, dims, false);
      } else {
        at::amin_out(out, in, dims, false);
      }
      return;
    }
    default:
      MDF_UNREACHABLE("not a reduction: ", call.op.opName());
  }
}

// ---------------------------------------------------------- data movement

void setKernel(KernelCall& call) {
  out0(call).copy_(reshapedAs(call.tensors[0], out0(call).sizes()));
}

void reshapeKernel(KernelCall& call) {
  out0(call).copy_(reshapedAs(call.tensors[0], out0(call).sizes()));
}

void permuteKernel(KernelCall& call) {
  const auto& op = static_cast<const PermuteOp&>(call.op);
  out0(call).copy_(call.tensors[0].permute(op.dims()));
}

void sliceKernel(KernelCall& call) {
  const auto& op = static_cast<const SliceOp&>(call.op);
  at::Tensor in = call.tensors[0];
  const at::Tensor& out = out0(call);
  for (int64_t a = 0; a < in.dim(); ++a) {
    const int64_t start = op.isWhole(a) ? 0 : call.scalars.at(a + 1).toLong();
    in = in.narrow(a, start, out.size(a));
  }
  out0(call).copy_(in);
}

void catKernel(KernelCall& call) {
  const auto& op = static_cast<const CatOp&>(call.op);
  std::vector<at::Tensor> ins;
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    ins.push_back(expanded(call, i));
  }
  at::cat_out(out0(call), ins, op.dim());
}

// --------------------------------------------------------- normalizations

void layerNormKernel(KernelCall& call) {
  const auto& op = static_cast<const LayerNormOp&>(call.op);
  const at::Tensor& in = call.tensors[0];
  size_t next = 1;
  std::optional<at::Tensor> weight;
  std::optional<at::Tensor> bias;
  if (op.weight() != nullptr) {
    weight = call.tensors[next++];
  }
  if (op.bias() != nullptr) {
    bias = call.tensors[next++];
  }
  const std::vector<int64_t> normalized(
      in.sizes().end() - op.normalizedNdim(), in.sizes().end());
  // ATen's out= variant computes into a temporary and copies too.
  const auto [y, mean, rstd] =
      at::native_layer_norm(in, normalized, weight, bias, op.eps());
  out0(call).copy_(y);
}

// The kernel of every operation type, in OpType order.
struct Entry {
  OpType type;
  Kernel kernel;
};
constexpr Entry kKernels[] = {
    {OpType::Neg, unary<at::neg_out>},
    {OpType::Abs, unary<at::abs_out>},
    {OpType::Exp, unary<at::exp_out>},
    {OpType::Log, unary<at::log_out>},
    {OpType::Log1p, unary<at::log1p_out>},
    {OpType::Tanh, unary<at::tanh_out>},
    {OpType::Sigmoid, unary<at::sigmoid_out>},
    {OpType::Relu, unary<reluOut>},
    {OpType::Silu, unary<at::silu_out>},
    {OpType::Gelu, unary<geluOut>},
    {OpType::GeluTanh, unary<geluTanhOut>},
    {OpType::Erf, unary<at::erf_out>},
    {OpType::Sqrt, unary<at::sqrt_out>},
    {OpType::Rsqrt, unary<at::rsqrt_out>},
    {OpType::Reciprocal, unary<at::reciprocal_out>},
    {OpType::Sin, unary<at::sin_out>},
    {OpType::Cos, unary<at::cos_out>},
    {OpType::Cast, unary<castOut>},
    {OpType::Add, binary<addOut>},
    {OpType::Sub, binary<subOut>},
    {OpType::Mul, binary<at::mul_out>},
    {OpType::Div, binary<divOut>},
    {OpType::Pow, binary<powOut>},
    {OpType::Maximum, binary<at::maximum_out>},
    {OpType::Minimum, binary<at::minimum_out>},
    {OpType::Eq, binary<at::eq_out>},
    {OpType::Ne, binary<at::ne_out>},
    {OpType::Lt, binary<at::lt_out>},
    {OpType::Le, binary<at::le_out>},
    {OpType::Gt, binary<at::gt_out>},
    {OpType::Ge, binary<at::ge_out>},
    {OpType::Where, whereKernel},
    {OpType::Clamp, clampKernel},
    {OpType::Sum, reduction},
    {OpType::Max, reduction},
    {OpType::Min, reduction},
    {OpType::Set, setKernel},
    {OpType::Broadcast, reshapeKernel},
    {OpType::Reshape, reshapeKernel},
    {OpType::Permute, permuteKernel},
    {OpType::Squeeze, reshapeKernel},
    {OpType::Slice, sliceKernel},
    {OpType::Cat, catKernel},
    {OpType::Full, fullKernel},
    {OpType::Iota, iotaKernel},
    {OpType::Uniform, randomKernel},
    {OpType::Normal, randomKernel},
    {OpType::Linear, linearKernel},
    {OpType::Matmul, matmulKernel},
    {OpType::GroupedMm, groupedMmKernel},
    {OpType::SdpaFwd, sdpaFwdKernel},
    {OpType::SdpaBwd, sdpaBwdKernel},
    {OpType::LayerNorm, layerNormKernel},
};

constexpr bool kernelsInOrder() {
  for (size_t i = 0; i < std::size(kKernels); ++i) {
    if (static_cast<size_t>(kKernels[i].type) != i) {
      return false;
    }
  }
  return static_cast<size_t>(kLastOpType) + 1 == std::size(kKernels);
}
static_assert(kernelsInOrder(), "kKernels must list every OpType in order");

} // namespace

at::Tensor layoutView(const KernelCall& call) {
  const at::Tensor& in = call.tensors.at(0);
  switch (call.op.type()) {
    case OpType::Permute:
      return in.permute(static_cast<const PermuteOp&>(call.op).dims());
    case OpType::Slice: {
      const auto& op = static_cast<const SliceOp&>(call.op);
      const std::vector<IterDomain*>& out_ids = op.out()->logical();
      at::Tensor view = in;
      for (int64_t a = 0; a < in.dim(); ++a) {
        if (!op.isWhole(a)) {
          view = view.narrow(
              a,
              call.scalars.at(a + 1).toLong(),
              call.extents.evaluate(out_ids.at(a)->extent()));
        }
      }
      return view;
    }
    case OpType::Squeeze: {
      const std::vector<bool>& removed =
          static_cast<const SqueezeOp&>(call.op).isRemoved();
      at::Tensor view = in;
      for (int64_t a = static_cast<int64_t>(removed.size()) - 1; a >= 0; --a) {
        if (removed[a]) {
          view = view.squeeze(a);
        }
      }
      return view;
    }
    case OpType::Broadcast: {
      const std::vector<bool>& is_new =
          static_cast<const BroadcastOp&>(call.op).isNew();
      at::Tensor view = in;
      for (size_t a = 0; a < is_new.size(); ++a) {
        if (is_new[a]) {
          view = view.unsqueeze(static_cast<int64_t>(a));
        }
      }
      return view;
    }
    case OpType::Reshape: {
      // Per group of axes, the output extents: global ones, except the
      // outermost of a group, which takes what the local input holds (a
      // device's or a stream chunk's part of it).
      const auto& op = static_cast<const ReshapeOp&>(call.op);
      const std::vector<IterDomain*>& out_ids = op.out()->logical();
      std::vector<int64_t> shape(out_ids.size(), 1);
      for (const ReshapeOp::Group& g : op.groups()) {
        int64_t local = 1;
        for (int64_t a = g.in_begin; a < g.in_end; ++a) {
          local *= in.size(a);
        }
        int64_t rest = 1;
        for (int64_t j = g.out_begin + 1; j < g.out_end; ++j) {
          shape[j] = call.extents.evaluate(out_ids[j]->extent());
          rest *= shape[j];
        }
        if (g.out_begin < g.out_end) {
          shape[g.out_begin] = rest == 0 ? 0 : local / rest;
        }
      }
      return in.reshape(shape);
    }
    default:
      MDF_UNREACHABLE("not a layout operation: ", call.op.opName());
  }
}

void runKernel(KernelCall& call) {
  const auto index = static_cast<size_t>(call.op.type());
  MDF_CHECK_LT(index, std::size(kKernels));
  kKernels[index].kernel(call);
}

} // namespace mdfuser
