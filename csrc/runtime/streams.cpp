// SPDX-License-Identifier: MIT
#include "runtime/streams.h"

#include "ir/errors.h"

namespace mdfuser {

StreamSet::StreamSet(c10::Device device) : device_(device) {
  if (device.is_cuda()) {
    impl_.emplace(device.type());
    event_.emplace(device.type());
    run_start_.emplace(device.type());
  }
}

c10::Stream StreamSet::current() const {
  if (!impl_) {
    return c10::Stream(c10::Stream::DEFAULT, device_);
  }
  return impl_->getStream(device_);
}

void StreamSet::setCurrent(c10::Stream stream) {
  if (impl_) {
    impl_->exchangeStream(stream);
  }
}

c10::Stream StreamSet::pooled(
    std::vector<c10::Stream>& streams, int64_t index, const char* kind) {
  MDF_CHECK(index >= 0, "negative ", kind, " stream index ", index);
  if (!impl_) {
    return current();
  }
  while (static_cast<int64_t>(streams.size()) <= index) {
    streams.push_back(impl_->getStreamFromGlobalPool(device_));
  }
  return streams[index];
}

c10::Stream StreamSet::worker(int64_t index) {
  return pooled(workers_, index, "worker");
}

c10::Stream StreamSet::communication(int64_t index, int64_t lane) {
  MDF_CHECK(
      lane >= 0 && lane < hir::Stream::kCommunicationLanes,
      "communication lane ",
      lane);
  return pooled(
      communication_[static_cast<size_t>(lane)], index, "communication");
}

void StreamSet::markRunStart() {
  if (impl_) {
    run_start_->record(current());
  }
}

void StreamSet::waitForRunStart() {
  if (impl_) {
    run_start_->block(current());
  }
}

void StreamSet::recordUse(const c10::DataPtr& data) {
  if (impl_) {
    impl_->recordDataPtrOnStream(data, current());
  }
}

void StreamSet::waitFor(c10::Stream stream) {
  if (!impl_) {
    return;
  }
  const c10::Stream now = current();
  if (stream == now) {
    return;
  }
  // Recording and blocking back to back lets one event serve every wait:
  // the wait captures the event's state when it is enqueued.
  event_->record(stream);
  event_->block(now);
}

} // namespace mdfuser
