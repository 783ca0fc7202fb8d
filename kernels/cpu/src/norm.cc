// Normalisation kernels: Softmax and LogSoftmax along one axis,
// BatchNormalization (inference), LayerNormalization,
// InstanceNormalization, LRN.

#include <math.h>

#include "arm/neon.h"
#include "cpu_kernels.h"
#include "isa_switch.h"
#include "kernel_util.h"
#include "parallel.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace {

// ---------------------------------------------------------------------------
// Softmax over one axis: outer x axis x inner.

Error check_softmax(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_same_shape(args, args.in(0), args.out(0), "input and output"));
  const auto* p = args.params<fb::AxisParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < args.in(0).rank(),
                    "bad axis");
  return Error::kOk;
}

// Softmax over the rows [o0, o1) of `outer`.
template <bool kLog>
void softmax_rows(const float* in, float* out, int64_t o0, int64_t o1, int64_t n, int64_t inner) {
#if KILN_X86
  if (!kLog && inner == 1 && x86::has_avx2_fma()) {
    // Contiguous rows: eight lanes at a time.
    for (int64_t o = o0; o < o1; ++o) x86::softmax_row_avx2(in + o * n, n, out + o * n);
    return;
  }
#endif
#if KILN_NEON
  if (!kLog && inner == 1 && neon::enabled()) {
    for (int64_t o = o0; o < o1; ++o) neon::softmax_row(in + o * n, n, out + o * n);
    return;
  }
#endif
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float* v = in + o * n * inner + i;
      float* r = out + o * n * inner + i;
      float max = -INFINITY;
      for (int64_t k = 0; k < n; ++k) max = v[k * inner] > max ? v[k * inner] : max;
      float sum = 0.f;
      for (int64_t k = 0; k < n; ++k) {
        const float e = expf(v[k * inner] - max);
        sum += e;
        if (!kLog) r[k * inner] = e;
      }
      if (kLog) {
        const float log_sum = logf(sum) + max;
        for (int64_t k = 0; k < n; ++k) r[k * inner] = v[k * inner] - log_sum;
      } else {
        const float scale = 1.f / sum;
        for (int64_t k = 0; k < n; ++k) r[k * inner] *= scale;
      }
    }
  }
}

template <bool kLog>
Error run_softmax(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const uint32_t axis = static_cast<uint32_t>(args.params<fb::AxisParams>()->axis());
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t n = x.dim(axis);
  const int64_t inner = dims_product(x, axis + 1, x.rank());
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  // Rows are independent (an attention's heads x queries): split them.
  const int64_t tasks = parallel_tasks(args.pool, outer * n * inner, outer, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t o0, o1;
    parallel_range(outer, tasks, t, 1, &o0, &o1);
    softmax_rows<kLog>(in, out, o0, o1, n, inner);
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// BatchNormalization (inference): y = (x - mean) / sqrt(var + eps) * scale + b
// with inputs X, scale, B, mean, var; channels on axis 1.

Error check_batch_norm(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 5, 5, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_same_shape(args, args.in(0), args.out(0), "input and output"));
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, x.rank() >= 2, "expects rank >= 2");
  for (uint32_t i = 1; i < 5; ++i) {
    KILN_KERNEL_CHECK(args, args.in(i).numel() == x.dim(1), "input %u must have C elements", i);
  }
  KILN_KERNEL_CHECK(args, args.params<fb::BatchNormParams>() != nullptr, "missing BatchNormParams");
  return Error::kOk;
}

