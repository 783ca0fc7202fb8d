// Signal-processing ops: HannWindow, HammingWindow, BlackmanWindow,
// MelWeightMatrix, DFT and STFT.
//
// The windows and the mel matrix are tables computed from scalars, so they
// are made when planning (OpDef::evaluate): their inputs must be constants,
// or graph inputs frozen with --freeze; a value computed at run time is
// refused naming the node and the input. Each follows ONNX's definition
// (opset 17) step for step, so the tables equal the reference's:
//
//   windows    N = size (periodic) or size - 1 (symmetric), in float32;
//              step = 2pi / N; w[i] = a0 - a1 cos(i step) + a2 cos(2 i step)
//              for i in [0, size): Hann a = (1/2, 1/2, 0), Hamming
//              (25/46, 21/46, 0), Blackman (0.42, 0.5, 0.08). A symmetric
//              window of size 1 divides by zero, as ONNX's function does
//              (its one element is NaN).
//   MelWeightMatrix  num_mel_bins + 2 points evenly spaced on the mel scale
//              mel(f) = 2595 log10(1 + f / 700) from lower_edge_hertz, in
//              steps of (mel(upper_edge_hertz) - mel(lower_edge_hertz)) /
//              (num_mel_bins + 2) (so the last stays below the upper edge,
//              as in ONNX's reference), each mapped back to hertz and to
//              the DFT bin floor((dft_length + 1) * hz / sample_rate); band
//              i is the triangle over bins [b_i, b_{i+2}] peaking (1.0) at
//              b_{i+1}.
//              The output is [dft_length / 2 + 1, num_mel_bins].
//
// output_datatype picks the tables' dtype; values are converted as Cast
// converts float32 (integers truncate toward zero).
//
// DFT and STFT lower to one kernel each (kernels/cpu/src/signal.cc),
// float32 only, with the transform's twiddle table baked as a constant and
// one scratch line (kiln/kernels/signal.h). The transform length (DFT's
// dft_length, STFT's frame_step and frame_length) sizes the output, so it
// must be known when planning; the signal and STFT's window are run-time
// tensors. A onesided transform of a complex signal (ONNX: not possible)
// and an inverse onesided DFT are refused.

#include <cmath>
#include <cstring>

#include "kiln/kernels/float16.h"
#include "kiln/kernels/signal.h"
#include "onnx/import.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

// The dtype named by output_datatype (default float32).
DType output_datatype(OpContext& ctx) {
  const int64_t code = ctx.attr_int("output_datatype", 1);
  const auto dtype = code >= 0 && code <= INT32_MAX ? dtype_from_onnx(static_cast<int32_t>(code)) : std::nullopt;
  if (!dtype || *dtype == DType::BOOL) {
    ctx.error("attribute 'output_datatype' = ", code, " is not a numeric ONNX data type");
  }
  return *dtype;
}

// `values` as a tensor of `dtype`.
HostTensor converted(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype) {
  HostTensor out(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const float f = static_cast<float>(v);
    // Integers go through int64, so negative values truncate as Cast does
    // and out-of-range ones wrap instead of being undefined.
    const int64_t n = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0;
    switch (dtype) {
      case DType::FLOAT32: out.data<float>()[i] = f; break;
      case DType::FLOAT64: out.data<double>()[i] = v; break;
      case DType::FLOAT16: out.data<uint16_t>()[i] = float_to_half(f); break;
      case DType::BFLOAT16: out.data<uint16_t>()[i] = float_to_bfloat16(f); break;
      case DType::INT8: out.data<int8_t>()[i] = static_cast<int8_t>(n); break;
      case DType::UINT8: out.data<uint8_t>()[i] = static_cast<uint8_t>(n); break;
      case DType::INT16: out.data<int16_t>()[i] = static_cast<int16_t>(n); break;
      case DType::UINT16: out.data<uint16_t>()[i] = static_cast<uint16_t>(n); break;
      case DType::INT32: out.data<int32_t>()[i] = static_cast<int32_t>(n); break;
      case DType::UINT32: out.data<uint32_t>()[i] = static_cast<uint32_t>(n); break;
      case DType::INT64: out.data<int64_t>()[i] = n; break;
      case DType::UINT64: out.data<uint64_t>()[i] = static_cast<uint64_t>(n); break;
      case DType::BOOL: break;
    }
  }
  return out;
}

