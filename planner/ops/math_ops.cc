// Element-wise math added for ONNX coverage: trigonometric and hyperbolic
// functions and their inverses, Round, Sign, Selu, Celu, Softsign,
// ThresholdedRelu, Shrink (one MathUnary kernel, the function in its
// parameters), IsNaN and IsInf (FloatClass), Mod and BitShift, Trilu,
// CumSum, Hardmax, GatherElements, EyeLike and Tile; DepthToSpace and
// SpaceToDepth as views around a Transpose; Bernoulli, RandomUniform(Like)
// and RandomNormal(Like) (one Random kernel); TfIdfVectorizer. The kernels
// and the meaning of their GenericParams are in kernels/cpu/src/math.cc.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "onnx/import.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

// MathUnary's function numbers (kernels/cpu/src/math.cc, MathFunction),
// with the attributes that become floats[0] and floats[1] and their defaults.
struct MathUnaryOp {
  const char* op;
  int64_t function;
  const char* attr_a;
  float default_a;
  const char* attr_b;
  float default_b;
};
constexpr MathUnaryOp kMathUnary[] = {
    {"Sin", 0, nullptr, 0.f, nullptr, 0.f},
    {"Cos", 1, nullptr, 0.f, nullptr, 0.f},
    {"Tan", 2, nullptr, 0.f, nullptr, 0.f},
    {"Asin", 3, nullptr, 0.f, nullptr, 0.f},
    {"Acos", 4, nullptr, 0.f, nullptr, 0.f},
    {"Atan", 5, nullptr, 0.f, nullptr, 0.f},
    {"Sinh", 6, nullptr, 0.f, nullptr, 0.f},
    {"Cosh", 7, nullptr, 0.f, nullptr, 0.f},
    {"Asinh", 9, nullptr, 0.f, nullptr, 0.f},
    {"Acosh", 10, nullptr, 0.f, nullptr, 0.f},
    {"Atanh", 11, nullptr, 0.f, nullptr, 0.f},
    {"Round", 12, nullptr, 0.f, nullptr, 0.f},
    {"Sign", 13, nullptr, 0.f, nullptr, 0.f},
    {"Selu", 14, "alpha", 1.67326319217681884765625f, "gamma", 1.05070102214813232421875f},
    {"Celu", 15, "alpha", 1.f, nullptr, 0.f},
    {"Softsign", 16, nullptr, 0.f, nullptr, 0.f},
    {"ThresholdedRelu", 17, "alpha", 1.f, nullptr, 0.f},
    {"Shrink", 18, "bias", 0.f, "lambd", 0.5f},
};

const MathUnaryOp& math_unary_of(OpContext& ctx) {
  for (const MathUnaryOp& m : kMathUnary) {
    if (ctx.node().op_type == m.op) return m;
  }
  ctx.error("internal error: no MathUnary function");
}

