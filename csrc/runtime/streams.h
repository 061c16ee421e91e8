// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "host_ir/nodes.h"

namespace mdfuser {

// The streams a host program runs on. On a CUDA device they come from c10's
// CUDA stream pool and are ordered with events; the host never blocks. On the
// CPU, where ATen runs work synchronously, every stream is the same and
// every operation is a no-op.
class StreamSet {
 public:
  explicit StreamSet(c10::Device device);

  c10::Stream current() const;
  void setCurrent(c10::Stream stream);
  // The worker stream of loop iteration `index`; the same stream for the
  // same index, run after run.
  c10::Stream worker(int64_t index);
  // The communication stream of `index` and `lane`, from a pool of its
  // own: rings issue their point-to-point moves there, beside the workers'
  // GEMMs.
  c10::Stream communication(int64_t index, int64_t lane = 0);
  // Makes the current stream wait for the work queued so far on `stream`.
  void waitFor(c10::Stream stream);
  // Marks the start of a run on the current stream (the caller's), which
  // waitForRunStart then makes the current stream wait for: the work queued
  // before the run. In a CUDA graph capture the mark is the capture's start,
  // and a stream that waits for it joins the capture with nothing before
  // it.
  void markRunStart();
  void waitForRunStart();
  // Keeps the caching allocator from reusing `data` before the work queued
  // so far on the current stream is done, whichever stream allocated it.
  void recordUse(const c10::DataPtr& data);

 private:
  // Stream `index` of `streams`, drawn from the device's pool as needed.
  c10::Stream pooled(
      std::vector<c10::Stream>& streams, int64_t index, const char* kind);

  c10::Device device_;
  std::optional<c10::impl::VirtualGuardImpl> impl_;
  std::optional<c10::Event> event_;
  std::optional<c10::Event> run_start_;
  std::vector<c10::Stream> workers_;
  // By lane, then index: lanes other than 0 draw streams from the pool
  // only where a program uses them.
  std::array<std::vector<c10::Stream>, hir::Stream::kCommunicationLanes>
      communication_;
};

// Makes the stream current at construction current again at destruction,
// also when the program fails midway.
class StreamRestorer {
 public:
  explicit StreamRestorer(StreamSet& streams)
      : streams_(streams), saved_(streams.current()) {}
  StreamRestorer(const StreamRestorer&) = delete;
  StreamRestorer& operator=(const StreamRestorer&) = delete;
  ~StreamRestorer() {
    streams_.setCurrent(saved_);
  }

 private:
  StreamSet& streams_;
  c10::Stream saved_;
};

} // namespace mdfuser