// A scalar input known at plan time, integer (int32/int64) or float.
const HostTensor& scalar_input(OpContext& ctx, size_t i, const char* what, bool integer) {
  if (integer) {
    ctx.expect_dtype(i, {DType::INT32, DType::INT64});
  } else {
    ctx.expect_dtype(i, {DType::FLOAT32, DType::FLOAT64});
  }
  const HostTensor& t = ctx.constant_input(i, what);
  if (t.numel() != 1) ctx.error(what, " must be a scalar, has shape ", shape_str(t.shape));
  return t;
}

// --- HannWindow, HammingWindow, BlackmanWindow -----------------------------

struct WindowCoefficients {
  const char* op;
  float a0, a1, a2;
};
// The constants of ONNX's function bodies, as float32.
constexpr WindowCoefficients kWindows[] = {
    {"HannWindow", 0.5f, 0.5f, 0.f},
    {"HammingWindow", 25.f / 46.f, 21.f / 46.f, 0.f},
    {"BlackmanWindow", 0.42f, 0.5f, 0.08f},
};

int64_t window_size(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  const int64_t size = scalar_input(ctx, 0, "the window size", true).int_at(0);
  if (size < 0) ctx.error("the window size is ", size, ", must not be negative");
  return size;
}

void infer_window(OpContext& ctx) {
  const int64_t size = window_size(ctx);
  ctx.set_output(0, output_datatype(ctx), {size});
}

std::vector<HostTensor> evaluate_window(OpContext& ctx) {
  const WindowCoefficients* c = nullptr;
  for (const WindowCoefficients& w : kWindows) {
    if (ctx.node().op_type == w.op) c = &w;
  }
  const int64_t size = window_size(ctx);
  const bool periodic = ctx.attr_int("periodic", 1) != 0;
  // float32 throughout, as the function body computes.
  const float n = periodic ? static_cast<float>(size) : static_cast<float>(size) - 1.f;
  const float step = 6.2831854820251465f / n;
  std::vector<double> values(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const float angle = static_cast<float>(i) * step;
    const float w = c->a0 - c->a1 * std::cos(angle) + c->a2 * std::cos(angle * 2.f);
    values[static_cast<size_t>(i)] = w;
  }
  return {converted(values, {size}, output_datatype(ctx))};
}

// --- MelWeightMatrix --------------------------------------------------------

struct MelArgs {
  int64_t bands, dft_length, sample_rate;
  double lower_hz, upper_hz;
};

MelArgs mel_args(OpContext& ctx) {
  ctx.expect_inputs(5, 5);
  MelArgs a;
  a.bands = scalar_input(ctx, 0, "num_mel_bins", true).int_at(0);
  a.dft_length = scalar_input(ctx, 1, "dft_length", true).int_at(0);
  a.sample_rate = scalar_input(ctx, 2, "sample_rate", true).int_at(0);
  a.lower_hz = scalar_input(ctx, 3, "lower_edge_hertz", false).float_at(0);
  a.upper_hz = scalar_input(ctx, 4, "upper_edge_hertz", false).float_at(0);
  if (a.bands < 1 || a.bands > (int64_t{1} << 24)) ctx.error("num_mel_bins is ", a.bands, ", must be 1 to 2^24");
  if (a.dft_length < 1 || a.dft_length > (int64_t{1} << 40)) {
    ctx.error("dft_length is ", a.dft_length, ", must be 1 to 2^40");
  }
  if (a.sample_rate < 1) ctx.error("sample_rate is ", a.sample_rate, ", must be positive");
  if (!(a.lower_hz >= 0 && a.upper_hz >= a.lower_hz && std::isfinite(a.upper_hz))) {
    ctx.error("the edges must satisfy 0 <= lower_edge_hertz (", a.lower_hz, ") <= upper_edge_hertz (", a.upper_hz, ")");
  }
  return a;
}

