// SPDX-License-Identifier: MIT
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/ops/arange.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "bindings.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "runtime/communicator.h"
#include "runtime/executor_cache.h"
#include "runtime/sdpa_dropout.h"
#include "runtime/shard_tensor.h"
#include "runtime/stream_chunks.h"

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
    // The rank's GPU becomes the current device: scripts written for
    // nvfuser_direct create their tensors with `.cuda()` and device="cuda"
    // after asking for the communicator, and mean that GPU.
    if (instance->isLaunched() && at::hasCUDA()) {
      c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
      const int64_t gpu = instance->localGpu(cuda.deviceCount());
      if (gpu < cuda.deviceCount()) {
        cuda.setDevice(c10::Device(
            c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(gpu)));
      }
    }
  }
  return *instance;
}

} // namespace

void bindRuntime(py::module_& m) {
  py::enum_<hir::CommunicatorBackend>(
      m,
      "CommunicatorBackend",
      "The library that carries communications: nccl (CUDA tensors), gloo "
      "(CPU tensors), cuda (copy engines into peers' symmetric memory, "
      "carrying ring decompositions; CUDA tensors).")
      .value("nccl", hir::CommunicatorBackend::kNccl)
      .value("gloo", hir::CommunicatorBackend::kGloo)
      .value("cuda", hir::CommunicatorBackend::kCuda);

  m.def(
      "_sdpa_dropout_keep",
      [](const at::Tensor& philox_seed,
         const std::vector<int64_t>& shape,
         double dropout_p) {
        MDF_TYPE_CHECK(
            philox_seed.scalar_type() == at::kUInt64 &&
                philox_seed.numel() == 2,
            "attention dropout mask: philox_seed must be the UInt64 tensor "
            "of 2 elements that sdpfa_fwd returns, got ",
            philox_seed.scalar_type(),
            " of ",
            philox_seed.numel(),
            " elements");
        MDF_USER_CHECK(
            shape.size() == 4,
            "attention dropout mask: shape must be [batch, heads, seq_q, "
            "seq_k], got ",
            shape.size(),
            " extents");
        const at::Tensor words = philox_seed.cpu().contiguous().view(at::kLong);
        const at::Tensor ids =
            at::arange(
                shape[0] * shape[1], at::TensorOptions().dtype(at::kLong))
                .view({shape[0], shape[1]});
        return sdpaDropoutKeep(
            static_cast<uint64_t>(words[0].item<int64_t>()),
            static_cast<uint64_t>(words[1].item<int64_t>()),
            ids,
            shape[2],
            shape[3],
            dropout_p);
      },
      py::arg("philox_seed"),
      py::arg("shape"),
      py::arg("dropout_p"));
  m.def(
      "_shard_tensor",
      [](const at::Tensor& tensor, const TensorView* tv, int64_t device) {
        return shardTensor(tensor, tv, device);
      },
      py::arg("tensor"),
      py::arg("tv"),
      py::arg("device"));
  m.def(
      "_set_machine_model",
      [](const std::string& device_type,
         double gemm_flops,
         double gemm_half_outputs,
         double memory_bytes,
         double link_bytes,
         double statement_seconds,
         double move_seconds) {
        setMachineModel(
            device_type,
            {gemm_flops,
             gemm_half_outputs,
             memory_bytes,
             link_bytes,
             statement_seconds,
             move_seconds});
      },
      py::arg("device_type"),
      py::arg("gemm_flops"),
      py::arg("gemm_half_outputs"),
      py::arg("memory_bytes"),
      py::arg("link_bytes"),
      py::arg("statement_seconds"),
      py::arg("move_seconds"),
      "The machine model the stream chunk count is chosen with on "
      "`device_type` ('cpu' or 'cuda'); see mdfuser.calibration.");
  m.def(
      "_machine_model",
      [](const std::string& device_type) -> py::object {
        const std::optional<MachineModel> model = machineModel(device_type);
        if (!model.has_value()) {
          return py::none();
        }
        py::dict d;
        d["gemm_flops"] = model->gemm_flops;
        d["gemm_half_outputs"] = model->gemm_half_outputs;
        d["memory_bytes"] = model->memory_bytes;
        d["link_bytes"] = model->link_bytes;
        d["statement_seconds"] = model->statement_seconds;
        d["move_seconds"] = model->move_seconds;
        return d;
      },
      py::arg("device_type"));
  m.def("_ignored_enable_options", &ExecuteOptions::ignoredEnableOptions);
  m.def("_ignored_disable_options", &ExecuteOptions::ignoredDisableOptions);

  auto mesh =
      py::reinterpret_borrow<py::class_<DeviceMesh>>(m.attr("DeviceMesh"));
  mesh.def(
      "shard_tensor",
      [](const DeviceMesh& self,
         const at::Tensor& tensor,
         int64_t dim,
         const py::object& which) {
        // `which`: a ParallelType (this rank's part along that mesh axis), a
        // device id, or None (this rank, mesh_x).
        ParallelType pt = ParallelType::DIDx;
        int64_t device = communicatorInstance().rank();
        if (py::isinstance<ParallelType>(which)) {
          pt = which.cast<ParallelType>();
        } else if (!which.is_none()) {
          device = which.cast<int64_t>();
        }
        const int64_t n = tensor.dim();
        MDF_USER_CHECK(
            dim >= -n && dim < n,
            "shard_tensor: dimension ",
            dim,
            " is out of range for a tensor of ",
            n,
            " dimensions");
        const int64_t d = dim < 0 ? dim + n : dim;
        if (!self.has(device)) {
          device = self.devices().front();
        }
        const std::vector<int64_t> team = self.team(device, pt);
        const auto parts = static_cast<int64_t>(team.size());
        const int64_t index =
            std::find(team.begin(), team.end(), device) - team.begin();
        MDF_USER_CHECK(
            tensor.size(d) % parts == 0,
            "shard_tensor: dimension ",
            d,
            " has size ",
            tensor.size(d),
            ", which does not split evenly across the ",
            parts,
            " devices of ",
            parallelTypeName(pt),
            " in ",
            self.toString());
        const int64_t size = tensor.size(d) / parts;
        return tensor.narrow(d, index * size, size).contiguous();
      },
      py::arg("tensor"),
      py::arg("dim"),
      py::arg("parallel_type") = py::none(),
      "This rank's part of `tensor` split along `dim` across the devices of "
      "`parallel_type` (default mesh_x); an int picks another device's part.");

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
          "_claim_once",
          &Communicator::claimOnce,
          py::arg("key"),
          py::call_guard<py::gil_scoped_release>(),
          "Whether this rank is the first of the job to claim `key` (it then "
          "computes the value and publishes it).")
      .def(
          "_publish",
          &Communicator::publish,
          py::arg("key"),
          py::arg("value"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_await_published",
          &Communicator::awaitPublished,
          py::arg("key"),
          py::arg("operation"),
          py::call_guard<py::gil_scoped_release>(),
          "The value the claiming rank published for `key`, waited for up to "
          "the timeout.")
      .def(
          "report_failure",
          &Communicator::reportFailure,
          py::arg("error"),
          py::call_guard<py::gil_scoped_release>(),
          "This rank failed outside a fusion's run (a check between runs, a "
          "test): peers waiting for it in a communication stop within about "
          "a second, quoting `error`, and the communication of every rank "
          "stops until they recover() (doc/runtime.md#failures).")
      .def(
          "recover",
          &Communicator::recover,
          py::call_guard<py::gil_scoped_release>(),
          "Every rank, together, after failures: waits until all arrive, "
          "then all communicate again, in a new communication epoch that "
          "nothing a failed run left in flight reaches. Without failures, a "
          "barrier.")
      .def(
          "stopped",
          &Communicator::stopped,
          "Whether this rank knows of failures the ranks have not recovered "
          "from: its communication raises them until recover().")
      .def(
          "epoch",
          &Communicator::epoch,
          "The communication epoch: how many of the job's failures this "
          "rank has recovered from.")
      .def(
          "_store",
          &Communicator::store,
          py::call_guard<py::gil_scoped_release>(),
          "The rendezvous store all ranks joined, a torch.distributed Store "
          "(mdfuser's keys live under a prefix of their own).")
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
  m.def(
      "_note_exit_on_error",
      [](const std::string& error) {
        if (instance != nullptr) {
          instance->noteExitOnError(error);
        }
      },
      py::arg("error"),
      py::call_guard<py::gil_scoped_release>(),
      "The process is about to exit on an uncaught `error`: peers that wait "
      "for this rank quote it, and the shutdown at exit does not wait for "
      "them.");

  py::class_<FusionExecutorCache>(m, "_FusionExecutorCache")
      .def(py::init<Fusion&>(), py::arg("fusion"), py::keep_alive<1, 2>())
      .def(
          "execute",
          [](FusionExecutorCache& cache,
             const std::vector<at::Tensor>& inputs,
             const std::vector<Literal::Value>& scalars,
             const std::vector<std::string>& enable,
             const std::vector<std::string>& disable,
             std::optional<hir::CommunicatorBackend> backend) {
            ExecuteOptions options;
            try {
              options = ExecuteOptions::parse(enable, disable);
            } catch (const UserError& e) {
              cache.failBeforeRun(communicatorInstance(), e);
              throw;
            }
            options.backend = backend;
            const DumpOptions& dump = DumpOptions::fromEnvironment();
            Communicator& communicator = communicatorInstance();
            py::gil_scoped_release no_gil;
            return cache.run(inputs, communicator, dump, options, scalars);
          },
          py::arg("inputs"),
          py::arg("scalars"),
          py::arg("enable_options"),
          py::arg("disable_options"),
          py::arg("backend") = py::none())
      .def_property_readonly("num_programs", &FusionExecutorCache::numPrograms)
      .def_property_readonly(
          "num_agreements", &FusionExecutorCache::numAgreements)
      .def_property_readonly(
          "graph_stats",
          [](const FusionExecutorCache& cache) {
            const ProgramGraphs::Stats stats = cache.graphStats();
            py::dict d;
            d["eager"] = stats.eager;
            d["captures"] = stats.captures;
            d["replays"] = stats.replays;
            d["failed_captures"] = stats.failed_captures;
            return d;
          },
          "Of the programs replayed as CUDA graphs (the cuda_graph option, "
          "or by default): how many runs ran the program's statements, how "
          "many graphs were captured and how many replayed (the captures' "
          "first replays included), and how many programs replayed by "
          "default gave graphs up after a capture failed.")
      .def(
          "note_failed_run",
          [](FusionExecutorCache& cache,
             const std::string& error,
             bool type_error) {
            cache.failBeforeRun(
                communicatorInstance(),
                UserError(
                    type_error ? UserError::Kind::kType
                               : UserError::Kind::kValue,
                    error));
          },
          py::arg("error"),
          py::arg("type_error"),
          py::call_guard<py::gil_scoped_release>(),
          "A run failed on this rank before reaching the cache with `error` "
          "(a TypeError or a ValueError): the ranks that compare raise it "
          "too; if some run a collective instead, the failure is reported to "
          "them.")
      .def(
          "compiled_outputs",
          [](const FusionExecutorCache& cache) {
            const hir::HostIrContainer* hic = cache.lastProgram();
            MDF_USER_CHECK(
                hic != nullptr,
                "the fusion has not been executed yet; its outputs' "
                "shardings are decided when it is compiled");
            return hic->fusion().outputs();
          },
          py::return_value_policy::reference_internal)
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
