// SPDX-License-Identifier: MIT
#include "runtime/streams.h"

#include "ir/errors.h"

namespace mdfuser {

StreamSet::StreamSet(c10::Device device) : device_(device) {
  if (device.is_cuda()) {
    impl_.emplace(device.type());
    event_.emplace(device.type());
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

c10::Stream StreamSet::worker(int64_t index) {
  MDF_CHECK(index >= 0, "negative worker stream index ", index);
  if (!impl_) {
    return current();
  }
  while (static_cast<int64_t>(workers_.size()) <= index) {
    workers_.push_back(impl_->getStreamFromGlobalPool(device_));
  }
  return workers_[index];
}

c10::Stream StreamSet::communication(int64_t index) {
  MDF_CHECK(index >= 0, "negative communication stream index ", index);
  if (!impl_) {
    return current();
  }
  while (static_cast<int64_t>(communication_.size()) <= index) {
    communication_.push_back(impl_->getStreamFromGlobalPool(device_));
  }
  return communication_[index];
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
