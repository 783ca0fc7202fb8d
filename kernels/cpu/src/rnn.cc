// Recurrent kernels, one per ONNX op, float32:
//
//   RNN, GRU, LSTM
//     inputs   as ONNX numbers them: X, W, R, then the optional B,
//              sequence_lens (int32 or int64; the planner has checked
//              0 <= length <= seq, the kernel clamps anyway), initial_h,
//              and for LSTM initial_c and P (absent ones are nullptr).
//     outputs  Y_h, then Y_c (LSTM only), then Y when the node has it (the
//              planner gives an unused Y_h or Y_c a temporary).
//     scratch  the working memory (rnn_work_floats, kiln/kernels/rnn.h),
//              then optionally the packing scratch of the packed GEMM
//              (rnn_pack_a_floats, rnn_pack_b_floats); without it the
//              products run as plain loops (gemm_f32).
//     GenericParams
//       ints   [hidden_size, direction (0 forward, 1 reverse, 2
//              bidirectional), layout (0: X [seq, batch, input], Y [seq,
//              dirs, batch, H], Y_h [dirs, batch, H]; 1: X [batch, seq,
//              input], Y [batch, seq, dirs, H], Y_h [batch, dirs, H]),
//              linear_before_reset (GRU), input_forget (LSTM: f = 1 - i),
//              then the activation functions (RnnActivation) of each
//              direction: f (RNN); f, g (GRU); f, g, h (LSTM)]
//       floats [clip (0: none; otherwise every gate's input is clamped to
//              [-clip, clip] before its activation), then alpha and beta of
//              each activation in the order of ints]
//
// Gate order in W, R and B is ONNX's: LSTM i, o, f, c; GRU z, r, h. B holds
// Wb then Rb; P holds the peepholes of i, o, f.
//
// Steps, for each direction (the working memory is reused):
//   1. x_proj = X W^T for every time step at once: one product of seq*batch
//      rows (rows in X's own order, so either layout is one matrix).
//   2. For each step s: rec = h R^T over all batch rows (one product). Then
//      for each row b whose length n_b > s: its time is t = s (forward) or
//      n_b - 1 - s (reverse); the gates are x_proj[t, b] + rec[b] + biases,
//      clipped and activated; the new state goes to h (c) and to Y[t, b].
//      GRU with linear_before_reset 0 needs (r * h) R_h^T: a second
//      product between computing r and the candidate.
//   3. Y_h (Y_c) get each row's state: the last step within its length.
// Y is zero at steps past a row's length (only written then when
// sequence_lens is given).

#include <math.h>
#include <string.h>

#include "activation.h"
#include "cpu_kernels.h"
#include "gemm.h"
#include "kernel_util.h"
#include "kiln/kernels/rnn.h"
#include "vmath.h"

namespace kiln {
namespace kernels {
namespace {

struct GateActivation {
  int64_t fn = kRnnSigmoid;
  float alpha = 0.f, beta = 0.f;
};

void activate(const GateActivation& a, float* x, int64_t n) {
  const float alpha = a.alpha, beta = a.beta;
  // The common gates on the vector path where there is one (vmath.h).
  if (a.fn == kRnnSigmoid && vector_math(MathOp::kSigmoid, x, x, n)) return;
  if (a.fn == kRnnTanh && vector_math(MathOp::kTanh, x, x, n)) return;
  switch (static_cast<RnnActivation>(a.fn)) {
    // clang-format off
    case kRnnSigmoid: for (int64_t i = 0; i < n; ++i) x[i] = sigmoid(x[i]); break;
    case kRnnTanh: for (int64_t i = 0; i < n; ++i) x[i] = tanhf(x[i]); break;
    case kRnnRelu: for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f; break;
    case kRnnAffine: for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta; break;
    case kRnnLeakyRelu: for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0.f ? alpha * x[i] : x[i]; break;
    case kRnnThresholdedRelu: for (int64_t i = 0; i < n; ++i) x[i] = x[i] > alpha ? x[i] : 0.f; break;
    case kRnnScaledTanh: for (int64_t i = 0; i < n; ++i) x[i] = alpha * tanhf(beta * x[i]); break;
    case kRnnHardSigmoid: for (int64_t i = 0; i < n; ++i) x[i] = hard_sigmoid(x[i], alpha, beta); break;
    case kRnnElu: for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0.f ? alpha * (expf(x[i]) - 1.f) : x[i]; break;
    case kRnnSoftsign: for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.f + fabsf(x[i])); break;
    // clang-format on
    case kRnnSoftplus:  // log(1 + e^x) without overflowing for large x
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
      break;
    default: break;
  }
}

void clip(float* x, int64_t n, float threshold) {
  if (threshold <= 0.f) return;
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] < -threshold ? -threshold : (x[i] > threshold ? threshold : x[i]);
}

// Everything one call works on, resolved from its arguments.
struct Recurrence {
  int64_t kind = kRnnSimple;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1, direction = 0;
  bool batch_first = false, linear_before_reset = false, input_forget = false;
  float clip = 0.f;
  const float *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr;
  const float *initial_h = nullptr, *initial_c = nullptr, *p = nullptr;
  const Tensor* lengths = nullptr;
  float *y = nullptr, *y_h = nullptr, *y_c = nullptr;
  float *work = nullptr, *pack_a = nullptr, *pack_b = nullptr;
  GateActivation act[6];