// The DFT bin of each of the num_mel_bins + 2 points; refuses a range that
// reaches past the last bin.
std::vector<int64_t> mel_bins(OpContext& ctx, const MelArgs& a) {
  const int64_t rows = a.dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(a.lower_hz), high = mel(a.upper_hz);
  const int64_t points = a.bands + 2;
  const double step = (high - low) / static_cast<double>(points);
  std::vector<int64_t> bins(static_cast<size_t>(points));
  for (int64_t i = 0; i < points; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + low) / 2595.0) - 1.0);
    const double bin = std::floor(static_cast<double>(a.dft_length + 1) * hz / static_cast<double>(a.sample_rate));
    if (!(bin >= 0 && bin < static_cast<double>(rows))) {
      ctx.error("upper_edge_hertz ", a.upper_hz, " maps to DFT bin ", bin, ", beyond the ", rows,
                " bins of a dft_length of ", a.dft_length, " at sample_rate ", a.sample_rate);
    }
    bins[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  return bins;
}

void infer_mel_weight_matrix(OpContext& ctx) {
  const MelArgs a = mel_args(ctx);
  mel_bins(ctx, a);
  ctx.set_output(0, output_datatype(ctx), {a.dft_length / 2 + 1, a.bands});
}

std::vector<HostTensor> evaluate_mel_weight_matrix(OpContext& ctx) {
  const MelArgs a = mel_args(ctx);
  const int64_t rows = a.dft_length / 2 + 1;
  const std::vector<int64_t> bins = mel_bins(ctx, a);
  std::vector<double> w(static_cast<size_t>(rows * a.bands), 0.0);
  auto at = [&](int64_t row, int64_t band) -> double& { return w[static_cast<size_t>(row * a.bands + band)]; };
  for (int64_t i = 0; i < a.bands; ++i) {
    const int64_t left = bins[static_cast<size_t>(i)], center = bins[static_cast<size_t>(i + 1)],
                  right = bins[static_cast<size_t>(i + 2)];
    if (center == left) {
      at(center, i) = 1.0;
    } else {
      for (int64_t j = left; j <= center; ++j) {
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
      }
    }
    for (int64_t j = center; j < right; ++j) {
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
  }
  return {converted(w, {rows, a.bands}, output_datatype(ctx))};
}

// --- DFT, STFT ------------------------------------------------------------

// The constant twiddle table of a length-n transform.
int twiddle_table(OpContext& ctx, LoweringContext& l, int64_t n) {
  HostTensor table(DType::FLOAT32, {n, 2});
  kernels::fill_dft_twiddles(n, table.data<float>());
  return l.constant(ctx.node().name + "/twiddles", std::move(table));
}

int scratch_line(OpContext& ctx, LoweringContext& l, int64_t n) {
  return l.temp(ctx.node().name + "/line", DType::FLOAT32, {kernels::dft_scratch_floats(n)});
}

// A transform length from a constant scalar input (int32/int64).
int64_t length_input(OpContext& ctx, size_t i, const char* what) {
  const int64_t n = scalar_input(ctx, i, what, true).int_at(0);
  if (n < 1 || n > (int64_t{1} << 32)) ctx.error(what, " is ", n, ", must be 1 to 2^32");
  return n;
}

struct DftArgs {
  int64_t axis, n, inverse, onesided;
  std::vector<int64_t> out_shape;
};

DftArgs dft_args(OpContext& ctx) {
  ctx.expect_inputs(1, 2);
  ctx.expect_dtype(0, {DType::FLOAT32});
  const int64_t rank = ctx.rank(0);
  if (rank < 2) ctx.error("input must have rank >= 2 ([batch, signal..., 1 or 2]), is ", shape_str(ctx.shape(0)));
  const int64_t c = ctx.shape(0).back();
  if (c != 1 && c != 2) ctx.error("input's last dim must be 1 (real) or 2 (complex), is ", c);
  DftArgs a;
  a.axis = ctx.axis(ctx.attr_int("axis", 1), rank);
  if (a.axis == rank - 1) ctx.error("axis ", a.axis, " is the (real, imaginary) dim; the DFT runs along a signal dim");
  a.inverse = ctx.attr_int("inverse", 0) != 0;
  a.onesided = ctx.attr_int("onesided", 0) != 0;
  if (a.onesided && c == 2) ctx.error("a onesided DFT needs a real input (last dim 1), the input is complex");
  if (a.onesided && a.inverse) ctx.not_supported("an inverse onesided DFT");
  a.n = ctx.has_input(1) ? length_input(ctx, 1, "dft_length") : ctx.shape(0)[static_cast<size_t>(a.axis)];
  if (a.n < 1) ctx.error("the DFT's length is ", a.n, " (an empty axis and no dft_length)");
  a.out_shape = ctx.shape(0);
  a.out_shape[static_cast<size_t>(a.axis)] = a.onesided ? a.n / 2 + 1 : a.n;
  a.out_shape.back() = 2;
  return a;
}

void infer_dft(OpContext& ctx) {
  const DftArgs a = dft_args(ctx);
  ctx.set_output(0, DType::FLOAT32, a.out_shape);
}

void lower_dft(OpContext& ctx, LoweringContext& l) {
  const DftArgs a = dft_args(ctx);
  l.kernel("DFT", {l.tensor(ctx.input_id(0)), twiddle_table(ctx, l, a.n)}, {l.tensor(ctx.output_id(0))},
           generic_params({a.axis, a.n, a.inverse, a.onesided}, {}), {scratch_line(ctx, l, a.n)});
}

struct StftArgs {
  int64_t step, n, onesided;
  std::vector<int64_t> out_shape;
};

StftArgs stft_args(OpContext& ctx) {
  ctx.expect_inputs(2, 4);
  ctx.expect_dtype(0, {DType::FLOAT32});
  const std::vector<int64_t>& signal = ctx.shape(0);
  if (signal.size() != 3 || (signal[2] != 1 && signal[2] != 2)) {
    ctx.error("signal must be [batch, length, 1 or 2], is ", shape_str(signal));
  }
  StftArgs a;
  a.step = length_input(ctx, 1, "frame_step");
  a.onesided = ctx.attr_int("onesided", 1) != 0;
  if (a.onesided && signal[2] == 2)
    ctx.error("a onesided STFT needs a real signal (last dim 1), the signal is complex");
  a.n = -1;
  if (ctx.has_input(2)) {
    ctx.expect_dtype(2, {DType::FLOAT32});
    if (ctx.rank(2) != 1) ctx.error("window must have rank 1, is ", shape_str(ctx.shape(2)));
    a.n = ctx.shape(2)[0];
    if (a.n < 1) ctx.error("window is empty");
  }
  if (ctx.has_input(3)) {
    const int64_t length = length_input(ctx, 3, "frame_length");
    if (a.n >= 0 && length != a.n) ctx.error("frame_length ", length, " differs from the window's length ", a.n);
    a.n = length;
  }
  if (a.n < 0) ctx.error("needs a window or a frame_length");
  if (signal[1] < a.n) ctx.error("signal of ", signal[1], " samples is shorter than one frame of ", a.n);
  const int64_t frames = (signal[1] - a.n) / a.step + 1;
  a.out_shape = {signal[0], frames, a.onesided ? a.n / 2 + 1 : a.n, 2};
  return a;
}

void infer_stft(OpContext& ctx) {
  const StftArgs a = stft_args(ctx);
  ctx.set_output(0, DType::FLOAT32, a.out_shape);
}

void lower_stft(OpContext& ctx, LoweringContext& l) {
  const StftArgs a = stft_args(ctx);
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), twiddle_table(ctx, l, a.n)};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  l.kernel("STFT", std::move(inputs), {l.tensor(ctx.output_id(0))}, generic_params({a.step, a.n, a.onesided}, {}),
           {scratch_line(ctx, l, a.n)});
}

}  // namespace

void add_signal_ops(std::vector<OpDef>& ops) {
  for (const WindowCoefficients& w : kWindows) {
    ops.push_back({.op_type = w.op, .infer = infer_window, .evaluate = evaluate_window});
  }
  ops.push_back(
      {.op_type = "MelWeightMatrix", .infer = infer_mel_weight_matrix, .evaluate = evaluate_mel_weight_matrix});
  ops.push_back({.op_type = "DFT", .infer = infer_dft, .lower = lower_dft});
  ops.push_back({.op_type = "STFT", .infer = infer_stft, .lower = lower_stft});
}

}  // namespace kiln::planner
