// SPDX-License-Identifier: MIT
#include "host_ir/ring_decomposition.h"

#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

class RingBuilder {
 public:
  explicit RingBuilder(const Ring& ring)
      : ring_(ring),
        hic_(ring.hic),
        d_(static_cast<int64_t>(ring.team.size())) {
    MDF_CHECK(
        d_ > 1 && ring.me >= 0 && ring.me < d_,
        "a ring needs two devices or more, this one among them");
  }

  int64_t size() const {
    return d_;
  }

  Scalar* constantOf(int64_t value) const {
    return constant(hic_.ir(), value);
  }

  // The part this device works on at `step` (a loop index, or nullptr for
  // step 0) of a ring that starts on part me + offset and moves one part
  // down each step: (me + offset - step) mod d.
  Scalar* part(int64_t offset, Scalar* step) const {
    const int64_t first = ((ring_.me + offset) % d_ + d_) % d_;
    if (step == nullptr) {
      return constantOf(first);
    }
    // step <= d keeps the dividend non-negative.
    return mod(sub(constantOf(first + d_), step), constantOf(d_));
  }

  // Part `index` of `tv` along `axis`, of extent `extent` there.
  TensorView* chunk(
      TensorView* tv, int64_t axis, Scalar* index, Scalar* extent) const {
    Scalar* length = ceilDiv(extent, constantOf(d_));
    Scalar* start = min(mul(index, length), extent);
    auto* view = hic_.create<TensorView>(
        tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Local);
    view->setDomains(tv->root(), tv->logical(), tv->loop());
    if (tv->hasDeviceMesh()) {
      view->setDeviceMesh(*tv->deviceMesh());
    }
    ring_.scope.pushBack(hic_.create<RingChunk>(
        view, tv, axis, index, d_, start, min(length, sub(extent, start))));
    return view;
  }

  ForLoop* loop(int64_t start, int64_t stop) const {
    return hic_.create<ForLoop>(
        symbol(hic_.ir()),
        constantOf(start),
        constantOf(stop),
        ParallelType::Serial);
  }

  // Posts `in` to the next device and receives the previous one's into
  // `out`, in `scope`; returns the communication to wait for. `landing`
  // (Communication::landing) is where `in` lands on the next device: at the
  // place there of this device's `landing`.
  Communication* permute(
      Scope& scope,
      TensorView* in,
      TensorView* out,
      TensorView* landing,
      int64_t shift = 1) const {
    CommunicationSpec spec;
    spec.type = CommunicationType::CollectivePermute;
    spec.team = ring_.team;
    spec.shift = shift;
    auto* c = hic_.create<Communication>(spec, in, out, ring_.backend, landing);
    scope.pushBack(c);
    return c;
  }

  void linear(
      Scope& scope,
      TensorView* out,
      TensorView* in,
      TensorView* weight,
      TensorView* bias) const {
    scope.pushBack(hic_.create<LinearOp>(out, in, weight, bias));
  }

  // A builder whose statements go to `scope`.
  RingBuilder in(Scope& scope) const {
    return RingBuilder(
        Ring{ring_.hic, scope, ring_.team, ring_.me, ring_.backend});
  }

  Scope& scope() const {
    return ring_.scope;
  }
  HostIrContainer& hic() const {
    return hic_;
  }
  int64_t me() const {
    return ring_.me;
  }

 private:
  Ring ring_;
  HostIrContainer& hic_;
  int64_t d_;
};

// This device's own partial sum into `own`, from its part `in_part` of
// the input, and the partial sums of its part that the moves bring into
// `receives` (moves[j - 1] into receives[j - 1], sent j steps back). Over
// three devices or more the first move has had d - 2 GEMMs to arrive: the
// own GEMM adds it as its C operand. At d = 2 that move was posted just
// before, so the own GEMM runs beside it instead and its arrival is added
// after. Each later arrival is added once its Wait passes.
void reduceOwnPart(
    const RingBuilder& b,
    TensorView* in_part,
    TensorView* weight,
    TensorView* own,
    const std::vector<Communication*>& moves,
    const std::vector<TensorView*>& receives) {
  HostIrContainer& hic = b.hic();
  const auto arrivals = static_cast<int64_t>(moves.size());
  const bool own_takes_first = arrivals > 1;
  if (own_takes_first) {
    b.scope().pushBack(hic.create<Wait>(moves.front()));
  }
  b.linear(
      b.scope(),
      own,
      in_part,
      weight,
      own_takes_first ? receives.front() : nullptr);
  for (int64_t j = own_takes_first ? 1 : 0; j < arrivals; ++j) {
    b.scope().pushBack(hic.create<Wait>(moves[j]));
    b.scope().pushBack(hic.create<PointwiseOp>(
        OpType::Add, own, std::vector<Val*>{own, receives[j]}));
  }
}

} // namespace