void infer_math_unary(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  const MathUnaryOp& m = math_unary_of(ctx);
  if (m.function == 15 && ctx.attr_float("alpha", 1.f) == 0.f) ctx.error("attribute 'alpha' must not be 0");
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_math_unary(OpContext& ctx, LoweringContext& l) {
  const MathUnaryOp& m = math_unary_of(ctx);
  const float a = m.attr_a != nullptr ? ctx.attr_float(m.attr_a, m.default_a) : 0.f;
  const float b = m.attr_b != nullptr ? ctx.attr_float(m.attr_b, m.default_b) : 0.f;
  l.kernel("MathUnary", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params({m.function}, {a, b}));
}

void infer_float_class(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.set_output(0, DType::BOOL, ctx.shape(0));
}

void lower_float_class(OpContext& ctx, LoweringContext& l) {
  const bool is_inf = ctx.node().op_type == "IsInf";
  std::vector<int64_t> ints = {is_inf ? 1 : 0, ctx.attr_int("detect_positive", 1) != 0 ? 1 : 0,
                               ctx.attr_int("detect_negative", 1) != 0 ? 1 : 0};
  l.kernel("FloatClass", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params(std::move(ints), {}));
}

void infer_mod(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT16, DType::FLOAT32, DType::FLOAT64, DType::INT8, DType::INT16, DType::INT32,
                       DType::INT64, DType::UINT8, DType::UINT16, DType::UINT32, DType::UINT64});
  if (ctx.dtype(1) != ctx.dtype(0)) ctx.error("inputs are ", dtype_str(ctx.dtype(0)), " and ", dtype_str(ctx.dtype(1)));
  const int64_t fmod = ctx.attr_int("fmod", 0);
  if (fmod != 0 && fmod != 1) ctx.error("attribute 'fmod' must be 0 or 1, has ", fmod);
  const bool is_float =
      ctx.dtype(0) == DType::FLOAT16 || ctx.dtype(0) == DType::FLOAT32 || ctx.dtype(0) == DType::FLOAT64;
  if (is_float && fmod == 0) ctx.error("attribute 'fmod' must be 1 for floating-point inputs");
  ctx.set_output(0, ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void lower_mod(OpContext& ctx, LoweringContext& l) {
  l.kernel("Mod", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params({ctx.attr_int("fmod", 0)}, {}));
}

void infer_bit_shift(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::UINT8, DType::UINT16, DType::UINT32, DType::UINT64});
  if (ctx.dtype(1) != ctx.dtype(0)) ctx.error("inputs are ", dtype_str(ctx.dtype(0)), " and ", dtype_str(ctx.dtype(1)));
  const std::string direction = ctx.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    ctx.error("attribute 'direction' must be LEFT or RIGHT, has '", direction, "'");
  }
  ctx.set_output(0, ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void lower_bit_shift(OpContext& ctx, LoweringContext& l) {
  l.kernel("BitShift", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params({ctx.attr_string("direction", "") == "RIGHT" ? 1 : 0}, {}));
}

}  // namespace

