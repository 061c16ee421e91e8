// SPDX-License-Identifier: MIT
#include "runtime/watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
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
  return [message](const std::vector<int64_t>& ranks, int64_t, uint64_t) {
    Watchdog::PeerNews news;
    if (std::find(ranks.begin(), ranks.end(), 1) != ranks.end()) {
      news.exited = message;
    }
    return news;
  };
}

// A check that says rank 1 failed in `epoch`, whenever asked about that
// epoch, counting those asks in `asks` where given.
Watchdog::PeerCheck rankOneFailedIn(
    int64_t epoch, std::shared_ptr<std::atomic<int>> asks = nullptr) {
  return [epoch, asks](const std::vector<int64_t>&, int64_t asked, uint64_t) {
    Watchdog::PeerNews news;
    if (asked == epoch) {
      if (asks != nullptr) {
        ++*asks;
      }
      news.failed = "rank 1 failed: RuntimeError: gave up";
    }
    return news;
  };
}

// Work that finishes once released `needed` times, counting its releases.
struct Releasable {
  std::shared_ptr<std::atomic<int>> releases =
      std::make_shared<std::atomic<int>>(0);

  Watchdog::Entry entry(int64_t epoch, int needed, std::vector<int64_t> peers) {
    Watchdog::Entry e;
    e.finished = [r = releases, needed] { return r->load() >= needed; };
    e.describe = [] { return "rank 0 in CollectivePermute (Communication 1)"; };
    e.timeout = milliseconds(60000);
    e.epoch = epoch;
    e.peers = std::move(peers);
    e.release = [r = releases] {
      ++*r;
      return false;
    };
    return e;
  }
};

// Polls `done` for up to `limit`.
bool within(milliseconds limit, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
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

// The singleton's abandoned epochs only grow: the tests below use epochs
// that grow in the order of the file, so that the whole binary also passes
// in one process.
TEST(Watchdog, WorkOfAnAbandonedEpochIsReleasedUntilItFinishes) {
  Releasable old_work;
  Releasable live_work;
  Watchdog::instance().watch(old_work.entry(100, 3, {}));
  Watchdog::instance().watch(live_work.entry(101, 1, {}));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(old_work.releases->load(), 0) << "live work is not released";
  Watchdog::instance().abandonBefore(101);
  EXPECT_TRUE(within(milliseconds(2000), [&] {
    return old_work.releases->load() >= 3;
  })) << "released at every poll until it finishes";
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(old_work.releases->load(), 3) << "finished work is forgotten";
  EXPECT_EQ(live_work.releases->load(), 0) << "the live epoch's work stays";
  // Work of an abandoned epoch posted later is released too.
  Releasable late;
  Watchdog::instance().watch(late.entry(100, 1, {}));
  EXPECT_TRUE(
      within(milliseconds(2000), [&] { return late.releases->load() >= 1; }));
  live_work.releases->store(1);
}

TEST(Watchdog, AFailureSinceTheEntrysEpochReleasesItsWork) {
  Watchdog::instance().setPeerCheck(rankOneFailedIn(200));
  Releasable waits_for_1;
  Releasable same_epoch;
  Releasable next_epoch;
  Watchdog::instance().watch(waits_for_1.entry(200, 1, {1}));
  Watchdog::instance().watch(same_epoch.entry(200, 1, {}));
  Watchdog::instance().watch(next_epoch.entry(201, 1, {1}));
  // Peers are asked about work watched for a second, once a second.
  EXPECT_TRUE(within(milliseconds(3500), [&] {
    return waits_for_1.releases->load() >= 1 &&
           same_epoch.releases->load() >= 1;
  })) << "the epoch's work is released, whatever it waits for";
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(next_epoch.releases->load(), 0) << "the next epoch goes on";
  next_epoch.releases->store(1);
  Watchdog::instance().setPeerCheck(nullptr);
}

// A CUDA call can be held up by another thread of the process (one that
// copies into pageable memory from a stream that waits): the deadlines and
// the peer checks must not wait for it.
TEST(WatchdogDeathTest, AFinishedCheckThatHangsDoesNotStopTheDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Watchdog::instance().watch(entry(
            [] {
              std::this_thread::sleep_for(std::chrono::hours(1));
              return false;
            },
            milliseconds(50),
            "rank 0 in a CUDA graph replay"));
        std::this_thread::sleep_for(milliseconds(5000));
      },
      "\\[mdfuser\\] rank 0 in a CUDA graph replay \\(more than 0 s\\)");
}

