// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/scalar.h"
#include "ir/tensor_view.h"
#include "multidevice/communication_type.h"

// The statements of a host program. A node's inputs() are the values it
// reads and its outputs() the values it writes; host nodes are never the
// definition of a value.
//
// Adding a node touches: this file (the class), nodes.cpp (constructor and
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

  explicit Stream(
      IrContainer* container,
      Scalar* index = nullptr,
      Kind kind = Kind::kCompute);

  Scalar* index() const {
    return index_;
  }
  bool isCommunication() const {
    return kind_ == Kind::kCommunication;
  }

  std::string_view counterKey() const override {
    if (isCommunication()) {
      return "CommunicationStream";
    }
    return index_ == nullptr ? "Stream" : "WorkerStream";
  }
  // "Stream 0", "Stream i3" or "CommunicationStream i3".
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Scalar* index_;
  Kind kind_;
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

// The library that carries a communication: NCCL for CUDA tensors, Gloo for
// CPU tensors, and kCuda, copy engines writing into peers' symmetric
// buffers (runtime/cuda_backend.h), which carries the CollectivePermutes of
// ring decompositions.
enum class CommunicatorBackend { kNccl, kGloo, kCuda };

// Calls `visit` on every statement of `scope` in program order, the
// statements of a loop's body after the loop.
void forEachExpr(
    const Scope& scope, const std::function<void(const Expr*)>& visit);
// The same for visitors that change the statements (not the scopes' lists).
void forEachExpr(Scope& scope, const std::function<void(Expr*)>& visit);

// A team of ranks as the dump and error messages print it: "(0 1)".
std::string teamString(const std::vector<int64_t>& team);
std::string_view backendName(CommunicatorBackend backend);

// How a reducing collective combines its inputs.
enum class ReduceKind { kSum, kMax, kMin };
std::string_view reduceKindName(ReduceKind kind);

// What a Communication moves: the collective, who takes part and how the
// local buffers are cut.
struct CommunicationSpec {
  CommunicationType type = CommunicationType::Allreduce;
  // The group, in rank order, every sender and receiver among it.
  std::vector<int64_t> team;
  // The devices that hold input and those that get output, in mesh order
  // (see runtime/collectives.h); empty means the team.
  std::vector<int64_t> senders;
  std::vector<int64_t> receivers;
  // Broadcast and Scatter: the sender; Gather and Reduce: the receiver.
  std::optional<int64_t> root;
  ReduceKind reduce = ReduceKind::kSum;
  // The local axis cut into parts (Allgather, ReduceScatter, Scatter,
  // Gather, AllToAll's input axis) and AllToAll's output axis; -1 if none.
  int64_t axis = -1;
  int64_t out_axis = -1;
  // A reduction of partial results: the position, in the input's local
  // tensor, of the device axis the collective sums over (one element
  // locally), dropped before posting; -1 if none.
  int64_t in_device_axis = -1;
  // CollectivePermute: each member sends to the member `shift` places after
  // it in team order and receives from the one `shift` places before it
  // (1: the next and the previous, a ring's step; 1 .. d - 1 over a team of
  // d, the d - 1 steps of a direct reduce-scatter).
  int64_t shift = 1;
};

// Posts a collective on the current stream. A rank that only sends has no
// output buffer, one that only receives no input buffer: the missing one is
// nullptr. A CollectivePermute (the step of a ring) has both: each team
// member sends `in` to the next member (`shift` places on) and receives the
// previous member's into `out`; until its Wait nothing may write `in` or
// touch `out`.
//
// On the CUDA backend a CollectivePermute writes `in` straight into the
// next member's memory, at the place in its symmetric buffer that
// `landing` has in this member's: `in` itself in a ring over one buffer
// whose parts keep their place on every member, `out` in a buffer of its
// own (the default), or another view of the receiving buffer where `in`
// is not in it (the part of it the next member receives into at this step).
class Communication : public HostExpr {
 public:
  Communication(
      IrContainer* container,
      CommunicationSpec spec,
      TensorView* in,
      TensorView* out,
      CommunicatorBackend backend,
      TensorView* landing = nullptr);