// Trilu: the diagonal offset k (input 1) must be known when planning.
void infer_trilu(OpContext& ctx) {
  ctx.expect_inputs(1, 2);
  if (ctx.rank(0) < 2) ctx.error("input has rank ", ctx.rank(0), ", Trilu needs 2 or more");
  if (ctx.has_input(1)) {
    const HostTensor& k = ctx.constant_input(1, "k");
    if (k.numel() != 1) ctx.error("k must be a scalar");
    if (k.int_at(0) > (int64_t{1} << 31) || k.int_at(0) < -(int64_t{1} << 31))
      ctx.error("k is ", k.int_at(0), ", out of range");
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_trilu(OpContext& ctx, LoweringContext& l) {
  const int64_t k = ctx.has_input(1) ? ctx.constant_input(1, "k").int_at(0) : 0;
  l.kernel("Trilu", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params({ctx.attr_int("upper", 1) != 0 ? 1 : 0, k}, {}));
}

// CumSum: the axis (input 1) must be known when planning.
void infer_cumsum(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  if (ctx.rank(0) < 1) ctx.error("input is a scalar; CumSum needs an axis");
  const HostTensor& axis = ctx.constant_input(1, "axis");
  if (axis.numel() != 1) ctx.error("axis must be a scalar");
  ctx.axis(axis.int_at(0), ctx.rank(0));
  for (const char* flag : {"exclusive", "reverse"}) {
    const int64_t v = ctx.attr_int(flag, 0);
    if (v != 0 && v != 1) ctx.error("attribute '", flag, "' must be 0 or 1, has ", v);
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_cumsum(OpContext& ctx, LoweringContext& l) {
  const int64_t axis = ctx.axis(ctx.constant_input(1, "axis").int_at(0), ctx.rank(0));
  l.kernel("CumSum", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params({axis, ctx.attr_int("exclusive", 0), ctx.attr_int("reverse", 0)}, {}));
}

void infer_hardmax(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  if (ctx.opset() < 13) ctx.not_supported("Hardmax before opset 13 (it flattened from the axis on)");
  ctx.axis(ctx.attr_int("axis", -1), ctx.rank(0));
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_hardmax(OpContext& ctx, LoweringContext& l) {
  l.kernel("Hardmax", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params({ctx.axis(ctx.attr_int("axis", -1), ctx.rank(0))}, {}));
}

void infer_gather_elements(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(1, {DType::INT32, DType::INT64});
  if (ctx.rank(0) < 1 || ctx.rank(1) != ctx.rank(0)) ctx.error("data and indices must have the same rank (>= 1)");
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0));
  for (int64_t d = 0; d < ctx.rank(0); ++d) {
    if (d != axis && ctx.shape(1)[static_cast<size_t>(d)] > ctx.shape(0)[static_cast<size_t>(d)]) {
      ctx.error("indices are larger than data on axis ", d);
    }
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(1));
}

void lower_gather_elements(OpContext& ctx, LoweringContext& l) {
  l.kernel("GatherElements", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params({ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0))}, {}));
}

// EyeLike: the input gives only the shape (2-D); dtype attribute or the
// input's.
void infer_eye_like(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  if (ctx.rank(0) != 2) ctx.error("input must be 2-D, has rank ", ctx.rank(0));
  const int64_t k = ctx.attr_int("k", 0);
  if (k > (int64_t{1} << 31) || k < -(int64_t{1} << 31)) ctx.error("attribute 'k' is ", k, ", out of range");
  DType dtype = ctx.dtype(0);
  if (ctx.has_attr("dtype")) {
    const int64_t onnx = ctx.attr_int("dtype", 1);
    // ONNX TensorProto element types kiln has.
    switch (onnx) {
      case 1: dtype = DType::FLOAT32; break;
      case 2: dtype = DType::UINT8; break;
      case 3: dtype = DType::INT8; break;
      case 4: dtype = DType::UINT16; break;
      case 5: dtype = DType::INT16; break;
      case 6: dtype = DType::INT32; break;
      case 7: dtype = DType::INT64; break;
      case 9: dtype = DType::BOOL; break;
      case 10: dtype = DType::FLOAT16; break;
      case 11: dtype = DType::FLOAT64; break;
      case 12: dtype = DType::UINT32; break;
      case 13: dtype = DType::UINT64; break;
      case 16: dtype = DType::BFLOAT16; break;
      default: ctx.not_supported("attribute 'dtype' ", onnx);
    }
  }
  ctx.set_output(0, dtype, ctx.shape(0));
}

void lower_eye_like(OpContext& ctx, LoweringContext& l) {
  l.kernel("EyeLike", {}, {l.tensor(ctx.output_id(0))}, generic_params({ctx.attr_int("k", 0)}, {}));
}

// Tile: the repeats (input 1) must be known when planning.
void infer_tile(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  const std::vector<int64_t> repeats = ctx.constant_input(1, "repeats").to_int64s();
  if (static_cast<int64_t>(repeats.size()) != ctx.rank(0)) {
    ctx.error("repeats has ", repeats.size(), " entries for an input of rank ", ctx.rank(0));
  }
  std::vector<int64_t> out = ctx.shape(0);
  for (size_t d = 0; d < out.size(); ++d) {
    if (repeats[d] < 0 || repeats[d] > (int64_t{1} << 30)) ctx.error("repeats[", d, "] is ", repeats[d]);
    if (__builtin_mul_overflow(out[d], repeats[d], &out[d])) ctx.error("repeats overflow the output's size");
  }
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_tile(OpContext& ctx, LoweringContext& l) {
  l.kernel("Tile", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))});
}

// DepthToSpace and SpaceToDepth are a reshape, a transpose and a reshape:
// the reshapes are views (the in-place pass makes them aliases), the
// transpose is the Transpose kernel.
struct Rearrangement {
  std::vector<int64_t> split;  // the input viewed with the block axes apart
  std::vector<int64_t> perm;
};

Rearrangement rearrangement(OpContext& ctx) {
  const auto& s = ctx.shape(0);
  const int64_t b = ctx.attr_int("blocksize", 0);
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (ctx.node().op_type == "SpaceToDepth") return {{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}};
  if (ctx.attr_string("mode", "DCR") == "CRD") return {{n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}};
  return {{n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}};
}

void infer_depth_space(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  if (ctx.rank(0) != 4) ctx.error("input must be 4-D (N, C, H, W), has rank ", ctx.rank(0));
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (b < 1 || b > 4096) ctx.error("attribute 'blocksize' must be from 1 to 4096, has ", b);
  const auto& s = ctx.shape(0);
  const bool to_space = ctx.node().op_type == "DepthToSpace";
  const std::string mode = ctx.attr_string("mode", "DCR");
  if (to_space && mode != "DCR" && mode != "CRD") ctx.error("attribute 'mode' must be DCR or CRD, is '", mode, "'");
  if (to_space) {
    if (s[1] % (b * b) != 0) ctx.error("channels ", s[1], " are not a multiple of blocksize^2 = ", b * b);
    ctx.set_output(0, ctx.dtype(0), {s[0], s[1] / (b * b), s[2] * b, s[3] * b});
  } else {
    if (s[2] % b != 0 || s[3] % b != 0) ctx.error("height and width must be multiples of blocksize ", b);
    ctx.set_output(0, ctx.dtype(0), {s[0], s[1] * b * b, s[2] / b, s[3] / b});
  }
}

