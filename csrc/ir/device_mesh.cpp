// SPDX-License-Identifier: MIT
#include "ir/device_mesh.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "ir/errors.h"

namespace mdfuser {

DeviceMesh::DeviceMesh(std::vector<int64_t> devices)
    : DeviceMesh(devices, {static_cast<int64_t>(devices.size())}) {}

DeviceMesh::DeviceMesh(std::vector<int64_t> devices, std::vector<int64_t> shape)
    : devices_(std::move(devices)), shape_(std::move(shape)) {
  MDF_USER_CHECK(!devices_.empty(), "a DeviceMesh needs at least one device");
  MDF_USER_CHECK(
      shape_.size() >= 1 && shape_.size() <= 3,
      "a DeviceMesh has 1 to 3 axes (mesh_x, mesh_y, mesh_z), got ",
      shape_.size());
  const int64_t volume = std::accumulate(
      shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
  MDF_USER_CHECK(
      volume == size(),
      "DeviceMesh shape has ",
      volume,
      " elements but ",
      size(),
      " devices were given");
  std::set<int64_t> seen;
  for (int64_t d : devices_) {
    MDF_USER_CHECK(d >= 0, "DeviceMesh device ids must be >= 0, got ", d);
    MDF_USER_CHECK(
        seen.insert(d).second, "DeviceMesh lists device ", d, " twice");
  }
}

int64_t DeviceMesh::axisOf(ParallelType pt) const {
  MDF_CHECK(isDeviceParallel(pt), pt, " is not a device parallel type");
  const int64_t from_end = pt == ParallelType::DIDx   ? 0
                           : pt == ParallelType::DIDy ? 1
                                                      : 2;
  MDF_USER_CHECK(
      from_end < rank(),
      parallelTypeName(pt),
      " needs a mesh of at least ",
      from_end + 1,
      " axes, but ",
      toString(),
      " has ",
      rank());
  return rank() - 1 - from_end;
}

int64_t DeviceMesh::size(ParallelType pt) const {
  return shape_[axisOf(pt)];
}

bool DeviceMesh::has(int64_t device) const {
  return std::find(devices_.begin(), devices_.end(), device) != devices_.end();
}

int64_t DeviceMesh::maxDevice() const {
  return *std::max_element(devices_.begin(), devices_.end());
}

std::vector<int64_t> DeviceMesh::coordinates(int64_t device) const {
  auto it = std::find(devices_.begin(), devices_.end(), device);
  MDF_CHECK(it != devices_.end(), "device ", device, " is not in ", toString());
  int64_t linear = it - devices_.begin();
  std::vector<int64_t> coords(shape_.size());
  for (int64_t axis = rank() - 1; axis >= 0; --axis) {
    coords[axis] = linear % shape_[axis];
    linear /= shape_[axis];
  }
  return coords;
}

std::vector<int64_t> DeviceMesh::team(int64_t device, ParallelType pt) const {
  const int64_t axis = axisOf(pt);
  std::vector<int64_t> coords = coordinates(device);
  std::vector<int64_t> result;
  for (int64_t i = 0; i < shape_[axis]; ++i) {
    coords[axis] = i;
    int64_t linear = 0;
    for (int64_t a = 0; a < rank(); ++a) {
      linear = linear * shape_[a] + coords[a];
    }
    result.push_back(devices_[linear]);
  }
  return result;
}

namespace {

void printAxis(
    std::ostream& os,
    const std::vector<int64_t>& devices,
    const std::vector<int64_t>& shape,
    size_t axis,
    int64_t& next) {
  os << "{";
  for (int64_t i = 0; i < shape[axis]; ++i) {
    if (i > 0) {
      os << " ";
    }
    if (axis + 1 == shape.size()) {
      os << devices[next++];
    } else {
      printAxis(os, devices, shape, axis + 1, next);
    }
  }
  os << "}";
}

} // namespace

std::string DeviceMesh::toString() const {
  std::ostringstream ss;
  ss << "DeviceMesh";
  int64_t next = 0;
  printAxis(ss, devices_, shape_, 0, next);
  return ss.str();
}

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) {
  return os << mesh.toString();
}

} // namespace mdfuser
