// SPDX-License-Identifier: MIT
#include "host_ir/passes/fuse_layer_norms.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/literal.h"
#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

// How many statements of the program read each tensor (a statement naming
// it twice counts twice).
void countUses(const Scope& scope, std::unordered_map<const Val*, int>& uses) {
  forEachExpr(scope, [&](const Expr* e) {
    for (const Val* in : e->inputs()) {
      ++uses[in];
    }
  });
}

class Matcher {
 public:
  // `defs` are the definitions in the scope being matched, `outer_defs`
  // those that run before it in the scopes enclosing it.
  Matcher(
      const HostIrContainer& hic,
      const std::unordered_map<const Val*, int>& uses,
      const std::unordered_map<const TensorView*, TensorOp*>& defs,
      const std::unordered_map<const TensorView*, TensorOp*>& outer_defs)
      : hic_(hic), uses_(uses), defs_(defs), outer_defs_(outer_defs) {}

  // The fused operation and the statements it replaces, when `rsqrt` is
  // the reciprocal square root of a layer_norm.
  struct Match {
    TensorView* out;
    TensorView* in;
    TensorView* weight = nullptr;
    TensorView* bias = nullptr;
    int64_t normalized_ndim;
    double eps;
    std::vector<TensorOp*> replaced;
  };

  std::optional<Match> match(TensorOp* rsqrt) {
    replaced_.clear();
    if (rsqrt->type() != OpType::Rsqrt) {
      return std::nullopt;
    }
    replaced_.push_back(rsqrt);
    // rsqrt(add(var, eps))
    TensorOp* add_eps = def(rsqrt->tensorInputs().at(0), OpType::Add, 1);
    if (add_eps == nullptr || add_eps->inputs().size() != 2) {
      return std::nullopt;
    }
    const auto* eps = dynamic_cast<const Literal*>(add_eps->inputs()[1]);
    if (eps == nullptr || eps->isSymbolic() ||
        !std::holds_alternative<double>(eps->value())) {
      return std::nullopt;
    }
    // var = div(broadcast(sum(mul(c, c))), n)
    std::optional<Mean> var = mean(add_eps->inputs()[0]);
    if (!var) {
      return std::nullopt;
    }
    TensorOp* square = def(var->of, OpType::Mul, 1);
    if (square == nullptr || square->inputs()[0] != square->inputs()[1]) {
      return std::nullopt;
    }
    auto* centred = dynamic_cast<TensorView*>(square->inputs()[0]);
    // c = sub(xf, mean(xf)); c is read twice by the square and once by y.
    TensorOp* sub = def(centred, OpType::Sub, 3);
    if (sub == nullptr) {
      return std::nullopt;
    }
    std::optional<Mean> mu = mean(sub->inputs()[1]);
    if (!mu || mu->of != sub->inputs()[0] || mu->dims != var->dims) {
      return std::nullopt;
    }
    auto* xf = static_cast<TensorView*>(sub->inputs()[0]);
    const std::vector<IterDomain*> axes = xf->logicalNoReductions();
    const auto rank = static_cast<int64_t>(axes.size());
    const auto ndim = static_cast<int64_t>(var->dims.size());
    for (int64_t i = 0; i < ndim; ++i) {
      if (var->dims[i] != rank - ndim + i) {
        return std::nullopt;
      }
    }
    if (!wholeOnEveryDevice(xf, ndim) || !isCount(mu->n, xf, ndim) ||
        !isCount(var->n, xf, ndim)) {
      return std::nullopt;
    }
    // y = mul(c, rsqrt(...)): the single use of the rsqrt.
    TensorOp* scale = use(rsqrt->out(), OpType::Mul);
    if (scale == nullptr || scale->inputs()[0] != centred ||
        scale->inputs()[1] != rsqrt->out()) {
      return std::nullopt;
    }
    replaced_.push_back(scale);
    ndim_ = ndim;
    eps_ = std::get<double>(eps->value());
    // Through the upcast of x when the result is cast back; on the Float
    // values otherwise (the upcast and what follows stay as they are).
    const std::vector<TensorOp*> common = replaced_;
    if (std::optional<Match> m = extend(scale, xf, /*through_upcast=*/true)) {
      return m;
    }
    replaced_ = common;
    return extend(scale, xf, /*through_upcast=*/false);
  }