void lower_depth_space(OpContext& ctx, LoweringContext& l) {
  const Rearrangement r = rearrangement(ctx);
  std::vector<int64_t> moved(r.perm.size());
  for (size_t i = 0; i < r.perm.size(); ++i) moved[i] = r.split[static_cast<size_t>(r.perm[i])];
  const DType dtype = ctx.dtype(0);
  const int split = l.temp(ctx.node().name + ".blocks", dtype, r.split);
  const int transposed = l.temp(ctx.node().name + ".moved", dtype, moved);
  l.view(l.tensor(ctx.input_id(0)), split);
  fb::TransposeParamsT p;
  for (int64_t v : r.perm) p.perm.push_back(static_cast<int32_t>(v));
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Transpose", {split}, {transposed}, std::move(params));
  l.view(transposed, l.tensor(ctx.output_id(0)));
}

// Random ops: a counter-based generator (the Random kernel) with a 64-bit
// key. A `seed` attribute gives the key (its float's bits), so a model with a
// seed gives the same values wherever it runs. Without a seed the planner
// fixes the key from the node's output name: the same plan for the same
// model, the same values on every run (the runtime keeps no state between
// runs). The values are drawn at run time, never folded into constants.
enum RandomKind : int64_t { kRandomUniform = 0, kRandomNormal = 1, kRandomBernoulli = 2 };

int64_t random_key(OpContext& ctx) {
  uint64_t key = 0;
  if (ctx.has_attr("seed")) {
    const float seed = ctx.attr_float("seed", 0.f);
    uint32_t bits = 0;
    std::memcpy(&bits, &seed, sizeof bits);
    key = bits;
  } else {
    // FNV-1a of the output's name, with the top bit set: never a seed's key.
    key = 1469598103934665603ull;
    for (unsigned char c : ctx.output(0).name) key = (key ^ c) * 1099511628211ull;
    key |= uint64_t{1} << 63;
  }
  return static_cast<int64_t>(key);
}

DType random_dtype(OpContext& ctx, DType fallback) {
  if (!ctx.has_attr("dtype")) return fallback;
  const int64_t onnx = ctx.attr_int("dtype", 1);
  const std::optional<DType> dtype =
      onnx >= 0 && onnx <= 64 ? dtype_from_onnx(static_cast<int32_t>(onnx)) : std::nullopt;
  if (!dtype) ctx.not_supported("attribute 'dtype' ", onnx);
  return *dtype;
}

bool is_random_float(DType t) { return t == DType::FLOAT32 || t == DType::FLOAT64 || t == DType::FLOAT16; }

void infer_random(OpContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const bool like = op == "RandomUniformLike" || op == "RandomNormalLike";
  DType dtype = DType::FLOAT32;
  std::vector<int64_t> shape;
  if (op == "Bernoulli") {
    ctx.expect_inputs(1, 1);
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64});
    dtype = random_dtype(ctx, ctx.dtype(0));
    if (dtype == DType::BFLOAT16 || dtype_bytes(dtype) == 0 || dtype_bytes(dtype) > 8) {
      ctx.not_supported("output dtype ", dtype_str(dtype));
    }
    shape = ctx.shape(0);
  } else if (like) {
    ctx.expect_inputs(1, 1);
    dtype = random_dtype(ctx, ctx.dtype(0));
    shape = ctx.shape(0);
  } else {
    ctx.expect_inputs(0, 0);
    if (!ctx.has_attr("shape")) ctx.error("attribute 'shape' is required");
    shape = ctx.attr_ints("shape");
    for (int64_t d : shape) {
      if (d < 0) ctx.error("attribute 'shape' ", shape_str(shape), " has a negative dimension");
    }
    dtype = random_dtype(ctx, DType::FLOAT32);
  }
  if (op != "Bernoulli" && !is_random_float(dtype)) ctx.not_supported("output dtype ", dtype_str(dtype));
  const bool normal = op == "RandomNormal" || op == "RandomNormalLike";
  if (op != "Bernoulli") {
    const float a = normal ? ctx.attr_float("mean", 0.f) : ctx.attr_float("low", 0.f);
    const float b = normal ? ctx.attr_float("scale", 1.f) : ctx.attr_float("high", 1.f);
    if (!std::isfinite(a) || !std::isfinite(b))
      ctx.error(normal ? "mean and scale" : "low and high", " must be finite");
  }
  ctx.set_output(0, dtype, std::move(shape));
}

