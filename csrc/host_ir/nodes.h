// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/ops/tensor_op.h"
#include "ir/scalar.h"
#include "ir/tensor_view.h"

// The statements of a host program. A node's inputs() are the values it
// reads and its outputs() the values it writes; host nodes are never the
// definition of a value.
//
// Adding a node touches: this file or the one of its kind (communication.h,
// fused_matmul_communication.h) for the class, its .cpp (constructor and
// printing), verifier.cpp (what it may reference), the evaluator in
// csrc/runtime (what it does) and, if it reads or writes tensors, nothing
// else: AllocateAndDeallocate works from inputs() and outputs(). A node
// that communicates is also one AssignStreams moves to the worker stream
// at (StreamSchedule::kCommunicationPerStream), as the
// FusedMatmulCommunication statements.
namespace mdfuser::hir {

// An ordered list of statements: a program's top level or a loop body.
class Scope {
 public:
  const std::vector<Expr*>& exprs() const {
    return exprs_;
  }
  void pushBack(Expr* expr) {
    exprs_.push_back(expr);
  }
  // Passes rebuild a scope as a whole rather than inserting at positions.
  void setExprs(std::vector<Expr*> exprs) {
    exprs_ = std::move(exprs);
  }

 private:
  std::vector<Expr*> exprs_;
};

// A stream value. Without an index, a stream captured at run time; with an
// index, the worker stream of that loop iteration, or (kCommunication) the
// communication stream of that index, on which AssignCommunicationStreams
// issues the point-to-point moves of rings beside the computation.
class Stream : public Val {
 public:
  enum class Kind { kCompute, kCommunication };

  // `lane`: of a communication stream, which of its iteration's (0 to
  // kCommunicationLanes - 1): moves outstanding at once go on lanes of their
  // own (AssignCommunicationStreams).
  explicit Stream(
      IrContainer* container,
      Scalar* index = nullptr,
      Kind kind = Kind::kCompute,
      int64_t lane = 0);

  // The most communication streams an iteration has.
  static constexpr int64_t kCommunicationLanes = 4;

  Scalar* index() const {
    return index_;
  }
  bool isCommunication() const {
    return kind_ == Kind::kCommunication;
  }
  int64_t lane() const {
    return lane_;
  }

  std::string_view counterKey() const override {
    if (isCommunication()) {
      return "CommunicationStream";
    }
    return index_ == nullptr ? "Stream" : "WorkerStream";
  }
  // Whether `other` is the same stream at run time: this node, or one of
  // the same kind and lane whose index is the same symbol or an equal
  // constant.
  bool sameAs(const Stream* other) const;

  // "Stream 0", "Stream i3", "CommunicationStream i3" or, on a lane other
  // than the first, "CommunicationStream i3 lane 1".
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Scalar* index_;
  Kind kind_;
  int64_t lane_;
};

// Base of host statements, which are never cloned.
class HostExpr : public Expr {
 public:
  Statement* cloneInto(IrCloner& cloner) const override;

 protected:
  using Expr::Expr;
};

// FOR index from start to stop, step 1. A Stream loop runs its iterations
// on worker streams once AssignStreams has rewritten it.
class ForLoop : public HostExpr {
 public:
  ForLoop(
      IrContainer* container,
      Scalar* index,
      Scalar* start,
      Scalar* stop,
      ParallelType parallel_type);

  Scalar* index() const {
    return index_;
  }
  Scalar* start() const {
    return start_;
  }
  Scalar* stop() const {
    return stop_;
  }
  ParallelType parallelType() const {
    return parallel_type_;
  }
  Scope& body() {
    return body_;
  }
  const Scope& body() const {
    return body_;
  }

  std::string_view opName() const override {
    return "ForLoop";
  }
  // The header line only: "FOR i0 from 0 to 3:".
  std::string toString() const override;

 private:
  Scalar* index_;
  Scalar* start_;
  Scalar* stop_;
  ParallelType parallel_type_;
  Scope body_;
};

// Captures the current stream into `stream`.
class GetCurrentStream : public HostExpr {
 public:
  GetCurrentStream(IrContainer* container, Stream* stream);
  Stream* stream() const;
  std::string_view opName() const override {
    return "GetCurrentStream";
  }
  std::string toString() const override;
};

// Makes `stream` the current stream.
class SetCurrentStream : public HostExpr {
 public:
  SetCurrentStream(IrContainer* container, Stream* stream);
  Stream* stream() const;
  std::string_view opName() const override {
    return "SetCurrentStream";
  }
  std::string toString() const override;
};

// The current stream waits for the work queued so far on `stream`. The host
// does not block.
class Synchronize : public HostExpr {
 public:
  Synchronize(IrContainer* container, Stream* stream);
  Stream* stream() const;
  std::string_view opName() const override {
    return "Synchronize";
  }
  std::string toString() const override;
};

// The current stream waits for the program's previous runs: for the work
// queued on the caller's stream before this run began, which every run
// joins before it returns (and which CUDA graph replays launch on, one
// after another), but for none of this run's. What a buffer that outlives
// a run (the CUDA backend's symmetric buffers) waits for before this run
// writes it, where nothing of this run used it yet. Printed
// "Synchronize(previous run)".
class SynchronizePreviousRun : public HostExpr {
 public:
  explicit SynchronizePreviousRun(IrContainer* container);
  std::string_view opName() const override {
    return "SynchronizePreviousRun";
  }
  std::string toString() const override;
};

// out = a part of `in`: a view, [start, start + length) along local axis
// `axis`. The evaluator and the verifier treat its kinds alike.
class ShardView : public HostExpr {
 public:
  TensorView* out() const;
  TensorView* in() const;
  int64_t axis() const {
    return axis_;
  }
  Scalar* start() const {
    return start_;
  }
  Scalar* length() const {
    return length_;
  }