 private:
  // The match from the scaling on: weight, bias and the downcast where
  // present.
  std::optional<Match> extend(
      const TensorOp* scale, TensorView* xf, bool through_upcast) {
    Match m;
    m.normalized_ndim = ndim_;
    m.eps = eps_;
    // The input, before an upcast that only the sum and the sub read.
    TensorView* x = xf;
    if (TensorOp* up = defOf(xf); through_upcast && up != nullptr &&
                                  up->type() == OpType::Cast &&
                                  useCount(xf) == 2 && !hic_.isOutput(xf)) {
      x = up->tensorInputs().at(0);
      replaced_.push_back(up);
    }
    const bool upcast = x != xf;
    if (through_upcast && !upcast) {
      return std::nullopt;
    }
    if (!wholeOnEveryDevice(x, ndim_)) {
      return std::nullopt;
    }
    TensorView* y = scale->out();
    if (TensorOp* mul = use(y, OpType::Mul);
        mul != nullptr && mul->inputs()[0] == y) {
      m.weight = parameter(mul->inputs()[1], x, upcast);
      if (m.weight != nullptr) {
        replaced_.push_back(mul);
        y = mul->out();
      }
    }
    if (TensorOp* add = use(y, OpType::Add);
        add != nullptr && add->inputs()[0] == y) {
      m.bias = parameter(add->inputs()[1], x, upcast);
      if (m.bias != nullptr) {
        replaced_.push_back(add);
        y = add->out();
      }
    }
    if (upcast) {
      TensorOp* down = use(y, OpType::Cast);
      if (down == nullptr || down->out()->dtype() != x->dtype()) {
        return std::nullopt;
      }
      replaced_.push_back(down);
      y = down->out();
    }
    if (!wholeOnEveryDevice(y, ndim_)) {
      return std::nullopt;
    }
    m.out = y;
    m.in = x;
    m.replaced = replaced_;
    return m;
  }

 private:
  struct Mean {
    // div(broadcast(sum(of, dims)), n)
    TensorView* of;
    std::vector<int64_t> dims;
    const Val* n;
  };

  int useCount(const Val* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }

  TensorOp* defOf(const TensorView* tv) const {
    auto it = defs_.find(tv);
    return it == defs_.end() ? nullptr : it->second;
  }

  // The definition of `v` when it is an operation of `type` in the scope
  // whose result is read `reads` times and is not a program output; it is
  // then one of the statements replaced.
  TensorOp* def(const Val* v, OpType type, int reads) {
    const auto* tv = dynamic_cast<const TensorView*>(v);
    if (tv == nullptr || hic_.isOutput(tv) || useCount(tv) != reads) {
      return nullptr;
    }
    TensorOp* op = defOf(tv);
    if (op == nullptr || op->type() != type) {
      return nullptr;
    }
    replaced_.push_back(op);
    return op;
  }

  // The single reader of `tv` when it is an operation of `type` in the
  // scope and `tv` is not a program output.
  TensorOp* use(const TensorView* tv, OpType type) const {
    if (hic_.isOutput(tv) || useCount(tv) != 1) {
      return nullptr;
    }
    auto it = readers_.find(tv);
    if (it == readers_.end()) {
      return nullptr;
    }
    return it->second->type() == type ? it->second : nullptr;
  }

  // As def(), for a definition read once that runs before the scope.
  TensorOp* outerDef(const TensorView* tv, OpType type) {
    if (hic_.isOutput(tv) || useCount(tv) != 1) {
      return nullptr;
    }
    auto it = outer_defs_.find(tv);
    if (it == outer_defs_.end() || it->second->type() != type) {
      return nullptr;
    }
    replaced_.push_back(it->second);
    return it->second;
  }

  std::optional<Mean> mean(const Val* v) {
    TensorOp* div = def(v, OpType::Div, 1);
    if (div == nullptr) {
      return std::nullopt;
    }
    TensorOp* bcast = def(div->inputs()[0], OpType::Broadcast, 1);
    if (bcast == nullptr) {
      return std::nullopt;
    }
    TensorOp* sum = def(bcast->tensorInputs().at(0), OpType::Sum, 1);
    if (sum == nullptr) {
      return std::nullopt;
    }
    std::vector<int64_t> dims =
        static_cast<const ReductionOp*>(sum)->reducedDims();
    std::sort(dims.begin(), dims.end());
    return Mean{sum->tensorInputs().at(0), dims, div->inputs()[1]};
  }

  // Weight or bias: `v` itself when the computation is in x's dtype, the
  // operand of its upcast otherwise; of x's dtype either way. The upcast
  // may run before the scope, in front of the Stream loop it is invariant
  // in (lowering puts it there).
  TensorView* parameter(Val* v, const TensorView* x, bool upcast) {
    auto* tv = dynamic_cast<TensorView*>(v);
    if (tv == nullptr) {
      return nullptr;
    }
    if (upcast) {
      TensorOp* up = def(tv, OpType::Cast, 1);
      if (up == nullptr) {
        up = outerDef(tv, OpType::Cast);
      }
      if (up == nullptr) {
        return nullptr;
      }
      tv = up->tensorInputs().at(0);
    }
    // ATen takes weight and bias of the normalized shape, in x's dtype.
    const std::vector<IterDomain*> mine = tv->logicalNoReductions();
    const std::vector<IterDomain*> xs = x->logicalNoReductions();
    if (tv->dtype() != x->dtype() || mine.size() > xs.size()) {
      return nullptr;
    }
    return static_cast<int64_t>(mine.size()) == ndim_ ? tv : nullptr;
  }

