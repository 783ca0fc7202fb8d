// Normalisation kernels: Softmax and LogSoftmax along one axis,
// BatchNormalization (inference).

#include <math.h>

#include "kernel_util.h"
#include "portable_kernels.h"

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
  KILN_KERNEL_CHECK(args, p != nullptr && p->axis() >= 0 &&
                              static_cast<uint32_t>(p->axis()) < args.in(0).rank(),
                    "bad axis");
  return Error::kOk;
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
  for (int64_t o = 0; o < outer; ++o) {
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
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float k = scale[ch] / sqrtf(var[ch] + eps);
      const float shift = bias[ch] - mean[ch] * k;
      const int64_t base = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) out[base + i] = in[base + i] * k + shift;
    }
  }
  return Error::kOk;
}

}  // namespace

const KernelEntry kNormKernels[] = {
    {"Softmax", check_softmax, run_softmax<false>},
    {"LogSoftmax", check_softmax, run_softmax<true>},
    {"BatchNormalization", check_batch_norm, run_batch_norm},
};
const size_t kNumNormKernels = sizeof(kNormKernels) / sizeof(kNormKernels[0]);

}  // namespace kernels
}  // namespace kiln
