// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/device_mesh.h"
#include "ir/dtype.h"
#include "ir/iter_domain.h"

namespace mdfuser {

// Where a tensor's buffer lives, printed after its name (T0_g___bfloat):
//  - Global ("g"): a buffer of its own, in device (or host) memory;
//  - Local ("l"): a view into another tensor's buffer (ShardByStream);
//  - Symmetric ("sym"): a buffer of its own that the user placed in
//    symmetric memory (set_memory_type). The CUDA communication backend
//    allocates it there, shared with the tensor's mesh; elsewhere (Gloo,
//    NCCL) it is an ordinary buffer;
//  - Shared, Tensor: the kernel memories of the reference system's
//    generated kernels. mdfuser runs ATen kernels on buffers of their own
//    and has neither; setMemoryType refuses them.
enum class MemoryType { Global, Local, Symmetric, Shared, Tensor };

std::string_view memoryTypeName(MemoryType type);

// A tensor in a fusion, described with global shapes. Three domains:
//  - root: only for rFactored tensors, the domain before the rFactor;
//  - logical: the tensor's axes, reductions included;
//  - loop: the logical axes after splits, where parallel types live. A
//    device-parallel loop axis shards the tensor across the mesh; a
//    stream-parallel one chunks the work along a host loop.
class TensorView : public Val {
 public:
  TensorView(
      IrContainer* container,
      std::vector<IterDomain*> logical,
      DataType dtype,
      std::vector<std::optional<bool>> contiguity = {},
      MemoryType memory_type = MemoryType::Global);

  DataType dtype() const {
    return dtype_;
  }
  MemoryType memoryType() const {
    return memory_type_;
  }
  // Whether the tensor has a buffer of its own (is no view).
  bool ownsBuffer() const {
    return memory_type_ != MemoryType::Local;
  }
  // The user's placement of the tensor's buffer: Global or Symmetric. User
  // error for the others (Local is what views are; Shared and Tensor are
  // kernel memories mdfuser has not), and once the fusion is compiled.
  void setMemoryType(MemoryType memory_type);

  bool hasRoot() const {
    return !root_.empty();
  }
  const std::vector<IterDomain*>& root() const {
    return root_;
  }
  // The root domain when there is one, the logical domain otherwise: what a
  // producer's logical domain maps to.
  const std::vector<IterDomain*>& maybeRoot() const {
    return hasRoot() ? root_ : logical_;
  }
  const std::vector<IterDomain*>& logical() const {
    return logical_;
  }
  const std::vector<IterDomain*>& loop() const {
    return loop_;
  }
  // One entry per non-reduction logical axis: whether that axis is
  // contiguous with the next, as declared by define_tensor; nullopt for
  // broadcast axes.
  const std::vector<std::optional<bool>>& contiguity() const {
    return contiguity_;
  }
  // As define_tensor's stride_order: entry i is the rank of axis i's stride,
  // the largest the outermost. Empty for row-major. mdfuser reads inputs of
  // any layout; the declaration is kept for printing and checks.
  const std::vector<int64_t>& strideOrder() const {
    return stride_order_;
  }
  void setStrideOrder(std::vector<int64_t> stride_order);
  // A 0-dimensional input that lives on the CPU next to CUDA inputs.
  bool isCpuScalar() const {
    return is_cpu_scalar_;
  }
  void setCpuScalar(bool is_cpu);
  std::vector<IterDomain*> logicalNoReductions() const;

  // Number of loop axes.
  int64_t nDims() const {
    return static_cast<int64_t>(loop_.size());
  }
  // Loop axis `axis`; negative counts from the end. User error when out of
  // range.
  IterDomain* axis(int64_t axis) const;

  // Scheduling primitives; they check their arguments (user errors) and
  // refuse a fusion that has been compiled.
  TensorView* split(int64_t axis, int64_t factor, bool inner_split = true);
  TensorView* outerSplit(int64_t axis, int64_t factor) {
    return split(axis, factor, /*inner_split=*/false);
  }
  TensorView* innerSplit(int64_t axis, int64_t factor) {
    return split(axis, factor, /*inner_split=*/true);
  }
  // An outer split whose factor, the number of parts, mdfuser chooses when
  // it compiles the fusion (Scalar::Role::kChosen): its outer part must be
  // parallelized on streams, and the count is chosen from a cost model of
  // the machine (passes/choose_stream_chunks.h).
  TensorView* outerSplitChosen(int64_t axis);
  // Swizzles loop axis `axis` with `parallel_type`, a device parallel type:
  // its index i stands for part (i + this device's index along that mesh
  // axis) mod extent (IterDomain::swizzle). The axis must be the outer part
  // of an outer split (its extent the number of parts); it is then
  // parallelized on streams, each device starting on its own part, which
  // mdfuser lowers as a ring (passes/swizzled_gathers.h).
  TensorView* swizzle1d(int64_t axis, ParallelType parallel_type);
  // Merges loop axes `outer` and `inner` (adjacent, outer first) into one.
  TensorView* merge(int64_t outer, int64_t inner);
  // Moves loop axes: old position -> new position; the others keep their
  // relative order.
  TensorView* reorder(const std::map<int64_t, int64_t>& old_to_new);
  // Parallelizes loop axis `axis` on `parallel_type`: one axis per type,
  // except that a reduction axis and an iteration axis on one device type
  // (partial sums scattered along the iteration axis) keep only the
  // iteration axis's. A broadcast axis may be parallelized (it holds one
  // element; validateSchedule refuses to split it among several devices).
  void parallelize(int64_t axis, ParallelType parallel_type);
  void setDeviceMesh(const DeviceMesh& mesh);

  bool hasDeviceMesh() const {
    return mesh_.has_value();
  }
  const std::optional<DeviceMesh>& deviceMesh() const {
    return mesh_;
  }

  // Passes rewrite domains wholesale. No checks beyond consistency.
  void setDomains(
      std::vector<IterDomain*> root,
      std::vector<IterDomain*> logical,
      std::vector<IterDomain*> loop);
  void setLoop(std::vector<IterDomain*> loop);

  std::string_view counterKey() const override {
    return "T";
  }
  // "T0_g___bfloat[iS0{i0}, iS1{8}]", followed by " (DeviceMesh{0 1})" when
  // the tensor has a mesh.
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  int64_t normalizeAxis(int64_t axis) const;
  void checkMutable() const;
  TensorView* splitBy(int64_t axis, Scalar* factor, bool inner_split);

  std::vector<IterDomain*> root_;
  std::vector<IterDomain*> logical_;
  std::vector<IterDomain*> loop_;
  std::vector<std::optional<bool>> contiguity_;
  DataType dtype_;
  MemoryType memory_type_;
  std::optional<DeviceMesh> mesh_;
  std::vector<int64_t> stride_order_;
  bool is_cpu_scalar_ = false;
};

// A new tensor with `tv`'s logical extents, iteration types (reductions
// only with `keep_reductions`), dtype and mesh, defined by nothing. With
// `with_schedule`, its loop domain is cut from its logical domain by the
// same splits and merges as `tv`'s, with the same parallel types (axes
// derived from dropped reductions are dropped).
TensorView* newTensorLike(
    const TensorView* tv, bool keep_reductions, bool with_schedule);

} // namespace mdfuser