TEST(WatchdogDeathTest, ADescriptionThatHangsIsStoodInFor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Watchdog::Entry e = entry([] { return false; }, milliseconds(50), "");
        e.describe = [] {
          std::this_thread::sleep_for(std::chrono::hours(1));
          return std::string("never");
        };
        Watchdog::instance().watch(std::move(e));
        std::this_thread::sleep_for(milliseconds(10000));
      },
      "work that a GPU stream waits for \\(its description waits on the "
      "GPU too\\) \\(more than 0 s\\)");
}

// Work whose finished() does not return until `go_on` (a CUDA query held
// up by another thread), then says it finished.
Watchdog::Entry heldUntil(
    std::shared_ptr<std::atomic<bool>> go_on, std::string what) {
  return entry(
      [go_on] {
        while (!go_on->load()) {
          std::this_thread::sleep_for(milliseconds(5));
        }
        return true;
      },
      milliseconds(60000),
      std::move(what));
}

TEST(Watchdog, AFinishedCheckThatHangsDoesNotStopThePeerChecks) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  Watchdog::instance().setPeerCheck(rankOneFailedIn(400, asked));
  auto go_on = std::make_shared<std::atomic<bool>>(false);
  Watchdog::Entry held =
      heldUntil(go_on, "rank 0 in CollectivePermute (Communication 1)");
  held.epoch = 400;
  held.peers = {1};
  Watchdog::instance().watch(std::move(held));
  EXPECT_TRUE(within(milliseconds(3500), [&] { return asked->load() >= 1; }))
      << "the peers are asked while the poller waits on the entry";
  go_on->store(true);
  Watchdog::instance().setPeerCheck(nullptr);
}

// An entry's resources may take long to destroy: a CUDA event's
// destruction waits while the host copies from a stream that waits for a
// peer. The supervisor must still ask about the peers.
TEST(Watchdog, AnEntryWhoseDestructionHangsDoesNotStopThePeerChecks) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  Watchdog::instance().setPeerCheck(rankOneFailedIn(450, asked));
  auto go_on = std::make_shared<std::atomic<bool>>(false);
  // Held by the finished entry's check: its destruction waits for go_on
  // (ten seconds at most).
  struct SlowToDestroy {
    std::shared_ptr<std::atomic<bool>> go_on;
    ~SlowToDestroy() {
      within(milliseconds(10000), [this] { return go_on->load(); });
    }
  };
  auto slow = std::make_shared<SlowToDestroy>();
  slow->go_on = go_on;
  Watchdog::Entry finished =
      entry([slow] { return true; }, milliseconds(60000), "a finished replay");
  finished.epoch = 450;
  finished.peers = {1};
  slow.reset();
  Watchdog::instance().watch(std::move(finished));
  // Polled and found finished, then dropped by both threads.
  std::this_thread::sleep_for(milliseconds(300));
  Watchdog::Entry held =
      heldUntil(go_on, "rank 0 in a CUDA graph replay of a program");
  held.epoch = 450;
  held.peers = {1};
  // Timed from here: a watchdog whose lock is held up holds up the watch
  // too.
  const auto start = std::chrono::steady_clock::now();
  Watchdog::instance().watch(std::move(held));
  EXPECT_TRUE(within(milliseconds(3500), [&] { return asked->load() >= 1; }))
      << "the peers are asked while a finished entry is being destroyed";
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3500));
  go_on->store(true);
  Watchdog::instance().setPeerCheck(nullptr);
}

