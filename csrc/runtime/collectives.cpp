// SPDX-License-Identifier: MIT
#include "runtime/collectives.h"

#include <algorithm>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"

namespace mdfuser {

PendingCollective::PendingCollective(
    std::vector<c10::intrusive_ptr<c10d::Work>> works,
    std::function<void()> epilogue)
    : works_(std::move(works)), epilogue_(std::move(epilogue)) {}

void PendingCollective::wait() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(works_);
  std::function<void()> epilogue = std::move(epilogue_);
  works_.clear();
  epilogue_ = nullptr;
  for (const c10::intrusive_ptr<c10d::Work>& work : works) {
    work->wait();
  }
  if (epilogue) {
    epilogue();
  }
}

void PendingCollective::waitInterruptibly(
    const std::function<void()>& interrupt, std::chrono::milliseconds period) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(works_);
  std::function<void()> epilogue = std::move(epilogue_);
  works_.clear();
  epilogue_ = nullptr;
  for (const c10::intrusive_ptr<c10d::Work>& work : works) {
    if (work->isCompleted()) {
      work->wait();
      continue;
    }
    // Gloo's waits cannot be cut short (a send or receive that times out
    // breaks its connection; they never report completion before their
    // wait), so a thread waits and this one watches.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([work, done] {
      try {
        work->wait();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    }).detach();
    while (finished.wait_for(period) != std::future_status::ready) {
      interrupt();
    }
    finished.get();
  }
  if (epilogue) {
    epilogue();
  }
}

// Both backends get the same primitives: Gloo in torch 2.11 implements
// every one used here (the base variants of reduce-scatter and allgather
// included) for SUM, MAX and MIN, which test_collectives checks. The CPU
// path differs only where Gloo writes into a buffer it should just read (see
// postReduce). NCCL needs contiguous buffers, so both backends get them:
// non-contiguous buffers and parts along an inner axis are staged.
namespace {

using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

std::string listString(const std::vector<int64_t>& ranks) {
  std::string s = "(";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i > 0 ? " " : "") + std::to_string(ranks[i]);
  }
  return s + ")";
}

// The position of `rank` in `ranks`, or -1.
int64_t indexIn(const std::vector<int64_t>& ranks, int64_t rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : it - ranks.begin();
}

// `t` as its `n` equal parts along `axis`, stacked: [n, ...part...]. A view.
at::Tensor partsOf(const at::Tensor& t, int64_t axis, int64_t n) {
  return t.unflatten(axis, {n, t.size(axis) / n}).movedim(axis, 0);
}

// c10d buffers are passed flat so that every backend splits them the same
// way (Gloo's base variants chunk along the outermost axis and compare
// shapes; NCCL only counts elements).
at::Tensor flat(const at::Tensor& contiguous) {
  return contiguous.view({-1});
}

