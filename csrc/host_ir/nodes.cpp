// SPDX-License-Identifier: MIT
#include "host_ir/nodes.h"

#include <algorithm>
#include <string>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser::hir {

Stream::Stream(IrContainer* container, Scalar* index, Kind kind)
    : Val(container), index_(index), kind_(kind) {
  MDF_CHECK(
      kind == Kind::kCompute || index != nullptr,
      "a communication stream has an index");
}

std::string Stream::toString() const {
  return (isCommunication() ? "CommunicationStream " : "Stream ") +
         (index_ == nullptr ? std::to_string(name()) : index_->toString());
}

Statement* Stream::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Stream>(cloner.clone(index_), kind_);
}

Statement* HostExpr::cloneInto(IrCloner&) const {
  MDF_UNREACHABLE("host IR statements are not cloned: ", opName());
}

ForLoop::ForLoop(
    IrContainer* container,
    Scalar* index,
    Scalar* start,
    Scalar* stop,
    ParallelType parallel_type)
    : HostExpr(container, {start, stop}, {index}),
      index_(index),
      start_(start),
      stop_(stop),
      parallel_type_(parallel_type) {
  MDF_CHECK(
      index->role() == Scalar::Role::kSymbol,
      "a loop index must be a free symbol, got ",
      index->toString());
  MDF_CHECK(
      !isDeviceParallel(parallel_type),
      "host loops cannot be device-parallel, got ",
      parallel_type);
}

std::string ForLoop::toString() const {
  return "FOR " + index_->toString() + " from " + start_->toString() + " to " +
         stop_->toString() + ":";
}

GetCurrentStream::GetCurrentStream(IrContainer* container, Stream* stream)
    : HostExpr(container, {}, {stream}) {
  MDF_CHECK(stream->index() == nullptr, "cannot capture into a worker stream");
}

Stream* GetCurrentStream::stream() const {
  return static_cast<Stream*>(output(0));
}

std::string GetCurrentStream::toString() const {
  return stream()->toString() + " = GetCurrentStream()";
}

SetCurrentStream::SetCurrentStream(IrContainer* container, Stream* stream)
    : HostExpr(container, {stream}, {}) {}

Stream* SetCurrentStream::stream() const {
  return static_cast<Stream*>(input(0));
}

std::string SetCurrentStream::toString() const {
  return "SetCurrentStream(" + stream()->toString() + ")";
}

Synchronize::Synchronize(IrContainer* container, Stream* stream)
    : HostExpr(container, {stream}, {}) {}

Stream* Synchronize::stream() const {
  return static_cast<Stream*>(input(0));
}

std::string Synchronize::toString() const {
  return "Synchronize(" + stream()->toString() + ")";
}

ShardView::ShardView(
    IrContainer* container,
    TensorView* out,
    std::vector<Val*> inputs,
    int64_t axis,
    Scalar* start,
    Scalar* length)
    : HostExpr(container, std::move(inputs), {out}),
      axis_(axis),
      start_(start),
      length_(length) {
  MDF_CHECK(
      out->memoryType() == MemoryType::Local,
      "the output of a ShardByStream or ShardByDevice is a view: ",
      out->toString());
}

TensorView* ShardView::out() const {
  return static_cast<TensorView*>(output(0));
}

TensorView* ShardView::in() const {
  return static_cast<TensorView*>(input(0));
}

ShardByStream::ShardByStream(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    Scalar* index,
    int64_t axis,
    Scalar* start,
    Scalar* length)
    : ShardView(container, out, {in, index}, axis, start, length),
      index_(index) {}

std::string ShardByStream::toString() const {
  return out()->toString() + " = ShardByStream(" + in()->toString() +
         ", stream_index = " + index_->toString() + ")";
}

ShardByDevice::ShardByDevice(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    ParallelType parallel_type,
    int64_t axis,
    Scalar* start,
    Scalar* length)
    : ShardView(container, out, {in}, axis, start, length),
      parallel_type_(parallel_type) {}

std::string ShardByDevice::toString() const {
  return out()->toString() + " = ShardByDevice(" + in()->toString() + ", " +
         std::string(parallelTypeName(parallel_type_)) +
         ", axis = " + std::to_string(axis()) + ")";
}

RingChunk::RingChunk(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    int64_t axis,
    Scalar* index,
    int64_t parts,
    Scalar* start,
    Scalar* length)
    : ShardView(container, out, {in, index}, axis, start, length),
      index_(index),
      parts_(parts) {
  MDF_CHECK(parts > 0, "a ring cuts a tensor into parts, got ", parts);
}

std::string RingChunk::toString() const {
  return out()->toString() + " = RingChunk(" + in()->toString() +
         ", axis = " + std::to_string(axis()) +
         ", index = " + index_->toString() +
         ", parts = " + std::to_string(parts_) + ")";
}

View::View(IrContainer* container, TensorOp* op)
    : HostExpr(container, op->inputs(), op->outputs()), op_(op) {
  MDF_CHECK(
      op->outputs().size() == 1 && !op->tensorInputs().empty(),
      "a view has one output and a tensor input: ",
      op->toString());
}

TensorView* View::in() const {
  return op_->tensorInputs().front();
}

TensorView* View::out() const {
  return op_->out();
}

std::string View::toString() const {
  return out()->toString() + " = View(" + std::string(op_->opName()) + ", " +
         in()->toString() + ")";
}