void lower_random(OpContext& ctx, LoweringContext& l) {
  const std::string& op = ctx.node().op_type;
  const int out = l.tensor(ctx.output_id(0));
  const int64_t key = random_key(ctx);
  if (op == "Bernoulli") {
    l.kernel("Random", {l.tensor(ctx.input_id(0))}, {out}, generic_params({kRandomBernoulli, key}, {0.f, 0.f}));
    return;
  }
  const bool normal = op == "RandomNormal" || op == "RandomNormalLike";
  const float a = normal ? ctx.attr_float("mean", 0.f) : ctx.attr_float("low", 0.f);
  const float b = normal ? ctx.attr_float("scale", 1.f) : ctx.attr_float("high", 1.f);
  l.kernel("Random", {}, {out}, generic_params({normal ? kRandomNormal : kRandomUniform, key}, {a, b}));
}

// TfIdfVectorizer over int32/int64 tokens (a string pool is refused): the
// pool becomes an n-gram table the TfIdf kernel walks. ngram_counts[k] is
// where the (k+1)-grams start in the pool; ngram_indexes gives each n-gram's
// output coordinate; weights (one per n-gram, default 1) scale IDF and TFIDF.
struct TfIdfTable {
  int64_t mode = 0;  // 0 TF, 1 IDF, 2 TFIDF
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  std::vector<int64_t> pool;
  std::vector<int64_t> grams;  // per n-gram: length, pool offset, output index
  std::vector<float> weights;
  int64_t outputs = 0;
};

TfIdfTable tfidf_table(OpContext& ctx) {
  TfIdfTable t;
  if (ctx.has_attr("pool_strings")) ctx.not_supported("string n-grams (pool_strings) are not supported");
  const std::string mode = ctx.attr_string("mode", "");
  if (mode == "TF") {
    t.mode = 0;
  } else if (mode == "IDF") {
    t.mode = 1;
  } else if (mode == "TFIDF") {
    t.mode = 2;
  } else {
    ctx.error("attribute 'mode' is '", mode, "', expected TF, IDF or TFIDF");
  }
  t.min_gram = ctx.attr_int("min_gram_length", 0);
  t.max_gram = ctx.attr_int("max_gram_length", 0);
  t.max_skip = ctx.attr_int("max_skip_count", -1);
  if (t.min_gram < 1 || t.max_gram < t.min_gram || t.max_gram > 64) {
    ctx.error("attributes 'min_gram_length' ", t.min_gram, " and 'max_gram_length' ", t.max_gram,
              " must satisfy 1 <= min <= max <= 64");
  }
  if (t.max_skip < 0 || t.max_skip > (int64_t{1} << 20)) ctx.error("attribute 'max_skip_count' is ", t.max_skip);
  t.pool = ctx.attr_ints("pool_int64s");
  const std::vector<int64_t> counts = ctx.attr_ints("ngram_counts");
  const std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
  if (t.pool.empty()) ctx.error("attribute 'pool_int64s' is required");
  if (counts.empty() || counts.size() > 64) ctx.error("attribute 'ngram_counts' has ", counts.size(), " entries");
  const int64_t pool_size = static_cast<int64_t>(t.pool.size());
  std::vector<int64_t> grams;  // (n, offset) in pool order
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t n = static_cast<int64_t>(k) + 1;
    const int64_t begin = counts[k], end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
    if (begin < 0 || end < begin || end > pool_size || (end - begin) % n != 0) {
      ctx.error("attributes 'ngram_counts' and 'pool_int64s' disagree: ngram_counts[", k, "] = ", begin,
                " does not delimit whole ", n, "-grams of a pool of ", pool_size);
    }
    for (int64_t at = begin; at < end; at += n) {
      grams.push_back(n);
      grams.push_back(at);
    }
  }
  const size_t count = grams.size() / 2;
  if (indexes.size() != count) {
    ctx.error("attributes 'ngram_indexes', 'ngram_counts' and 'pool_int64s' disagree: ", indexes.size(),
              " output indexes for ", count, " n-grams in the pool");
  }
  std::vector<float> weights = ctx.attr_floats("weights");
  if (!weights.empty() && weights.size() != count) {
    ctx.error("attribute 'weights' has ", weights.size(), " entries for ", count, " n-grams");
  }
  if (weights.empty()) weights.assign(count, 1.f);
  for (size_t i = 0; i < count; ++i) {
    if (indexes[i] < 0 || indexes[i] >= (int64_t{1} << 31)) {
      ctx.error("attribute 'ngram_indexes' [", i, "] is ", indexes[i]);
    }
    t.outputs = std::max(t.outputs, indexes[i] + 1);
    const int64_t n = grams[2 * i];
    if (n < t.min_gram || n > t.max_gram) continue;  // a length the op does not extract
    t.grams.insert(t.grams.end(), {n, grams[2 * i + 1], indexes[i]});
    t.weights.push_back(weights[i]);
  }
  return t;
}

