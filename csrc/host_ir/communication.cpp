// SPDX-License-Identifier: MIT
#include "host_ir/communication.h"

#include <string>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser::hir {

std::string_view backendName(CommunicatorBackend backend) {
  switch (backend) {
    case CommunicatorBackend::kNccl:
      return "NCCL";
    case CommunicatorBackend::kGloo:
      return "Gloo";
    case CommunicatorBackend::kCuda:
      return "CUDA";
  }
  MDF_UNREACHABLE("unknown backend ", static_cast<int>(backend));
}

std::string_view reduceKindName(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
  }
  MDF_UNREACHABLE("unknown reduce kind ", static_cast<int>(kind));
}

namespace {

std::vector<Val*> present(TensorView* tv) {
  return tv == nullptr ? std::vector<Val*>{} : std::vector<Val*>{tv};
}

// A permute's place of landing: `out` unless given.
TensorView* landingOf(
    const CommunicationSpec& spec, TensorView* out, TensorView* landing) {
  if (spec.type != CommunicationType::CollectivePermute) {
    MDF_CHECK(landing == nullptr, "only a CollectivePermute has a landing");
    return nullptr;
  }
  return landing == nullptr ? out : landing;
}

// The input and, where it is another view, the landing: read by no one
// here, it names a place, whose view is made before the permute as an
// operand's is.
std::vector<Val*> operandsOf(
    TensorView* in, TensorView* out, TensorView* landing) {
  std::vector<Val*> operands = present(in);
  if (landing != nullptr && landing != in && landing != out) {
    operands.push_back(landing);
  }
  return operands;
}

bool reduces(CommunicationType type) {
  return type == CommunicationType::Allreduce ||
         type == CommunicationType::ReduceScatter ||
         type == CommunicationType::Reduce;
}

} // namespace

Communication::Communication(
    IrContainer* container,
    CommunicationSpec spec,
    TensorView* in,
    TensorView* out,
    CommunicatorBackend backend,
    TensorView* landing)
    : HostExpr(
          container,
          operandsOf(in, out, landingOf(spec, out, landing)),
          present(out)),
      spec_(std::move(spec)),
      in_(in),
      out_(out),
      backend_(backend),
      landing_(landingOf(spec_, out, landing)) {
  MDF_CHECK(!spec_.team.empty(), "a communication needs a team");
  MDF_CHECK(in != nullptr || out != nullptr, "a communication moves data");
  if (spec_.senders.empty()) {
    spec_.senders = spec_.team;
  }
  if (spec_.receivers.empty()) {
    spec_.receivers = spec_.team;
  }
  if (spec_.type == CommunicationType::CollectivePermute) {
    MDF_CHECK(
        in != nullptr && out != nullptr && in != out,
        "a CollectivePermute sends one buffer and receives into another");
    MDF_CHECK(
        spec_.senders == spec_.team && spec_.receivers == spec_.team,
        "every member of a CollectivePermute's team sends and receives");
    const auto d = static_cast<int64_t>(spec_.team.size());
    MDF_CHECK(
        spec_.shift >= 1 && (spec_.shift < d || d == 1),
        "a CollectivePermute over a team of ",
        d,
        " shifts by 1 to ",
        std::max<int64_t>(d - 1, 1),
        " places, not ",
        spec_.shift);
  } else {
    MDF_CHECK(spec_.shift == 1, "only a CollectivePermute shifts");
  }
}

void Communication::setRootIndex(Scalar* index) {
  MDF_CHECK(
      spec_.type == CommunicationType::Broadcast && index != nullptr,
      "only a Broadcast takes its root at run time");
  MDF_CHECK(
      in_ != nullptr && out_ != nullptr,
      "a Broadcast whose root changes has both buffers on every member");
  root_index_ = index;
}

void Communication::setSendsAfter(Stream* stream) {
  MDF_CHECK(
      backend_ == CommunicatorBackend::kCuda &&
          spec_.type == CommunicationType::CollectivePermute &&
          stream != nullptr && !stream->isCommunication(),
      "only a CollectivePermute on the CUDA backend sends after a compute "
      "stream");
  sends_after_ = stream;
}

void Communication::reduceInPlace() {
  MDF_CHECK(in_ != nullptr && out_ != nullptr);
  in_ = out_;
  setInput(0, out_);
}

std::string Communication::toString() const {
  std::string s = "Communication " + std::to_string(name()) +
                  " (type=" + std::string(communicationTypeName(spec_.type)) +
                  ", team=" + teamString(spec_.team);
  if (spec_.senders != spec_.team) {
    s += ", senders=" + teamString(spec_.senders);
  }
  if (spec_.receivers != spec_.team) {
    s += ", receivers=" + teamString(spec_.receivers);
  }
  if (root_index_ != nullptr) {
    s += ", root=team[" + root_index_->toString() + "]";
  } else if (spec_.root.has_value()) {
    s += ", root=" + std::to_string(*spec_.root);
  }
  if (reduces(spec_.type) && spec_.reduce != ReduceKind::kSum) {
    s += ", op=" + std::string(reduceKindName(spec_.reduce));
  }
  if (spec_.axis >= 0 && spec_.type != CommunicationType::Allreduce) {
    s += ", axis=" + std::to_string(spec_.axis);
  }
  if (spec_.out_axis >= 0) {
    s += ", out_axis=" + std::to_string(spec_.out_axis);
  }
  if (spec_.shift != 1) {
    s += ", shift=" + std::to_string(spec_.shift);
  }
  if (in_ != nullptr) {
    s += ", input=" + in_->toString();
  }
  if (out_ != nullptr) {
    s += ", output=" + out_->toString();
  }
  if (backend_ == CommunicatorBackend::kCuda &&
      spec_.type == CommunicationType::CollectivePermute) {
    s += landing_ == in_    ? ", lands_at=input"
         : landing_ == out_ ? ", lands_at=output"
                            : ", lands_at=" + landing_->toString();
  }
  if (sends_after_ != nullptr) {
    s += ", sends_after=" + sends_after_->toString();
  }
  return s + ", backend=" + std::string(backendName(backend_)) + ")";
}

namespace {

std::vector<Val*> buffersOf(const Communication* communication) {
  std::vector<Val*> result;
  for (TensorView* tv : {communication->in(), communication->out()}) {
    if (tv != nullptr) {
      result.push_back(tv);
    }
  }
  return result;
}

} // namespace

Wait::Wait(IrContainer* container, Communication* communication)
    // A pending collective still reads and writes its buffers: listing them
    // keeps them alive until the wait.
    : HostExpr(container, buffersOf(communication), {}),
      communication_(communication) {}

bool isCollectivePermute(const Expr* expr) {
  const auto* c = dynamic_cast<const Communication*>(expr);
  return c != nullptr && c->type() == CommunicationType::CollectivePermute;
}

std::string Wait::toString() const {
  return "Wait(Communication " + std::to_string(communication_->name()) + ")";
}

} // namespace mdfuser::hir
