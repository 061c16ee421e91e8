// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10d {
class Store;
} // namespace c10d

// Where the ranks of a job tell each other of failures: records in the
// rendezvous store, each an error message under a key of its own, beside a
// counter that makes "did any rank post one" a single read.
//
//   exited/<rank>     the rank is about to exit on an error its program did
//                     not catch: the job is over for its peers (counter
//                     "exited")
//   failure/<i>       the job's i-th failure: a run failed on one rank, or
//                     its program reported a failure; the communication of
//                     every rank stops until they recover together
//                     (counter "failures"; doc/runtime.md#failures)
//   knows/<rank>      how many failures the rank knows of: its next run
//                     raises them. Until then nothing releases its GPU
//                     waits from outside (CudaBackend::releaser): a run it
//                     does not know was released would hand back wrong
//                     outputs without an error.
//
// Every function here throws what the store throws, except the posts.
namespace mdfuser {

struct PeerFailure {
  int64_t rank = 0;
  std::string error;
};

// Posts `error` as `rank`'s exit. Never throws; false when the store is
// gone.
bool postExit(c10d::Store& store, int64_t rank, const std::string& error);

// Posts `error` as a failure of `rank`. Returns how many failures the job
// has posted, this one included (at least), or 0 when the store is gone.
// Never throws.
int64_t postFailure(c10d::Store& store, int64_t rank, const std::string& error);

// Says that `rank` knows of `failures` failures (or more, said before).
// Never throws.
void postKnown(c10d::Store& store, int64_t rank, int64_t failures);

// How many failures `rank` has said it knows of: one read.
int64_t knownBy(c10d::Store& store, int64_t rank);

// Of `ranks` (`me` aside), the first that exited on an error; one read of a
// counter while none did.
std::optional<PeerFailure> exitedAmong(
    c10d::Store& store, const std::vector<int64_t>& ranks, int64_t me);

// How many failures the job has posted: one read.
int64_t failureCount(c10d::Store& store);

// The failures posted from the `first`-th on, in the order they were
// numbered (a record being written is left out).
std::vector<PeerFailure> failuresSince(c10d::Store& store, int64_t first);

// "rank 1 exited on an error: ..." and "rank 1 failed: ...; rank 3
// failed: ...".
std::string describeExit(const PeerFailure& exit);
std::string describeFailures(const std::vector<PeerFailure>& failures);

} // namespace mdfuser
