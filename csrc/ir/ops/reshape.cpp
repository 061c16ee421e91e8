// SPDX-License-Identifier: MIT
#include "ir/ops/reshape.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

ReshapeOp::ReshapeOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<Group> groups)
    : TensorOp(container, OpType::Reshape, {in}, {out}),
      groups_(std::move(groups)) {}

TensorView* ReshapeOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> ReshapeOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (const Group& g : groups_) {
    const int64_t n_in = g.in_end - g.in_begin;
    const int64_t n_out = g.out_end - g.out_begin;
    if (n_in == 1 && n_out == 1) {
      result.push_back({p[g.in_begin], c[g.out_begin]});
    } else if ((n_in == 1 && n_out > 1) || (n_in > 1 && n_out == 1)) {
      result.push_back({p[g.in_begin], c[g.out_begin], /*exact=*/false});
    }
  }
  return result;
}

TensorOp* ReshapeOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<ReshapeOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      groups_);
}

namespace {

bool isConstant(const Scalar* s, int64_t value) {
  return s->isConst() && s->value() == value;
}

std::string shapeString(const std::vector<Scalar*>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i > 0 ? ", " : "") + shape[i]->toString();
  }
  return s + "]";
}

int64_t staticCount(const std::vector<Scalar*>& extents) {
  int64_t count = 1;
  for (const Scalar* e : extents) {
    MDF_USER_CHECK(
        !__builtin_mul_overflow(count, e->value(), &count),
        "reshape: a shape of more than 2^63 - 1 elements");
  }
  return count;
}

bool allStatic(const std::vector<Scalar*>& extents, int64_t except = -1) {
  for (size_t k = 0; k < extents.size(); ++k) {
    if (static_cast<int64_t>(k) != except && !extents[k]->isConst()) {
      return false;
    }
  }
  return true;
}

// Pairs the input and output axes of a reshape into groups, taking one
// group at a time off the front or the back of the axes not yet grouped.
class Grouper {
 public:
  Grouper(
      const std::vector<Scalar*>& in,
      const std::vector<Scalar*>& out,
      const std::string& what)
      : in_(in), out_(out), what_(what), in_end_(in.size()) {}

  // Groups from the front until the output axes before `out_stop` are
  // grouped; with `whole_input`, until the input axes are grouped too.
  void groupFront(
      int64_t out_stop, bool whole_input, const std::string& mismatch) {
    while (out_begin_ < out_stop || (whole_input && inputLeft())) {
      take(out_begin_, out_stop, /*front=*/true, mismatch);
    }
  }

  // Groups from the back until the output axes from `out_stop` on are
  // grouped.
  void groupBack(int64_t out_stop, const std::string& mismatch) {
    auto out_end = static_cast<int64_t>(out_.size());
    while (out_end > out_stop) {
      out_end = take(out_stop, out_end, /*front=*/false, mismatch);
    }
  }

  // The input axes left over, grouped with output axis `j` (the -1), whose
  // extent is their product.
  Scalar* groupRestWith(int64_t j) {
    Scalar* product = constant(out_[j]->container(), 1);
    for (int64_t i = in_begin_; i < in_end_; ++i) {
      product = mul(product, in_[i]);
    }
    groups_.push_back({in_begin_, in_end_, j, j + 1});
    in_begin_ = in_end_;
    out_begin_ = j + 1;
    return product;
  }

  bool inputLeft() const {
    return in_begin_ < in_end_;
  }

  // The groups in axis order.
  std::vector<ReshapeOp::Group> groups() {
    std::vector<ReshapeOp::Group> result = groups_;
    result.insert(result.end(), back_.rbegin(), back_.rend());
    return result;
  }

 private:
  // Takes one group off the front of in[in_begin_, in_end_) and
  // out[out_lo, out_hi), or off their back; returns the new out_hi.
  int64_t take(
      int64_t out_lo, int64_t out_hi, bool front, const std::string& mismatch) {
    const int64_t n_in = in_end_ - in_begin_;
    const int64_t n_out = out_hi - out_lo;
    auto in = [&](int64_t k) {
      return in_[front ? in_begin_ + k : in_end_ - 1 - k];
    };
    auto out = [&](int64_t k) {
      return out_[front ? out_lo + k : out_hi - 1 - k];
    };
    int64_t ni = 0;
    int64_t nj = 0;
    if (n_in > 0 && isConstant(in(0), 1)) {
      // Axes of extent 1 form groups of their own.
      ni = 1;
    } else if (n_out > 0 && isConstant(out(0), 1)) {
      nj = 1;
    } else {
      MDF_USER_CHECK(n_in > 0 && n_out > 0, what_, ": ", mismatch);
      ni = nj = 1;
      if (!in(0)->isConst() || !out(0)->isConst()) {
        MDF_USER_CHECK(
            in(0) == out(0),
            what_,
            ": cannot tell how the symbolic extent ",
            (!in(0)->isConst() ? in(0) : out(0))->toString(),
            " is reshaped; keep it as its own dimension (or -1) or give "
            "static extents");
      } else {
        int64_t p_in = in(0)->value();
        int64_t p_out = out(0)->value();
        while (p_in != p_out) {
          const bool more_in = p_in < p_out;
          Scalar* next = more_in ? (ni < n_in ? in(ni) : nullptr)
                                 : (nj < n_out ? out(nj) : nullptr);
          MDF_USER_CHECK(
              next != nullptr && next->isConst(), what_, ": ", mismatch);
          (more_in ? p_in : p_out) *= next->value();
          ++(more_in ? ni : nj);
        }
      }
    }
    if (front) {
      groups_.push_back({in_begin_, in_begin_ + ni, out_lo, out_lo + nj});
      in_begin_ += ni;
      out_begin_ += nj;
      return out_hi;
    }
    back_.push_back({in_end_ - ni, in_end_, out_hi - nj, out_hi});
    in_end_ -= ni;
    return out_hi - nj;
  }

