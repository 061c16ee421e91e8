// SPDX-License-Identifier: MIT
#include "ir/parallel_type.h"

#include "ir/errors.h"

namespace mdfuser {

bool isDeviceParallel(ParallelType pt) {
  return pt == ParallelType::DIDx || pt == ParallelType::DIDy ||
         pt == ParallelType::DIDz;
}

std::string_view parallelTypeName(ParallelType pt) {
  switch (pt) {
    case ParallelType::Serial:
      return "serial";
    case ParallelType::Stream:
      return "stream";
    case ParallelType::DIDx:
      return "mesh_x";
    case ParallelType::DIDy:
      return "mesh_y";
    case ParallelType::DIDz:
      return "mesh_z";
  }
  MDF_UNREACHABLE("unknown ParallelType ", static_cast<int>(pt));
}

std::string_view idString(ParallelType pt) {
  switch (pt) {
    case ParallelType::Serial:
      return "S";
    case ParallelType::Stream:
      return "streamIdx";
    case ParallelType::DIDx:
      return "deviceIdx.x";
    case ParallelType::DIDy:
      return "deviceIdx.y";
    case ParallelType::DIDz:
      return "deviceIdx.z";
  }
  MDF_UNREACHABLE("unknown ParallelType ", static_cast<int>(pt));
}

std::ostream& operator<<(std::ostream& os, ParallelType pt) {
  return os << parallelTypeName(pt);
}

} // namespace mdfuser
