// SPDX-License-Identifier: MIT
#include "runtime/watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace mdfuser {
namespace {

using std::chrono::milliseconds;

Watchdog::Entry entry(
    std::function<bool()> finished, milliseconds timeout, std::string what) {
  Watchdog::Entry e;
  e.finished = std::move(finished);
  e.describe = [what = std::move(what)] { return what; };
  e.timeout = timeout;
  return e;
}

// A check that says rank 1 exited with `message`, whenever asked about it.
Watchdog::PeerCheck rankOneExited(std::string message) {
  return [message](const std::vector<int64_t>& ranks) -> std::string {
    const bool asked = std::find(ranks.begin(), ranks.end(), 1) != ranks.end();
    return asked ? message : "";
  };
}

TEST(Watchdog, WorkThatFinishesInTimeIsForgotten) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto asked = std::make_shared<std::atomic<int>>(0);
  Watchdog::instance().watch(entry(
      [done, asked] {
        ++*asked;
        return done->load();
      },
      milliseconds(2000),
      "never reported"));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_GT(asked->load(), 0) << "the watchdog polls what it watches";
  done->store(true);
  std::this_thread::sleep_for(milliseconds(100));
  const int after_finishing = asked->load();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(asked->load(), after_finishing)
      << "finished work is no longer polled";
}

TEST(WatchdogDeathTest, WorkPastItsTimeoutIsReportedAndEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Watchdog::instance().watch(entry(
            [] { return false; },
            milliseconds(50),
            "rank 0 in Allreduce (Communication 3) with team (0 1)"));
        std::this_thread::sleep_for(milliseconds(5000));
      },
      "\\[mdfuser\\] rank 0 in Allreduce \\(Communication 3\\) with team \\(0 "
      "1\\) "
      "\\(more than 0 s\\); the stream cannot go on, ending the process");
}

TEST(WatchdogDeathTest, APeerThatExitedEndsTheProcessBeforeTheDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Watchdog::instance().setPeerCheck(
            rankOneExited("rank 1 exited on an error: ValueError: bad"));
        Watchdog::Entry waits_for_1 = entry(
            [] { return false; },
            milliseconds(60000),
            "rank 0 in CollectivePermute (Communication 4) with team (0 1)");
        waits_for_1.peers = {1};
        Watchdog::instance().watch(std::move(waits_for_1));
        std::this_thread::sleep_for(milliseconds(10000));
      },
      "\\[mdfuser\\] rank 0 in CollectivePermute \\(Communication 4\\) with "
      "team \\(0 1\\) \\(rank 1 exited on an error: ValueError: bad\\); the "
      "stream cannot go on, ending the process");
}

TEST(Watchdog, APeerThatExitedLeavesWorkThatDoesNotWaitForIt) {
  Watchdog::instance().setPeerCheck(rankOneExited("rank 1 exited on an error"));
  auto done = std::make_shared<std::atomic<bool>>(false);
  Watchdog::Entry waits_for_2 =
      entry([done] { return done->load(); }, milliseconds(60000), "");
  waits_for_2.peers = {2, 3};
  Watchdog::instance().watch(std::move(waits_for_2));
  // Past two rounds of peer checks: the process is still here.
  std::this_thread::sleep_for(milliseconds(2500));
  done->store(true);
  Watchdog::instance().setPeerCheck(nullptr);
}

} // namespace
} // namespace mdfuser
