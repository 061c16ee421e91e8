// SPDX-License-Identifier: MIT
// The bindings of linear, matmul, grouped_mm and attention.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"
#include "op_arguments.h"

namespace py = pybind11;

namespace mdfuser::python {

void bindMatmulOps(py::module_& m) {
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
