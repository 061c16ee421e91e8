// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace mdfuser {

// The store a team's symmetric-memory group rendezvous through.
//
// torch's symmetric memory numbers its store exchanges with one counter per
// process ("<Kind>/<n>/<rank>"), shared by every group: a rank that set up
// buffers with one team has a higher count than a rank that did not, and
// the two then wait for each other's keys forever when they meet in another
// team (four ranks, ranks 0 and 1 ringing as a pair, then all four). This
// store renumbers those exchanges per team and communication epoch: the
// k-th exchange a member makes with the team, under any process count, is
// "<Kind>/<epoch>.<k>/<rank>" for every member, since every member of a team
// makes the same sequence of exchanges with it. Keys of any other form pass
// through unchanged.
//
// Its waits poll, and call `interrupt` between polls once past the first
// few milliseconds: a rank that fails meanwhile ends them (interrupt
// throws) within seconds, not at the store's timeout.
class TeamStore : public c10d::Store {
 public:
  TeamStore(
      c10::intrusive_ptr<c10d::Store> inner,
      std::function<int64_t()> epoch,
      std::function<void()> interrupt = [] {});

  // The key `key` is stored under (exposed for tests).
  std::string translate(const std::string& key);

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(
      const std::string& key,
      const std::vector<uint8_t>& current,
      const std::vector<uint8_t>& next) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(
      const std::vector<std::string>& keys,
      const std::chrono::milliseconds& timeout) override;
  const std::chrono::milliseconds& getTimeout() const noexcept override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;

 private:
  // Where this rank stands in one kind's exchanges with the team.
  struct Count {
    int64_t epoch = -1;
    // torch's number of the exchange under way, and the team's.
    std::string process_number;
    int64_t team_number = -1;
  };

  // Shared by a store and its clones.
  struct Counts {
    std::mutex mutex;
    std::map<std::string, Count> by_kind;
  };

  TeamStore(
      c10::intrusive_ptr<c10d::Store> inner,
      std::function<int64_t()> epoch,
      std::function<void()> interrupt,
      std::shared_ptr<Counts> counts);

  std::vector<std::string> translate(const std::vector<std::string>& keys);

  c10::intrusive_ptr<c10d::Store> inner_;
  std::function<int64_t()> epoch_;
  std::function<void()> interrupt_;
  std::shared_ptr<Counts> counts_;
};

} // namespace mdfuser
