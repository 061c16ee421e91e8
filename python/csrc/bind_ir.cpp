// SPDX-License-Identifier: MIT
#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "ir/rfactor.h"
#include "multidevice/sharding.h"
#include "passes/choose_stream_chunks.h"

namespace py = pybind11;

namespace mdfuser::python {

namespace {

// What tv.axis(i) returns: one loop axis of a tensor. Parallelizing goes
// through the tensor, which checks the request against its other axes.
struct AxisRef {
  TensorView* tv;
  int64_t axis;

  IterDomain* id() const {
    return tv->axis(axis);
  }
};

using TensorViewHolder = std::unique_ptr<TensorView, py::nodelete>;

// Appends the integers of a nested list to `flat`, recording the length of
// each nesting level in `shape` and requiring every level to be regular.
void flatten(
    const py::handle& item,
    size_t depth,
    std::vector<int64_t>& flat,
    std::vector<int64_t>& shape) {
  if (py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item)) {
    MDF_USER_CHECK(
        depth == shape.size(),
        "DeviceMesh: devices must form a regular grid of integers");
    flat.push_back(item.cast<int64_t>());
    return;
  }
  MDF_TYPE_CHECK(
      py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item) ||
          py::isinstance(item, py::module_::import("builtins").attr("range")),
      "DeviceMesh: devices must be integers, got ",
      std::string(py::repr(item)));
  const auto seq =
      py::reinterpret_steal<py::sequence>(PySequence_List(item.ptr()));
  const auto length = static_cast<int64_t>(seq.size());
  if (depth == shape.size()) {
    MDF_USER_CHECK(
        flat.empty(), "DeviceMesh: devices must form a regular grid");
    shape.push_back(length);
  }
  MDF_USER_CHECK(
      shape[depth] == length,
      "DeviceMesh: devices must form a regular grid, but one level has ",
      length,
      " entries and another ",
      shape[depth]);
  for (const py::handle& child : seq) {
    flatten(child, depth + 1, flat, shape);
  }
}

// A mesh from a list, nested lists or an integer tensor.
DeviceMesh meshFrom(const py::object& devices) {
  py::object list = devices;
  if (py::hasattr(devices, "tolist") && py::hasattr(devices, "shape")) {
    if (py::hasattr(devices, "is_floating_point")) {
      MDF_TYPE_CHECK(
          !devices.attr("is_floating_point")().cast<bool>(),
          "DeviceMesh: devices must be integers, got a tensor of dtype ",
          std::string(py::str(devices.attr("dtype"))));
    }
    list = devices.attr("tolist")();
  }
  std::vector<int64_t> flat;
  std::vector<int64_t> shape;
  flatten(list, 0, flat, shape);
  MDF_USER_CHECK(
      !shape.empty(),
      "DeviceMesh: expected a list of device ids, got one integer");
  return DeviceMesh(std::move(flat), std::move(shape));
}

} // namespace

