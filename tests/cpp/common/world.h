// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "runtime/communicator.h"

namespace mdfuser::test {

// The world's communicator of a test binary run under mpirun, created
// before the tests by WorldEnvironment and shut down after them.
inline Communicator* world = nullptr;

// Creates `world` from the launcher's environment and checks that the job
// has between `min_size` and `max_size` processes.
class WorldEnvironment : public ::testing::Environment {
 public:
  WorldEnvironment(int64_t min_size, int64_t max_size)
      : min_size_(min_size), max_size_(max_size) {}

  void SetUp() override {
    world = new Communicator(
        LaunchInfo::fromEnvironment(), CommunicatorOptions::fromEnvironment());
    ASSERT_TRUE(world->size() >= min_size_ && world->size() <= max_size_)
        << "run this binary with mpirun -np " << min_size_
        << (max_size_ > min_size_ ? " to " + std::to_string(max_size_) : "")
        << ", not " << world->size();
  }
  void TearDown() override {
    world->shutdown();
    delete world;
    world = nullptr;
  }

 private:
  int64_t min_size_;
  int64_t max_size_;
};

// The main function of such a binary.
inline int runWorldTests(
    int argc, char** argv, int64_t min_size, int64_t max_size) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new WorldEnvironment(min_size, max_size));
  return RUN_ALL_TESTS();
}

} // namespace mdfuser::test
