// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "host_ir/host_ir_container.h"
#include "host_ir/passes/assign_streams.h"

namespace mdfuser::hir {

struct HostPassOptions {
  // When set, the program is printed here after every pass.
  std::ostream* dump_after_each_pass = nullptr;
  // Run the verifier after every pass.
  bool verify = true;
  // Run InplaceAllreduce.
  bool inplace_allreduce = true;
  // Run AliasLayoutOps.
  bool alias_layout_ops = true;
  // Run FuseLayerNorms.
  bool fuse_layer_norms = true;
  // Run RingProloguesFirst.
  bool ring_prologues_first = false;
  // The program runs where symmetric memory is (the CUDA backend):
  // PlaceSymmetricBuffers also places the buffers the user put there.
  bool symmetric_memory = false;
  // How AssignStreams places Stream loop iterations.
  StreamSchedule stream_schedule = StreamSchedule::kIterationPerStream;
  // How many communication streams AssignCommunicationStreams gives the
  // moves of an iteration that are outstanding at once.
  int64_t communication_lanes = 1;
};

// Runs host passes in order, verifying the program after each and dumping
// it when asked.
class HostPassManager {
 public:
  struct Pass {
    std::string name;
    std::function<void(HostIrContainer&)> run;
    // From this pass on, the verifier requires every buffer to be
    // allocated before use.
    bool allocates_buffers = false;
  };

  explicit HostPassManager(HostPassOptions options) : options_(options) {}

  HostPassManager& add(Pass pass) {
    passes_.push_back(std::move(pass));
    return *this;
  }

  void run(HostIrContainer& hic) const;

 private:
  HostPassOptions options_;
  std::vector<Pass> passes_;
};

// The host pipeline:
//   FuseLayerNorms        (unless disabled) first, on the statements lowering
//                         wrote
//   FoldCasts             after FuseLayerNorms, whose pattern ends in a cast
//   InplaceAllreduce      (unless disabled) before allocation, so that the
//                         temporaries it removes are never allocated
//   AliasLayoutOps        (unless disabled) before allocation, so that views
//                         get no buffer of their own
//   AllocateAndDeallocate
//   AssignStreams         after allocation, so that buffers allocated in a
//                         Stream loop body are allocated on its worker stream
//   AssignCommunicationStreams
//                         after AssignStreams, so that the compute stream a
//                         ring's moves come back to is the loop's worker
//   OrderCommunicationStreams
//                         after AssignCommunicationStreams, whose streams it
//                         orders
void runHostPasses(HostIrContainer& hic, const HostPassOptions& options = {});

} // namespace mdfuser::hir
