// SPDX-License-Identifier: MIT
#include "runtime/rendezvous.h"

#include <future>
#include <memory>
#include <stdexcept>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace mdfuser {

c10::intrusive_ptr<c10d::Store> connectStore(
    const std::string& host,
    const c10d::TCPStoreOptions& options,
    std::chrono::milliseconds timeout) {
  using Result = c10::intrusive_ptr<c10d::Store>;
  auto result = std::make_shared<std::promise<Result>>();
  std::future<Result> future = result->get_future();
  std::thread([result, host, options] {
    try {
      result->set_value(c10::make_intrusive<c10d::TCPStore>(host, options));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  if (future.wait_for(timeout) != std::future_status::ready) {
    throw std::runtime_error(
        "no store answered there (a program that is no rendezvous store may "
        "hold the port)");
  }
  return future.get();
}

bool pollUntil(
    const std::function<bool()>& ready,
    std::optional<std::chrono::milliseconds> timeout,
    std::chrono::microseconds cap,
    const std::function<void()>& on_slow) {
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(cap);
  while (!ready()) {
    if (timeout.has_value() &&
        std::chrono::steady_clock::now() - start >= *timeout) {
      return false;
    }
    backoff.pause();
    if (on_slow && backoff.slow()) {
      on_slow();
    }
  }
  return true;
}

bool arriveAndWait(
    c10d::Store& store,
    const std::string& key,
    int64_t count,
    std::chrono::milliseconds timeout,
    int64_t& arrived,
    const std::function<void()>& check) {
  arrived = store.add(key, 1);
  bool first = true;
  return pollUntil(
      [&] {
        if (!first) {
          arrived = store.add(key, 0);
        }
        first = false;
        return arrived >= count;
      },
      timeout,
      std::chrono::milliseconds(50),
      check);
}

double seconds(std::chrono::milliseconds ms) {
  return static_cast<double>(ms.count()) / 1000.0;
}

std::string messageOf(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return error->what_without_backtrace();
  }
  return e.what();
}

std::string ranksString(const std::vector<int64_t>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}

} // namespace mdfuser