 protected:
  // `inputs` starts with the tensor viewed.
  ShardView(
      IrContainer* container,
      TensorView* out,
      std::vector<Val*> inputs,
      int64_t axis,
      Scalar* start,
      Scalar* length);

 private:
  int64_t axis_;
  Scalar* start_;
  Scalar* length_;
};

// The rows of `in` that one iteration of a stream loop covers.
class ShardByStream : public ShardView {
 public:
  ShardByStream(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      Scalar* index,
      int64_t axis,
      Scalar* start,
      Scalar* length);

  Scalar* index() const {
    return index_;
  }

  std::string_view opName() const override {
    return "ShardByStream";
  }
  std::string toString() const override;

 private:
  Scalar* index_;
};

// This device's part of `in`. Lowering emits it where a replicated tensor
// feeds a sharded one: each device takes its part.
class ShardByDevice : public ShardView {
 public:
  ShardByDevice(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      ParallelType parallel_type,
      int64_t axis,
      Scalar* start,
      Scalar* length);

  ParallelType parallelType() const {
    return parallel_type_;
  }

  std::string_view opName() const override {
    return "ShardByDevice";
  }
  // "T7 = ShardByDevice(T3, mesh_x, axis = 0)"
  std::string toString() const override;

 private:
  ParallelType parallel_type_;
};

// Part `index` of the `parts` parts of `in` along `axis`: the chunk a step
// of a ring decomposition works on, its index depending on the step and on
// the device. Parts are ceilDiv(extent, parts) long, trailing ones short or
// empty; `start` and `length` say so for the evaluator.
class RingChunk : public ShardView {
 public:
  RingChunk(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      int64_t axis,
      Scalar* index,
      int64_t parts,
      Scalar* start,
      Scalar* length);

  Scalar* index() const {
    return index_;
  }
  int64_t parts() const {
    return parts_;
  }

  std::string_view opName() const override {
    return "RingChunk";
  }
  // "T9 = RingChunk(T8, axis = 0, index = (2 - i4) % 2, parts = 2)"
  std::string toString() const override;

 private:
  Scalar* index_;
  int64_t parts_;
};

// out = a layout operation's result (permute, slice, squeeze, broadcast,
// reshape) as a view of its input's buffer: no copy, no buffer of its own.
// The AliasLayoutOps pass turns eligible layout operations into views.
class View : public HostExpr {
 public:
  View(IrContainer* container, TensorOp* op);

  // The layout operation the view computes; not run as a kernel.
  TensorOp* op() const {
    return op_;
  }
  TensorView* in() const;
  TensorView* out() const;

  std::string_view opName() const override {
    return "View";
  }
  // "T8 = View(permute, T7, dims=[1, 0])"
  std::string toString() const override;

 private:
  TensorOp* op_;
};

// When `expr` makes a view of another tensor's buffer (ShardByStream,
// ShardByDevice, View): the view and the tensor it views.
struct ViewOf {
  TensorView* view;
  TensorView* source;
};
std::optional<ViewOf> asView(const Expr* expr);

// Binds a fresh, uninitialized (or zeroed) buffer of local extents `shape`
// to `buffer`, row-major unless a stride order says otherwise.
class Allocate : public HostExpr {
 public:
  Allocate(
      IrContainer* container,
      TensorView* buffer,
      std::vector<Scalar*> shape,
      bool zero_init = false);

  TensorView* buffer() const;
  const std::vector<Scalar*>& shape() const {
    return shape_;
  }
  bool zeroInit() const {
    return zero_init_;
  }
  // As define_tensor's stride_order: entry i is the rank of axis i's
  // stride, the largest the outermost. Empty for row-major.
  const std::vector<int64_t>& strideOrder() const {
    return stride_order_;
  }
  void setStrideOrder(std::vector<int64_t> stride_order);

  // A symmetric buffer lives in symmetric memory shared with `team` (ranks
  // in team order, this one among them): every member allocates it at the
  // same point of the program and maps the others' copies, into which the
  // CUDA communication backend writes. The PlaceSymmetricBuffers pass
  // decides which buffers are symmetric.
  bool isSymmetric() const {
    return !team_.empty();
  }
  const std::vector<int64_t>& team() const {
    return team_;
  }
  void makeSymmetric(std::vector<int64_t> team);

  std::string_view opName() const override {
    return "Allocate";
  }
  // "T5 = ALLOCATE(mem_type=global, zero_init=false, stride_order=[3, 1,
  // 2, 0])", the stride order only when there is one; a symmetric buffer
  // reads "mem_type=symmetric, team=(0 1)".
  std::string toString() const override;

 private:
  std::vector<Scalar*> shape_;
  bool zero_init_;
  std::vector<int64_t> stride_order_;
  std::vector<int64_t> team_;
};

// Drops the buffer bound to `buffer`.
class Deallocate : public HostExpr {
 public:
  Deallocate(IrContainer* container, TensorView* buffer);
  TensorView* buffer() const;
  std::string_view opName() const override {
    return "Deallocate";
  }
  std::string toString() const override;
};

// Calls `visit` on every statement of `scope` in program order, the
// statements of a loop's body after the loop.
void forEachExpr(
    const Scope& scope, const std::function<void(const Expr*)>& visit);
// The same for visitors that change the statements (not the scopes' lists).
void forEachExpr(Scope& scope, const std::function<void(Expr*)>& visit);

// A team of ranks as the dump and error messages print it: "(0 1)".
std::string teamString(const std::vector<int64_t>& team);

} // namespace mdfuser::hir
