// SPDX-License-Identifier: MIT
#include "host_ir/passes/pass_manager.h"

#include "host_ir/passes/alias_layout_ops.h"
#include "host_ir/passes/allocate_and_deallocate.h"
#include "host_ir/passes/assign_communication_streams.h"
#include "host_ir/passes/choose_allocation_layouts.h"
#include "host_ir/passes/fold_casts.h"
#include "host_ir/passes/fuse_layer_norms.h"
#include "host_ir/passes/inplace_allreduce.h"
#include "host_ir/passes/order_communication_streams.h"
#include "host_ir/passes/place_symmetric_buffers.h"
#include "host_ir/passes/ring_prologues_first.h"
#include "host_ir/verifier.h"

namespace mdfuser::hir {

void HostPassManager::run(HostIrContainer& hic) const {
  VerifyOptions verify_options;
  if (options_.verify) {
    verify(hic, verify_options);
  }
  for (const Pass& pass : passes_) {
    pass.run(hic);
    verify_options.buffers_allocated |= pass.allocates_buffers;
    if (options_.verify) {
      verify(hic, verify_options);
    }
    if (options_.dump_after_each_pass != nullptr) {
      *options_.dump_after_each_pass << "After " << pass.name << ":\n"
                                     << hic.toString();
    }
  }
}

void runHostPasses(HostIrContainer& hic, const HostPassOptions& options) {
  HostPassManager manager(options);
  if (options.fuse_layer_norms) {
    manager.add({"FuseLayerNorms", fuseLayerNorms});
  }
  manager.add({"FoldCasts", foldCasts});
  if (options.inplace_allreduce) {
    manager.add({"InplaceAllreduce", inplaceAllreduce});
  }
  if (options.alias_layout_ops) {
    manager.add({"AliasLayoutOps", aliasLayoutOps});
  }
  manager.add({"AllocateAndDeallocate", allocateAndDeallocate, true})
      .add({"ChooseAllocationLayouts", chooseAllocationLayouts})
      .add(
          {"AssignStreams",
           [schedule = options.stream_schedule](HostIrContainer& h) {
             assignStreams(h, schedule);
           }})
      .add(
          {"AssignCommunicationStreams",
           [lanes = options.communication_lanes](HostIrContainer& h) {
             assignCommunicationStreams(h, lanes);
           }})
      .add({"OrderCommunicationStreams", orderCommunicationStreams})
      .add(
          {"PlaceSymmetricBuffers",
           [symmetric = options.symmetric_memory](HostIrContainer& h) {
             placeSymmetricBuffers(h, symmetric);
           }});
  if (options.ring_prologues_first) {
    manager.add({"RingProloguesFirst", ringProloguesFirst});
  }
  manager.run(hic);
}

} // namespace mdfuser::hir
