// Einsum, lowered onto kernels the planner already emits: no einsum
// interpreter runs on the device. The kernels compute in float32; float64
// operands are cast to float32 and the result back (float32's precision).
//
// The equation names every axis of every operand with a letter ("..."
// stands for the leading axes a letter does not name, equal across
// operands). The lowering, in order:
//
//   1. A letter repeated within one operand (a diagonal, "ii->i"): multiply
//      by an identity mask over the two axes (Mul, broadcast) and sum one of
//      them away (ReduceSum).
//   2. Letters of one operand that no other operand and not the output
//      name: summed away (ReduceSum).
//   3. Operands are combined left to right, two at a time. Their letters
//      fall into batch (both, still needed), contracted (both, not needed
//      later), left-only and right-only. Each operand is transposed to
//      [batch, left, contracted] and [batch, contracted, right], viewed as
//      3-D, and one MatMul gives [batch, left, right].
//   4. The result is transposed into the output's letter order.
//
// So "bij,bjk->bik" is one MatMul, "bhid,bhjd->bhij" a Transpose of the
// second operand and a MatMul, "i,j->ij" a MatMul with an inner dimension
// of 1, "ij->ji" one Transpose. Reshapes are views (the in-place pass makes
// them aliases); a transpose with the identity permutation is skipped.

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "kiln/kernels/gemm_blocking.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

// A label per axis: a letter's character code, or kEllipsisLabel + j for the
// j-th axis "..." stands for (counted over the widest "...").
constexpr int kEllipsisLabel = 256;

struct Equation {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  std::map<int, int64_t> size;  // of each label
};

// One term's labels; `rank` is its operand's rank, `ellipsis_rank` the
// widest "..." (its axes take the trailing labels of that width).
std::vector<int> term_labels(OpContext& ctx, const std::string& term, int64_t rank, int64_t ellipsis_rank,
                             bool is_output) {
  std::vector<int> labels;
  size_t dots = term.find("...");
  const std::string letters = dots == std::string::npos ? term : term.substr(0, dots) + term.substr(dots + 3);
  if (letters.find('.') != std::string::npos) ctx.error("equation term '", term, "' has a stray '.'");
  for (char c : letters) {
    if (!std::isalpha(static_cast<unsigned char>(c))) ctx.error("equation term '", term, "' has '", c, "'");
  }
  const int64_t named = static_cast<int64_t>(letters.size());
  const int64_t spread = is_output ? ellipsis_rank : rank - named;
  if (dots == std::string::npos ? (!is_output && named != rank) : spread < 0) {
    ctx.error("equation term '", term, "' names ", named, " axes of an operand of rank ", rank);
  }
  for (size_t i = 0; i < term.size();) {
    if (i == dots) {
      for (int64_t j = 0; j < spread; ++j) {
        labels.push_back(static_cast<int>(kEllipsisLabel + ellipsis_rank - spread + j));
      }
      i += 3;
    } else {
      labels.push_back(static_cast<unsigned char>(term[i]));
      ++i;
    }
  }
  return labels;
}

Equation parse_equation(OpContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", "")) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ctx.num_inputs()) {
    ctx.error("attribute 'equation' '", eq, "' has ", terms.size(), " operands, the node ", ctx.num_inputs());
  }
  int64_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (terms[i].find("...") != std::string::npos) {
      int64_t letters = 0;
      for (char c : terms[i]) letters += c != '.';
      ellipsis_rank = std::max(ellipsis_rank, ctx.rank(i) - letters);
    }
  }
  Equation e;
  for (size_t i = 0; i < terms.size(); ++i) {
    e.inputs.push_back(term_labels(ctx, terms[i], ctx.rank(i), ellipsis_rank, false));
    const auto& shape = ctx.shape(i);
    for (size_t d = 0; d < shape.size(); ++d) {
      const int label = e.inputs.back()[d];
      auto [it, inserted] = e.size.emplace(label, shape[d]);
      if (!inserted && it->second != shape[d]) {
        if (label >= kEllipsisLabel) {
          ctx.not_supported("Einsum broadcasting within '...' (sizes ", it->second, " and ", shape[d], ")");
        }
        ctx.error("equation letter '", static_cast<char>(label), "' has sizes ", it->second, " and ", shape[d]);
      }
    }
  }
  if (arrow == std::string::npos) {
    // Implicit output: "..." first, then the letters used once, in order.
    std::map<int, int> count;
    for (const auto& in : e.inputs) {
      for (int label : in) ++count[label];
    }
    for (const auto& [label, n] : count) {
      if (label >= kEllipsisLabel) e.output.push_back(label);
    }
    for (const auto& [label, n] : count) {
      if (label < kEllipsisLabel && n == 1) e.output.push_back(label);
    }
  } else {
    e.output = term_labels(ctx, eq.substr(arrow + 2), 0, ellipsis_rank, true);
    for (size_t i = 0; i < e.output.size(); ++i) {
      if (!e.size.count(e.output[i])) {
        ctx.error("output letter '", static_cast<char>(e.output[i]), "' names no input axis");
      }
      if (std::count(e.output.begin(), e.output.end(), e.output[i]) > 1) ctx.error("output repeats a letter");
    }
  }
  return e;
}

