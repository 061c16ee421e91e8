// SPDX-License-Identifier: MIT
#include "multidevice/communication_type.h"

#include <algorithm>
#include <sstream>

#include "ir/errors.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

using Kind = DeviceSharding::Kind;

std::string describe(const DeviceSharding& s) {
  switch (s.kind) {
    case Kind::kReplicated:
      return "replicated";
    case Kind::kSharded:
      return "sharded on axis " + std::to_string(s.axis) +
             (s.above.empty() ? "" : " " + s.above);
    case Kind::kPartial:
      return "partial";
  }
  MDF_UNREACHABLE();
}

std::string describe(const ShardingState& state) {
  std::string s = state.mesh.toString();
  for (ParallelType pt : kDeviceParallelTypes) {
    const DeviceSharding d = state.of(pt);
    if (d.kind != Kind::kReplicated) {
      s += ", " + std::string(parallelTypeName(pt)) + " " + describe(d);
    }
  }
  if (state.types.empty() ||
      std::all_of(state.types.begin(), state.types.end(), [](const auto& e) {
        return e.second.kind == Kind::kReplicated;
      })) {
    s += ", replicated";
  }
  return s;
}

Resharding collective(
    CommunicationType type, ParallelType pt, int64_t axis = -1) {
  Resharding r;
  r.kind = Resharding::Kind::kCollective;
  r.type = type;
  r.parallel_type = pt;
  r.axis = axis;
  return r;
}

[[noreturn]] void unsupported(
    const ShardingState& producer,
    const ShardingState& consumer,
    const std::string& why) {
  MDF_USER_ERROR(
      "cannot move a tensor from {",
      describe(producer),
      "} to {",
      describe(consumer),
      "}: ",
      why);
}

// Both tensors on one mesh.
Resharding onOneMesh(
    const ShardingState& producer, const ShardingState& consumer) {
  std::vector<Resharding> changes;
  bool local_slice = false;
  for (ParallelType pt : kDeviceParallelTypes) {
    const DeviceSharding p = producer.of(pt);
    const DeviceSharding c = consumer.of(pt);
    MDF_CHECK(
        c.kind != Kind::kPartial, "a consumer cannot hold partial results");
    if (p == c) {
      continue;
    }
    if (p.kind == Kind::kSharded && c.kind == Kind::kReplicated) {
      changes.push_back(collective(CommunicationType::Allgather, pt, p.axis));
    } else if (p.kind == Kind::kReplicated && c.kind == Kind::kSharded) {
      local_slice = true;
    } else if (p.kind == Kind::kSharded && c.kind == Kind::kSharded) {
      if (p.axis == c.axis) {
        auto where = [](const DeviceSharding& d) {
          return d.above.empty() ? std::string("is the outermost split")
                                 : "lies " + d.above;
        };
        unsupported(
            producer,
            consumer,
            detail::concat(
                "axis ",
                p.axis,
                " is cut into parts two ways: its ",
                parallelTypeName(pt),
                " split ",
                where(p),
                " in the producer and ",
                where(c),
                " in the consumer; split both alike"));
      }
      Resharding r = collective(CommunicationType::AllToAll, pt, p.axis);
      r.out_axis = c.axis;
      changes.push_back(r);
    } else if (p.kind == Kind::kPartial && c.kind == Kind::kReplicated) {
      changes.push_back(collective(CommunicationType::Allreduce, pt));
    } else {
      changes.push_back(
          collective(CommunicationType::ReduceScatter, pt, c.axis));
    }
  }
  if (changes.empty()) {
    return Resharding{};
  }
  if (changes.size() > 1 || local_slice) {
    unsupported(
        producer,
        consumer,
        "more than one device parallel type changes; move one at a time "
        "with a set in between");
  }
  return changes.front();
}

bool holdsNoPartial(const ShardingState& s) {
  for (const auto& [pt, d] : s.types) {
    if (d.kind == Kind::kPartial) {
      return false;
    }
  }
  return true;
}

