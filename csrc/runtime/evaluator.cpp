// SPDX-License-Identifier: MIT
//
// The HostIrEvaluator: the tables it derives once per program, its CUDA
// graphs, and a run, which binds the inputs and runs the statements with an
// Interpreter (runtime/interpreter.h).
#include "runtime/evaluator.h"

#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "ir/errors.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_graphs.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_types.h"

namespace mdfuser {

namespace {

using evaluator_detail::Interpreter;
using evaluator_detail::RunState;
using evaluator_detail::scalarOf;

// `t` with its expanded broadcast axes at their extent, as torch returns
// them.
at::Tensor expandBroadcasts(
    const at::Tensor& t, const TensorView* tv, const ScalarEvaluator& extents) {
  const std::vector<IterDomain*> ids = tv->logicalNoReductions();
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  bool any = false;
  for (size_t a = 0; a < ids.size() && a < shape.size(); ++a) {
    if (ids[a]->isExpanded()) {
      shape[a] = extents.evaluate(ids[a]->extent());
      any = true;
    }
  }
  return any ? t.expand(shape) : t;
}

// Whether `scope` exchanges data with peers.
bool communicates(const hir::Scope& scope) {
  bool found = false;
  hir::forEachExpr(scope, [&](const Expr* expr) {
    const auto* comm = dynamic_cast<const hir::Communication*>(expr);
    found |=
        (comm != nullptr && comm->team().size() > 1) ||
        dynamic_cast<const hir::FusedMatmulCommunication*>(expr) != nullptr;
  });
  return found;
}

template <typename T>
bool isA(const Expr* expr) {
  return dynamic_cast<const T*>(expr) != nullptr;
}

// What `expr` is to the evaluator; fails on a statement it cannot run.
HostIrEvaluator::Statement classify(const Expr* expr) {
  using S = HostIrEvaluator::Statement;
  // No class listed derives from another: the first match is the only one.
  static constexpr std::pair<bool (*)(const Expr*), S> kKinds[] = {
      {isA<hir::ForLoop>, S::kLoop},
      {isA<hir::GetCurrentStream>, S::kGetCurrentStream},
      {isA<hir::SetCurrentStream>, S::kSetCurrentStream},
      {isA<hir::Synchronize>, S::kSynchronize},
      {isA<hir::SynchronizePreviousRun>, S::kSynchronizePreviousRun},
      {isA<hir::Allocate>, S::kAllocate},
      {isA<hir::Deallocate>, S::kDeallocate},
      {isA<hir::ShardView>, S::kShardView},
      {isA<hir::View>, S::kView},
      {isA<hir::Communication>, S::kCommunication},
      {isA<hir::Wait>, S::kWait},
      {isA<hir::AllgatherLinear>, S::kAllgatherLinear},
      {isA<hir::LinearReduceScatter>, S::kLinearReduceScatter},
      {isA<TensorOp>, S::kCompute},
  };
  for (const auto& [is, kind] : kKinds) {
    if (is(expr)) {
      return kind;
    }
  }
  MDF_UNREACHABLE("the evaluator cannot run ", expr->toString());
}

// The tables of a program's statements, from one walk in program order.
HostIrEvaluator::Tables tablesOf(const hir::Scope& scope) {
  using S = HostIrEvaluator::Statement;
  HostIrEvaluator::Tables tables;
  // The fused statements are numbered per kind.
  std::map<S, int64_t> fused_count;
  hir::forEachExpr(scope, [&](const Expr* expr) {
    const S kind = classify(expr);
    tables.statements.emplace(expr, kind);
    tables.waits_for_previous_run |= kind == S::kSynchronizePreviousRun;
    if (kind == S::kAllocate) {
      const auto* alloc = static_cast<const hir::Allocate*>(expr);
      if (alloc->isSymmetric()) {
        tables.symmetric_numbers.emplace(
            alloc, static_cast<int64_t>(tables.symmetric_numbers.size()));
      }
    } else if (kind == S::kCommunication) {
      const auto* comm = static_cast<const hir::Communication*>(expr);
      tables.names.emplace(
          comm,
          std::make_shared<const std::string>(detail::concat(
              communicationTypeName(comm->type()),
              " (Communication ",
              comm->name(),
              ")")));
    } else if (kind == S::kAllgatherLinear || kind == S::kLinearReduceScatter) {
      const auto* fused =
          static_cast<const hir::FusedMatmulCommunication*>(expr);
      tables.fused.emplace(
          fused,
          HostIrEvaluator::Tables::Fused{
              fused_count[kind]++,
              // The backend's messages name the team.
              detail::concat(fused->opName(), " ", fused->name())});
    }
  });
  return tables;
}

} // namespace

HostIrEvaluator::HostIrEvaluator(
    const hir::HostIrContainer& hic,
    c10::Device device,
    Communicator* communicator,
    std::unique_ptr<CudaBackend>* cuda,
    ExecuteOptions::Choice graphs)
    : hic_(hic),
      device_(device),
      communicator_(communicator),
      streams_(device),
      cuda_(cuda != nullptr ? *cuda : own_cuda_),
      tables_(tablesOf(hic_.topLevel())) {
  graphs_by_default_ = graphs == ExecuteOptions::Choice::kDefault;
  if (graphs != ExecuteOptions::Choice::kOff) {
    graphs_ = std::make_unique<ProgramGraphs>(
        device,
        communicates(hic_.topLevel()) ? communicator : nullptr,
        &cuda_,
        graphs_by_default_);
  }
}

void HostIrEvaluator::dropGraphs() {
  if (graphs_ != nullptr) {
    const ProgramGraphs::Stats stats = graphs_->stats();
    graphs_ = std::make_unique<ProgramGraphs>(
        device_,
        communicates(hic_.topLevel()) ? communicator_ : nullptr,
        &cuda_,
        graphs_by_default_);
    graphs_->addStats(stats);
  }
}

const ProgramGraphs* HostIrEvaluator::graphs() const {
  return graphs_.get();
}

HostIrEvaluator::~HostIrEvaluator() {
  if (cuda_ != nullptr || graphs_ != nullptr) {
    // Copies into and out of the symmetric buffers, and replays of the
    // graphs about to be destroyed, may still be queued.
    // At process exit the CUDA runtime may be gone already, and its work
    // with it: a destructor must not throw.
    try {
      c10::impl::VirtualGuardImpl(device_.type())
          .synchronizeDevice(device_.index());
    } catch (const std::exception&) {
    }
  }
}

std::vector<at::Tensor> HostIrEvaluator::run(
    const std::vector<at::Tensor>& inputs,
    const ScalarEvaluator& extents,
    uint64_t rng_base,
    const std::vector<Literal::Value>& scalars) {
  MDF_CHECK_EQ(inputs.size(), hic_.inputs().size());
  MDF_CHECK_EQ(scalars.size(), hic_.fusion().scalarInputs().size());
  std::optional<c10::DeviceGuard> device_guard;
  if (device_.is_cuda()) {
    device_guard.emplace(device_);
  }
  // Each scalar input's value as its dtype holds it.
  std::vector<c10::Scalar> values;
  const std::vector<Literal*>& scalar_inputs = hic_.fusion().scalarInputs();
  for (size_t i = 0; i < scalars.size(); ++i) {
    values.push_back(
        scalarOf(Literal::as(scalars[i], scalar_inputs[i]->dtype())));
  }
  if (graphs_ != nullptr) {
    return graphs_->run(inputs, values, rng_base, [&](bool capturing) {
      return runStatements(inputs, values, extents, rng_base, capturing);
    });
  }
  return runStatements(inputs, values, extents, rng_base, /*capturing=*/false);
}

std::vector<at::Tensor> HostIrEvaluator::runStatements(
    const std::vector<at::Tensor>& inputs,
    const std::vector<c10::Scalar>& scalars,
    const ScalarEvaluator& extents,
    uint64_t rng_base,
    bool capturing) {
  StreamRestorer restore_stream(streams_);

  RunState state;
  state.scalars = extents;
  const std::vector<Literal*>& scalar_inputs = hic_.fusion().scalarInputs();
  for (size_t i = 0; i < scalars.size(); ++i) {
    state.literals.emplace(scalar_inputs[i], scalars[i]);
  }
  state.rng_base = rng_base;
  state.capturing = capturing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    state.tensors.emplace(hic_.inputs()[i], inputs[i]);
  }
  if (tables_.waits_for_previous_run) {
    streams_.markRunStart();
  }
  Interpreter(state, device_, communicator_, streams_, cuda_, tables_)
      .runScope(hic_.topLevel());
  MDF_CHECK(state.pending.empty(), "a communication was never waited for");

  std::vector<at::Tensor> outputs;
  for (const TensorView* out : hic_.outputs()) {
    auto it = state.tensors.find(out);
    if (it == state.tensors.end()) {
      // An output on a mesh without this device: nothing to return.
      MDF_CHECK(
          out->hasDeviceMesh() && communicator_ != nullptr &&
              !out->deviceMesh()->has(communicator_->rank()),
          "output ",
          out->toString(),
          " unset");
      outputs.push_back(at::empty(
          {0},
          at::TensorOptions()
              .dtype(toScalarType(out->dtype()))
              .device(device_)));
      continue;
    }
    outputs.push_back(expandBroadcasts(it->second, out, state.scalars));
  }
  return outputs;
}

} // namespace mdfuser