TEST(Watchdog, AReleaseThatMayRunAnywhereIsStartedWhileThePollerIsHeldUp) {
  auto go_on = std::make_shared<std::atomic<bool>>(false);
  auto releases = std::make_shared<std::atomic<int>>(0);
  Watchdog::Entry held =
      heldUntil(go_on, "rank 0 in Allreduce (Communication 2) on NCCL");
  held.epoch = 500;
  held.release = [releases] {
    ++*releases;
    return true;
  };
  held.release_anywhere = true;
  Watchdog::instance().watch(std::move(held));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(releases->load(), 0) << "nothing before the epoch ends";
  Watchdog::instance().abandonBefore(501);
  EXPECT_TRUE(within(milliseconds(2000), [&] { return releases->load() >= 1; }))
      << "the supervisor starts the release itself";
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(releases->load(), 1) << "once";
  go_on->store(true);
}

// A standby that counts its calls and says it is over after `calls` of
// them (never, with 0).
struct Standing {
  std::shared_ptr<std::atomic<int>> calls =
      std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<int> owner = std::make_shared<int>(0);

  Watchdog::Standby standby(int64_t epoch, milliseconds duration, int over) {
    Watchdog::Standby s;
    s.epoch = epoch;
    s.duration = duration;
    s.owner = owner;
    s.release = [c = calls, over] { return ++*c == over; };
    return s;
  }
};

TEST(Watchdog, AStandbyRunsOnceItsEpochIsAbandonedForItsDuration) {
  Standing standing;
  Watchdog::instance().onAbandon(standing.standby(600, milliseconds(400), 0));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(standing.calls->load(), 0) << "nothing before the epoch ends";
  Watchdog::instance().abandonBefore(601);
  EXPECT_TRUE(within(milliseconds(2000), [&] {
    return standing.calls->load() >= 5;
  })) << "called at every poll once the epoch is abandoned";
  // 400 ms of 20 ms polls, then no more.
  std::this_thread::sleep_for(milliseconds(600));
  const int calls = standing.calls->load();
  EXPECT_LE(calls, 30);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(standing.calls->load(), calls) << "not after its duration";
}

TEST(Watchdog, AStandbyEndsWhenItSaysItIsOver) {
  Standing standing;
  Watchdog::instance().abandonBefore(611);
  // Its epoch is already over: it starts at once.
  Watchdog::instance().onAbandon(standing.standby(610, milliseconds(5000), 2));
  EXPECT_TRUE(
      within(milliseconds(2000), [&] { return standing.calls->load() >= 2; }));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(standing.calls->load(), 2);
}

TEST(Watchdog, AStandbyWhoseOwnerIsGoneIsDropped) {
  Standing gone;
  Standing kept;
  Watchdog::instance().onAbandon(gone.standby(620, milliseconds(5000), 1));
  gone.owner.reset();
  // Registering another prunes it.
  Watchdog::instance().onAbandon(kept.standby(620, milliseconds(5000), 1));
  EXPECT_EQ(gone.calls.use_count(), 1) << "its release is destroyed";
  Watchdog::instance().abandonBefore(621);
  EXPECT_TRUE(
      within(milliseconds(2000), [&] { return kept.calls->load() >= 1; }));
  EXPECT_EQ(gone.calls->load(), 0);
}

TEST(Watchdog, APeersFailureStartsTheStandbysOfItsEpoch) {
  Watchdog::instance().setPeerCheck(rankOneFailedIn(630));
  Standing standing;
  Releasable waits_for_1;
  Watchdog::instance().onAbandon(standing.standby(630, milliseconds(5000), 1));
  Watchdog::instance().watch(waits_for_1.entry(630, 1, {1}));
  EXPECT_TRUE(within(milliseconds(3500), [&] {
    return standing.calls->load() >= 1;
  })) << "the failure a wait learns of ends the epoch for the standby too";
  Watchdog::instance().setPeerCheck(nullptr);
}

} // namespace
} // namespace mdfuser