void infer_einsum(OpContext& ctx) {
  if (ctx.num_inputs() < 1) ctx.error("Einsum needs an operand");
  ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64});
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.dtype(i) != ctx.dtype(0)) ctx.error("operands differ in dtype");
  }
  const Equation e = parse_equation(ctx);
  std::vector<int64_t> shape;
  for (int label : e.output) shape.push_back(e.size.at(label));
  ctx.set_output(0, ctx.dtype(0), shape);
}

// An operand on its way through the lowering: a method tensor and the
// label of each of its axes.
struct Term {
  int tensor;
  std::vector<int> labels;
};

class EinsumLowering {
 public:
  EinsumLowering(OpContext& ctx, LoweringContext& l, const Equation& e) : ctx_(ctx), l_(l), e_(e) {}

  // The result of einsum over `inputs` (float32 tensors) into `output`.
  void run(const std::vector<int>& inputs, int output) {
    std::vector<Term> terms;
    for (size_t i = 0; i < e_.inputs.size(); ++i) terms.push_back({inputs[i], e_.inputs[i]});
    for (size_t i = 0; i < terms.size(); ++i) {
      terms[i] = take_diagonals(terms[i]);
      terms[i] = sum_away(terms[i], needed(terms, 0, i));
    }
    Term acc = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      acc = contract(acc, terms[i], needed(terms, i + 1, terms.size()));
    }
    acc = transpose(acc, e_.output);
    l_.view(acc.tensor, output);
  }

 private:
  std::vector<int64_t> shape_of(const std::vector<int>& labels) const {
    std::vector<int64_t> shape;
    for (int label : labels) shape.push_back(e_.size.at(label));
    return shape;
  }
  int temp(const std::vector<int64_t>& shape) {
    return l_.temp(ctx_.node().name + "/einsum" + std::to_string(step_++), DType::FLOAT32, shape);
  }

  // The labels of the output and of the terms from `first` on, term `skip`
  // excepted.
  std::vector<int> needed(const std::vector<Term>& terms, size_t first, size_t skip) const {
    std::vector<int> labels = e_.output;
    for (size_t i = first; i < terms.size(); ++i) {
      if (i != skip) labels.insert(labels.end(), terms[i].labels.begin(), terms[i].labels.end());
    }
    return labels;
  }

  Term take_diagonals(Term t) {
    for (;;) {
      size_t p = 0, q = 0;
      for (size_t i = 0; i < t.labels.size() && q == 0; ++i) {
        for (size_t j = i + 1; j < t.labels.size(); ++j) {
          if (t.labels[j] == t.labels[i]) {
            p = i, q = j;
            break;
          }
        }
      }
      if (q == 0) return t;
      const int64_t n = e_.size.at(t.labels[p]);
      std::vector<int64_t> mask_shape(t.labels.size(), 1);
      mask_shape[p] = mask_shape[q] = n;
      HostTensor mask(DType::FLOAT32, mask_shape);
      for (int64_t i = 0; i < n; ++i) mask.data<float>()[i * n + i] = 1.f;
      const int masked = temp(shape_of(t.labels));
      l_.kernel("Mul", {t.tensor, l_.constant(ctx_.node().name + "/identity" + std::to_string(step_), std::move(mask))},
                {masked});
      t.labels.erase(t.labels.begin() + static_cast<std::ptrdiff_t>(q));
      t = {reduce_sum(masked, shape_of(t.labels), {static_cast<int32_t>(q)}), t.labels};
    }
  }

  int reduce_sum(int in, const std::vector<int64_t>& out_shape, std::vector<int32_t> axes) {
    const int out = temp(out_shape);
    fb::ReduceParamsT p;
    p.axes = std::move(axes);
    p.keepdims = false;
    fb::ParamsUnion params;
    params.Set(std::move(p));
    l_.kernel("ReduceSum", {in}, {out}, std::move(params));
    return out;
  }

  // Sums away the axes whose labels are not in `keep`.
  Term sum_away(Term t, const std::vector<int>& keep) {
    std::vector<int32_t> axes;
    std::vector<int> left;
    for (size_t i = 0; i < t.labels.size(); ++i) {
      if (std::find(keep.begin(), keep.end(), t.labels[i]) == keep.end()) {
        axes.push_back(static_cast<int32_t>(i));
      } else {
        left.push_back(t.labels[i]);
      }
    }
    if (axes.empty()) return t;
    return {reduce_sum(t.tensor, shape_of(left), std::move(axes)), left};
  }

  Term transpose(Term t, const std::vector<int>& order) {
    std::vector<int32_t> perm;
    for (int label : order) {
      perm.push_back(static_cast<int32_t>(std::find(t.labels.begin(), t.labels.end(), label) - t.labels.begin()));
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int32_t>(i);
    if (identity) return t;
    if (perm.size() > 8) ctx_.not_supported("Einsum with more than 8 axes in one operand");
    const int out = temp(shape_of(order));
    fb::TransposeParamsT p;
    p.perm = std::move(perm);
    fb::ParamsUnion params;
    params.Set(std::move(p));
    l_.kernel("Transpose", {t.tensor}, {out}, std::move(params));
    return {out, order};
  }

  int64_t product(const std::vector<int>& labels) const { return shape_numel(shape_of(labels)); }

  // a and b combined into one term holding the labels of `keep` they name.
  Term contract(Term a, Term b, const std::vector<int>& keep) {
    auto has = [](const std::vector<int>& v, int label) { return std::find(v.begin(), v.end(), label) != v.end(); };
    a = sum_away(a, [&] {
      std::vector<int> k = keep;
      k.insert(k.end(), b.labels.begin(), b.labels.end());
      return k;
    }());
    b = sum_away(b, [&] {
      std::vector<int> k = keep;
      k.insert(k.end(), a.labels.begin(), a.labels.end());
      return k;
    }());
    std::vector<int> batch, left, inner, right;
    for (int label : a.labels) {
      if (!has(b.labels, label)) {
        left.push_back(label);
      } else {
        (has(keep, label) ? batch : inner).push_back(label);
      }
    }
    for (int label : b.labels) {
      if (!has(a.labels, label)) right.push_back(label);
    }
    auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
      x.insert(x.end(), y.begin(), y.end());
      x.insert(x.end(), z.begin(), z.end());
      return x;
    };
    a = transpose(a, concat(batch, left, inner));
    b = transpose(b, concat(batch, inner, right));
    const int64_t nb = product(batch), m = product(left), k = product(inner), n = product(right);
    const bool batched = nb != 1;
    auto dims = [batched, nb](int64_t r, int64_t c) {
      return batched ? std::vector<int64_t>{nb, r, c} : std::vector<int64_t>{r, c};
    };
    const int a3 = temp(dims(m, k)), b3 = temp(dims(k, n)), y3 = temp(dims(m, n));
    l_.view(a.tensor, a3);
    l_.view(b.tensor, b3);
    std::vector<int> scratch;
    if (l_.options().packing_scratch && l_.device().type() == fb::DeviceType::CPU) {
      using namespace kiln::kernels;
      scratch = {temp({gemm_pack_a_floats(m, k)}), temp({gemm_pack_b_floats(k, n)})};
    }
    l_.kernel("MatMul", {a3, b3}, {y3}, {}, std::move(scratch));
    Term y{temp(shape_of(concat(batch, left, right))), concat(batch, left, right)};
    l_.view(y3, y.tensor);
    return y;
  }

  OpContext& ctx_;
  LoweringContext& l_;
  const Equation& e_;
  int step_ = 0;
};

void lower_einsum(OpContext& ctx, LoweringContext& l) {
  const Equation e = parse_equation(ctx);
  std::vector<int> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(l.tensor(ctx.input_id(i)));
  const int output = l.tensor(ctx.output_id(0));
  if (ctx.dtype(0) == DType::FLOAT32) {
    EinsumLowering(ctx, l, e).run(inputs, output);
    return;
  }
  // float64: the MatMul kernel is float32, so the operands go through Casts.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int narrow = l.temp(ctx.node().name + "/float" + std::to_string(i), DType::FLOAT32, ctx.shape(i));
    l.kernel("Cast", {inputs[i]}, {narrow});
    inputs[i] = narrow;
  }
  const int narrow = l.temp(ctx.node().name + "/result", DType::FLOAT32, ctx.output(0).shape);
  EinsumLowering(ctx, l, e).run(inputs, narrow);
  l.kernel("Cast", {narrow}, {output});
}

}  // namespace

void add_einsum_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Einsum", .infer = infer_einsum, .lower = lower_einsum});
}

}  // namespace kiln::planner