Error run_batch_norm(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const float eps = args.params<fb::BatchNormParams>()->epsilon();
  const float* scale = args.in(1).data_as<const float>();
  const float* bias = args.in(2).data_as<const float>();
  const float* mean = args.in(3).data_as<const float>();
  const float* var = args.in(4).data_as<const float>();
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = dims_product(x, 2, x.rank());
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  // Planes are independent: split them.
  const int64_t planes = n * c;
  const int64_t tasks = parallel_tasks(args.pool, planes * inner, planes, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t p0, p1;
    parallel_range(planes, tasks, t, 1, &p0, &p1);
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t ch = plane % c;
      const float k = scale[ch] / sqrtf(var[ch] + eps);
      const float shift = bias[ch] - mean[ch] * k;
      const int64_t base = plane * inner;
      for (int64_t i = 0; i < inner; ++i) out[base + i] = in[base + i] * k + shift;
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// LayerNormalization: each row of the input seen as [outer, inner], with
// inner the product of the dims from `axis` on, is normalised:
//   mean = sum(x) / inner, var = sum((x - mean)^2) / inner,
//   inv = 1 / sqrt(var + epsilon), y = (x - mean) * inv * scale + bias.
// Inputs X, Scale, B (optional), each of Scale and B holding `inner`
// elements. Outputs Y and optionally Mean and InvStdDev (outer elements
// each, float32). Statistics accumulate in double.

Error check_layer_norm(const KernelArgs& args) {
  KILN_KERNEL_CHECK(
      args, args.num_inputs >= 2 && args.num_inputs <= 3 && args.inputs[0] != nullptr && args.inputs[1] != nullptr,
      "expects X, Scale and an optional B");
  KILN_KERNEL_CHECK(args, args.num_outputs == 1 || args.num_outputs == 3, "expects 1 or 3 outputs");
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  const auto* p = args.params<fb::LayerNormParams>();
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(),
                    "missing LayerNormParams or bad axis");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, args.out(0), "X and Y"));
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t inner = dims_product(x, axis, x.rank());
  KILN_KERNEL_CHECK(args, args.in(1).numel() == inner, "Scale must have %lld elements", static_cast<long long>(inner));
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == inner, "B must have %lld elements", static_cast<long long>(inner));
  }
  for (uint32_t i = 1; i < args.num_outputs; ++i) {
    KILN_KERNEL_CHECK(args, args.out(i).numel() == outer, "output %u must have %lld elements", i,
                      static_cast<long long>(outer));
  }
  return Error::kOk;
}

// LayerNormalization of the rows [o0, o1).
void layer_norm_rows(const float* in, const float* scale, const float* bias, double eps, int64_t inner, int64_t o0,
                     int64_t o1, float* out, float* mean_out, float* inv_out) {
#if KILN_X86
  if (x86::has_avx2_fma()) {
    for (int64_t o = o0; o < o1; ++o) {
      x86::layer_norm_row_avx2(in + o * inner, inner, scale, bias, eps, out + o * inner,
                               mean_out != nullptr ? mean_out + o : nullptr,
                               inv_out != nullptr ? inv_out + o : nullptr);
    }
    return;
  }
#endif
#if KILN_NEON
  if (neon::enabled()) {
    for (int64_t o = o0; o < o1; ++o) {
      neon::layer_norm_row(in + o * inner, inner, scale, bias, eps, out + o * inner,
                           mean_out != nullptr ? mean_out + o : nullptr, inv_out != nullptr ? inv_out + o : nullptr);
    }
    return;
  }
#endif
  for (int64_t o = o0; o < o1; ++o) {
    const float* row = in + o * inner;
    float* dst = out + o * inner;
    double sum = 0.0;
    for (int64_t i = 0; i < inner; ++i) sum += row[i];
    const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
    double squares = 0.0;
    for (int64_t i = 0; i < inner; ++i) {
      const double d = row[i] - mean;
      squares += d * d;
    }
    const double var = inner > 0 ? squares / static_cast<double>(inner) : 0.0;
    const float inv = static_cast<float>(1.0 / sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < inner; ++i) {
      const float v = (row[i] - m) * inv * scale[i];
      dst[i] = bias != nullptr ? v + bias[i] : v;
    }
    if (mean_out != nullptr) {
      mean_out[o] = m;
      inv_out[o] = inv;
    }
  }
}

