// SPDX-License-Identifier: MIT
#include "host_ir/passes/choose_allocation_layouts.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

// A tensor's axes from the outermost in memory to the innermost.
using Order = std::vector<int64_t>;

Order rowMajor(size_t rank) {
  Order order(rank);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// Result `result` of an op of `type` is laid out like its operand
// `operand` (indices into outs() and tensorInputs()).
struct FollowsOperand {
  OpType type;
  size_t result;
  size_t operand;
};

// The attention kernels: flash and cuDNN return the output like the query,
// and the gradients of query, key and value like those operands (sdpfa_bwd
// takes grad_output, query, key, value, output, log_sumexp).
constexpr FollowsOperand kFollows[] = {
    {OpType::SdpaFwd, 0, 0},
    {OpType::SdpaBwd, 0, 1},
    {OpType::SdpaBwd, 1, 2},
    {OpType::SdpaBwd, 2, 3},
};

// The layout of a layout operation's result from its input's.
std::optional<Order> viewOrder(const TensorOp& op, const Order& in) {
  switch (op.type()) {
    case OpType::Slice:
      return in;
    case OpType::Permute: {
      // Output axis i is input axis dims[i].
      const std::vector<int64_t>& dims =
          static_cast<const PermuteOp&>(op).dims();
      Order out_of(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) {
        out_of[dims[i]] = static_cast<int64_t>(i);
      }
      Order out;
      for (int64_t a : in) {
        out.push_back(out_of[a]);
      }
      return out;
    }
    case OpType::Squeeze: {
      const std::vector<bool>& removed =
          static_cast<const SqueezeOp&>(op).isRemoved();
      Order out_of(removed.size(), -1);
      int64_t next = 0;
      for (size_t a = 0; a < removed.size(); ++a) {
        if (!removed[a]) {
          out_of[a] = next++;
        }
      }
      Order out;
      for (int64_t a : in) {
        if (out_of[a] >= 0) {
          out.push_back(out_of[a]);
        }
      }
      return out;
    }
    case OpType::Broadcast: {
      // New axes have extent 1: innermost, where they cost nothing.
      const std::vector<bool>& is_new =
          static_cast<const BroadcastOp&>(op).isNew();
      Order out_of;
      Order added;
      for (size_t a = 0; a < is_new.size(); ++a) {
        (is_new[a] ? added : out_of).push_back(static_cast<int64_t>(a));
      }
      Order out;
      for (int64_t a : in) {
        out.push_back(out_of[a]);
      }
      out.insert(out.end(), added.begin(), added.end());
      return out;
    }
    case OpType::Reshape: {
      // Each group's input axes must lie next to each other in memory, in
      // order; its output axes then take their place. Groups without input
      // axes add axes of extent 1, innermost.
      Order out;
      Order added;
      const auto& groups = static_cast<const ReshapeOp&>(op).groups();
      std::vector<const ReshapeOp::Group*> group_of(in.size(), nullptr);
      for (const ReshapeOp::Group& g : groups) {
        for (int64_t a = g.in_begin; a < g.in_end; ++a) {
          group_of[a] = &g;
        }
        if (g.in_begin == g.in_end) {
          for (int64_t a = g.out_begin; a < g.out_end; ++a) {
            added.push_back(a);
          }
        }
      }
      for (size_t i = 0; i < in.size();) {
        const ReshapeOp::Group* g = group_of[in[i]];
        if (g == nullptr || in[i] != g->in_begin) {
          return std::nullopt;
        }
        for (int64_t a = g->in_begin; a < g->in_end; ++a, ++i) {
          if (i >= in.size() || in[i] != a) {
            return std::nullopt;
          }
        }
        for (int64_t a = g->out_begin; a < g->out_end; ++a) {
          out.push_back(a);
        }
      }
      out.insert(out.end(), added.begin(), added.end());
      return out;
    }
    default:
      return std::nullopt;
  }
}

// The axis along which ShardByStream views cut each buffer.
void collectStreamCuts(
    const Scope& scope,
    std::unordered_map<const TensorView*, int64_t>& cut_axis) {
  forEachExpr(scope, [&](const Expr* e) {
    if (const auto* chunk = dynamic_cast<const ShardByStream*>(e)) {
      cut_axis.emplace(chunk->in(), chunk->axis());
    }
  });
}

class LayoutChooser {
 public:
  explicit LayoutChooser(HostIrContainer& hic) {
    for (const TensorView* tv : hic.inputs()) {
      order_[tv] = orderOf(tv->logicalNoReductions().size(), tv->strideOrder());
    }
    collectStreamCuts(hic.topLevel(), stream_cut_);
  }

  void run(Scope& scope) {
    forEachExpr(scope, [this](Expr* e) {
      if (auto* alloc = dynamic_cast<Allocate*>(e)) {
        allocations_[alloc->buffer()] = alloc;
        chunkAxisOutermost(*alloc);
        order_[alloc->buffer()] = fromStrideOrder(*alloc);
      } else if (const auto* part = dynamic_cast<const ShardView*>(e)) {
        source_[part->out()] = part->in();
        copyOrder(part->in(), part->out());
      } else if (const auto* view = dynamic_cast<const View*>(e)) {
        auto it = order_.find(view->in());
        if (it != order_.end()) {
          if (std::optional<Order> o = viewOrder(*view->op(), it->second)) {
            order_[view->out()] = std::move(*o);
          }
        }
      } else if (const auto* op = dynamic_cast<const TensorOp*>(e)) {
        follow(*op);
      }
    });
  }

 private:
  // The axes from the outermost in memory, for stride ranks as
  // define_tensor's stride_order gives them (row-major when empty).
  static Order orderOf(size_t rank, const std::vector<int64_t>& ranks) {
    Order order = rowMajor(rank);
    if (ranks.size() == rank) {
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return ranks[a] > ranks[b];
      });
    }
    return order;
  }

  static Order fromStrideOrder(const Allocate& alloc) {
    return orderOf(alloc.shape().size(), alloc.strideOrder());
  }

  // A row-major buffer that a Stream loop cuts along an inner axis (the
  // batch of [seq, batch, e]) gets that axis outermost, the others in their
  // order: each chunk is then one contiguous block that kernels write and
  // read in place, where a row-major one is strided and copied.
  void chunkAxisOutermost(Allocate& alloc) {
    auto it = stream_cut_.find(alloc.buffer());
    const auto rank = static_cast<int64_t>(alloc.shape().size());
    if (it == stream_cut_.end() || it->second <= 0 || it->second >= rank ||
        !alloc.strideOrder().empty()) {
      return;
    }
    Order order = {it->second};
    for (int64_t a = 0; a < rank; ++a) {
      if (a != it->second) {
        order.push_back(a);
      }
    }
    std::vector<int64_t> ranks(rank);
    for (int64_t i = 0; i < rank; ++i) {
      ranks[order[i]] = rank - 1 - i;
    }
    alloc.setStrideOrder(std::move(ranks));
  }

  void copyOrder(const TensorView* from, const TensorView* to) {
    auto it = order_.find(from);
    if (it != order_.end()) {
      order_[to] = it->second;
    }
  }

  // Lays out each result of `op` that follows an operand like it, when
  // the result's buffer is allocated by the program and still row-major.
  void follow(const TensorOp& op) {
    for (const FollowsOperand& rule : kFollows) {
      if (rule.type != op.type()) {
        continue;
      }
      const TensorView* operand = op.tensorInputs().at(rule.operand);
      const TensorView* result = op.outs().at(rule.result);
      auto it = order_.find(operand);
      if (it == order_.end() || it->second == rowMajor(it->second.size())) {
        continue;
      }
      const Order order = it->second;
      // The buffer the result is written into, through its chunk views.
      const TensorView* buffer = result;
      while (source_.count(buffer) != 0) {
        buffer = source_.at(buffer);
      }
      auto alloc = allocations_.find(buffer);
      if (alloc == allocations_.end() ||
          !alloc->second->strideOrder().empty() ||
          alloc->second->shape().size() != order.size()) {
        continue;
      }
      std::vector<int64_t> ranks(order.size());
      for (size_t i = 0; i < order.size(); ++i) {
        ranks[order[i]] = static_cast<int64_t>(order.size() - 1 - i);
      }
      alloc->second->setStrideOrder(std::move(ranks));
      order_[buffer] = order;
      order_[result] = order;
    }
  }

  // What is known of each tensor's layout.
  std::unordered_map<const TensorView*, Order> order_;
  std::unordered_map<const TensorView*, Allocate*> allocations_;
  // Chunk views (ShardByStream, RingChunk) to the tensor they cut.
  std::unordered_map<const TensorView*, const TensorView*> source_;
  // Buffers cut by ShardByStream views, with the axis cut.
  std::unordered_map<const TensorView*, int64_t> stream_cut_;
};

} // namespace

void chooseAllocationLayouts(HostIrContainer& hic) {
  LayoutChooser(hic).run(hic.topLevel());
}

} // namespace mdfuser::hir
