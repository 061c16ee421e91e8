// SPDX-License-Identifier: MIT
#include <optional>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"

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
      py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item),
      "DeviceMesh: devices must be integers, got ",
      std::string(py::repr(item)));
  const auto seq = py::reinterpret_borrow<py::sequence>(item);
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
  py::enum_<DataType>(m, "DataType", "Element type of a tensor.")
      .value("Float", DataType::Float)
      .value("Double", DataType::Double)
      .value("Half", DataType::Half)
      .value("BFloat16", DataType::BFloat16)
      .value("Int", DataType::Int)
      .value("Int32", DataType::Int32)
      .value("Bool", DataType::Bool);

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

  py::class_<DeviceMesh>(
      m,
      "DeviceMesh",
      "An arrangement of device ids (ranks), from a list, nested lists or an "
      "integer tensor: DeviceMesh(torch.arange(4)). mesh_x is the last axis.")
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
      .def("__eq__", &DeviceMesh::operator==)
      .def("__repr__", &DeviceMesh::toString);

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
      .def_property_readonly(
          "extent",
          [](const AxisRef& ref) -> std::optional<int64_t> {
            return ref.id()->extent()->constValue();
          },
          "The extent when it is known statically, else None.")
      .def("__repr__", [](const AxisRef& ref) { return ref.id()->toString(); });

  py::class_<TensorView, TensorViewHolder>(
      m, "TensorView", "A tensor of a fusion, with global shape.")
      .def_property_readonly(
          "ndim",
          [](const TensorView& tv) { return tv.logicalNoReductions().size(); },
          "Number of dimensions of the tensor.")
      .def_property_readonly("dtype", &TensorView::dtype)
      .def_property_readonly(
          "num_loop_axes",
          &TensorView::nDims,
          "Number of loop axes: dimensions after splits.")
      .def_property_readonly(
          "device_mesh", [](const TensorView& tv) { return tv.deviceMesh(); })
      .def("set_device_mesh", &TensorView::setDeviceMesh, py::arg("mesh"))
      .def(
          "split",
          [](TensorView& tv, int64_t axis, int64_t factor, bool inner_split) {
            tv.split(axis, factor, inner_split);
          },
          py::arg("axis"),
          py::arg("factor"),
          py::arg("inner_split") = true,
          "Splits loop axis `axis` in two. An outer split makes the outer "
          "part's extent `factor`; an inner split the inner part's.")
      .def(
          "outer_split",
          [](TensorView& tv, int64_t axis, int64_t factor) {
            tv.outerSplit(axis, factor);
          },
          py::arg("axis"),
          py::arg("factor"))
      .def(
          "inner_split",
          [](TensorView& tv, int64_t axis, int64_t factor) {
            tv.innerSplit(axis, factor);
          },
          py::arg("axis"),
          py::arg("factor"))
      .def(
          "axis",
          [](TensorView& tv, int64_t axis) {
            tv.axis(axis); // range check
            return AxisRef{&tv, axis};
          },
          py::arg("i"),
          py::keep_alive<0, 1>())
      .def(
          "_sharded_axes",
          [](const TensorView& tv) {
            std::vector<std::pair<int64_t, ParallelType>> result;
            const std::vector<ParallelType> sharding =
                shardingOfLogicalAxes(&tv);
            for (size_t i = 0; i < sharding.size(); ++i) {
              if (sharding[i] != ParallelType::Serial) {
                result.emplace_back(static_cast<int64_t>(i), sharding[i]);
              }
            }
            return result;
          },
          "(axis, parallel type) for each tensor axis sharded across devices.")
      .def("__repr__", &TensorView::toString);

  py::class_<Fusion>(m, "Fusion", "A fusion: its tensors, ops and schedule.")
      .def(py::init<>())
      .def(
          "define_tensor",
          [](Fusion& fusion,
             const std::vector<int64_t>& shape,
             std::vector<std::optional<bool>> contiguity,
             DataType dtype) {
            return fusion.defineTensor(shape, std::move(contiguity), dtype);
          },
          py::arg("shape"),
          py::arg("contiguity"),
          py::arg("dtype"),
          py::return_value_policy::reference_internal)
      .def("add_output", &Fusion::addOutput, py::arg("tensor"))
      .def(
          "inputs",
          &Fusion::inputs,
          py::return_value_policy::reference_internal)
      .def(
          "outputs",
          &Fusion::outputs,
          py::return_value_policy::reference_internal)
      .def("__str__", &Fusion::toString)
      .def("__repr__", &Fusion::toString);

  m.def(
      "linear",
      &linear,
      py::arg("input"),
      py::arg("weight"),
      py::arg("bias") = nullptr,
      py::return_value_policy::reference,
      py::keep_alive<0, 1>());
  m.def(
      "matmul",
      &matmul,
      py::arg("a"),
      py::arg("b"),
      py::return_value_policy::reference,
      py::keep_alive<0, 1>());
  m.def(
      "set",
      &set,
      py::arg("input"),
      py::return_value_policy::reference,
      py::keep_alive<0, 1>());
}

} // namespace mdfuser::python
