// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string_view>

#include "ir/ops.h"

namespace mdfuser {

// The collectives a resharding can become.
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
};

std::string_view communicationTypeName(CommunicationType type);
std::ostream& operator<<(std::ostream& os, CommunicationType type);

struct CommunicationInfo {
  CommunicationType type;
  // The device parallel type whose mesh axis the collective runs along.
  ParallelType parallel_type;
};

// The collective that implements a resharding `op` whose producer and
// consumer share a mesh. User error when no single collective does.
CommunicationInfo chooseCommunication(const TensorOp* op);

} // namespace mdfuser