bool replicated(const ShardingState& s) {
  for (const auto& [pt, d] : s.types) {
    if (d.kind != Kind::kReplicated) {
      return false;
    }
  }
  return true;
}

// The one device parallel type along which `s` is not replicated, or
// nullopt (user error when several).
std::optional<ParallelType> onlyType(
    const ShardingState& s,
    const ShardingState& producer,
    const ShardingState& consumer) {
  std::optional<ParallelType> result;
  for (const auto& [pt, d] : s.types) {
    if (d.kind == Kind::kReplicated) {
      continue;
    }
    if (result.has_value()) {
      unsupported(
          producer,
          consumer,
          "a move between meshes of a tensor "
          "sharded on more than one mesh axis");
    }
    result = pt;
  }
  return result;
}

Resharding betweenMeshes(
    const ShardingState& producer, const ShardingState& consumer) {
  if (producer.mesh.rank() != 1 || consumer.mesh.rank() != 1) {
    unsupported(producer, consumer, "moves between meshes are 1-D meshes only");
  }
  const std::vector<int64_t>& from = producer.mesh.devices();
  const std::vector<int64_t>& to = consumer.mesh.devices();
  const ParallelType x = ParallelType::DIDx;
  if (from.size() == 1) {
    MDF_CHECK(holdsNoPartial(producer));
    Resharding r;
    if (to.size() == 1) {
      r = collective(CommunicationType::SendRecv, x);
    } else if (replicated(consumer)) {
      r = collective(CommunicationType::Broadcast, x);
    } else {
      std::optional<ParallelType> pt = onlyType(consumer, producer, consumer);
      r = collective(CommunicationType::Scatter, *pt, consumer.of(*pt).axis);
    }
    r.root = from[0];
    return r;
  }
  if (to.size() == 1) {
    const std::optional<ParallelType> pt =
        onlyType(producer, producer, consumer);
    Resharding r;
    if (!pt.has_value()) {
      if (std::find(from.begin(), from.end(), to[0]) != from.end()) {
        return Resharding{};
      }
      r = collective(CommunicationType::SendRecv, x);
      r.root = from[0];
      return r;
    }
    const DeviceSharding p = producer.of(*pt);
    r = p.kind == Kind::kPartial
            ? collective(CommunicationType::Reduce, *pt)
            : collective(CommunicationType::Gather, *pt, p.axis);
    r.root = to[0];
    return r;
  }
  bool same = from.size() == to.size();
  for (ParallelType pt : kDeviceParallelTypes) {
    same = same && producer.of(pt) == consumer.of(pt) &&
           producer.of(pt).kind != Kind::kPartial;
  }
  if (!same) {
    unsupported(
        producer,
        consumer,
        "between two meshes of several devices, mdfuser moves a tensor only "
        "when both meshes have as many devices and the tensor keeps its "
        "sharding");
  }
  return collective(CommunicationType::SendRecv, x);
}

} // namespace

std::string_view communicationTypeName(CommunicationType type) {
  switch (type) {
    case CommunicationType::Allreduce:
      return "Allreduce";
    case CommunicationType::ReduceScatter:
      return "ReduceScatter";
    case CommunicationType::Allgather:
      return "Allgather";
    case CommunicationType::Broadcast:
      return "Broadcast";
    case CommunicationType::Scatter:
      return "Scatter";
    case CommunicationType::Gather:
      return "Gather";
    case CommunicationType::Reduce:
      return "Reduce";
    case CommunicationType::SendRecv:
      return "SendRecv";
    case CommunicationType::AllToAll:
      return "AllToAll";
    case CommunicationType::CollectivePermute:
      return "CollectivePermute";
  }
  MDF_UNREACHABLE("unknown CommunicationType ", static_cast<int>(type));
}

std::ostream& operator<<(std::ostream& os, CommunicationType type) {
  return os << communicationTypeName(type);
}

DeviceSharding ShardingState::of(ParallelType pt) const {
  auto it = types.find(pt);
  return it == types.end() ? DeviceSharding{} : it->second;
}

