// SPDX-License-Identifier: MIT
#pragma once

// What runtime/collectives.cpp posts each collective type with (private to
// it): the Posting that checks a request and stages its buffers, and the
// rank helpers both use.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/collectives.h"

namespace mdfuser {
namespace collectives_detail {

using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

std::string listString(const std::vector<int64_t>& ranks);

// The position of `rank` in `ranks`, or -1.
int64_t indexIn(const std::vector<int64_t>& ranks, int64_t rank);

// One collective being posted on this rank: the request, this rank's place
// in it, and the staging that wait() finishes.
class Posting {
 public:
  Posting(c10d::Backend& backend, const CollectiveRequest& request)
      : backend(backend),
        request(request),
        me(indexIn(request.team, request.rank)),
        size(static_cast<int64_t>(request.team.size())),
        is_sender(indexIn(request.senders, request.rank) >= 0),
        is_receiver(indexIn(request.receivers, request.rank) >= 0) {
    checkCommon();
  }

  c10d::Backend& backend;
  const CollectiveRequest& request;
  const int64_t me;
  const int64_t size;
  const bool is_sender;
  const bool is_receiver;

  // Prefix of every message about this request.
  std::string where() const {
    return detail::concat(request.type, " on rank ", request.rank, ": ");
  }

  int teamIndex(int64_t rank) const {
    return static_cast<int>(indexIn(request.team, rank));
  }

  // senders == receivers == team, in team order.
  void expectWholeTeam() const;

  // The team is `members` plus `root`, who may or may not be one of them.
  void expectRootAnd(
      int64_t root,
      const std::vector<int64_t>& members,
      const char* what) const;

  // `whole` is `n` parts of `part`'s shape along `axis`.
  void expectParts(
      const at::Tensor& whole,
      const char* whole_name,
      const at::Tensor& part,
      const char* part_name,
      int64_t axis,
      int64_t n) const;

  // `whole` splits into `n` equal parts along `axis`.
  void expectSplits(
      const at::Tensor& whole, const char* name, int64_t axis, int64_t n) const;

  void expectSameShape() const;

  bool alone() const {
    return size == 1;
  }

  // The result of a team of one: nothing to post.
  Works local() const;

  // c10d reads contiguous buffers: `src` itself when it is one, else a
  // contiguous copy.
  at::Tensor input(const at::Tensor& src);

  // A contiguous copy of `src` that c10d may overwrite.
  at::Tensor copy(const at::Tensor& src);

  // c10d writes contiguous buffers: `dst` itself when it is one, else a
  // contiguous temporary that wait() copies into `dst`.
  at::Tensor output(const at::Tensor& dst);

  // A buffer c10d reduces in place: it starts as `in` and ends in `out`.
  at::Tensor inPlace(const at::Tensor& in, const at::Tensor& out);

  // A buffer of this collective's dtype and device whose contents nobody
  // reads.
  at::Tensor scratch(at::IntArrayRef sizes);

  PendingCollective finish(Works works);

 private:
  void checkCommon() const;

  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;
  std::vector<at::Tensor> temporaries_;
};

} // namespace collectives_detail
} // namespace mdfuser
