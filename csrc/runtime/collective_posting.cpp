// SPDX-License-Identifier: MIT
//
// A collective being posted on this rank: the checks of its request, and
// the staging through contiguous buffers that wait() finishes.
#include "runtime/collective_posting.h"

#include <algorithm>

#include <ATen/ops/empty.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace mdfuser {
namespace collectives_detail {

std::string listString(const std::vector<int64_t>& ranks) {
  std::string s = "(";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i > 0 ? " " : "") + std::to_string(ranks[i]);
  }
  return s + ")";
}

int64_t indexIn(const std::vector<int64_t>& ranks, int64_t rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : it - ranks.begin();
}

void Posting::expectWholeTeam() const {
  MDF_CHECK(
      request.senders == request.team && request.receivers == request.team,
      where(),
      "expected senders ",
      listString(request.senders),
      " and receivers ",
      listString(request.receivers),
      " to be the team ",
      listString(request.team));
}

void Posting::expectRootAnd(
    int64_t root, const std::vector<int64_t>& members, const char* what) const {
  MDF_CHECK(!members.empty(), where(), "no ", what, " (root ", root, ")");
  for (int64_t rank : request.team) {
    MDF_CHECK(
        rank == root || indexIn(members, rank) >= 0,
        where(),
        "team member ",
        rank,
        " of ",
        listString(request.team),
        " is neither the root ",
        root,
        " nor one of the ",
        what,
        " ",
        listString(members));
  }
}

void Posting::expectParts(
    const at::Tensor& whole,
    const char* whole_name,
    const at::Tensor& part,
    const char* part_name,
    int64_t axis,
    int64_t n) const {
  bool ok = whole.dim() == part.dim() && axis >= 0 && axis < whole.dim();
  for (int64_t d = 0; ok && d < whole.dim(); ++d) {
    ok = whole.size(d) == (d == axis ? n : 1) * part.size(d);
  }
  MDF_CHECK(
      ok,
      where(),
      whole_name,
      " has shape ",
      whole.sizes(),
      " and ",
      part_name,
      " has shape ",
      part.sizes(),
      "; expected ",
      whole_name,
      " to be ",
      n,
      " parts of ",
      part_name,
      " along axis ",
      axis);
}

void Posting::expectSplits(
    const at::Tensor& whole, const char* name, int64_t axis, int64_t n) const {
  MDF_CHECK(
      axis >= 0 && axis < whole.dim() && whole.size(axis) % n == 0,
      where(),
      name,
      " has shape ",
      whole.sizes(),
      "; expected axis ",
      axis,
      " to split into ",
      n,
      " equal parts");
}

void Posting::expectSameShape() const {
  MDF_CHECK(
      request.in.sizes() == request.out.sizes(),
      where(),
      "in has shape ",
      request.in.sizes(),
      " but out has shape ",
      request.out.sizes());
}

Works Posting::local() const {
  if (request.in.defined() && request.out.defined() &&
      !request.out.is_same(request.in)) {
    request.out.copy_(request.in);
  }
  return {};
}

at::Tensor Posting::input(const at::Tensor& src) {
  if (src.is_contiguous()) {
    return src;
  }
  at::Tensor copy = src.contiguous();
  temporaries_.push_back(copy);
  return copy;
}

at::Tensor Posting::copy(const at::Tensor& src) {
  at::Tensor copy = src.clone(at::MemoryFormat::Contiguous);
  temporaries_.push_back(copy);
  return copy;
}

at::Tensor Posting::output(const at::Tensor& dst) {
  if (dst.is_contiguous()) {
    return dst;
  }
  at::Tensor temporary = at::empty(dst.sizes(), dst.options());
  temporaries_.push_back(temporary);
  copies_.emplace_back(dst, temporary);
  return temporary;
}

at::Tensor Posting::inPlace(const at::Tensor& in, const at::Tensor& out) {
  at::Tensor buffer = output(out);
  if (!buffer.is_same(in)) {
    buffer.copy_(in);
  }
  return buffer;
}

at::Tensor Posting::scratch(at::IntArrayRef sizes) {
  const at::Tensor& like = request.in.defined() ? request.in : request.out;
  at::Tensor temporary = at::empty(sizes, like.options());
  temporaries_.push_back(temporary);
  return temporary;
}

PendingCollective Posting::finish(Works works) {
  if (copies_.empty() && temporaries_.empty()) {
    return PendingCollective(std::move(works), nullptr);
  }
  // The works' wait() ordered the current stream after the collective:
  // the copies follow it there, and the temporaries are kept from reuse
  // until that stream is past them (posting may have used another).
  return PendingCollective(
      std::move(works),
      [copies = std::move(copies_), temporaries = std::move(temporaries_)] {
        for (const auto& [dst, src] : copies) {
          dst.copy_(src);
        }
        for (const at::Tensor& temporary : temporaries) {
          if (!temporary.device().is_cpu()) {
            c10::impl::VirtualGuardImpl impl(temporary.device().type());
            temporary.record_stream(impl.getStream(temporary.device()));
          }
        }
      });
}

void Posting::checkCommon() const {
  MDF_CHECK(
      me >= 0,
      where(),
      "the rank is not in the team ",
      listString(request.team));
  MDF_CHECK(
      backend.getSize() == size && backend.getRank() == me,
      where(),
      "the backend is rank ",
      backend.getRank(),
      " of ",
      backend.getSize(),
      ", not rank ",
      me,
      " of the team ",
      listString(request.team));
  for (const std::vector<int64_t>* ranks :
       {&request.senders, &request.receivers}) {
    for (int64_t rank : *ranks) {
      MDF_CHECK(
          indexIn(request.team, rank) >= 0,
          where(),
          "sender or receiver ",
          rank,
          " is not in the team ",
          listString(request.team));
    }
  }
  MDF_CHECK(
      request.in.defined() == is_sender,
      where(),
      is_sender ? "a sender needs" : "only a sender has",
      " an input buffer");
  MDF_CHECK(
      request.out.defined() == is_receiver,
      where(),
      is_receiver ? "a receiver needs" : "only a receiver has",
      " an output buffer");
  if (is_sender && is_receiver) {
    MDF_CHECK(
        request.in.dtype() == request.out.dtype() &&
            request.in.device() == request.out.device(),
        where(),
        "in is ",
        request.in.dtype(),
        " on ",
        request.in.device(),
        " but out is ",
        request.out.dtype(),
        " on ",
        request.out.device());
  }
  MDF_CHECK(
      request.op == c10d::ReduceOp::SUM || request.op == c10d::ReduceOp::MAX ||
          request.op == c10d::ReduceOp::MIN,
      where(),
      "reduction ",
      static_cast<int>(request.op),
      " is none of SUM, MAX, MIN");
}

} // namespace collectives_detail
} // namespace mdfuser
