// SPDX-License-Identifier: MIT
//
// Waiting for a posted collective: the backend's works, then what must
// follow them on this rank.
#include "runtime/pending_collective.h"

#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace mdfuser {

PendingCollective::PendingCollective(
    std::vector<c10::intrusive_ptr<c10d::Work>> works,
    std::function<void()> epilogue)
    : works_(std::move(works)), epilogue_(std::move(epilogue)) {}

void PendingCollective::wait() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(works_);
  std::function<void()> epilogue = std::move(epilogue_);
  works_.clear();
  epilogue_ = nullptr;
  for (const c10::intrusive_ptr<c10d::Work>& work : works) {
    work->wait();
  }
  if (epilogue) {
    epilogue();
  }
}

void PendingCollective::waitInterruptibly(
    const std::function<void()>& interrupt, std::chrono::milliseconds period) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(works_);
  std::function<void()> epilogue = std::move(epilogue_);
  works_.clear();
  epilogue_ = nullptr;
  for (const c10::intrusive_ptr<c10d::Work>& work : works) {
    if (work->isCompleted()) {
      work->wait();
      continue;
    }
    // Gloo's waits cannot be cut short (a send or receive that times out
    // breaks its connection; they never report completion before their
    // wait), so a thread waits and this one watches.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([work, done] {
      try {
        work->wait();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    }).detach();
    while (finished.wait_for(period) != std::future_status::ready) {
      interrupt();
    }
    finished.get();
  }
  if (epilogue) {
    epilogue();
  }
}

} // namespace mdfuser
