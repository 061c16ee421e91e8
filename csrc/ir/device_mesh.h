// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ir/parallel_type.h"

namespace mdfuser {

// An N-dimensional arrangement of device ids (ranks). mesh_x (DIDx) is the
// last axis, mesh_y (DIDy) the one before it, mesh_z (DIDz) the one before
// that. A tensor on a mesh is replicated over every mesh axis it is not
// sharded on.
class DeviceMesh {
 public:
  // A 1-D mesh.
  explicit DeviceMesh(std::vector<int64_t> devices);
  // An N-D mesh of the given shape; `devices` in row-major order.
  DeviceMesh(std::vector<int64_t> devices, std::vector<int64_t> shape);

  const std::vector<int64_t>& devices() const {
    return devices_;
  }
  const std::vector<int64_t>& shape() const {
    return shape_;
  }
  int64_t rank() const {
    return static_cast<int64_t>(shape_.size());
  }
  int64_t size() const {
    return static_cast<int64_t>(devices_.size());
  }
  // Extent of the mesh axis a device parallel type maps to. Fails (user
  // error) when the mesh has no such axis.
  int64_t size(ParallelType pt) const;

  bool has(int64_t device) const;
  int64_t maxDevice() const;

  // The devices that differ from `device` only in the coordinate along
  // `pt`'s axis, in order: the team a collective over that axis runs on.
  std::vector<int64_t> team(int64_t device, ParallelType pt) const;

  bool operator==(const DeviceMesh& other) const = default;

  // "DeviceMesh{0 1}" or, for more axes, "DeviceMesh{{0 1} {2 3}}".
  std::string toString() const;

 private:
  int64_t axisOf(ParallelType pt) const;
  std::vector<int64_t> coordinates(int64_t device) const;

  std::vector<int64_t> devices_;
  std::vector<int64_t> shape_;
};

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh);

} // namespace mdfuser
