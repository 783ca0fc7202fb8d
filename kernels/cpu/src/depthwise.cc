// depthwise_conv (depthwise.h): the vector kernel the ISA switch allows
// (x86/depthwise_avx2.cc, x86/depthwise_avx512.cc), or plain loops (any
// stride, firmware).

#include "depthwise.h"

#include "activation.h"
#include "arm/neon.h"
#include "isa_switch.h"
#include "kiln/kernels/isa.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace {

void depthwise_portable(const DepthwiseConv& c) {
  for (int64_t oy = 0; oy < c.oh; ++oy) {
    float* orow = c.out + oy * c.ow;
    for (int64_t ox = 0; ox < c.ow; ++ox) orow[ox] = c.bias;
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      const int64_t iy = oy * c.stride - c.pt + ky * c.dh;
      if (iy < 0 || iy >= c.h) continue;
      const float* row = c.in + iy * c.w;
      for (int64_t kx = 0; kx < c.kw; ++kx) {
        const float wv = c.weights[ky * c.kw + kx];
        for (int64_t ox = 0; ox < c.ow; ++ox) {
          const int64_t ix = ox * c.stride - c.pl + kx * c.dw;
          if (ix >= 0 && ix < c.w) orow[ox] += wv * row[ix];
        }
      }
    }
  }
}

}  // namespace

#if !KILN_X86
// No vector kernels here: the plain loops run.
bool depthwise_conv_avx2(const DepthwiseConv&, bool, float, float) { return false; }
bool depthwise_conv_avx512(const DepthwiseConv&, bool, float, float) { return false; }
#endif

void depthwise_conv(const DepthwiseConv& conv, const fb::FusedActivation* activation) {
  // RELU and CLIP clamp inside the vector kernels; the others run after.
  const fb::Activation kind = activation != nullptr ? activation->kind() : fb::Activation::NONE;
  const bool clamp = kind == fb::Activation::RELU || kind == fb::Activation::CLIP;
  const float lo = kind == fb::Activation::RELU ? 0.f : clamp ? activation->alpha() : 0.f;
  const float hi = kind == fb::Activation::RELU ? __builtin_inff() : clamp ? activation->beta() : 0.f;
  bool done = false;
#if KILN_X86
  const Isa isa = active_isa();
  // A row whose last 16-float vector would be at most half full (7, 20,
  // 56 wide) takes the 8-float kernel: fewer idle lanes, and on processors
  // that run 512-bit FMAs as two 256-bit halves (Zen 4) no slower per lane
  // (a 960-channel 5x5 on 20x20: 1.14 ms with 16 floats, 0.98 with 8).
  // Not the undilated 5x5 and 7x7 at stride 1: their tap-by-tap kernel
  // issues about a quarter of the instructions per output with 16 floats
  // (the weights broadcast inside the FMA, where AVX2 needs a broadcast of
  // its own), and that pays for the idle lanes even on Zen 4
  // (ConvNeXt-T's 96 channels of 56 x 56, 7x7: 0.36 ms with 8 floats, 0.29
  // with 16; EfficientNet-B0's stride-1 5x5 layers, 7 to 28 wide: 0.95 ms
  // with 8 floats by row sums, 0.77 with 16 tap by tap).
  const int64_t last = conv.ow % 16;
  if (isa == Isa::kAvx512 && (last == 0 || last > 8 || depthwise_by_taps(conv)))
    done = depthwise_conv_avx512(conv, clamp, lo, hi);
  if (!done && (isa == Isa::kAvx512 || isa == Isa::kAvx2)) done = depthwise_conv_avx2(conv, clamp, lo, hi);
  if (done && clamp) return;
#else
  static_cast<void>(lo);  // the clamp is the vector kernels' (x86 only)
  static_cast<void>(hi);
#endif
  if (!done) depthwise_portable(conv);
  apply_activation(conv.out, conv.oh * conv.ow, activation);
}

}  // namespace kernels
}  // namespace kiln
