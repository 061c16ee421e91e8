// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host_ir/nodes.h"
#include "multidevice/communication_type.h"

// The host statements that communicate through a collective library:
// Communication, which posts a collective on the current stream, and Wait,
// which makes the current stream wait for it.
namespace mdfuser::hir {

// The library that carries a communication: NCCL for CUDA tensors, Gloo for
// CPU tensors, and kCuda, copy engines writing into peers' symmetric
// buffers (runtime/cuda_backend.h), which carries the CollectivePermutes of
// ring decompositions.
enum class CommunicatorBackend { kNccl, kGloo, kCuda };

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
  // d, the d - 1 steps of a direct reduce-scatter or allreduce half).
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
  // A CollectivePermute on the CUDA backend whose receive is posted before
  // its data is ready: the stream whose work so far the copy waits for,
  // after the handshake that tells the peer this member's buffer is free
  // (OrderCommunicationStreams). nullptr: the current stream already
  // waited for it.
  Stream* sendsAfter() const {
    return sends_after_;
  }
  void setSendsAfter(Stream* stream);

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
  Stream* sends_after_ = nullptr;
};

// Whether `expr` is a CollectivePermute: a step of a ring or direct
// decomposition, which moves data to one peer.
bool isCollectivePermute(const Expr* expr);

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
