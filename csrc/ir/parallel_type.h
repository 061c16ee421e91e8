// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string_view>

namespace mdfuser {

// How a loop IterDomain is executed.
//  - Serial: an ordinary loop, or no loop at all when the axis is local.
//  - Stream: a host loop whose iterations run on separate worker streams.
//  - DIDx/DIDy/DIDz: spread across devices along mesh axis x (the innermost
//    axis of a DeviceMesh), y (the one before it) or z.
enum class ParallelType { Serial, Stream, DIDx, DIDy, DIDz };

bool isDeviceParallel(ParallelType pt);

// The device parallel types, of the innermost mesh axis first.
inline constexpr ParallelType kDeviceParallelTypes[] = {
    ParallelType::DIDx, ParallelType::DIDy, ParallelType::DIDz};

// The Python-visible name: "serial", "stream", "mesh_x", "mesh_y", "mesh_z".
std::string_view parallelTypeName(ParallelType pt);

// The form used when printing an IterDomain: "S", "streamIdx",
// "deviceIdx.x", ...
std::string_view idString(ParallelType pt);

std::ostream& operator<<(std::ostream& os, ParallelType pt);

} // namespace mdfuser
