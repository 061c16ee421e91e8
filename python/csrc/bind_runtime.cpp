// SPDX-License-Identifier: MIT
#include <memory>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings.h"
#include "runtime/communicator.h"
#include "runtime/executor_cache.h"

namespace py = pybind11;

namespace mdfuser::python {

namespace {

// The process-wide communicator Python sees, created on first use. Never
// destroyed: the atexit hook of mdfuser.multidevice shuts it down while
// libtorch is still whole.
Communicator* instance = nullptr;

Communicator& communicatorInstance() {
  if (instance == nullptr) {
    instance = new Communicator(
        LaunchInfo::fromEnvironment(), CommunicatorOptions::fromEnvironment());
  }
  return *instance;
}

} // namespace

void bindRuntime(py::module_& m) {
  py::class_<Communicator, std::unique_ptr<Communicator, py::nodelete>>(
      m,
      "Communicator",
      "The processes of this job, as mpirun or torchrun started them.")
      .def_static(
          "instance", &communicatorInstance, py::return_value_policy::reference)
      .def("rank", &Communicator::rank)
      .def("size", &Communicator::size)
      .def("local_rank", &Communicator::localRank)
      .def("local_size", &Communicator::localSize)
      .def("is_launched", &Communicator::isLaunched)
      .def(
          "barrier",
          &Communicator::barrier,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_shutdown",
          &Communicator::shutdown,
          py::call_guard<py::gil_scoped_release>());

  m.def(
      "_shutdown_communicator",
      [] {
        if (instance != nullptr) {
          instance->shutdown();
        }
      },
      py::call_guard<py::gil_scoped_release>(),
      "Shuts the communicator down if one was created.");

  py::class_<FusionExecutorCache>(m, "_FusionExecutorCache")
      .def(py::init<Fusion&>(), py::arg("fusion"), py::keep_alive<1, 2>())
      .def(
          "execute",
          [](FusionExecutorCache& cache,
             const std::vector<at::Tensor>& inputs,
             const std::vector<std::string>& enable,
             const std::vector<std::string>& disable) {
            const ExecuteOptions options =
                ExecuteOptions::parse(enable, disable);
            const DumpOptions& dump = DumpOptions::fromEnvironment();
            Communicator& communicator = communicatorInstance();
            py::gil_scoped_release no_gil;
            return cache.run(inputs, communicator, dump, options);
          },
          py::arg("inputs"),
          py::arg("enable_options"),
          py::arg("disable_options"))
      .def_property_readonly("num_programs", &FusionExecutorCache::numPrograms)
      .def(
          "last_host_ir",
          [](const FusionExecutorCache& cache) -> std::optional<std::string> {
            const hir::HostIrContainer* hic = cache.lastProgram();
            if (hic == nullptr) {
              return std::nullopt;
            }
            return hic->toString();
          });
}

} // namespace mdfuser::python