  int64_t x_row(int64_t t, int64_t row) const { return batch_first ? row * seq + t : t * batch + row; }
  int64_t y_offset(int64_t t, int64_t d, int64_t row) const {
    return (batch_first ? (row * seq + t) * dirs + d : (t * dirs + d) * batch + row) * hidden;
  }
  int64_t state_offset(int64_t d, int64_t row) const {
    return (batch_first ? row * dirs + d : d * batch + row) * hidden;
  }
  int64_t length(int64_t row) const {
    if (lengths == nullptr) return seq;
    const int64_t n = lengths->dtype() == DType::INT32 ? lengths->data_as<const int32_t>()[row]
                                                       : lengths->data_as<const int64_t>()[row];
    return n < 0 ? 0 : (n > seq ? seq : n);
  }
};

// C (m x n, ldc) = A (m x k, lda) B^T, B given as n rows of k floats (a
// weight matrix in ONNX's layout).
void product(const Recurrence& rc, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b_rows,
             float* c, int64_t ldc) {
  if (rc.pack_b != nullptr) {
    GemmMatrix am;
    am.data = a;
    am.ld = lda;
    GemmMatrix bm;
    bm.data = b_rows;
    bm.ld = k;
    bm.trans = true;
    gemm_packed(m, n, k, am, bm, nullptr, c, ldc, GemmEpilogue{}, rc.pack_a, rc.pack_b);
  } else {
    gemm_f32(m, n, k, a, lda, false, b_rows, k, true, c, ldc, false);
  }
}

// One direction's working memory (in rc.work, reused by every direction)
// and its slices of the weights.
struct Direction {
  int64_t d = 0;
  bool reverse = false;
  float* x_proj = nullptr;  // [seq * batch][G * H]
  float* rec = nullptr;     // [batch][G * H]
  float* h = nullptr;       // [batch][H]
  float* aux = nullptr;     // LSTM: c; GRU: r * h
  float* aux2 = nullptr;    // GRU: the candidate's recurrent part
  const float *w = nullptr, *r = nullptr, *wb = nullptr, *rb = nullptr, *p = nullptr;
  const GateActivation* act = nullptr;
};

Direction direction_of(const Recurrence& rc, int64_t d, bool reverse) {
  const int64_t H = rc.hidden, GH = rc.gates * H, batch = rc.batch;
  Direction dir;
  dir.d = d;
  dir.reverse = reverse;
  dir.x_proj = rc.work;
  dir.rec = dir.x_proj + rc.seq * batch * GH;
  dir.h = dir.rec + batch * GH;
  dir.aux = dir.h + batch * H;
  dir.aux2 = dir.aux + batch * H;
  dir.w = rc.w + d * GH * rc.input;
  dir.r = rc.r + d * GH * H;
  dir.wb = rc.b != nullptr ? rc.b + d * 2 * GH : nullptr;
  dir.rb = dir.wb != nullptr ? dir.wb + GH : nullptr;
  dir.p = rc.p != nullptr ? rc.p + d * 3 * H : nullptr;
  dir.act = rc.act + d * rnn_activations_per_direction(rc.kind);
  return dir;
}

// h (and the LSTM's c) of every batch row from initial_h (initial_c), or 0.
void initial_state(const Recurrence& rc, const Direction& dir) {
  const int64_t H = rc.hidden;
  for (int64_t row = 0; row < rc.batch; ++row) {
    float* hr = dir.h + row * H;
    if (rc.initial_h != nullptr) {
      memcpy(hr, rc.initial_h + rc.state_offset(dir.d, row), static_cast<size_t>(H) * sizeof(float));
    } else {
      memset(hr, 0, static_cast<size_t>(H) * sizeof(float));
    }
    if (rc.kind == kRnnLstm) {
      float* cr = dir.aux + row * H;
      if (rc.initial_c != nullptr) {
        memcpy(cr, rc.initial_c + rc.state_offset(dir.d, row), static_cast<size_t>(H) * sizeof(float));
      } else {
        memset(cr, 0, static_cast<size_t>(H) * sizeof(float));
      }
    }
  }
}

// Batch row `row` at step s: its time t (counted from its last step when
// reversed), its gates in rec and its input projection; false past the
// row's length.
struct RowStep {
  int64_t t = 0;
  float* g = nullptr;
  const float* xp = nullptr;
};

bool row_step(const Recurrence& rc, const Direction& dir, int64_t row, int64_t s, RowStep* out) {
  const int64_t n = rc.length(row);
  if (s >= n) return false;
  const int64_t GH = rc.gates * rc.hidden;
  out->t = dir.reverse ? n - 1 - s : s;
  out->g = dir.rec + row * GH;
  out->xp = dir.x_proj + rc.x_row(out->t, row) * GH;
  return true;
}

// g[j] += xp[j] and both biases, for j < count: the gates' inputs.
void add_inputs(float* g, const float* xp, const float* wb, const float* rb, int64_t count) {
  for (int64_t j = 0; j < count; ++j) g[j] += xp[j] + (wb != nullptr ? wb[j] + rb[j] : 0.f);
}

// GRU without linear_before_reset, step s: z and r of every row still
// within its length, then (r * h) R_h^T into aux2 for the candidate.
void gru_reset_gates(const Recurrence& rc, const Direction& dir, int64_t s) {
  const int64_t H = rc.hidden;
  for (int64_t row = 0; row < rc.batch; ++row) {
    RowStep st;
    if (!row_step(rc, dir, row, s, &st)) continue;
    add_inputs(st.g, st.xp, dir.wb, dir.rb, 2 * H);
    clip(st.g, 2 * H, rc.clip);
    activate(dir.act[0], st.g, 2 * H);
    const float* hr = dir.h + row * H;
    float* rh = dir.aux + row * H;
    for (int64_t j = 0; j < H; ++j) rh[j] = st.g[H + j] * hr[j];
  }
  product(rc, rc.batch, H, H, dir.aux, H, dir.r + 2 * H * H, dir.aux2, H);
}

// One GRU row's step: the gates g (z, r, candidate; z and r already done
// when gru_reset_first), then the new state hr.
void gru_row(const Recurrence& rc, const Direction& dir, int64_t row, float* g, const float* xp, float* hr,
             bool gru_reset_first) {
  const int64_t H = rc.hidden;
  const float *wb = dir.wb, *rb = dir.rb;
  float* z = g;
  float* rr = g + H;
  float* cand = g + 2 * H;
  if (gru_reset_first) {
    // z and r are done; the candidate's recurrent part is in aux2.
    const float* rh_r = dir.aux2 + row * H;
    for (int64_t j = 0; j < H; ++j) {
      cand[j] = xp[2 * H + j] + rh_r[j] + (wb != nullptr ? wb[2 * H + j] + rb[2 * H + j] : 0.f);
    }
  } else {
    add_inputs(g, xp, wb, rb, 2 * H);
    clip(g, 2 * H, rc.clip);
    activate(dir.act[0], g, 2 * H);
    for (int64_t j = 0; j < H; ++j) {
      cand[j] = xp[2 * H + j] + (wb != nullptr ? wb[2 * H + j] : 0.f) +
                rr[j] * (cand[j] + (rb != nullptr ? rb[2 * H + j] : 0.f));
    }
  }
  clip(cand, H, rc.clip);
  activate(dir.act[1], cand, H);
  for (int64_t j = 0; j < H; ++j) hr[j] = (1.f - z[j]) * cand[j] + z[j] * hr[j];
}

// One LSTM row's step: the gates g (i, o, f, c) with the peepholes, then
// the new cell state (in aux) and hr.
void lstm_row(const Recurrence& rc, const Direction& dir, int64_t row, float* g, const float* xp, float* hr) {
  const int64_t H = rc.hidden, GH = rc.gates * H;
  const float *wb = dir.wb, *rb = dir.rb, *p = dir.p;
  const GateActivation* act = dir.act;
  float* gi = g;
  float* go = g + H;
  float* gf = g + 2 * H;
  float* gc = g + 3 * H;
  float* cr = dir.aux + row * H;
  add_inputs(g, xp, wb, rb, GH);
  if (p != nullptr) {
    for (int64_t j = 0; j < H; ++j) {
      gi[j] += p[j] * cr[j];
      gf[j] += p[2 * H + j] * cr[j];
    }
  }
  clip(gi, H, rc.clip);
  activate(act[0], gi, H);
  if (rc.input_forget) {
    for (int64_t j = 0; j < H; ++j) gf[j] = 1.f - gi[j];
  } else {
    clip(gf, H, rc.clip);
    activate(act[0], gf, H);
  }
  clip(gc, H, rc.clip);
  activate(act[1], gc, H);
  for (int64_t j = 0; j < H; ++j) cr[j] = gf[j] * cr[j] + gi[j] * gc[j];
  if (p != nullptr) {
    for (int64_t j = 0; j < H; ++j) go[j] += p[H + j] * cr[j];
  }
  clip(go, H, rc.clip);
  activate(act[0], go, H);
  // h(c) goes through gc, which is free now.
  memcpy(gc, cr, static_cast<size_t>(H) * sizeof(float));
  activate(act[2], gc, H);
  for (int64_t j = 0; j < H; ++j) hr[j] = go[j] * gc[j];
}

// Step 2's gates and new state for every row still within its length at
// step s (rec holds h R^T), written to Y too.
void step_rows(const Recurrence& rc, const Direction& dir, int64_t s, bool gru_reset_first) {
  const int64_t H = rc.hidden;
  for (int64_t row = 0; row < rc.batch; ++row) {
    RowStep st;
    if (!row_step(rc, dir, row, s, &st)) continue;
    float* hr = dir.h + row * H;
    if (rc.kind == kRnnSimple) {
      add_inputs(st.g, st.xp, dir.wb, dir.rb, H);
      clip(st.g, H, rc.clip);
      activate(dir.act[0], st.g, H);
      memcpy(hr, st.g, static_cast<size_t>(H) * sizeof(float));
    } else if (rc.kind == kRnnGru) {
      gru_row(rc, dir, row, st.g, st.xp, hr, gru_reset_first);
    } else {
      lstm_row(rc, dir, row, st.g, st.xp, hr);
    }
    if (rc.y != nullptr) memcpy(rc.y + rc.y_offset(st.t, dir.d, row), hr, static_cast<size_t>(H) * sizeof(float));
  }
}

// One direction of the recurrence (steps 1 to 3 above).
void run_direction(const Recurrence& rc, int64_t d, bool reverse) {
  const int64_t H = rc.hidden, GH = rc.gates * H, batch = rc.batch;
  const Direction dir = direction_of(rc, d, reverse);
  initial_state(rc, dir);
  // Step 1.
  product(rc, rc.seq * batch, GH, rc.input, rc.x, rc.input, dir.w, dir.x_proj, GH);
  const bool gru_reset_first = rc.kind == kRnnGru && !rc.linear_before_reset;
  for (int64_t s = 0; s < rc.seq; ++s) {
    // Step 2: the recurrent product (GRU without linear_before_reset: z and
    // r only; the candidate's comes after the reset gate).
    product(rc, batch, gru_reset_first ? 2 * H : GH, H, dir.h, H, dir.r, dir.rec, GH);
    if (gru_reset_first) gru_reset_gates(rc, dir, s);
    step_rows(rc, dir, s, gru_reset_first);
  }
  // Step 3.
  for (int64_t row = 0; row < batch; ++row) {
    memcpy(rc.y_h + rc.state_offset(d, row), dir.h + row * H, static_cast<size_t>(H) * sizeof(float));
    if (rc.y_c != nullptr) {
      memcpy(rc.y_c + rc.state_offset(d, row), dir.aux + row * H, static_cast<size_t>(H) * sizeof(float));
    }
  }
}

// Input positions, as ONNX numbers them.
constexpr uint32_t kX = 0, kW = 1, kR = 2, kB = 3, kLengths = 4, kInitialH = 5, kInitialC = 6, kP = 7;

bool dims_are(const Tensor& t, int64_t d0, int64_t d1, int64_t d2) {
  return t.rank() == 3 && t.dim(0) == d0 && t.dim(1) == d1 && t.dim(2) == d2;
}

// The geometry of a call, read from its tensors; check() has validated it
// before run() reads it.
Recurrence resolve(const KernelArgs& args, int64_t kind) {
  const auto* params = args.params<fb::GenericParams>();
  const auto* ints = params->ints();
  const auto* floats = params->floats();
  Recurrence rc;
  rc.kind = kind;
  rc.gates = rnn_gates(kind);
  rc.hidden = ints->Get(kRnnIntHidden);
  rc.direction = ints->Get(kRnnIntDirection);
  rc.dirs = rc.direction == 2 ? 2 : 1;
  rc.batch_first = ints->Get(kRnnIntLayout) == 1;
  rc.linear_before_reset = ints->Get(kRnnIntLinearBeforeReset) != 0;
  rc.input_forget = ints->Get(kRnnIntInputForget) != 0;
  rc.clip = floats->Get(kRnnFloatClip);
  const Tensor& x = args.in(kX);
  if (x.rank() == 3) {
    rc.seq = rc.batch_first ? x.dim(1) : x.dim(0);
    rc.batch = rc.batch_first ? x.dim(0) : x.dim(1);
    rc.input = x.dim(2);
  }
  const int64_t count = rc.dirs * rnn_activations_per_direction(kind);
  for (int64_t i = 0; i < count && i < 6; ++i) {
    const uint32_t at = static_cast<uint32_t>(i);
    if (ints->size() > kRnnIntActivations + at) rc.act[i].fn = ints->Get(kRnnIntActivations + at);
    if (floats->size() > kRnnFloatActivations + 2 * at + 1) {
      rc.act[i].alpha = floats->Get(kRnnFloatActivations + 2 * at);
      rc.act[i].beta = floats->Get(kRnnFloatActivations + 2 * at + 1);
    }
  }
  auto data = [&args](uint32_t i) { return args.has_input(i) ? args.in(i).data_as<const float>() : nullptr; };
  rc.x = data(kX);
  rc.w = data(kW);
  rc.r = data(kR);
  rc.b = data(kB);
  rc.initial_h = data(kInitialH);
  rc.initial_c = data(kInitialC);
  rc.p = data(kP);
  rc.lengths = args.has_input(kLengths) ? &args.in(kLengths) : nullptr;
  const uint32_t states = kind == kRnnLstm ? 2 : 1;
  rc.y_h = args.out(0).data_as<float>();
  rc.y_c = kind == kRnnLstm ? args.out(1).data_as<float>() : nullptr;
  rc.y = args.num_outputs > states ? args.out(states).data_as<float>() : nullptr;
  rc.work = args.scratch[0]->data_as<float>();
  if (args.num_scratch == 3) {
    rc.pack_a = args.scratch[1]->data_as<float>();
    rc.pack_b = args.scratch[2]->data_as<float>();
  }
  return rc;
}

Error check_recurrence(const KernelArgs& args, int64_t kind) {
  const uint32_t max_inputs = kind == kRnnLstm ? 8 : 6;
  KILN_KERNEL_CHECK(args, args.num_inputs >= 3 && args.num_inputs <= max_inputs, "expects 3 to %u inputs, has %u",
                    max_inputs, args.num_inputs);
  for (uint32_t i = 0; i < 3; ++i) KILN_KERNEL_CHECK(args, args.inputs[i] != nullptr, "input %u is required", i);
  for (uint32_t i = 0; i < args.num_inputs; ++i) {
    if (!args.has_input(i)) continue;
    if (i == kLengths) {
      KILN_KERNEL_CHECK(args, args.in(i).dtype() == DType::INT32 || args.in(i).dtype() == DType::INT64,
                        "sequence_lens must be int32 or int64");
    } else {
      KILN_KERNEL_CHECK(args, args.in(i).dtype() == DType::FLOAT32, "input %u must be float32", i);
    }
  }
  const uint32_t states = kind == kRnnLstm ? 2 : 1;
  KILN_KERNEL_CHECK(args, args.num_outputs == states || args.num_outputs == states + 1,
                    "expects %u or %u outputs, has %u", states, states + 1, args.num_outputs);
  for (uint32_t i = 0; i < args.num_outputs; ++i) {
    KILN_KERNEL_CHECK(args, args.out(i).dtype() == DType::FLOAT32, "output %u must be float32", i);
  }
  KILN_KERNEL_CHECK(args, args.num_scratch == 1 || args.num_scratch == 3, "expects 1 or 3 scratch buffers, has %u",
                    args.num_scratch);
  const auto* params = args.params<fb::GenericParams>();
  KILN_KERNEL_CHECK(
      args, params != nullptr && params->ints() != nullptr && params->floats() != nullptr && aligned8(params->ints()),
      "expects GenericParams");
  const auto* ints = params->ints();
  KILN_KERNEL_CHECK(args, ints->size() > kRnnIntActivations, "expects %u integer parameters", kRnnIntActivations);
  const int64_t direction = ints->Get(kRnnIntDirection), layout = ints->Get(kRnnIntLayout);
  KILN_KERNEL_CHECK(args, direction >= 0 && direction <= 2, "direction %lld out of range",
                    static_cast<long long>(direction));
  KILN_KERNEL_CHECK(args, layout == 0 || layout == 1, "layout %lld out of range", static_cast<long long>(layout));
  const int64_t dirs = direction == 2 ? 2 : 1;
  const int64_t count = dirs * rnn_activations_per_direction(kind);
  KILN_KERNEL_CHECK(
      args, ints->size() >= kRnnIntActivations + count && params->floats()->size() >= kRnnFloatActivations + 2 * count,
      "expects %lld activation functions with alpha and beta", static_cast<long long>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t fn = ints->Get(kRnnIntActivations + static_cast<uint32_t>(i));
    KILN_KERNEL_CHECK(args, fn >= 0 && fn < kRnnNumActivations, "unknown activation %lld", static_cast<long long>(fn));
  }
  const float threshold = params->floats()->Get(kRnnFloatClip);
  KILN_KERNEL_CHECK(args, threshold >= 0.f, "clip must not be negative");

  const Recurrence rc = resolve(args, kind);
  const int64_t H = rc.hidden;
  KILN_KERNEL_CHECK(args, args.in(kX).rank() == 3, "X must be 3-D");
  KILN_KERNEL_CHECK(args, H > 0 && H < (int64_t{1} << 32), "hidden_size %lld out of range", static_cast<long long>(H));
  const int64_t GH = rc.gates * H;
  KILN_KERNEL_CHECK(args, dims_are(args.in(kW), dirs, GH, rc.input), "W must be [%lld, %lld, %lld]",
                    static_cast<long long>(dirs), static_cast<long long>(GH), static_cast<long long>(rc.input));
  KILN_KERNEL_CHECK(args, dims_are(args.in(kR), dirs, GH, H), "R must be [%lld, %lld, %lld]",
                    static_cast<long long>(dirs), static_cast<long long>(GH), static_cast<long long>(H));
  if (args.has_input(kB)) {
    const Tensor& b = args.in(kB);
    KILN_KERNEL_CHECK(args, b.rank() == 2 && b.dim(0) == dirs && b.dim(1) == 2 * GH, "B must be [%lld, %lld]",
                      static_cast<long long>(dirs), static_cast<long long>(2 * GH));
  }
  if (args.has_input(kLengths)) {
    const Tensor& n = args.in(kLengths);
    KILN_KERNEL_CHECK(args, n.rank() == 1 && n.dim(0) == rc.batch, "sequence_lens must be [%lld]",
                      static_cast<long long>(rc.batch));
  }
  const int64_t s0 = rc.batch_first ? rc.batch : dirs, s1 = rc.batch_first ? dirs : rc.batch;
  const uint32_t state_inputs[] = {kInitialH, kInitialC};
  for (uint32_t i : state_inputs) {
    if (args.has_input(i)) {
      KILN_KERNEL_CHECK(args, dims_are(args.in(i), s0, s1, H), "input %u must be [%lld, %lld, %lld]", i,
                        static_cast<long long>(s0), static_cast<long long>(s1), static_cast<long long>(H));
    }
  }
  if (args.has_input(kP)) {
    const Tensor& p = args.in(kP);
    KILN_KERNEL_CHECK(args, p.rank() == 2 && p.dim(0) == dirs && p.dim(1) == 3 * H, "P must be [%lld, %lld]",
                      static_cast<long long>(dirs), static_cast<long long>(3 * H));
  }
  for (uint32_t i = 0; i < states; ++i) {
    KILN_KERNEL_CHECK(args, dims_are(args.out(i), s0, s1, H), "output %u must be [%lld, %lld, %lld]", i,
                      static_cast<long long>(s0), static_cast<long long>(s1), static_cast<long long>(H));
  }
  if (args.num_outputs > states) {
    const Tensor& y = args.out(states);
    const int64_t y0 = rc.batch_first ? rc.batch : rc.seq, y1 = rc.batch_first ? rc.seq : dirs,
                  y2 = rc.batch_first ? dirs : rc.batch;
    KILN_KERNEL_CHECK(args, y.rank() == 4 && y.dim(0) == y0 && y.dim(1) == y1 && y.dim(2) == y2 && y.dim(3) == H,
                      "Y must be [%lld, %lld, %lld, %lld]", static_cast<long long>(y0), static_cast<long long>(y1),
                      static_cast<long long>(y2), static_cast<long long>(H));
  }
  for (uint32_t i = 0; i < args.num_scratch; ++i) {
    KILN_KERNEL_CHECK(args, args.scratch[i]->dtype() == DType::FLOAT32, "scratch %u must be float32", i);
  }
  // rnn_work_floats with overflow checks: an X of input size 0 bounds
  // neither seq nor batch.
  int64_t rows = 0, work = 0, state_floats = 0;
  const bool fits = checked_add(rc.seq, 1, &rows) && checked_mul(rows, rc.batch, &rows) &&
                    checked_mul(rows, GH, &work) && checked_mul(rc.batch, 3 * H, &state_floats) &&
                    checked_add(work, state_floats, &work);
  KILN_KERNEL_CHECK(args, fits && args.scratch[0]->numel() >= work, "working memory too small");
  if (args.num_scratch == 3) {
    KILN_KERNEL_CHECK(args,
                      args.scratch[1]->numel() >= rnn_pack_a_floats(rc.seq, rc.batch, rc.input, H) &&
                          args.scratch[2]->numel() >= rnn_pack_b_floats(kind, rc.input, H),
                      "packing scratch too small");
  }
  return Error::kOk;
}

Error run_recurrence(const KernelArgs& args, int64_t kind) {
  const Recurrence rc = resolve(args, kind);
  if (rc.y != nullptr && rc.lengths != nullptr) {
    memset(rc.y, 0, static_cast<size_t>(args.out(args.num_outputs - 1).nbytes()));
  }
  for (int64_t d = 0; d < rc.dirs; ++d) run_direction(rc, d, rc.direction == 1 || d == 1);
  return Error::kOk;
}

template <int64_t kKind>
Error check_kind(const KernelArgs& args) {
  return check_recurrence(args, kKind);
}

template <int64_t kKind>
Error run_kind(const KernelArgs& args) {
  return run_recurrence(args, kKind);
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_RNN_KERNELS(K)                               \
  K(RNN, check_kind<kRnnSimple>, run_kind<kRnnSimple>, 0) \
  K(GRU, check_kind<kRnnGru>, run_kind<kRnnGru>, 0)       \
  K(LSTM, check_kind<kRnnLstm>, run_kind<kRnnLstm>, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_RNN_KERNELS)
const KernelEntry kRnnKernels[] = {KILN_RNN_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumRnnKernels = sizeof(kRnnKernels) / sizeof(kRnnKernels[0]);

}  // namespace kernels
}  // namespace kiln