// What `op` leaves unchanged: the contribution of a root that sends nothing.
c10::Scalar identity(c10d::ReduceOp::RedOpType op, at::ScalarType dtype) {
  if (op == c10d::ReduceOp::SUM) {
    return 0;
  }
  const bool max = op == c10d::ReduceOp::MAX;
  if (at::isFloatingType(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    return max ? -inf : inf;
  }
  if (dtype == at::kBool) {
    return !max;
  }
  c10::Scalar result;
  AT_DISPATCH_INTEGRAL_TYPES(dtype, "identity", [&] {
    result = max ? std::numeric_limits<scalar_t>::lowest()
                 : std::numeric_limits<scalar_t>::max();
  });
  return result;
}

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
  void expectWholeTeam() const {
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

  // The team is `members` plus `root`, who may or may not be one of them.
  void expectRootAnd(
      int64_t root,
      const std::vector<int64_t>& members,
      const char* what) const {
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

  // `whole` is `n` parts of `part`'s shape along `axis`.
  void expectParts(
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

  // `whole` splits into `n` equal parts along `axis`.
  void expectSplits(
      const at::Tensor& whole,
      const char* name,
      int64_t axis,
      int64_t n) const {
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

  void expectSameShape() const {
    MDF_CHECK(
        request.in.sizes() == request.out.sizes(),
        where(),
        "in has shape ",
        request.in.sizes(),
        " but out has shape ",
        request.out.sizes());
  }

  bool alone() const {
    return size == 1;
  }

  // The result of a team of one: nothing to post.
  Works local() const {
    if (request.in.defined() && request.out.defined() &&
        !request.out.is_same(request.in)) {
      request.out.copy_(request.in);
    }
    return {};
  }

  // c10d reads contiguous buffers: `src` itself when it is one, else a
  // contiguous copy.
  at::Tensor input(const at::Tensor& src) {
    if (src.is_contiguous()) {
      return src;
    }
    at::Tensor copy = src.contiguous();
    temporaries_.push_back(copy);
    return copy;
  }

  // A contiguous copy of `src` that c10d may overwrite.
  at::Tensor copy(const at::Tensor& src) {
    at::Tensor copy = src.clone(at::MemoryFormat::Contiguous);
    temporaries_.push_back(copy);
    return copy;
  }

  // c10d writes contiguous buffers: `dst` itself when it is one, else a
  // contiguous temporary that wait() copies into `dst`.
  at::Tensor output(const at::Tensor& dst) {
    if (dst.is_contiguous()) {
      return dst;
    }
    at::Tensor temporary = at::empty(dst.sizes(), dst.options());
    temporaries_.push_back(temporary);
    copies_.emplace_back(dst, temporary);
    return temporary;
  }

  // A buffer c10d reduces in place: it starts as `in` and ends in `out`.
  at::Tensor inPlace(const at::Tensor& in, const at::Tensor& out) {
    at::Tensor buffer = output(out);
    if (!buffer.is_same(in)) {
      buffer.copy_(in);
    }
    return buffer;
  }

  // A buffer of this collective's dtype and device whose contents nobody
  // reads.
  at::Tensor scratch(at::IntArrayRef sizes) {
    const at::Tensor& like = request.in.defined() ? request.in : request.out;
    at::Tensor temporary = at::empty(sizes, like.options());
    temporaries_.push_back(temporary);
    return temporary;
  }

  PendingCollective finish(Works works) {
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

 private:
  void checkCommon() const {
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
        request.op == c10d::ReduceOp::SUM ||
            request.op == c10d::ReduceOp::MAX ||
            request.op == c10d::ReduceOp::MIN,
        where(),
        "reduction ",
        static_cast<int>(request.op),
        " is none of SUM, MAX, MIN");
  }

  std::vector<std::pair<at::Tensor, at::Tensor>> copies_;
  std::vector<at::Tensor> temporaries_;
};

Works postAllreduce(Posting& p) {
  p.expectWholeTeam();
  p.expectSameShape();
  if (p.alone()) {
    return p.local();
  }
  std::vector<at::Tensor> buffers = {p.inPlace(p.request.in, p.request.out)};
  c10d::AllreduceOptions options;
  options.reduceOp = p.request.op;
  return {p.backend.allreduce(buffers, options)};
}

Works postReduceScatter(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  p.expectParts(r.in, "in", r.out, "out", r.axis, p.size);
  if (p.alone()) {
    return p.local();
  }
  // c10d sends the i-th slice of the flat input to team index i.
  at::Tensor in = flat(p.input(partsOf(r.in, r.axis, p.size)));
  at::Tensor out = flat(p.output(r.out));
  c10d::ReduceScatterOptions options;
  options.reduceOp = r.op;
  return {p.backend._reduce_scatter_base(out, in, options)};
}

Works postAllgather(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  p.expectParts(r.out, "out", r.in, "in", r.axis, p.size);
  if (p.alone()) {
    return p.local();
  }
  at::Tensor in = flat(p.input(r.in));
  at::Tensor out = flat(p.output(partsOf(r.out, r.axis, p.size)));
  return {p.backend._allgather_base(out, in)};
}

Works postAllToAll(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  MDF_CHECK(
      r.axis != r.out_axis, p.where(), "axis and out_axis are both ", r.axis);
  // in and out are both n parts of one block: in along axis, out along
  // out_axis.
  p.expectSplits(r.in, "in", r.out_axis, p.size);
  p.expectParts(
      r.out,
      "out",
      partsOf(r.in, r.out_axis, p.size).select(0, 0),
      "a part of in along out_axis",
      r.axis,
      p.size);
  if (p.alone()) {
    return p.local();
  }
  // Part j of in along out_axis goes to team index j, whose part of out
  // along axis it becomes.
  at::Tensor in = flat(p.input(partsOf(r.in, r.out_axis, p.size)));
  at::Tensor out = flat(p.output(partsOf(r.out, r.axis, p.size)));
  std::vector<int64_t> equal_splits;
  return {p.backend.alltoall_base(out, in, equal_splits, equal_splits)};
}

Works postBroadcast(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.senders.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.senders[0];
  p.expectRootAnd(root, r.receivers, "receivers");
  if (p.is_sender && p.is_receiver) {
    p.expectSameShape();
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::BroadcastOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<at::Tensor> buffers;
  if (p.is_sender) {
    // The root broadcasts from its input (c10d leaves it unchanged) and, when
    // it is also a receiver, has its result at hand.
    buffers = {p.input(r.in)};
    if (p.is_receiver && !r.out.is_same(r.in)) {
      r.out.copy_(r.in);
    }
  } else {
    buffers = {p.output(r.out)};
  }
  return {p.backend.broadcast(buffers, options)};
}

Works postScatter(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.senders.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.senders[0];
  p.expectRootAnd(root, r.receivers, "receivers");
  const auto n = static_cast<int64_t>(r.receivers.size());
  if (p.is_sender) {
    p.expectSplits(r.in, "in", r.axis, n);
  }
  if (p.is_sender && p.is_receiver) {
    p.expectParts(r.in, "in", r.out, "out", r.axis, n);
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::ScatterOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<at::Tensor> outputs;
  if (p.is_sender) {
    const at::Tensor parts = p.input(partsOf(r.in, r.axis, n));
    // c10d scatters to the whole team: a root outside the receivers sends
    // itself a dummy part (part 0) into scratch.
    inputs.emplace_back();
    for (int64_t rank : r.team) {
      inputs[0].push_back(
          parts[std::max<int64_t>(indexIn(r.receivers, rank), 0)]);
    }
    outputs = {p.is_receiver ? p.output(r.out) : p.scratch(parts[0].sizes())};
  } else {
    outputs = {p.output(r.out)};
  }
  return {p.backend.scatter(outputs, inputs, options)};
}

Works postGather(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.receivers.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.receivers[0];
  p.expectRootAnd(root, r.senders, "senders");
  const auto m = static_cast<int64_t>(r.senders.size());
  if (p.is_receiver) {
    p.expectSplits(r.out, "out", r.axis, m);
  }
  if (p.is_sender && p.is_receiver) {
    p.expectParts(r.out, "out", r.in, "in", r.axis, m);
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::GatherOptions options;
  options.rootRank = p.teamIndex(root);
  std::vector<std::vector<at::Tensor>> outputs;
  std::vector<at::Tensor> inputs;
  if (p.is_receiver) {
    const at::Tensor parts = p.output(partsOf(r.out, r.axis, m));
    // c10d gathers from the whole team: a root outside the senders
    // contributes a dummy part, which it drops.
    outputs.emplace_back();
    for (int64_t rank : r.team) {
      const int64_t i = indexIn(r.senders, rank);
      outputs[0].push_back(i >= 0 ? parts[i] : p.scratch(parts[0].sizes()));
    }
    inputs = {p.is_sender ? p.input(r.in) : p.scratch(parts[0].sizes())};
  } else {
    inputs = {p.input(r.in)};
  }
  return {p.backend.gather(outputs, inputs, options)};
}

Works postReduce(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK_EQ(r.receivers.size(), 1u, p.where(), "expected one root");
  const int64_t root = r.receivers[0];
  p.expectRootAnd(root, r.senders, "senders");
  if (p.is_sender && p.is_receiver) {
    p.expectSameShape();
  }
  if (p.alone()) {
    return p.local();
  }
  c10d::ReduceOptions options;
  options.rootRank = p.teamIndex(root);
  options.reduceOp = r.op;
  std::vector<at::Tensor> buffers;
  if (p.is_receiver && p.is_sender) {
    buffers = {p.inPlace(r.in, r.out)};
  } else if (p.is_receiver) {
    // A root outside the senders contributes the identity of the op.
    buffers = {p.output(r.out).fill_(identity(r.op, r.out.scalar_type()))};
  } else if (p.backend.getBackendName() == "gloo") {
    // Gloo's reduce (torch 2.11) leaves partial results in the buffers of
    // the other ranks; this sender reduces a copy to keep its input intact.
    // NCCL only reads them.
    buffers = {p.copy(r.in)};
  } else {
    buffers = {p.input(r.in)};
  }
  return {p.backend.reduce(buffers, options)};
}

Works postSendRecv(Posting& p) {
  const CollectiveRequest& r = p.request;
  MDF_CHECK(
      r.senders.size() == 1 && r.receivers.size() == 1 &&
          r.senders[0] != r.receivers[0],
      p.where(),
      "expected one sender and one other receiver, got senders ",
      listString(r.senders),
      " and receivers ",
      listString(r.receivers));
  constexpr int kTag = 0;
  if (p.is_sender) {
    std::vector<at::Tensor> buffers = {p.input(r.in)};
    return {p.backend.send(buffers, p.teamIndex(r.receivers[0]), kTag)};
  }
  if (p.is_receiver) {
    std::vector<at::Tensor> buffers = {p.output(r.out)};
    return {p.backend.recv(buffers, p.teamIndex(r.senders[0]), kTag)};
  }
  // A team member between neither: nothing to do.
  return {};
}

// Point to point, both directions posted together. NCCL runs them as one
// group, so that no member's send waits for a receive queued behind it;
// Gloo's send does not wait for the receiver.
Works postCollectivePermute(Posting& p) {
  const CollectiveRequest& r = p.request;
  p.expectWholeTeam();
  MDF_CHECK(
      r.in.dtype() == r.out.dtype(),
      p.where(),
      "in is ",
      r.in.dtype(),
      " but out is ",
      r.out.dtype());
  if (p.alone()) {
    MDF_CHECK(
        r.in.sizes() == r.out.sizes(),
        p.where(),
        "a team of one receives its own in, of shape ",
        r.in.sizes(),
        ", into out of shape ",
        r.out.sizes());
    return p.local();
  }
  constexpr int kTag = 1;
  MDF_CHECK(
      r.shift >= 1 && r.shift < p.size,
      p.where(),
      "a team of ",
      p.size,
      " shifts by 1 to ",
      p.size - 1,
      " places, not ",
      r.shift);
  const int next = static_cast<int>((p.me + r.shift) % p.size);
  const int previous = static_cast<int>((p.me + p.size - r.shift) % p.size);
  std::vector<at::Tensor> send = {p.input(r.in)};
  std::vector<at::Tensor> recv = {p.output(r.out)};
  if (p.backend.getBackendName() == "nccl") {
    p.backend.startCoalescing();
    p.backend.send(send, next, kTag);
    p.backend.recv(recv, previous, kTag);
    return {p.backend.endCoalescing()};
  }
  return {
      p.backend.send(send, next, kTag), p.backend.recv(recv, previous, kTag)};
}

Works post(Posting& p) {
  switch (p.request.type) {
    case CommunicationType::Allreduce:
      return postAllreduce(p);
    case CommunicationType::ReduceScatter:
      return postReduceScatter(p);
    case CommunicationType::Allgather:
      return postAllgather(p);
    case CommunicationType::AllToAll:
      return postAllToAll(p);
    case CommunicationType::Broadcast:
      return postBroadcast(p);
    case CommunicationType::Scatter:
      return postScatter(p);
    case CommunicationType::Gather:
      return postGather(p);
    case CommunicationType::Reduce:
      return postReduce(p);
    case CommunicationType::SendRecv:
      return postSendRecv(p);
    case CommunicationType::CollectivePermute:
      return postCollectivePermute(p);
  }
  MDF_UNREACHABLE(
      "unknown CommunicationType ", static_cast<int>(p.request.type));
}

} // namespace

PendingCollective postCollective(
    c10d::Backend& backend, const CollectiveRequest& request) {
  Posting posting(backend, request);
  Works works = post(posting);
  return posting.finish(std::move(works));
}

} // namespace mdfuser