  const std::vector<Scalar*>& in_;
  const std::vector<Scalar*>& out_;
  const std::string& what_;
  int64_t in_begin_ = 0;
  int64_t in_end_;
  int64_t out_begin_ = 0;
  std::vector<ReshapeOp::Group> groups_;
  // Groups taken off the back, last first.
  std::vector<ReshapeOp::Group> back_;
};

// Works out the groups of a reshape of `in` (extents) into `out`, filling
// in a -1 of `out`. Static groups pair runs with equal products; a
// symbolic extent pairs with itself. A -1 takes the input axes left
// between the groups before it and the groups after it.
std::vector<ReshapeOp::Group> group(
    const std::vector<Scalar*>& in,
    std::vector<Scalar*>& out,
    const std::string& what) {
  int64_t inferred = -1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (isConstant(out[j], -1)) {
      MDF_USER_CHECK(inferred < 0, what, ": at most one -1 is allowed");
      inferred = static_cast<int64_t>(j);
    } else {
      MDF_USER_CHECK(
          !out[j]->isConst() || out[j]->value() >= 0,
          what,
          ": extent ",
          out[j]->toString(),
          " is negative");
    }
  }
  const auto n_out = static_cast<int64_t>(out.size());
  if (allStatic(in) && allStatic(out, inferred)) {
    const int64_t in_count = staticCount(in);
    if (inferred < 0) {
      MDF_USER_CHECK(
          in_count == staticCount(out),
          what,
          ": the input has ",
          in_count,
          " elements but the shape has ",
          staticCount(out));
    } else {
      std::vector<Scalar*> rest = out;
      rest.erase(rest.begin() + inferred);
      const int64_t rest_count = staticCount(rest);
      MDF_USER_CHECK(
          rest_count != 0 && in_count % rest_count == 0,
          what,
          ": cannot infer -1: ",
          in_count,
          " elements do not divide into ",
          rest_count);
      out[inferred] =
          constant(out[inferred]->container(), in_count / rest_count);
      inferred = -1;
    }
  }

  Grouper grouper(in, out, what);
  if (inferred < 0) {
    grouper.groupFront(
        n_out, /*whole_input=*/true, "the element counts differ");
    return grouper.groups();
  }
  const std::string cannot_infer =
      "cannot infer -1: the extents around it do not match whole input "
      "dimensions";
  grouper.groupFront(inferred, /*whole_input=*/false, cannot_infer);
  grouper.groupBack(inferred + 1, cannot_infer);
  out[inferred] = grouper.groupRestWith(inferred);
  return grouper.groups();
}

} // namespace

TensorView* reshape(TensorView* in, const std::vector<Scalar*>& shape) {
  ops::requireTensor(in, "reshape", "input");
  std::vector<Val*> operands{in};
  operands.insert(operands.end(), shape.begin(), shape.end());
  ops::requireSameFusion(operands, "reshape");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  std::vector<Scalar*> in_extents;
  for (IterDomain* id : ids) {
    in_extents.push_back(id->extent());
  }
  std::vector<Scalar*> out_extents = shape;
  const std::string what =
      "reshape of " + in->toString() + " to " + shapeString(shape);
  for (IterDomain* id : ids) {
    MDF_USER_CHECK(
        !id->isExpanded(),
        what,
        ": dimension ",
        id->toString(),
        " is an expanded broadcast; reshape cannot merge or split it");
  }
  std::vector<ReshapeOp::Group> groups = group(in_extents, out_extents, what);
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  for (Scalar* extent : out_extents) {
    out_ids.push_back(container->create<IterDomain>(extent));
  }
  TensorView* out = ops::newTensor(container, out_ids, in->dtype());
  container->create<ReshapeOp>(out, in, std::move(groups))
      ->registerAsDefinition();
  return out;
}

} // namespace mdfuser
