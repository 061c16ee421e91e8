// SPDX-License-Identifier: MIT
#include "host_ir/nodes.h"

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser::hir {

Stream::Stream(IrContainer* container, Scalar* index)
    : Val(container), index_(index) {}

std::string Stream::toString() const {
  return "Stream " +
         (index_ == nullptr ? std::to_string(name()) : index_->toString());
}

Statement* Stream::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Stream>(cloner.clone(index_));
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

ShardByStream::ShardByStream(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    Scalar* index,
    int64_t axis,
    Scalar* start,
    Scalar* length)
    : HostExpr(container, {in, index}, {out}),
      index_(index),
      axis_(axis),
      start_(start),
      length_(length) {
  MDF_CHECK(
      out->memoryType() == MemoryType::Local,
      "the output of ShardByStream is a view: ",
      out->toString());
}

TensorView* ShardByStream::out() const {
  return static_cast<TensorView*>(output(0));
}

TensorView* ShardByStream::in() const {
  return static_cast<TensorView*>(input(0));
}

std::string ShardByStream::toString() const {
  return out()->toString() + " = ShardByStream(" + in()->toString() +
         ", stream_index = " + index_->toString() + ")";
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
      buffer->memoryType() == MemoryType::Global,
      "views are not allocated: ",
      buffer->toString());
}

TensorView* Allocate::buffer() const {
  return static_cast<TensorView*>(output(0));
}

std::string Allocate::toString() const {
  return buffer()->toString() + " = ALLOCATE(mem_type=global, zero_init=" +
         (zero_init_ ? "true" : "false") + ")";
}

Deallocate::Deallocate(IrContainer* container, TensorView* buffer)
    : HostExpr(container, {buffer}, {}) {}

TensorView* Deallocate::buffer() const {
  return static_cast<TensorView*>(input(0));
}

std::string Deallocate::toString() const {
  return "Deallocate(" + buffer()->toString() + ")";
}

std::string_view backendName(CommunicatorBackend backend) {
  switch (backend) {
    case CommunicatorBackend::kNccl:
      return "NCCL";
    case CommunicatorBackend::kGloo:
      return "Gloo";
  }
  MDF_UNREACHABLE("unknown backend ", static_cast<int>(backend));
}

Communication::Communication(
    IrContainer* container,
    CommunicationType type,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* out,
    CommunicatorBackend backend,
    std::optional<int64_t> root)
    : HostExpr(container, {in}, {out}),
      type_(type),
      team_(std::move(team)),
      backend_(backend),
      root_(root) {
  MDF_CHECK(!team_.empty(), "a communication needs a team");
}

TensorView* Communication::in() const {
  return static_cast<TensorView*>(input(0));
}

TensorView* Communication::out() const {
  return static_cast<TensorView*>(output(0));
}

void Communication::reduceInPlace() {
  setInput(0, out());
}

std::string Communication::toString() const {
  std::string s = "Communication " + std::to_string(name()) +
                  " (type=" + std::string(communicationTypeName(type_)) +
                  ", team=(";
  for (size_t i = 0; i < team_.size(); ++i) {
    s += (i > 0 ? " " : "") + std::to_string(team_[i]);
  }
  s += ")";
  if (root_.has_value()) {
    s += ", root=" + std::to_string(*root_);
  }
  return s + ", input=" + in()->toString() + ", output=" + out()->toString() +
         ", backend=" + std::string(backendName(backend_)) + ")";
}

Wait::Wait(IrContainer* container, Communication* communication)
    // A pending collective still reads and writes its buffers: listing them
    // keeps them alive until the wait.
    : HostExpr(container, {communication->in(), communication->out()}, {}),
      communication_(communication) {}

std::string Wait::toString() const {
  return "Wait(Communication " + std::to_string(communication_->name()) + ")";
}

} // namespace mdfuser::hir