void emitAllgatherLinear(
    const Ring& ring,
    TensorView* in,
    TensorView* gathered,
    int64_t axis,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    TensorView* weight,
    TensorView* bias) {
  RingBuilder b(ring);
  const int64_t d = b.size();
  HostIrContainer& hic = b.hic();
  // This device's part goes where the gathered tensor holds it.
  TensorView* own = b.chunk(gathered, axis, b.part(0, nullptr), extent);
  b.scope().pushBack(hic.create<LoadStoreOp>(own, in));
  // Steps 0 .. d - 2: move the part held on while the GEMM consumes it.
  ForLoop* steps = b.loop(0, d - 1);
  RingBuilder body = b.in(steps->body());
  Scalar* held_index = body.part(0, steps->index());
  TensorView* held = body.chunk(gathered, axis, held_index, extent);
  TensorView* next =
      body.chunk(gathered, axis, body.part(-1, steps->index()), extent);
  // Part p travels from device p + j to p + j + 1 into part p.
  Communication* c = body.permute(steps->body(), held, next, held);
  TensorView* result = body.chunk(out, out_axis, held_index, extent);
  body.linear(steps->body(), result, held, weight, bias);
  steps->body().pushBack(hic.create<Wait>(c));
  b.scope().pushBack(steps);
  // Step d - 1: the last part received, from no one further.
  Scalar* last_index = b.part(1, nullptr);
  TensorView* last = b.chunk(gathered, axis, last_index, extent);
  b.linear(
      b.scope(),
      b.chunk(out, out_axis, last_index, extent),
      last,
      weight,
      bias);
}

void emitLinearReduceScatter(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    TensorView* receive,
    Scalar* part_extent) {
  RingBuilder b(ring);
  const int64_t d = b.size();
  HostIrContainer& hic = b.hic();
  Scalar* extent = mul(b.constantOf(d), part_extent);
  // Step 0: this device's partial sum of part me - 1, which the previous
  // devices' partial sums join on the way round.
  b.linear(
      b.scope(),
      out,
      b.chunk(in, in_axis, b.part(-1, nullptr), extent),
      weight,
      nullptr);
  // Steps 1 .. d - 1: pass the sum on, receive the previous device's, add
  // this device's partial sum of that part in the GEMM.
  ForLoop* steps = b.loop(1, d);
  RingBuilder body = b.in(steps->body());
  Communication* c = body.permute(steps->body(), out, receive, receive);
  steps->body().pushBack(hic.create<Wait>(c));
  TensorView* part =
      body.chunk(in, in_axis, body.part(-1, steps->index()), extent);
  body.linear(steps->body(), out, part, weight, receive);
  b.scope().pushBack(steps);
}

void emitDirectLinearReduceScatter(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    const std::vector<TensorView*>& sends,
    const std::vector<TensorView*>& receives,
    Scalar* part_extent) {
  RingBuilder b(ring);
  const int64_t d = b.size();
  MDF_CHECK(
      static_cast<int64_t>(sends.size()) == d - 1 &&
          static_cast<int64_t>(receives.size()) == d - 1,
      "a direct reduce-scatter over ",
      d,
      " devices sends and receives ",
      d - 1,
      " parts");
  Scalar* extent = mul(b.constantOf(d), part_extent);
  // Step j: the partial sum of device me + j's part, sent to it while the
  // next step's GEMM runs; device me - j's partial sum of part me arrives.
  std::vector<Communication*> moves;
  for (int64_t j = 1; j < d; ++j) {
    TensorView* part = b.chunk(in, in_axis, b.part(j, nullptr), extent);
    b.linear(b.scope(), sends[j - 1], part, weight, nullptr);
    moves.push_back(b.permute(
        b.scope(), sends[j - 1], receives[j - 1], receives[j - 1], j));
  }
  reduceOwnPart(
      b,
      b.chunk(in, in_axis, b.part(0, nullptr), extent),
      weight,
      out,
      moves,
      receives);
}

void emitLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    TensorView* receive) {
  RingBuilder b(ring);
  const int64_t d = b.size();
  HostIrContainer& hic = b.hic();
  const bool apart = receive != out;
  // Reduce-scatter ring: out's part p accumulates the partial sum of part
  // p, which travels on into the next device's `receive`, at the place
  // there of this device's part p.
  Scalar* first = b.part(-1, nullptr);
  b.linear(
      b.scope(),
      b.chunk(out, out_axis, first, extent),
      b.chunk(in, in_axis, first, extent),
      weight,
      nullptr);
  ForLoop* reduce = b.loop(1, d);
  {
    RingBuilder body = b.in(reduce->body());
    Scalar* sent_index = body.part(0, reduce->index());
    Scalar* index = body.part(-1, reduce->index());
    TensorView* sent = body.chunk(out, out_axis, sent_index, extent);
    TensorView* landing =
        apart ? body.chunk(receive, out_axis, sent_index, extent) : sent;
    TensorView* received = body.chunk(receive, out_axis, index, extent);
    Communication* c = body.permute(reduce->body(), sent, received, landing);
    reduce->body().pushBack(hic.create<Wait>(c));
    body.linear(
        reduce->body(),
        apart ? body.chunk(out, out_axis, index, extent) : received,
        body.chunk(in, in_axis, index, extent),
        weight,
        received);
  }
  b.scope().pushBack(reduce);
  // Allgather ring: part me is reduced; pass the reduced parts round, each
  // copied from `receive` into out once it arrived.
  ForLoop* gather = b.loop(0, d - 1);
  {
    RingBuilder body = b.in(gather->body());
    Scalar* held_index = body.part(0, gather->index());
    Scalar* next_index = body.part(-1, gather->index());
    TensorView* held = body.chunk(out, out_axis, held_index, extent);
    TensorView* landing =
        apart ? body.chunk(receive, out_axis, held_index, extent) : held;
    TensorView* next = body.chunk(receive, out_axis, next_index, extent);
    Communication* c = body.permute(gather->body(), held, next, landing);
    gather->body().pushBack(hic.create<Wait>(c));
    if (apart) {
      gather->body().pushBack(hic.create<LoadStoreOp>(
          body.chunk(out, out_axis, next_index, extent), next));
    }
  }
  b.scope().pushBack(gather);
}

void emitDirectLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    int64_t in_axis,
    TensorView* weight,
    TensorView* out,
    int64_t out_axis,
    Scalar* extent,
    const std::vector<TensorView*>& receives,
    TensorView* gathered) {
  RingBuilder b(ring);
  const int64_t d = b.size();
  MDF_CHECK(
      static_cast<int64_t>(receives.size()) == d - 1,
      "a direct allreduce over ",
      d,
      " devices receives ",
      d - 1,
      " partial sums");
  HostIrContainer& hic = b.hic();
  // Reduce-scatter: step j computes the partial sum of device me + j's part
  // into out's part me + j and sends it from there, landing in that
  // device's receives[j - 1] at its own part; device me - j's partial sum
  // of part me arrives in this device's receives[j - 1] at part me.
  std::vector<Communication*> moves;
  std::vector<TensorView*> arrived;
  for (int64_t j = 1; j < d; ++j) {
    Scalar* index = b.part(j, nullptr);
    TensorView* partial = b.chunk(out, out_axis, index, extent);
    b.linear(
        b.scope(),
        partial,
        b.chunk(in, in_axis, index, extent),
        weight,
        nullptr);
    TensorView* landing = b.chunk(receives[j - 1], out_axis, index, extent);
    arrived.push_back(
        b.chunk(receives[j - 1], out_axis, b.part(0, nullptr), extent));
    moves.push_back(b.permute(b.scope(), partial, arrived.back(), landing, j));
  }
  Scalar* me = b.part(0, nullptr);
  TensorView* own = b.chunk(out, out_axis, me, extent);
  reduceOwnPart(
      b, b.chunk(in, in_axis, me, extent), weight, own, moves, arrived);
  // Allgather: the reduced part goes to every other device (shift j),
  // landing in its `gathered` at part me; device me - j's reduced part
  // arrives at part me - j, copied into out where `gathered` is not out.
  std::vector<Communication*> gathers;
  std::vector<TensorView*> reduced;
  TensorView* landing = b.chunk(gathered, out_axis, me, extent);
  for (int64_t j = 1; j < d; ++j) {
    reduced.push_back(b.chunk(gathered, out_axis, b.part(-j, nullptr), extent));
    gathers.push_back(b.permute(b.scope(), own, reduced.back(), landing, j));
  }
  for (int64_t j = 1; j < d; ++j) {
    b.scope().pushBack(hic.create<Wait>(gathers[j - 1]));
    if (gathered != out) {
      b.scope().pushBack(hic.create<LoadStoreOp>(
          b.chunk(out, out_axis, b.part(-j, nullptr), extent), reduced[j - 1]));
    }
  }
}

void emitExchangedLinearAllreduce(
    const Ring& ring,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    TensorView* receive) {
  RingBuilder b(ring);
  MDF_CHECK(
      b.size() == 2,
      "an exchanged allreduce runs over two devices, not ",
      b.size());
  HostIrContainer& hic = b.hic();
  b.linear(b.scope(), out, in, weight, nullptr);
  Communication* move = b.permute(b.scope(), out, receive, receive);
  b.scope().pushBack(hic.create<Wait>(move));
  b.scope().pushBack(hic.create<PointwiseOp>(
      OpType::Add, out, std::vector<Val*>{out, receive}));
}

} // namespace mdfuser::hir
