// SPDX-License-Identifier: MIT
#include "runtime/team_store.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "ir/errors.h"
#include "runtime/rendezvous.h"

namespace mdfuser {

TeamStore::TeamStore(
    c10::intrusive_ptr<c10d::Store> inner,
    std::function<int64_t()> epoch,
    std::function<void()> interrupt)
    : TeamStore(
          std::move(inner),
          std::move(epoch),
          std::move(interrupt),
          std::make_shared<Counts>()) {}

TeamStore::TeamStore(
    c10::intrusive_ptr<c10d::Store> inner,
    std::function<int64_t()> epoch,
    std::function<void()> interrupt,
    std::shared_ptr<Counts> counts)
    : c10d::Store(inner->getTimeout()),
      inner_(std::move(inner)),
      epoch_(std::move(epoch)),
      interrupt_(std::move(interrupt)),
      counts_(std::move(counts)) {}

std::string TeamStore::translate(const std::string& key) {
  // "<Kind>/<digits>/<rest>"
  const size_t first = key.find('/');
  if (first == std::string::npos || first == 0) {
    return key;
  }
  const size_t second = key.find('/', first + 1);
  if (second == std::string::npos || second == first + 1) {
    return key;
  }
  const std::string number = key.substr(first + 1, second - first - 1);
  if (!std::all_of(number.begin(), number.end(), [](unsigned char c) {
        return std::isdigit(c) != 0;
      })) {
    return key;
  }
  const std::string kind = key.substr(0, first);
  const int64_t epoch = epoch_();
  std::lock_guard<std::mutex> lock(counts_->mutex);
  Count& count = counts_->by_kind[kind];
  if (count.epoch != epoch) {
    count = Count{.epoch = epoch, .process_number = "", .team_number = -1};
  }
  if (count.process_number != number) {
    // The next exchange: torch's counter only grows, and all keys of one
    // exchange carry its number.
    count.process_number = number;
    ++count.team_number;
  }
  return kind + "/" + std::to_string(epoch) + "." +
         std::to_string(count.team_number) + key.substr(second);
}

std::vector<std::string> TeamStore::translate(
    const std::vector<std::string>& keys) {
  std::vector<std::string> translated;
  translated.reserve(keys.size());
  for (const std::string& key : keys) {
    translated.push_back(translate(key));
  }
  return translated;
}

c10::intrusive_ptr<c10d::Store> TeamStore::clone() {
  return c10::intrusive_ptr<TeamStore>::make(
      TeamStore(inner_->clone(), epoch_, interrupt_, counts_));
}

void TeamStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  inner_->set(translate(key), value);
}

std::vector<uint8_t> TeamStore::compareSet(
    const std::string& key,
    const std::vector<uint8_t>& current,
    const std::vector<uint8_t>& next) {
  return inner_->compareSet(translate(key), current, next);
}

std::vector<uint8_t> TeamStore::get(const std::string& key) {
  return inner_->get(translate(key));
}

int64_t TeamStore::add(const std::string& key, int64_t value) {
  return inner_->add(translate(key), value);
}

bool TeamStore::deleteKey(const std::string& key) {
  return inner_->deleteKey(translate(key));
}

bool TeamStore::check(const std::vector<std::string>& keys) {
  return inner_->check(translate(keys));
}

int64_t TeamStore::getNumKeys() {
  return inner_->getNumKeys();
}

void TeamStore::wait(const std::vector<std::string>& keys) {
  wait(keys, getTimeout());
}

void TeamStore::wait(
    const std::vector<std::string>& keys,
    const std::chrono::milliseconds& timeout) {
  const std::vector<std::string> translated = translate(keys);
  // interrupt_ reads the store too: a few times a second is enough.
  constexpr std::chrono::milliseconds kInterruptEvery{250};
  auto next_interrupt = std::chrono::steady_clock::now();
  const bool met = pollUntil(
      [&] { return inner_->check(translated); },
      timeout == kNoTimeout ? std::nullopt
                            : std::optional<std::chrono::milliseconds>(timeout),
      std::chrono::milliseconds(20),
      [&] {
        if (std::chrono::steady_clock::now() >= next_interrupt) {
          interrupt_();
          next_interrupt = std::chrono::steady_clock::now() + kInterruptEvery;
        }
      });
  if (!met) {
    std::string names;
    for (const std::string& key : translated) {
      names += (names.empty() ? "" : ", ") + key;
    }
    throw std::runtime_error(
        detail::concat("waited ", timeout.count(), " ms for the keys ", names));
  }
}

const std::chrono::milliseconds& TeamStore::getTimeout() const noexcept {
  return inner_->getTimeout();
}

void TeamStore::setTimeout(const std::chrono::milliseconds& timeout) {
  inner_->setTimeout(timeout);
}

} // namespace mdfuser