  const CommunicationSpec& spec() const {
    return spec_;
  }
  CommunicationType type() const {
    return spec_.type;
  }
  const std::vector<int64_t>& team() const {
    return spec_.team;
  }
  // nullptr on a rank that only receives.
  TensorView* in() const {
    return in_;
  }
  // nullptr on a rank that only sends.
  TensorView* out() const {
    return out_;
  }
  CommunicatorBackend backend() const {
    return backend_;
  }
  // A CollectivePermute's place of landing (above); nullptr otherwise.
  TensorView* landing() const {
    return landing_;
  }
  std::optional<int64_t> root() const {
    return spec_.root;
  }
  // A Broadcast whose root changes at run time: team()[index], the index a
  // scalar of the enclosing loop (the broadcast-based allgather, one root
  // per step). nullptr for a fixed root.
  Scalar* rootIndex() const {
    return root_index_;
  }
  void setRootIndex(Scalar* index);
  // Makes the collective read its output buffer: it reduces in place.
  void reduceInPlace();

  std::string_view opName() const override {
    return "Communication";
  }
  std::string toString() const override;

 private:
  CommunicationSpec spec_;
  TensorView* in_;
  TensorView* out_;
  CommunicatorBackend backend_;
  TensorView* landing_ = nullptr;
  Scalar* root_index_ = nullptr;
};

// A linear and the collective beside it along the rows, computed by one
// fused kernel that moves the rows through symmetric memory while its GEMM
// computes (sm_90a; runtime/fused_matmul.h): AllgatherLinear and
// LinearReduceScatter. Lowering emits one in place of the pair's ring where
// LoweringOptions::fused_matmul_communication asks for it (multidevice/
// fused_matmul_choice.h says which pairs qualify). It runs on the current
// stream and has no Wait: the kernel returns when `out` is complete there.
class FusedMatmulCommunication : public HostExpr {
 public:
  // Ranks in team order, this one among them.
  const std::vector<int64_t>& team() const {
    return team_;
  }
  TensorView* in() const;
  TensorView* weight() const;
  TensorView* out() const;
  // The axis the collective cuts: the rows (0).
  int64_t axis() const {
    return axis_;
  }
  // The pair in words, for messages: "allgather + linear".
  virtual std::string_view pairName() const = 0;

  // "T5 = AllgatherLinear(T0, T1, team=(0 1), kernel=sm90)"
  std::string toString() const override;

 protected:
  // `op` names the statement in the errors of its checks.
  FusedMatmulCommunication(
      IrContainer* container,
      std::string_view op,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis);

 private:
  std::vector<int64_t> team_;
  int64_t axis_;
};

// out = linear(allgather(in) over `team` along the rows, weight): `in` is
// this device's rows, `out` the output over the gathered rows. The kernel
// pushes each member's rows into its peers' symmetric memory while its GEMM
// computes the tiles of the rows that have arrived.
class AllgatherLinear : public FusedMatmulCommunication {
 public:
  AllgatherLinear(
      IrContainer* container,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis = 0);

  std::string_view opName() const override {
    return "AllgatherLinear";
  }
  std::string_view pairName() const override {
    return "allgather + linear";
  }
};

// out = reduce_scatter(linear(in, weight)) over `team` along the rows:
// `in` [M, K] and `weight` [N, K] hold this device's part of K, `out`
// [M / d, N] its rows of the sum. The kernel computes the peers' rows
// first and sends each peer its partial sum as soon as it is finished,
// while it computes the next.
class LinearReduceScatter : public FusedMatmulCommunication {
 public:
  LinearReduceScatter(
      IrContainer* container,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis = 0);

  std::string_view opName() const override {
    return "LinearReduceScatter";
  }
  std::string_view pairName() const override {
    return "linear + reduce-scatter";
  }
};

// The current stream waits for `communication` to finish.
class Wait : public HostExpr {
 public:
  Wait(IrContainer* container, Communication* communication);
  Communication* communication() const {
    return communication_;
  }
  std::string_view opName() const override {
    return "Wait";
  }
  std::string toString() const override;

 private:
  Communication* communication_;
};

} // namespace mdfuser::hir
