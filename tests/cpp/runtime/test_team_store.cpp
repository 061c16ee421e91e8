// SPDX-License-Identifier: MIT
#include "runtime/team_store.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

namespace mdfuser {
namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string text(const std::vector<uint8_t>& b) {
  return {b.begin(), b.end()};
}

// Two members of one team over one shared store, each with its own epoch.
struct Team {
  c10::intrusive_ptr<c10d::HashStore> shared =
      c10::make_intrusive<c10d::HashStore>();
  int64_t epoch0 = 0;
  int64_t epoch1 = 0;
  TeamStore member0{shared, [this] { return epoch0; }};
  TeamStore member1{shared, [this] { return epoch1; }};
};

// One exchange as torch's symmetric memory makes it: each member posts its
// key under its own process count, then reads the other's.
void exchange(
    Team& team, int64_t count0, int64_t count1, const std::string& tag) {
  const auto key = [](int64_t count, int rank) {
    return "CUDASymmetricMemory/" + std::to_string(count) + "/" +
           std::to_string(rank);
  };
  team.member0.set(key(count0, 0), bytes(tag + "0"));
  team.member1.set(key(count1, 1), bytes(tag + "1"));
  const std::chrono::milliseconds brief(200);
  team.member0.wait({key(count0, 1)}, brief);
  team.member1.wait({key(count1, 0)}, brief);
  EXPECT_EQ(text(team.member0.get(key(count0, 1))), tag + "1");
  EXPECT_EQ(text(team.member1.get(key(count1, 0))), tag + "0");
}

TEST(TeamStore, MembersWithDifferentProcessCountsMeet) {
  // Member 0 made 26 exchanges with another team before; member 1 none.
  Team team;
  exchange(team, 26, 0, "first");
  // Member 0 exchanged with its other team again in between.
  exchange(team, 30, 1, "second");
  exchange(team, 31, 2, "third");
}

TEST(TeamStore, ProcessCountsAloneDoNotMeet) {
  // What the store prevents: the same keys on the plain store never meet.
  auto shared = c10::make_intrusive<c10d::HashStore>();
  shared->set("CUDASymmetricMemory/26/0", bytes("x"));
  EXPECT_FALSE(shared->check({"CUDASymmetricMemory/0/0"}));
}

TEST(TeamStore, EachEpochNumbersItsExchangesFromZero) {
  Team team;
  exchange(team, 0, 0, "a");
  // Member 0 failed in the middle of an exchange: it posted, its peer did
  // not. Both move to the next epoch.
  team.member0.set("CUDASymmetricMemory/1/0", bytes("lost"));
  team.epoch0 = team.epoch1 = 1;
  exchange(team, 2, 1, "b");
  EXPECT_EQ(
      team.member0.translate("CUDASymmetricMemory/2/0"),
      "CUDASymmetricMemory/1.0/0");
}

TEST(TeamStore, OtherKeysPassThrough) {
  Team team;
  for (const std::string key :
       {"joined", "a/b/c", "/1/2", "Kind//0", "Kind/1x/0", "Kind/7"}) {
    EXPECT_EQ(team.member0.translate(key), key);
  }
  EXPECT_EQ(team.member0.translate("Kind/7/rank/3"), "Kind/0.0/rank/3");
  // Kinds count apart.
  EXPECT_EQ(team.member0.translate("Other/9/0"), "Other/0.0/0");
  EXPECT_EQ(team.member0.translate("Kind/8/0"), "Kind/0.1/0");
}

TEST(TeamStore, ClonesShareTheCount) {
  Team team;
  auto clone = team.member0.clone();
  EXPECT_EQ(team.member0.translate("Kind/5/0"), "Kind/0.0/0");
  EXPECT_EQ(
      static_cast<TeamStore&>(*clone).translate("Kind/6/0"), "Kind/0.1/0");
}

TEST(TeamStore, AWaitEndsWhenInterruptThrows) {
  auto shared = c10::make_intrusive<c10d::HashStore>();
  int calls = 0;
  TeamStore store(
      shared,
      [] { return int64_t{0}; },
      [&calls] {
        if (++calls == 2) {
          throw std::runtime_error("rank 1 failed");
        }
      });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(
      {
        try {
          store.wait({"Kind/3/1"}, std::chrono::seconds(60));
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "rank 1 failed");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(calls, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(TeamStore, AWaitPastItsTimeoutNamesTheKeys) {
  Team team;
  try {
    team.member0.wait({"Kind/3/1", "joined"}, std::chrono::milliseconds(50));
    FAIL() << "the wait ended without the keys";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "waited 50 ms for the keys Kind/0.0/1, joined");
  }
}

TEST(TeamStore, AWaitForKeysAlreadySetReturns) {
  Team team;
  team.member1.set("Kind/9/1", bytes("x"));
  team.member0.wait({"Kind/0/1"}, std::chrono::milliseconds(50));
}

} // namespace
} // namespace mdfuser
