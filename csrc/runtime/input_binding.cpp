// SPDX-License-Identifier: MIT
#include "runtime/input_binding.h"

#include <c10/core/DeviceType.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"
#include "runtime/communicator.h"
#include "runtime/tensor_types.h"

namespace mdfuser {

namespace {

std::string describe(const Fusion& fusion, size_t i) {
  return detail::concat("input ", i, " (T", fusion.inputs()[i]->name(), ")");
}

void checkMesh(const DeviceMesh& mesh, const Communicator& comm) {
  if (mesh.maxDevice() >= comm.size()) {
    MDF_USER_CHECK(
        comm.isLaunched(),
        "this fusion runs on ",
        mesh.toString(),
        ", which needs ",
        mesh.maxDevice() + 1,
        " processes, but this process was not started by a launcher. Run "
        "one process per device, e.g. `mpirun -np ",
        mesh.maxDevice() + 1,
        " python script.py` or `torchrun --nproc-per-node ",
        mesh.maxDevice() + 1,
        " script.py`");
    MDF_USER_ERROR(
        mesh.toString(),
        " names device ",
        mesh.maxDevice(),
        ", but the world has only ",
        comm.size(),
        " processes (ranks 0 to ",
        comm.size() - 1,
        "); launch at least ",
        mesh.maxDevice() + 1,
        " processes or use a smaller mesh");
  }
}

} // namespace

void checkScalarInputs(
    const Fusion& fusion, const std::vector<Literal::Value>& scalars) {
  const std::vector<Literal*>& expected = fusion.scalarInputs();
  MDF_USER_CHECK(
      scalars.size() == expected.size(),
      "execute: the fusion has ",
      expected.size(),
      " scalar input(s) (define_scalar(None, dtype)), got ",
      scalars.size(),
      " value(s) for them");
  for (size_t i = 0; i < scalars.size(); ++i) {
    const Literal* input = expected[i];
    MDF_TYPE_CHECK(
        Literal::fits(scalars[i], input->dtype()),
        "execute: scalar input ",
        i,
        " (",
        input->toString(),
        ") has dtype ",
        input->dtype(),
        " but got ",
        valueString(scalars[i]),
        "; expected a bool for Bool, an int for an integral type, an int or "
        "a float for a floating type");
  }
}

c10::Device programDevice(
    const Fusion& fusion, const std::vector<at::Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size() && i < fusion.inputs().size(); ++i) {
    if (!fusion.inputs()[i]->isCpuScalar() && inputs[i].defined()) {
      return inputs[i].device();
    }
  }
  return c10::Device(c10::kCPU);
}

void checkInputs(const Fusion& fusion, const std::vector<at::Tensor>& inputs) {
  const std::vector<TensorView*>& tvs = fusion.inputs();
  MDF_USER_CHECK(
      inputs.size() == tvs.size(),
      "execute expected ",
      tvs.size(),
      " inputs (one per define_tensor), got ",
      inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const TensorView* tv = tvs[i];
    MDF_TYPE_CHECK(t.defined(), describe(fusion, i), " is an undefined tensor");
    MDF_TYPE_CHECK(
        !t.is_nested(),
        describe(fusion, i),
        " is a nested tensor; mdfuser takes dense tensors of one shape");
    MDF_TYPE_CHECK(
        t.layout() == c10::kStrided,
        describe(fusion, i),
        " has layout ",
        t.layout(),
        "; mdfuser takes dense (strided) tensors: pass tensor.to_dense()");
    MDF_TYPE_CHECK(
        !t.is_meta(),
        describe(fusion, i),
        " is on the meta device, which holds no values; pass a tensor on "
        "the CPU or a GPU (materialize a model built on the meta device "
        "first, e.g. with to_empty and its initialization)");
    MDF_TYPE_CHECK(
        t.is_cpu() || t.is_cuda(),
        describe(fusion, i),
        " is on ",
        t.device(),
        "; mdfuser runs on CPU and CUDA tensors");
    MDF_TYPE_CHECK(
        t.scalar_type() == toScalarType(tv->dtype()),
        describe(fusion, i),
        " has dtype ",
        t.scalar_type(),
        " but was defined as ",
        tv->dtype());
    const int64_t ndim = static_cast<int64_t>(tv->logicalNoReductions().size());
    MDF_USER_CHECK(
        t.dim() == ndim,
        describe(fusion, i),
        " has ",
        t.dim(),
        " dimensions but was defined with ",
        ndim);
    const c10::Device device = programDevice(fusion, inputs);
    MDF_USER_CHECK(
        t.device() == device || (tv->isCpuScalar() && t.device().is_cpu()),
        describe(fusion, i),
        " is on ",
        t.device(),
        " but the other inputs are on ",
        device,
        "; all inputs must be on one device (0-dimensional inputs defined "
        "with is_cpu=True may stay on the CPU)");
  }
}

namespace {

// The devices one logical axis of an input is split across: the product of
// the mesh sizes of every device parallel type on it (several on an N-D
// mesh), named outermost first.
struct AxisDevices {
  int64_t devices = 1;
  std::string names;
  // The axis itself is parallelized: each device holds one element.
  bool whole = false;
};

AxisDevices devicesOn(const TensorView* tv, const IterDomain* axis) {
  AxisDevices result;
  for (ParallelType pt : kDeviceParallelTypes) {
    const ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
    if (!pa || pa.source != axis) {
      continue;
    }
    result.devices *= tv->deviceMesh()->size(pt);
    const std::string name(parallelTypeName(pt));
    result.names = result.names.empty() ? name : name + " and " + result.names;
    result.whole = result.whole || pa.split == nullptr;
  }
  return result;
}

} // namespace