std::string Resharding::toString() const {
  if (kind == Kind::kLocal) {
    return "local";
  }
  std::ostringstream ss;
  ss << type << " on " << parallelTypeName(parallel_type);
  if (axis >= 0) {
    ss << " axis " << axis;
  }
  if (out_axis >= 0) {
    ss << " to axis " << out_axis;
  }
  if (root.has_value()) {
    ss << " root " << *root;
  }
  return ss.str();
}

Resharding chooseResharding(
    const ShardingState& producer, const ShardingState& consumer) {
  if (producer.mesh == consumer.mesh) {
    return onOneMesh(producer, consumer);
  }
  return betweenMeshes(producer, consumer);
}

namespace {

// The position of `id` among the non-reduction axes of `domain`, or -1.
int64_t positionOf(
    const std::vector<IterDomain*>& domain, const IterDomain* id) {
  int64_t pos = 0;
  for (const IterDomain* d : domain) {
    if (d == id) {
      return d->isReduction() ? -1 : pos;
    }
    if (!d->isReduction()) {
      ++pos;
    }
  }
  return -1;
}

// Layout numbers for DeviceSharding: equal for equal layouts of one axis.
int64_t layoutOf(const ParallelAxis& pa) {
  int64_t layout = 0;
  for (const IterDomain* above : pa.above) {
    const Scalar* e = above->extent();
    layout = layout * 131 + (e->isConst() ? e->value() : 7);
  }
  return layout;
}

// "below a stream split into 3 and a split into 2": the splits above the
// device split of `pa`, outermost first; empty when there are none.
std::string aboveOf(const ParallelAxis& pa) {
  std::string s;
  for (const IterDomain* above : pa.above) {
    const ParallelType pt = above->parallelType();
    s += detail::concat(
        s.empty() ? "below " : " and ",
        pt == ParallelType::Serial
            ? std::string("a split")
            : detail::concat("a ", parallelTypeName(pt), " split"),
        " into ",
        above->extent()->toString());
  }
  return s;
}

} // namespace

ShardingState producerState(const TensorOp* op) {
  const TensorView* producer = op->tensorInputs().at(0);
  const TensorView* consumer = op->out();
  MDF_CHECK(producer->hasDeviceMesh(), producer->toString(), " has no mesh");
  ShardingState state{*producer->deviceMesh(), {}};
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis pa = findParallelAxis(producer, pt, producer->logical());
    if (!pa || pa.source->isReduction()) {
      continue;
    }
    IterDomain* mapped = mappedAxis(op, producer, consumer, pa.source);
    MDF_CHECK(
        mapped != nullptr,
        "the ",
        parallelTypeName(pt),
        " axis of ",
        producer->toString(),
        " maps to no axis of ",
        consumer->toString());
    if (mapped->isReduction()) {
      state.types[pt] = {Kind::kPartial, -1, 0, ""};
    } else {
      state.types[pt] = {
          Kind::kSharded,
          positionOf(consumer->maybeRoot(), mapped),
          layoutOf(pa),
          aboveOf(pa)};
    }
  }
  return state;
}

ShardingState consumerState(const TensorOp* op) {
  const TensorView* consumer = op->out();
  MDF_CHECK(consumer->hasDeviceMesh(), consumer->toString(), " has no mesh");
  ShardingState state{*consumer->deviceMesh(), {}};
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis pa = findParallelAxis(consumer, pt, consumer->maybeRoot());
    if (!pa || pa.source->isReduction()) {
      continue;
    }
    state.types[pt] = {
        Kind::kSharded,
        positionOf(consumer->maybeRoot(), pa.source),
        layoutOf(pa),
        aboveOf(pa)};
  }
  return state;
}

Resharding chooseResharding(const TensorOp* op) {
  MDF_CHECK(
      op->tensorInputs().size() == 1 && op->outputs().size() == 1,
      op->opName(),
      " is not a set or sum");
  return chooseResharding(producerState(op), consumerState(op));
}

} // namespace mdfuser