  // n is the element count of the trailing `ndim` axes of `tv`: the
  // product of their static extents, or the one axis's symbolic extent.
  static bool isCount(const Val* n, const TensorView* tv, int64_t ndim) {
    const std::vector<IterDomain*> axes = tv->logicalNoReductions();
    if (ndim == 1 && n == axes.back()->extent()) {
      return true;
    }
    const auto* s = dynamic_cast<const Scalar*>(n);
    if (s == nullptr || !s->isConst()) {
      return false;
    }
    int64_t count = 1;
    for (size_t i = axes.size() - ndim; i < axes.size(); ++i) {
      const auto* extent = dynamic_cast<const Scalar*>(axes[i]->extent());
      if (extent == nullptr || !extent->isConst()) {
        return false;
      }
      count *= extent->value();
    }
    return s->value() == count;
  }

  // The trailing `ndim` logical axes of `tv` are loop axes themselves:
  // neither devices nor stream chunks split them.
  static bool wholeOnEveryDevice(const TensorView* tv, int64_t ndim) {
    const std::vector<IterDomain*> axes = tv->logicalNoReductions();
    const std::vector<IterDomain*>& loop = tv->loop();
    for (size_t i = axes.size() - ndim; i < axes.size(); ++i) {
      if (std::find(loop.begin(), loop.end(), axes[i]) == loop.end() ||
          axes[i]->parallelType() != ParallelType::Serial) {
        return false;
      }
    }
    return true;
  }

 public:
  // The reader of each tensor read exactly once in the scope.
  std::unordered_map<const TensorView*, TensorOp*> readers_;

 private:
  const HostIrContainer& hic_;
  const std::unordered_map<const Val*, int>& uses_;
  const std::unordered_map<const TensorView*, TensorOp*>& defs_;
  const std::unordered_map<const TensorView*, TensorOp*>& outer_defs_;
  std::vector<TensorOp*> replaced_;
  int64_t ndim_ = 0;
  double eps_ = 0;
};

// The statements the fused operations replace, and the fused operation
// that takes the place of each one writing a layer_norm's output.
struct Rewrite {
  std::unordered_set<const Expr*> removed;
  std::unordered_map<const Expr*, Expr*> replacement;
};

// Matches the layer_norms of `scope` and of the loops in it; `outer_defs`
// are the definitions that run before `scope` in the scopes enclosing it.
void match(
    HostIrContainer& hic,
    Scope& scope,
    const std::unordered_map<const Val*, int>& uses,
    const std::unordered_map<const TensorView*, TensorOp*>& outer_defs,
    Rewrite& rewrite) {
  std::unordered_map<const TensorView*, TensorOp*> defs;
  std::unordered_map<const TensorView*, TensorOp*> readers;
  for (Expr* e : scope.exprs()) {
    if (auto* loop = dynamic_cast<ForLoop*>(e)) {
      std::unordered_map<const TensorView*, TensorOp*> before = outer_defs;
      for (const auto& [tv, op] : defs) {
        before[tv] = op;
      }
      match(hic, loop->body(), uses, before, rewrite);
    } else if (auto* op = dynamic_cast<TensorOp*>(e)) {
      for (TensorView* out : op->outs()) {
        defs[out] = op;
      }
      for (TensorView* in : op->tensorInputs()) {
        readers[in] = op;
      }
    }
  }
  Matcher matcher(hic, uses, defs, outer_defs);
  matcher.readers_ = readers;
  for (Expr* e : scope.exprs()) {
    auto* op = dynamic_cast<TensorOp*>(e);
    if (op == nullptr || rewrite.removed.count(op) != 0) {
      continue;
    }
    std::optional<Matcher::Match> m = matcher.match(op);
    if (!m) {
      continue;
    }
    // The fused operation takes the place of the last statement replaced,
    // the one that writes `out`; x, weight and bias are ready before the
    // first.
    Expr* fused = hic.create<LayerNormOp>(
        m->out, m->in, m->weight, m->bias, m->normalized_ndim, m->eps);
    for (TensorOp* r : m->replaced) {
      rewrite.removed.insert(r);
    }
    rewrite.replacement[defs.at(m->out)] = fused;
  }
}

void apply(Scope& scope, const Rewrite& rewrite) {
  std::vector<Expr*> exprs;
  for (Expr* e : scope.exprs()) {
    if (auto* loop = dynamic_cast<ForLoop*>(e)) {
      apply(loop->body(), rewrite);
    }
    if (auto it = rewrite.replacement.find(e);
        it != rewrite.replacement.end()) {
      exprs.push_back(it->second);
    } else if (rewrite.removed.count(e) == 0) {
      exprs.push_back(e);
    }
  }
  scope.setExprs(std::move(exprs));
}

} // namespace

void fuseLayerNorms(HostIrContainer& hic) {
  std::unordered_map<const Val*, int> uses;
  countUses(hic.topLevel(), uses);
  Rewrite rewrite;
  match(hic, hic.topLevel(), uses, {}, rewrite);
  if (!rewrite.removed.empty()) {
    apply(hic.topLevel(), rewrite);
  }
}

} // namespace mdfuser::hir
