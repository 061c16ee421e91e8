// SPDX-License-Identifier: MIT
#include "runtime/grouped_mm_kernel.h"

#include <string>
#include <vector>

#include <ATen/ops/_grouped_mm.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/mm.h>

#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/kernel_buffers.h"
#include "runtime/shard_tensor.h"

namespace mdfuser {

namespace {

using Form = GroupedMmOp::Form;

// The end of each group along the ragged axis of `length` positions,
// checked: user errors name the offsets.
std::vector<int64_t> groupEnds(const at::Tensor& offsets, int64_t length) {
  const at::Tensor host = offsets.to(at::kCPU, at::kLong).contiguous();
  const int64_t* data = host.const_data_ptr<int64_t>();
  std::vector<int64_t> ends(data, data + host.numel());
  int64_t previous = 0;
  for (size_t e = 0; e < ends.size(); ++e) {
    MDF_USER_CHECK(
        ends[e] >= previous && ends[e] <= length,
        "grouped_mm: offsets must be non-decreasing ends of groups within the "
        "ragged axis of ",
        length,
        " positions, got offsets[",
        e,
        "] = ",
        ends[e],
        e == 0 ? std::string() : " after " + std::to_string(previous));
    previous = ends[e];
  }
  return ends;
}

int64_t groupStart(const std::vector<int64_t>& ends, int64_t e) {
  return e == 0 ? 0 : ends[e - 1];
}

// The groups (global indices) whose matrices this device holds: all of
// them unless the grouped operand's group axis is sharded.
std::vector<int64_t> heldGroups(
    const KernelCall& call, const TensorView* grouped, int64_t groups) {
  const std::vector<int64_t> held =
      heldIndices(grouped, 0, groups, call.device, call.extents);
  const size_t operand = grouped == call.op.input(0) ? 0 : 1;
  MDF_CHECK_EQ(
      static_cast<int64_t>(held.size()),
      call.tensors[operand].size(0),
      "groups held by ",
      grouped->toString());
  return held;
}

// [M, K] x [G, K, N] in one call where torch has a grouped GEMM for it;
// false where it refuses the operands (alignment, architecture).
bool tryTorchGroupedMm(
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor& offsets,
    at::Tensor& out) {
  if (!out.is_cuda() || a.scalar_type() != at::kBFloat16) {
    return false;
  }
  try {
    out.copy_(at::_grouped_mm(a, b, offsets));
  } catch (const c10::Error&) {
    return false;
  }
  // Rows past the last offset belong to no group: zero, as on the CPU.
  const at::Tensor rows =
      at::arange(a.size(0), offsets.options().dtype(at::kLong));
  out.masked_fill_(at::ge(rows, offsets[-1]).unsqueeze(1), 0);
  return true;
}

} // namespace

void groupedMmKernel(KernelCall& call) {
  const auto& op = static_cast<const GroupedMmOp&>(call.op);
  const at::Tensor& a = call.tensors[0];
  const at::Tensor& b = call.tensors[1];
  const at::Tensor& offsets = call.tensors[2];
  const int64_t groups = offsets.size(0);
  at::Tensor& buffer = call.outputs.at(0);

  switch (op.form()) {
    case Form::kRaggedRows: {
      // a [M, K], b [G_held, K, N] -> [M, N]
      at::Tensor out = writable(buffer, {a.size(0), b.size(2)});
      const std::vector<int64_t> held = heldGroups(call, op.b(), groups);
      if (static_cast<int64_t>(held.size()) == groups &&
          tryTorchGroupedMm(a, b, offsets, out)) {
        finish(out, buffer);
        return;
      }
      const std::vector<int64_t> ends = groupEnds(offsets, a.size(0));
      out.zero_();
      for (size_t j = 0; j < held.size(); ++j) {
        const int64_t start = groupStart(ends, held[j]);
        const int64_t rows = ends[held[j]] - start;
        if (rows > 0) {
          at::Tensor part = out.narrow(0, start, rows);
          at::mm_out(part, a.narrow(0, start, rows), b[j]);
        }
      }
      finish(out, buffer);
      return;
    }
    case Form::kRaggedCols: {
      // a [G_held, M, K], b [K, N] -> [M, N]
      at::Tensor out = writable(buffer, {a.size(1), b.size(1)});
      const std::vector<int64_t> held = heldGroups(call, op.a(), groups);
      const std::vector<int64_t> ends = groupEnds(offsets, b.size(1));
      out.zero_();
      for (size_t j = 0; j < held.size(); ++j) {
        const int64_t start = groupStart(ends, held[j]);
        const int64_t cols = ends[held[j]] - start;
        if (cols > 0) {
          out.narrow(1, start, cols)
              .copy_(at::mm(a[j], b.narrow(1, start, cols)));
        }
      }
      finish(out, buffer);
      return;
    }
    case Form::kRaggedK: {
      // a [M, K], b [K, N] -> [G, M, N]
      at::Tensor out = writable(buffer, {groups, a.size(0), b.size(1)});
      const std::vector<int64_t> ends = groupEnds(offsets, a.size(1));
      for (int64_t e = 0; e < groups; ++e) {
        const int64_t start = groupStart(ends, e);
        const int64_t k = ends[e] - start;
        at::Tensor part = out[e];
        if (k == 0) {
          part.zero_();
          continue;
        }
        at::mm_out(part, a.narrow(1, start, k), b.narrow(0, start, k));
      }
      finish(out, buffer);
      return;
    }
  }
  MDF_UNREACHABLE("unknown grouped_mm form");
}

} // namespace mdfuser
