// SPDX-License-Identifier: MIT
#pragma once

#include <pybind11/pybind11.h>

namespace mdfuser::python {

// The IR a FusionDefinition builds: DataType, ParallelType, DeviceMesh,
// Fusion, TensorView and the operations.
void bindIr(pybind11::module_& m);

// The operations, as functions of mdfuser._C.ops taking the fusion first;
// bindOps calls the other two.
void bindOps(pybind11::module_& m);
void bindShapeOps(pybind11::module_& m);
void bindMatmulOps(pybind11::module_& m);

// Execution: Communicator and FusionExecutorCache.
void bindRuntime(pybind11::module_& m);

} // namespace mdfuser::python
