// SPDX-License-Identifier: MIT
#include "host_ir/nodes.h"

#include <algorithm>
#include <string>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser::hir {

Stream::Stream(IrContainer* container, Scalar* index, Kind kind, int64_t lane)
    : Val(container), index_(index), kind_(kind), lane_(lane) {
  MDF_CHECK(
      kind == Kind::kCompute || index != nullptr,
      "a communication stream has an index");
  MDF_CHECK(
      lane == 0 || (kind == Kind::kCommunication && lane > 0 &&
                    lane < kCommunicationLanes),
      "communication streams have lanes 0 to ",
      kCommunicationLanes - 1,
      ", compute streams none; got lane ",
      lane);
}

bool Stream::sameAs(const Stream* other) const {
  if (this == other) {
    return true;
  }
  if (kind_ != other->kind_ || lane_ != other->lane_ || index_ == nullptr ||
      other->index_ == nullptr) {
    return false;
  }
  return index_ == other->index_ ||
         (index_->isConst() && other->index_->isConst() &&
          index_->constValue() == other->index_->constValue());
}

std::string Stream::toString() const {
  std::string s =
      (isCommunication() ? "CommunicationStream " : "Stream ") +
      (index_ == nullptr ? std::to_string(name()) : index_->toString());
  if (lane_ != 0) {
    s += " lane " + std::to_string(lane_);
  }
  return s;
}

Statement* Stream::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Stream>(cloner.clone(index_), kind_, lane_);
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

SynchronizePreviousRun::SynchronizePreviousRun(IrContainer* container)
    : HostExpr(container, {}, {}) {}

std::string SynchronizePreviousRun::toString() const {
  return "Synchronize(previous run)";
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

} // namespace mdfuser::hir