std::optional<ViewOf> asView(const Expr* expr) {
  if (const auto* v = dynamic_cast<const ShardView*>(expr)) {
    return ViewOf{v->out(), v->in()};
  }
  if (const auto* v = dynamic_cast<const View*>(expr)) {
    return ViewOf{v->out(), v->in()};
  }
  return std::nullopt;
}

namespace {

std::vector<Val*> asVals(const std::vector<Scalar*>& scalars) {
  return {scalars.begin(), scalars.end()};
}

} // namespace

Allocate::Allocate(
    IrContainer* container,
    TensorView* buffer,
    std::vector<Scalar*> shape,
    bool zero_init)
    : HostExpr(container, asVals(shape), {buffer}),
      shape_(std::move(shape)),
      zero_init_(zero_init) {
  MDF_CHECK(
      buffer->ownsBuffer(), "views are not allocated: ", buffer->toString());
}

TensorView* Allocate::buffer() const {
  return static_cast<TensorView*>(output(0));
}

void Allocate::setStrideOrder(std::vector<int64_t> stride_order) {
  if (!stride_order.empty()) {
    std::vector<int64_t> sorted = stride_order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      MDF_CHECK(
          sorted.size() == shape_.size() &&
              sorted[i] == static_cast<int64_t>(i),
          "the stride order of ",
          buffer()->toString(),
          " must be a permutation of its ",
          shape_.size(),
          " axes");
    }
  }
  stride_order_ = std::move(stride_order);
}

void Allocate::makeSymmetric(std::vector<int64_t> team) {
  MDF_CHECK(
      !team.empty(), "a symmetric buffer needs a team: ", buffer()->toString());
  MDF_CHECK(
      team_.empty() || team_ == team,
      buffer()->toString(),
      " is shared with two teams, ",
      teamString(team_),
      " and ",
      teamString(team));
  team_ = std::move(team);
}

std::string Allocate::toString() const {
  std::string s =
      buffer()->toString() + " = ALLOCATE(mem_type=" +
      (isSymmetric() ? "symmetric, team=" + teamString(team_) : "global") +
      ", zero_init=" + (zero_init_ ? "true" : "false");
  if (!stride_order_.empty()) {
    s += ", stride_order=[";
    for (size_t i = 0; i < stride_order_.size(); ++i) {
      s += (i > 0 ? ", " : "") + std::to_string(stride_order_[i]);
    }
    s += "]";
  }
  return s + ")";
}

Deallocate::Deallocate(IrContainer* container, TensorView* buffer)
    : HostExpr(container, {buffer}, {}) {}

TensorView* Deallocate::buffer() const {
  return static_cast<TensorView*>(input(0));
}

std::string Deallocate::toString() const {
  return "Deallocate(" + buffer()->toString() + ")";
}

void forEachExpr(
    const Scope& scope, const std::function<void(const Expr*)>& visit) {
  for (const Expr* expr : scope.exprs()) {
    visit(expr);
    if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
      forEachExpr(loop->body(), visit);
    }
  }
}

void forEachExpr(Scope& scope, const std::function<void(Expr*)>& visit) {
  for (Expr* expr : scope.exprs()) {
    visit(expr);
    if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
      forEachExpr(loop->body(), visit);
    }
  }
}

std::string teamString(const std::vector<int64_t>& team) {
  std::string s = "(";
  for (size_t i = 0; i < team.size(); ++i) {
    s += (i > 0 ? " " : "") + std::to_string(team[i]);
  }
  return s + ")";
}

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
  return s + ", backend=" + std::string(backendName(backend_)) + ")";
}

FusedMatmulCommunication::FusedMatmulCommunication(
    IrContainer* container,
    std::string_view op,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : HostExpr(container, {in, weight}, {out}),
      team_(std::move(team)),
      axis_(axis) {
  MDF_CHECK(
      team_.size() >= 2,
      "an ",
      op,
      " runs over two devices or more, got team ",
      teamString(team_));
  MDF_CHECK(axis_ == 0, "an ", op, " cuts rows (axis 0), not ", axis_);
  MDF_CHECK(
      out != in && out != weight,
      "an ",
      op,
      " writes a buffer of its own: ",
      out->toString());
}

TensorView* FusedMatmulCommunication::in() const {
  return static_cast<TensorView*>(input(0));
}

TensorView* FusedMatmulCommunication::weight() const {
  return static_cast<TensorView*>(input(1));
}

TensorView* FusedMatmulCommunication::out() const {
  return static_cast<TensorView*>(output(0));
}

std::string FusedMatmulCommunication::toString() const {
  // The only kernels so far: Hopper's (sm_90a).
  return out()->toString() + " = " + std::string(opName()) + "(" +
         in()->toString() + ", " + weight()->toString() +
         ", team=" + teamString(team_) + ", kernel=sm90)";
}

AllgatherLinear::AllgatherLinear(
    IrContainer* container,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : FusedMatmulCommunication(
          container,
          "AllgatherLinear",
          std::move(team),
          in,
          weight,
          out,
          axis) {}

LinearReduceScatter::LinearReduceScatter(
    IrContainer* container,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : FusedMatmulCommunication(
          container,
          "LinearReduceScatter",
          std::move(team),
          in,
          weight,
          out,
          axis) {}

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

std::string Wait::toString() const {
  return "Wait(Communication " + std::to_string(communication_->name()) + ")";
}

} // namespace mdfuser::hir
