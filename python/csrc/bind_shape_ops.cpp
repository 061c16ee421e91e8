// SPDX-License-Identifier: MIT
// The bindings of the layout operations: broadcast, reshape, permute,
// squeeze, slice and cat.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "op_arguments.h"

namespace py = pybind11;

namespace mdfuser::python {

void bindShapeOps(py::module_& m) {
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
}

} // namespace mdfuser::python