void bindIr(py::module_& m) {
  py::enum_<DataType>(m, "DataType", "Element type of a tensor or scalar.")
      .value("Float", DataType::Float)
      .value("Double", DataType::Double)
      .value("Half", DataType::Half)
      .value("BFloat16", DataType::BFloat16)
      .value("Int", DataType::Int)
      .value("Int32", DataType::Int32)
      .value("Bool", DataType::Bool)
      .value("UInt64", DataType::UInt64)
      .value("Null", DataType::Null);

  py::enum_<ParallelType>(
      m,
      "ParallelType",
      "How a loop axis runs: serially, across CUDA streams, or across the "
      "devices of a mesh axis (mesh_x is the innermost).")
      .value("serial", ParallelType::Serial)
      .value("stream", ParallelType::Stream)
      .value("mesh_x", ParallelType::DIDx)
      .value("mesh_y", ParallelType::DIDy)
      .value("mesh_z", ParallelType::DIDz);

  py::enum_<MemoryType>(
      m,
      "MemoryType",
      "Where a tensor's buffer lives (TensorView.set_memory_type): global, "
      "or symmetric (shared with the tensor's mesh on the CUDA "
      "communication backend; an ordinary buffer elsewhere). local, shared "
      "and tensor name the reference system's kernel memories, which "
      "mdfuser's ATen kernels do not have: set_memory_type refuses them.")
      .value("tensor", MemoryType::Tensor)
      .value("local", MemoryType::Local)
      .value("shared", MemoryType::Shared)
      .value("global", MemoryType::Global)
      .value("symmetric", MemoryType::Symmetric);

  py::class_<DeviceMesh>(
      m,
      "DeviceMesh",
      "An arrangement of device ids (ranks), from a list, a range, nested "
      "lists or an integer tensor: DeviceMesh(torch.arange(4)). mesh_x is "
      "the last axis.")
      .def(py::init(&meshFrom), py::arg("devices"))
      .def_property_readonly("devices", &DeviceMesh::devices)
      .def_property_readonly("shape", &DeviceMesh::shape)
      .def_property_readonly(
          "size", [](const DeviceMesh& mesh) { return mesh.size(); })
      .def("__len__", [](const DeviceMesh& mesh) { return mesh.size(); })
      .def(
          "team",
          &DeviceMesh::team,
          py::arg("device"),
          py::arg("parallel_type"),
          "The devices of the mesh axis `parallel_type` that `device` is on.")
      .def("__contains__", &DeviceMesh::has, py::arg("device"))
      .def("__eq__", &DeviceMesh::operator==)
      .def("__repr__", &DeviceMesh::toString);

  py::class_<Val, std::unique_ptr<Val, py::nodelete>>(
      m,
      "Val",
      "A value of a fusion: a tensor, a scalar (define_scalar: a constant, "
      "or with None an input given at execute) or an extent (tv.size(i), "
      "fd.ops.shape(tv)).")
      .def(
          "is_tensor",
          [](const Val& v) {
            return dynamic_cast<const TensorView*>(&v) != nullptr;
          },
          "Whether the value is a TensorView.")
      .def("__repr__", &Val::toString);

  py::class_<Scalar, Val, std::unique_ptr<Scalar, py::nodelete>>(
      m, "Scalar", "An integer extent: static, or known only at run time.")
      .def(
          "is_symbolic",
          [](const Scalar& s) { return !s.isConst(); },
          "Whether the value is known only at run time.")
      .def_property_readonly(
          "value",
          [](const Scalar& s) { return s.constValue(); },
          "The value when it is static, else None.");

  py::class_<Literal, Val, std::unique_ptr<Literal, py::nodelete>>(
      m, "Literal", "A typed constant: define_scalar(value, dtype).")
      .def("is_symbolic", &Literal::isSymbolic, "Whether execute gives it.")
      .def("dtype", &Literal::dtype)
      .def_property_readonly(
          "value",
          [](const Literal& l) -> py::object {
            if (l.isSymbolic()) {
              return py::none();
            }
            return std::visit(
                [](auto v) -> py::object { return py::cast(v); }, l.value());
          },
          "The constant's value; None for a scalar input.");

  py::class_<AxisRef>(m, "IterDomain", "One loop axis of a TensorView.")
      .def(
          "parallelize",
          [](const AxisRef& ref, ParallelType pt) {
            ref.tv->parallelize(ref.axis, pt);
          },
          py::arg("parallel_type"))
      .def_property_readonly(
          "parallel_type",
          [](const AxisRef& ref) { return ref.id()->parallelType(); })
      .def(
          "extent",
          [](const AxisRef& ref) { return ref.id()->extent(); },
          py::return_value_policy::reference,
          "The extent, a Scalar (static or symbolic).")
      .def(
          "is_reduction",
          [](const AxisRef& ref) { return ref.id()->isReduction(); })
      .def(
          "is_broadcast",
          [](const AxisRef& ref) { return ref.id()->isBroadcast(); })
      .def("__repr__", [](const AxisRef& ref) { return ref.id()->toString(); });

  py::class_<TensorView, Val, TensorViewHolder>(
      m, "TensorView", "A tensor of a fusion, with global shape.")
      .def_property_readonly(
          "ndim",
          [](const TensorView& tv) { return tv.logicalNoReductions().size(); },
          "Number of dimensions of the tensor.")
      .def("dtype", &TensorView::dtype, "The element type.")
      .def(
          "shape",
          [](const TensorView& tv) {
            std::vector<Scalar*> shape;
            for (IterDomain* id : tv.logicalNoReductions()) {
              shape.push_back(id->extent());
            }
            return shape;
          },
          py::return_value_policy::reference,
          "The global extents, as Scalars.")
      .def(
          "size",
          [](const TensorView& tv, int64_t dim) {
            const std::vector<IterDomain*> ids = tv.logicalNoReductions();
            const auto n = static_cast<int64_t>(ids.size());
            MDF_USER_CHECK(
                dim >= -n && dim < n,
                "size: dimension ",
                dim,
                " is out of range for ",
                tv.toString());
            return ids[dim < 0 ? dim + n : dim]->extent();
          },
          py::arg("dim"),
          py::return_value_policy::reference,
          "The global extent of dimension `dim`, a Scalar.")
      .def_property_readonly(
          "num_loop_axes",
          &TensorView::nDims,
          "Number of loop axes: dimensions after splits.")
      .def_property_readonly(
          "device_mesh", [](const TensorView& tv) { return tv.deviceMesh(); })
      .def("set_device_mesh", &TensorView::setDeviceMesh, py::arg("mesh"))
      .def(
          "set_memory_type",
          &TensorView::setMemoryType,
          py::arg("memory_type"),
          "Places the tensor's buffer: MemoryType.global (the default) or "
          "MemoryType.symmetric, which the CUDA communication backend "
          "allocates in symmetric memory shared with the tensor's mesh and "
          "the other backends as an ordinary buffer (program inputs and "
          "outputs keep the caller's and a fresh buffer). The values are "
          "the same either way.")
      .def_property_readonly(
          "memory_type",
          &TensorView::memoryType,
          "Where the buffer lives (set_memory_type).")
      .def(
          "split",
          [](TensorView& tv, int64_t axis, int64_t factor, bool inner_split) {
            tv.split(axis, factor, inner_split);
            return &tv;
          },
          py::arg("axis"),
          py::arg("factor"),
          py::arg("inner_split") = true,
          py::return_value_policy::reference,
          "Splits loop axis `axis` in two. An outer split makes the outer "
          "part's extent `factor`; an inner split the inner part's.")
      .def(
          "outer_split",
          [](TensorView& tv, int64_t axis, std::optional<int64_t> factor) {
            if (factor.has_value()) {
              tv.outerSplit(axis, *factor);
            } else {
              tv.outerSplitChosen(axis);
            }
            return &tv;
          },
          py::arg("axis"),
          py::arg("factor") = py::none(),
          py::return_value_policy::reference,
          "Splits loop axis `axis` into `factor` parts (the outer part's "
          "extent). Without a factor, mdfuser chooses the number of parts "
          "when it compiles the fusion, from a model of the machine: the "
          "outer part must then be parallelized on ParallelType.stream "
          "(doc/options.md#stream-chunks).")
      .def(
          "inner_split",
          [](TensorView& tv, int64_t axis, int64_t factor) {
            tv.innerSplit(axis, factor);
            return &tv;
          },
          py::arg("axis"),
          py::arg("factor"),
          py::return_value_policy::reference)
      .def(
          "swizzle1d",
          [](TensorView& tv, int64_t axis, ParallelType parallel_type) {
            tv.swizzle1d(axis, parallel_type);
            return &tv;
          },
          py::arg("axis"),
          py::arg("parallel_type"),
          py::return_value_policy::reference,
          "Swizzles loop axis `axis`, the outer part of an outer split into "
          "d parts, with the device parallel type `parallel_type`: its "
          "index i stands for part (i + this device's index) mod d. On the "
          "stream split of a gather (a set of a tensor split across that "
          "mesh axis into the same d parts) each device starts on its own "
          "part: mdfuser lowers the gather and the linear it feeds as its "
          "ring of CollectivePermutes (doc/host_ir.md#ring-decompositions).")
      .def(
          "merge",
          [](TensorView& tv, int64_t outer, int64_t inner) {
            tv.merge(outer, inner);
            return &tv;
          },
          py::arg("axis_o"),
          py::arg("axis_i"),
          py::return_value_policy::reference,
          "Merges adjacent loop axes `axis_o` and `axis_i` into one.")
      .def(
          "reorder",
          [](TensorView& tv, const std::map<int64_t, int64_t>& old_to_new) {
            tv.reorder(old_to_new);
            return &tv;
          },
          py::arg("old2new"),
          py::return_value_policy::reference,
          "Moves loop axes, e.g. reorder({1: 0}).")
      .def(
          "rfactor",
          [](TensorView& tv, const std::vector<int64_t>& axes) {
            std::vector<IterDomain*> ids;
            for (int64_t a : axes) {
              ids.push_back(tv.axis(a));
            }
            return rFactor(&tv, ids);
          },
          py::arg("axes"),
          py::return_value_policy::reference,
          "Splits the reduction defining this tensor: returns a new tensor "
          "that reduces over the loop axes `axes` only; this tensor then "
          "reduces the new one over the others.")
      .def(
          "get_loop_domain",
          [](py::object self) {
            auto& tv = self.cast<TensorView&>();
            py::list axes;
            for (int64_t i = 0; i < tv.nDims(); ++i) {
              // Each keeps the tensor alive, as axis(i)'s does.
              py::object axis = py::cast(AxisRef{&tv, i});
              py::detail::keep_alive_impl(axis, self);
              axes.append(axis);
            }
            return axes;
          },
          "The loop axes, outermost first (what axis(i) returns for each i).")
      .def(
          "set_allocation_domain",
          [](TensorView& tv,
             const std::vector<AxisRef>& domain,
             const py::object& new_contiguity) {
            std::vector<IterDomain*> ids;
            for (const AxisRef& ref : domain) {
              MDF_USER_CHECK(
                  ref.tv == &tv,
                  "set_allocation_domain: axis ",
                  ref.id()->toString(),
                  " belongs to ",
                  ref.tv->toString(),
                  ", not to ",
                  tv.toString());
              ids.push_back(ref.id());
            }
            std::vector<IterDomain*> loop(tv.loop().begin(), tv.loop().end());
            std::vector<IterDomain*> sorted_ids = ids;
            std::sort(sorted_ids.begin(), sorted_ids.end());
            std::sort(loop.begin(), loop.end());
            MDF_USER_CHECK(
                sorted_ids == loop,
                "set_allocation_domain: the domain must hold each loop axis "
                "of ",
                tv.toString(),
                " once, got ",
                ids.size(),
                " axes");
            bool contiguous = true;
            if (py::isinstance<py::bool_>(new_contiguity)) {
              contiguous = new_contiguity.cast<bool>();
            } else {
              for (const auto& c :
                   new_contiguity.cast<std::vector<std::optional<bool>>>()) {
                contiguous = contiguous && c.value_or(true);
              }
            }
            MDF_USER_CHECK(
                contiguous,
                "set_allocation_domain: mdfuser holds the local tensor of ",
                tv.toString(),
                " contiguous; new_contiguity must be True");
            const std::string mismatch = allocationMismatch(&tv, ids);
            MDF_USER_CHECK(
                mismatch.empty(),
                "set_allocation_domain: mdfuser cannot lay out ",
                tv.toString(),
                " in that order: ",
                mismatch);
          },
          py::arg("domain"),
          py::arg("new_contiguity") = true,
          "Declares the memory layout of the tensor's local part: its loop "
          "axes in `domain`'s order, contiguous. mdfuser holds every local "
          "tensor contiguous in the order of its logical axes (device "
          "parts hold one element); a layout that is this one is accepted, "
          "any other refused with a ValueError naming the axis.")
      .def(
          "axis",
          [](TensorView& tv, int64_t axis) {
            tv.axis(axis); // range check
            return AxisRef{&tv, axis};
          },
          py::arg("i"),
          py::keep_alive<0, 1>())
      .def(
          "_device_axes",
          [](const TensorView& tv) {
            // Per device parallel type that shards a tensor axis: (parallel
            // type, tensor axis, splits above it on that axis, whether the
            // devices hold contiguous blocks: the outer part of its split,
            // with only device splits above).
            std::vector<std::tuple<ParallelType, int64_t, int64_t, bool>>
                result;
            const std::vector<IterDomain*> logical = tv.logicalNoReductions();
            for (ParallelType pt : deviceParallelTypes(&tv)) {
              const ParallelAxis pa = findParallelAxis(&tv, pt, tv.logical());
              auto it = std::find(logical.begin(), logical.end(), pa.source);
              if (it == logical.end()) {
                continue; // a reduction axis: summed across the devices
              }
              const bool blocks =
                  pa.isOuter() && std::all_of(
                                      pa.above.begin(),
                                      pa.above.end(),
                                      [](const IterDomain* id) {
                                        return id->isDeviceParallel();
                                      });
              result.emplace_back(
                  pt,
                  static_cast<int64_t>(it - logical.begin()),
                  static_cast<int64_t>(pa.above.size()),
                  blocks);
            }
            return result;
          },
          "(parallel type, axis, splits above, contiguous blocks) for each "
          "device parallel type sharding a tensor axis.")
      .def("__repr__", &TensorView::toString);

  py::class_<Fusion>(m, "Fusion", "A fusion: its tensors, ops and schedule.")
      .def(py::init<>())
      .def_property_readonly(
          "chooses_stream_chunks",
          [](const Fusion& fusion) { return choosesStreamChunks(fusion); },
          "Whether an outer_split without a factor leaves a stream chunk "
          "count to mdfuser.")
      .def(
          "define_tensor",
          [](Fusion& fusion,
             const std::vector<int64_t>& shape,
             std::vector<std::optional<bool>> contiguity,
             DataType dtype,
             const std::vector<int64_t>& stride_order,
             bool is_cpu) {
            TensorView* tv =
                fusion.defineTensor(shape, std::move(contiguity), dtype);
            tv->setStrideOrder(stride_order);
            tv->setCpuScalar(is_cpu);
            return tv;
          },
          py::arg("shape"),
          py::arg("contiguity"),
          py::arg("dtype"),
          py::arg("stride_order"),
          py::arg("is_cpu"),
          py::return_value_policy::reference_internal)
      .def(
          "define_scalar_input",
          &Fusion::defineScalarInput,
          py::arg("dtype"),
          py::return_value_policy::reference_internal)
      .def(
          "define_scalar",
          [](Fusion& fusion, Literal::Value value, DataType dtype) {
            return fusion.create<Literal>(
                value, dtype == DataType::Null ? defaultDtype(value) : dtype);
          },
          py::arg("value"),
          py::arg("dtype"),
          py::return_value_policy::reference_internal)
      .def("add_output", &Fusion::addOutput, py::arg("tensor"))
      .def(
          "contains",
          [](const Fusion& fusion, const Val& val) {
            return val.container() == &fusion;
          },
          py::arg("val"))
      .def(
          "inputs",
          &Fusion::allInputs,
          "Every input, tensors and scalar inputs, in the order defined: the "
          "order of execute's arguments.",
          py::return_value_policy::reference_internal)
      .def(
          "outputs",
          &Fusion::outputs,
          py::return_value_policy::reference_internal)
      .def(
          "vals",
          &Fusion::allTensors,
          py::return_value_policy::reference_internal,
          "Every tensor the outputs depend on, inputs included, producers "
          "first (the tensors of nvFuser's vals(); extents and constants "
          "are not listed).")
      .def("print_math", [](const Fusion& f) { return f.toString(); })
      .def("__str__", &Fusion::toString)
      .def("__repr__", &Fusion::toString);

  py::module_ ops = m.def_submodule("ops", "Operations of a fusion.");
  bindOps(ops);
}

} // namespace mdfuser::python
