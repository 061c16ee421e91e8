// SPDX-License-Identifier: MIT
#include "multidevice/communication_type.h"

#include <unordered_map>

#include "ir/errors.h"
#include "multidevice/sharding.h"

namespace mdfuser {

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
  }
  MDF_UNREACHABLE("unknown CommunicationType ", static_cast<int>(type));
}

std::ostream& operator<<(std::ostream& os, CommunicationType type) {
  return os << communicationTypeName(type);
}

CommunicationInfo chooseCommunication(const TensorOp* op) {
  const TensorView* consumer = op->out();
  const std::vector<TensorView*> producers = op->tensorInputs();
  MDF_USER_CHECK(
      producers.size() == 1,
      "cannot turn ",
      op->opName(),
      " into a collective: it reshards and has ",
      producers.size(),
      " inputs; only single-input operations (set, sum) can be "
      "communications");
  const TensorView* producer = producers[0];
  MDF_USER_CHECK(
      producer->deviceMesh() == consumer->deviceMesh(),
      "moving ",
      producer->toString(),
      " to ",
      consumer->toString(),
      " changes the device mesh, which mdfuser does not support yet");

  std::unordered_map<IterDomain*, IterDomain*> p2c;
  for (auto [p, c] : op->mapProducerToConsumer(producer)) {
    p2c[p] = c;
  }
  // Exactly one device parallel type may change between producer and
  // consumer.
  std::vector<CommunicationInfo> found;
  for (ParallelType pt : deviceParallelTypes(producer)) {
    ParallelAxis p_axis = findParallelAxis(producer, pt, producer->logical());
    ParallelAxis c_axis = findParallelAxis(consumer, pt, consumer->maybeRoot());
    IterDomain* mapped =
        p2c.count(p_axis.source) ? p2c[p_axis.source] : nullptr;
    if (c_axis && c_axis.source == mapped && !c_axis.loop->isReduction()) {
      continue;
    }
    // The producer's device axis is summed in the consumer: an allreduce,
    // or a reduce-scatter when the consumer is sharded again on another axis.
    if (mapped != nullptr && mapped->isReduction()) {
      found.push_back(
          {c_axis && !c_axis.loop->isReduction()
               ? CommunicationType::ReduceScatter
               : CommunicationType::Allreduce,
           pt});
    } else if (!c_axis) {
      found.push_back({CommunicationType::Allgather, pt});
    } else {
      found.push_back({CommunicationType::AllToAll, pt});
    }
  }
  for (ParallelType pt : deviceParallelTypes(consumer)) {
    if (loopAxis(producer, pt) == nullptr &&
        !loopAxis(consumer, pt)->isReduction()) {
      found.push_back({CommunicationType::Scatter, pt});
    }
  }
  MDF_USER_CHECK(
      found.size() == 1,
      "cannot turn ",
      op->opName(),
      "(",
      producer->toString(),
      ") -> ",
      consumer->toString(),
      " into a single collective: ",
      found.size(),
      " device axes change");
  return found.front();
}

} // namespace mdfuser