void infer_tfidf(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::INT32, DType::INT64});
  const TfIdfTable t = tfidf_table(ctx);
  std::vector<int64_t> shape = ctx.shape(0);
  if (shape.size() != 1 && shape.size() != 2) ctx.error("X must be 1-D or 2-D, has rank ", shape.size());
  shape.back() = t.outputs;
  ctx.set_output(0, DType::FLOAT32, shape);
}

void lower_tfidf(OpContext& ctx, LoweringContext& l) {
  TfIdfTable t = tfidf_table(ctx);
  const std::string& name = ctx.output(0).name;
  const int64_t grams = static_cast<int64_t>(t.weights.size());
  const int64_t pool_size = static_cast<int64_t>(t.pool.size());
  const int pool = l.constant(name + "_pool", HostTensor::from_int64s(t.pool, {pool_size}));
  const int table = l.constant(name + "_ngrams", HostTensor::from_int64s(t.grams, {grams, 3}));
  const int weights = l.constant(name + "_weights", HostTensor::from_floats(t.weights, {grams}));
  l.kernel("TfIdf", {l.tensor(ctx.input_id(0)), pool, table, weights}, {l.tensor(ctx.output_id(0))},
           generic_params({t.mode, t.min_gram, t.max_gram, t.max_skip}, {}));
}

void add_math_ops(std::vector<OpDef>& ops) {
  for (const MathUnaryOp& m : kMathUnary) {
    ops.push_back({.op_type = m.op, .infer = infer_math_unary, .lower = lower_math_unary});
  }
  ops.push_back({.op_type = "IsNaN", .infer = infer_float_class, .lower = lower_float_class});
  ops.push_back({.op_type = "IsInf", .infer = infer_float_class, .lower = lower_float_class});
  ops.push_back({.op_type = "Mod", .infer = infer_mod, .lower = lower_mod});
  ops.push_back({.op_type = "BitShift", .infer = infer_bit_shift, .lower = lower_bit_shift});
  ops.push_back({.op_type = "Trilu", .infer = infer_trilu, .lower = lower_trilu});
  ops.push_back({.op_type = "CumSum", .infer = infer_cumsum, .lower = lower_cumsum});
  ops.push_back({.op_type = "Hardmax", .infer = infer_hardmax, .lower = lower_hardmax});
  ops.push_back({.op_type = "GatherElements", .infer = infer_gather_elements, .lower = lower_gather_elements});
  ops.push_back({.op_type = "DepthToSpace", .infer = infer_depth_space, .lower = lower_depth_space});
  ops.push_back({.op_type = "SpaceToDepth", .infer = infer_depth_space, .lower = lower_depth_space});
  ops.push_back({.op_type = "EyeLike", .infer = infer_eye_like, .lower = lower_eye_like});
  ops.push_back({.op_type = "Tile", .infer = infer_tile, .lower = lower_tile});
  for (const char* op : {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike"}) {
    ops.push_back({.op_type = op, .infer = infer_random, .lower = lower_random, .foldable = false});
  }
  ops.push_back({.op_type = "TfIdfVectorizer", .infer = infer_tfidf, .lower = lower_tfidf});
}

}  // namespace kiln::planner
