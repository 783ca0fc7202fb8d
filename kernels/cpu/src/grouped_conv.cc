// grouped_conv3x3 (grouped_conv.h): the path the ISA switch allows
// (x86/grouped_conv_avx2.cc, x86/grouped_conv_avx512.cc), and the two steps
// every vector width shares in plain code: the weights' order and the
// padded copy of a band of input rows. Elsewhere there is no such kernel:
// grouped_conv3x3 declines and the packed product runs.

#include "grouped_conv.h"

#include <string.h>

#include "activation.h"
#include "isa_switch.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"

namespace kiln {
namespace kernels {

#if KILN_X86
// The weights read out of gemm_prepack_a's panels (kGemmMr rows, column
// by column) into [cg][9][up to `chunk`] per `chunk` output channels, at
// the scratch's start.
void grouped_conv3x3_prepare_weights(const GroupedConv3x3& conv, int64_t chunk) {
  const int64_t k = conv.cg * 9;
  for (int64_t m0 = 0; m0 < conv.mg; m0 += chunk) {
    const int64_t mc = gemm_min(conv.mg - m0, chunk);
    float* out = conv.scratch + m0 * k;
    for (int64_t j = 0; j < mc; ++j) {
      const int64_t m = m0 + j;
      const float* panel = conv.packed_weights + (m / kGemmMr) * kGemmMr * k + m % kGemmMr;
      for (int64_t kk = 0; kk < k; ++kk) out[kk * mc + j] = panel[kk * kGemmMr];
    }
  }
}

// Padded rows [r0, r0 + rows) of every channel into `pad` (rows * row
// floats per channel; zero borders; at stride 2 each row's even columns,
// then its odd ones), then the slack.
void grouped_conv3x3_prepare_band(const GroupedConv3x3& conv, int64_t r0, int64_t rows, float* pad) {
  const int64_t rs = grouped_conv3x3_row_floats(conv.w, conv.stride), ps = rows * rs, half = rs / 2;
  for (int64_t c = 0; c < conv.cg; ++c) {
    const float* xc = conv.x + c * conv.h * conv.w;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = pad + c * ps + r * rs;
      const int64_t y = r0 + r - 1;  // padded row r0 + r is input row y
      if (y < 0 || y >= conv.h) {
        memset(row, 0, static_cast<size_t>(rs) * sizeof(float));
        continue;
      }
      const float* in = xc + y * conv.w;
      if (conv.stride == 1) {
        row[0] = 0.f;
        memcpy(row + 1, in, static_cast<size_t>(conv.w) * sizeof(float));
        row[conv.w + 1] = 0.f;
        continue;
      }
      // Padded column j = input column j - 1: even j to slot j / 2, odd j
      // to slot half + j / 2.
      memset(row, 0, static_cast<size_t>(rs) * sizeof(float));
      for (int64_t x = 0; x < conv.w; ++x) {
        const int64_t j = x + 1;
        row[(j & 1) * half + j / 2] = in[x];
      }
    }
  }
  memset(pad + conv.cg * ps, 0, kGroupedConvSlack * sizeof(float));
}

bool grouped_conv3x3_available() {
  const Isa isa = active_isa();
  return isa == Isa::kAvx2 || isa == Isa::kAvx512;
}

bool grouped_conv3x3(const GroupedConv3x3& conv, const fb::FusedActivation* activation) {
  // RELU and CLIP clamp inside the kernels; the others run after.
  const fb::Activation kind = activation != nullptr ? activation->kind() : fb::Activation::NONE;
  const bool clamp = kind == fb::Activation::RELU || kind == fb::Activation::CLIP;
  const float lo = kind == fb::Activation::RELU ? 0.f : clamp ? activation->alpha() : 0.f;
  const float hi = kind == fb::Activation::RELU ? __builtin_inff() : clamp ? activation->beta() : 0.f;
  const Isa isa = active_isa();
  bool done = false;
  if (isa == Isa::kAvx512) {
    done = grouped_conv3x3_avx512(conv, clamp, lo, hi);
  } else if (isa == Isa::kAvx2) {
    done = grouped_conv3x3_avx2(conv, clamp, lo, hi);
  }
  if (!done) return false;
  const int64_t plane = ((conv.h - 1) / conv.stride + 1) * ((conv.w - 1) / conv.stride + 1);
  if (!clamp) apply_activation(conv.y, conv.mg * plane, activation);
  return true;
}

#else

bool grouped_conv3x3_avx2(const GroupedConv3x3&, bool, float, float) { return false; }
bool grouped_conv3x3_avx512(const GroupedConv3x3&, bool, float, float) { return false; }
bool grouped_conv3x3_available() { return false; }
bool grouped_conv3x3(const GroupedConv3x3&, const fb::FusedActivation*) { return false; }

#endif

}  // namespace kernels
}  // namespace kiln
