// SPDX-License-Identifier: MIT
//
// A DeviceMesh arranges ranks in 1 to 3 axes. mesh_x (DIDx) is the last,
// innermost axis; a collective along a parallel type runs on the team of
// devices that differ only in that axis' coordinate.

#include <sstream>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/device_mesh.h"

namespace mdfuser {
namespace {

using Ids = std::vector<int64_t>;

TEST(DeviceMesh, OneDimensional) {
  const DeviceMesh mesh({0, 1, 2, 3});
  EXPECT_EQ(mesh.rank(), 1);
  EXPECT_EQ(mesh.size(), 4);
  EXPECT_EQ(mesh.shape(), Ids{4});
  EXPECT_EQ(mesh.size(ParallelType::DIDx), 4);
  EXPECT_EQ(mesh.team(2, ParallelType::DIDx), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(mesh.toString(), "DeviceMesh{0 1 2 3}");
  EXPECT_TRUE(mesh.has(3));
  EXPECT_FALSE(mesh.has(4));
  EXPECT_EQ(mesh.maxDevice(), 3);
}

TEST(DeviceMesh, DeviceIdsNeedNotBeContiguous) {
  const DeviceMesh mesh({7, 3});
  EXPECT_EQ(mesh.maxDevice(), 7);
  EXPECT_EQ(mesh.team(3, ParallelType::DIDx), (Ids{7, 3}));
  EXPECT_FALSE(mesh.has(0));
  std::ostringstream ss;
  ss << mesh;
  EXPECT_EQ(ss.str(), "DeviceMesh{7 3}");
}

TEST(DeviceMesh, MeshXIsTheInnermostAxis) {
  // {{0 1 2}
  //  {3 4 5}}
  const DeviceMesh mesh({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(mesh.rank(), 2);
  EXPECT_EQ(mesh.size(ParallelType::DIDx), 3);
  EXPECT_EQ(mesh.size(ParallelType::DIDy), 2);
  EXPECT_EQ(mesh.team(4, ParallelType::DIDx), (Ids{3, 4, 5}));
  EXPECT_EQ(mesh.team(4, ParallelType::DIDy), (Ids{1, 4}));
  EXPECT_EQ(mesh.team(0, ParallelType::DIDy), (Ids{0, 3}));
  EXPECT_EQ(mesh.toString(), "DeviceMesh{{0 1 2} {3 4 5}}");
}

TEST(DeviceMesh, ThreeAxes) {
  const DeviceMesh mesh({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  EXPECT_EQ(mesh.size(ParallelType::DIDz), 2);
  EXPECT_EQ(mesh.team(5, ParallelType::DIDz), (Ids{1, 5}));
  EXPECT_EQ(mesh.team(5, ParallelType::DIDy), (Ids{5, 7}));
  EXPECT_EQ(mesh.team(5, ParallelType::DIDx), (Ids{4, 5}));
  EXPECT_EQ(mesh.toString(), "DeviceMesh{{{0 1} {2 3}} {{4 5} {6 7}}}");
}

TEST(DeviceMesh, EqualityComparesDevicesAndShape) {
  EXPECT_EQ(DeviceMesh({0, 1}), DeviceMesh({0, 1}));
  EXPECT_NE(DeviceMesh({0, 1}), DeviceMesh({1, 0}));
  EXPECT_NE(DeviceMesh({0, 1, 2, 3}), DeviceMesh({0, 1, 2, 3}, {2, 2}));
}

TEST(DeviceMesh, MissingAxisIsAUserError) {
  const DeviceMesh mesh({0, 1});
  EXPECT_VALUE_ERROR(
      mesh.size(ParallelType::DIDy),
      "mesh_y needs a mesh of at least 2 axes, but DeviceMesh{0 1} has 1");
  EXPECT_VALUE_ERROR(
      mesh.team(0, ParallelType::DIDz), "mesh_z needs a mesh of at least 3");
}

TEST(DeviceMesh, InvalidConstructionIsAUserError) {
  EXPECT_VALUE_ERROR(DeviceMesh(Ids{}), "needs at least one device");
  EXPECT_VALUE_ERROR(
      DeviceMesh({0, 1, 2}, {2, 2}),
      "shape has 4 elements but 3 devices were given");
  EXPECT_VALUE_ERROR(
      DeviceMesh({0, 1}, {1, 1, 1, 2}), "1 to 3 axes (mesh_x, mesh_y, mesh_z)");
  EXPECT_VALUE_ERROR(DeviceMesh({0, -1}), "must be >= 0, got -1");
  EXPECT_VALUE_ERROR(DeviceMesh({0, 1, 1}), "lists device 1 twice");
}

TEST(DeviceMesh, TeamOfADeviceOutsideTheMeshIsAnInternalError) {
  const DeviceMesh mesh({0, 1});
  EXPECT_INTERNAL_ERROR(
      mesh.team(5, ParallelType::DIDx), "device 5 is not in DeviceMesh{0 1}");
}

} // namespace
} // namespace mdfuser