namespace {

// A max or min over an axis of extent 0 has no value; torch refuses it,
// and so does mdfuser, naming the axis (unless the operation gives the
// identity there, ReductionOp::emptyIsIdentity).
void checkNoEmptyMaxima(const Fusion& fusion, const ScalarEvaluator& extents) {
  for (const TensorOp* op : fusion.exprs()) {
    const auto* reduction = dynamic_cast<const ReductionOp*>(op);
    if (reduction == nullptr || op->type() == OpType::Sum ||
        reduction->emptyIsIdentity()) {
      continue;
    }
    const std::vector<IterDomain*> axes =
        reduction->in()->logicalNoReductions();
    for (int64_t d : reduction->reducedDims()) {
      MDF_USER_CHECK(
          extents.evaluate(axes.at(d)->extent()) != 0,
          op->opName(),
          " over an empty axis: axis ",
          d,
          " of ",
          reduction->in()->toString(),
          " has extent 0, and the ",
          op->type() == OpType::Max ? "maximum" : "minimum",
          " of no values is undefined (torch refuses it too)");
    }
  }
}

} // namespace

ScalarEvaluator bindInputs(
    const Fusion& fusion,
    const std::vector<at::Tensor>& inputs,
    const Communicator& comm) {
  checkInputs(fusion, inputs);
  for (const TensorView* tv : fusion.allTensors()) {
    if (tv->hasDeviceMesh()) {
      checkMesh(*tv->deviceMesh(), comm);
    }
  }
  const c10::Device device = programDevice(fusion, inputs);
  if (device.is_cuda() && comm.isLaunched()) {
    const bool shared = comm.options().share_devices;
    const int64_t expected = comm.localGpu(
        c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).deviceCount());
    MDF_USER_CHECK(
        device.index() == expected,
        "the inputs of rank ",
        comm.rank(),
        " are on ",
        device,
        ", but local rank ",
        comm.localRank(),
        " uses cuda:",
        expected,
        shared ? " (MDFUSER_SHARE_DEVICES=1: local rank modulo the GPUs)"
               : " (one device per process, numbered by local rank)");
  }

  ScalarEvaluator extents;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView* tv = fusion.inputs()[i];
    const std::vector<IterDomain*> logical = tv->logicalNoReductions();
    for (size_t axis = 0; axis < logical.size(); ++axis) {
      const int64_t local = inputs[i].size(static_cast<int64_t>(axis));
      const AxisDevices on = devicesOn(tv, logical[axis]);
      const int64_t devices = on.devices;
      const bool whole_axis_on_devices = on.whole;
      if (whole_axis_on_devices) {
        MDF_USER_CHECK(
            local == 1,
            describe(fusion, i),
            " axis ",
            axis,
            " is parallelized on ",
            on.names,
            ", so each device holds 1 element of it, but its local size is ",
            local);
      }
      const int64_t global = whole_axis_on_devices ? devices : local * devices;
      const std::string sharded = devices == 1
                                      ? std::string()
                                      : detail::concat(
                                            "; sharded across ",
                                            devices,
                                            " devices on ",
                                            on.names,
                                            " that is a global size of ",
                                            global);
      const Scalar* extent = logical[axis]->extent();
      std::optional<int64_t> expected = extents.tryEvaluate(extent);
      if (!expected.has_value()) {
        extents.bind(extent, global);
        if (devices > 1 && !whole_axis_on_devices) {
          // An inner split fixes the shard size rather than the number of
          // shards; splits above the device split set how many runs of it
          // a device holds.
          const std::optional<int64_t> part =
              extents.tryEvaluate(localExtents(tv)[axis]);
          MDF_USER_CHECK(
              !part.has_value() || *part == local,
              describe(fusion, i),
              " axis ",
              axis,
              " has local size ",
              local,
              ", but its split gives each device ",
              part.value_or(0));
        }
        continue;
      }
      MDF_USER_CHECK(
          *expected == global,
          describe(fusion, i),
          " axis ",
          axis,
          " has local size ",
          local,
          sharded,
          ", but the fusion defines it as ",
          *expected,
          devices == 1
              ? std::string()
              : detail::concat(
                    " (so each device expects ", *expected / devices, ")"));
    }
  }

  for (const Fusion::ExtentConstraint& c : fusion.extentConstraints()) {
    const int64_t lhs = extents.evaluate(c.lhs);
    const int64_t rhs = extents.evaluate(c.rhs);
    switch (c.kind) {
      case Fusion::ExtentConstraint::Kind::kDivisible:
        MDF_USER_CHECK(
            // An empty axis splits into parts of no elements, whose extent
            // is 0 too.
            rhs == 0 ? lhs == 0 : lhs % rhs == 0,
            c.what,
            " has extent ",
            lhs,
            ", which does not divide evenly into ",
            rhs,
            " parts");
        break;
      case Fusion::ExtentConstraint::Kind::kAtMost:
        MDF_USER_CHECK(
            lhs <= rhs, c.what, " is ", lhs, ", past ", c.rhs_what, " ", rhs);
        break;
      case Fusion::ExtentConstraint::Kind::kEqual:
        MDF_USER_CHECK(
            lhs == rhs, c.what, " must match, got ", lhs, " and ", rhs);
        break;
    }
  }
  checkNoEmptyMaxima(fusion, extents);
  return extents;
}

} // namespace mdfuser
