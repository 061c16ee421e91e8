// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "ir/device_mesh.h"
#include "ir/ops/tensor_op.h"

namespace mdfuser {

// The collectives a resharding can become, and CollectivePermute, the
// point-to-point step of the ring decompositions (lowering emits it, never
// chooseResharding).
enum class CommunicationType {
  Allreduce,
  ReduceScatter,
  Allgather,
  Broadcast,
  Scatter,
  Gather,
  Reduce,
  SendRecv,
  AllToAll,
  CollectivePermute,
};

std::string_view communicationTypeName(CommunicationType type);
std::ostream& operator<<(std::ostream& os, CommunicationType type);

// How a tensor is laid out along one device parallel type.
struct DeviceSharding {
  enum class Kind {
    // Every device of the mesh axis holds the whole tensor.
    kReplicated,
    // Each holds one part along `axis`.
    kSharded,
    // Each holds a partial result that the devices must reduce.
    kPartial,
  };
  Kind kind = Kind::kReplicated;
  // kSharded: the position of the sharded axis, counted among the
  // consumer's non-reduction logical axes.
  int64_t axis = -1;
  // kSharded: tells apart two ways of cutting one axis (a split above the
  // device split, into stream chunks or plain parts, changes which elements
  // a device holds); equal numbers mean equal layouts.
  int64_t layout = 0;
  // kSharded: the splits above the device split, as errors name them
  // ("below a stream split into 3"); empty when it is the outermost.
  std::string above;

  bool operator==(const DeviceSharding& other) const {
    return kind == other.kind && axis == other.axis && layout == other.layout;
  }
};

// A tensor's mesh and its sharding per device parallel type; a type that is
// missing is replicated.
struct ShardingState {
  DeviceMesh mesh;
  std::map<ParallelType, DeviceSharding> types;

  DeviceSharding of(ParallelType pt) const;
};

// What moving a tensor from the producer's to the consumer's sharding takes.
struct Resharding {
  enum class Kind {
    // Nothing moves: the consumer's devices already hold their data, whole
    // (a copy) or as a part they take locally (replicated -> sharded).
    kLocal,
    kCollective,
  };
  Kind kind = Kind::kLocal;
  CommunicationType type = CommunicationType::Allreduce;
  // The device parallel type whose mesh axis the collective runs along.
  ParallelType parallel_type = ParallelType::DIDx;
  // Allgather, ReduceScatter, Scatter, Gather, AllToAll: the (consumer)
  // axis split into parts; AllToAll: `axis` is the producer's sharded axis,
  // `out_axis` the consumer's.
  int64_t axis = -1;
  int64_t out_axis = -1;
  // Broadcast and Scatter: the device that sends; Gather and Reduce: the
  // device that receives.
  std::optional<int64_t> root;

  std::string toString() const;
};

// The collective that turns `producer` into `consumer`: a pure function of
// the two shardings. User error, naming both, when no single collective
// does (more than one device parallel type changes, one axis is cut two
// ways, an unsupported move between meshes).
//
// On one mesh, per device parallel type (P: producer, C: consumer):
//   P sharded on a, C replicated        Allgather along a
//   P replicated, C sharded on a        local: each device takes its part
//   P sharded on a, C sharded on b != a AllToAll from a to b
//   P partial, C replicated             Allreduce
//   P partial, C sharded on a           ReduceScatter along a
// Between two 1-D meshes:
//   P on one device, C on one other     SendRecv
//   P on one device, C replicated       Broadcast from it
//   P on one device, C sharded on a     Scatter from it along a
//   P sharded on a, C on one device     Gather to it along a
//   P partial, C on one device          Reduce to it
//   P replicated, C on one device       SendRecv from P's first device
//                                       (local when it holds P)
//   equal meshes' sizes and shardings   SendRecv, device i to device i
Resharding chooseResharding(
    const ShardingState& producer, const ShardingState& consumer);

// The states of a resharding set or sum `op`: the producer's axes in the
// consumer's positions (through the op's axis map), the consumer's own.
ShardingState producerState(const TensorOp* op);
ShardingState consumerState(const TensorOp* op);

// chooseResharding for a set or sum whose producer and consumer have a mesh.
Resharding chooseResharding(const TensorOp* op);

} // namespace mdfuser