Error run_layer_norm(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const auto* p = args.params<fb::LayerNormParams>();
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t inner = dims_product(x, axis, x.rank());
  const float* in = x.data_as<const float>();
  const float* scale = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* out = args.out(0).data_as<float>();
  float* mean_out = args.num_outputs == 3 ? args.out(1).data_as<float>() : nullptr;
  float* inv_out = args.num_outputs == 3 ? args.out(2).data_as<float>() : nullptr;
  const double eps = static_cast<double>(p->epsilon());
  // Rows are independent (a sequence's tokens): split them.
  const int64_t tasks = parallel_tasks(args.pool, outer * inner, outer, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t o0, o1;
    parallel_range(outer, tasks, t, 1, &o0, &o1);
    layer_norm_rows(in, scale, bias, eps, inner, o0, o1, out, mean_out, inv_out);
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// InstanceNormalization: inputs X [N, C, ...], scale [C], B [C];
// GenericParams floats [epsilon]. Each (n, c) plane is normalised over its
// spatial elements: y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c].
// Statistics accumulate in double.

Error check_instance_norm(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_params(args, 0, 1));
  KILN_RETURN_IF_ERROR(check_same_shape(args, args.in(0), args.out(0), "input and output"));
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, x.rank() >= 3, "expects rank >= 3");
  for (uint32_t i = 1; i < 3; ++i) {
    KILN_KERNEL_CHECK(args, args.in(i).numel() == x.dim(1), "input %u must have C elements", i);
  }
  return Error::kOk;
}

Error run_instance_norm(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const double eps = param_float(args, 0);
  const float* scale = args.in(1).data_as<const float>();
  const float* bias = args.in(2).data_as<const float>();
  const int64_t c = x.dim(1);
  const int64_t planes = x.dim(0) * c;
  const int64_t inner = dims_product(x, 2, x.rank());
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = in + p * inner;
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i) sum += src[i];
    const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0;
    double sq = 0;
    for (int64_t i = 0; i < inner; ++i) sq += (src[i] - mean) * (src[i] - mean);
    const double var = inner > 0 ? sq / static_cast<double>(inner) : 0;
    const float k = static_cast<float>(scale[p % c] / sqrt(var + eps));
    const float shift = static_cast<float>(bias[p % c] - mean * k);
    float* dst = out + p * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = src[i] * k + shift;
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// LRN (local response normalisation across channels): X [N, C, ...];
// GenericParams ints [size], floats [alpha, beta, bias]:
//   y = x / (bias + alpha / size * sum of x^2 over the channels
//            [c - (size - 1) / 2, c + size / 2] within [0, C))^beta.

Error check_lrn(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 3));
  KILN_RETURN_IF_ERROR(check_same_shape(args, args.in(0), args.out(0), "input and output"));
  KILN_KERNEL_CHECK(args, args.in(0).rank() >= 2, "expects rank >= 2");
  KILN_KERNEL_CHECK(args, param_int(args, 0) >= 1 && param_int(args, 0) <= (int64_t{1} << 30), "size out of range");
  return Error::kOk;
}

Error run_lrn(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t size = param_int(args, 0);
  const float alpha = param_float(args, 0), beta = param_float(args, 1), bias = param_float(args, 2);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = dims_product(x, 2, x.rank());
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t lo = ch - before < 0 ? 0 : ch - before;
      const int64_t hi = ch + after >= c ? c - 1 : ch + after;
      for (int64_t i = 0; i < inner; ++i) {
        float sum = 0.f;
        for (int64_t j = lo; j <= hi; ++j) {
          const float v = in[(b * c + j) * inner + i];
          sum += v * v;
        }
        const int64_t at = (b * c + ch) * inner + i;
        out[at] = in[at] / powf(bias + alpha / static_cast<float>(size) * sum, beta);
      }
    }
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_NORM_KERNELS(K)                                                       \
  K(Softmax, check_softmax, run_softmax<false>, 0)                                 \
  K(LogSoftmax, check_softmax, run_softmax<true>, 0)                               \
  K(BatchNormalization, check_batch_norm, run_batch_norm, 0)                       \
  K(LayerNormalization, check_layer_norm, run_layer_norm, kInplaceInput0)          \
  K(InstanceNormalization, check_instance_norm, run_instance_norm, kInplaceInput0) \
  K(LRN, check_lrn, run_lrn, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_NORM_KERNELS)
const KernelEntry kNormKernels[] = {KILN_NORM_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumNormKernels = sizeof(kNormKernels) / sizeof(kNormKernels[0]);

}  // namespace kernels
}  // namespace kiln
