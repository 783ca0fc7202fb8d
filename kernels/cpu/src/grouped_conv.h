// Grouped 3x3 convolution, stride 1 or 2, padding 1 on every side, no
// dilation, of one image's group (grouped_conv.cc, x86/grouped_conv_*.cc):
// the small groups of RegNet and ResNeXt (4 to 16 channels each) computed
// straight from a zero-padded copy of the group's input instead of as an
// im2col product, whose packing of 9 x cg rows costs more than the product
// it feeds. Host x86-64 only: elsewhere grouped_conv3x3 declines and the
// packed product runs. Internal.
//
// Scratch (caller's, grouped_conv3x3_scratch_floats floats for the whole
// plane at once; less makes the kernel go by bands of output rows):
//
//   [ weights: per 8 output channels, [cg][9][up to 8] ]
//   [ channel 0: a band's padded rows, zero border | channel 1 | ... ]
//   [ kGroupedConvSlack zeros: a short row's vector reads past the last one ]
//
// A padded row is the w + 2 columns as they are (stride 1), or its even
// columns then its odd ones, ceil((w + 2) / 2) slots each (stride 2), so
// that every tap (ky, kx) of a run of outputs in one row is one contiguous
// load: at ky * row + kx (stride 1), at ky * row + {0, odd start, 1}
// (stride 2), from the output row's first padded row. Each load feeds up to
// eight accumulators (one per output channel) by broadcast weights. Rows as
// wide as a vector are stored whole (the last vector moved back to end at
// the row's end), narrower ones through a buffer; at stride 1 narrow
// planes are walked flat and the two padding columns of each row left out
// as the vectors are stored. The sums run in the same order on every
// thread count.

#ifndef KILN_KERNELS_CPU_SRC_GROUPED_CONV_H_
#define KILN_KERNELS_CPU_SRC_GROUPED_CONV_H_

#include <stdint.h>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace kernels {

struct GroupedConv3x3 {
  int64_t cg = 0, mg = 0;                 // input and output channels of the group
  int64_t h = 0, w = 0;                   // input plane
  int64_t stride = 1;                     // 1 or 2 on both axes; the output is
                                          // ((h - 1) / stride + 1) x ((w - 1) / stride + 1)
  const float* x = nullptr;               // [cg][h][w]
  const float* packed_weights = nullptr;  // mg x cg * 9, as gemm_prepack_a packs it
  const float* bias = nullptr;            // mg, or nullptr
  float* y = nullptr;                     // [mg][output plane]
  float* scratch = nullptr;               // scratch_floats floats
  int64_t scratch_floats = 0;             // at least grouped_conv3x3_band_rows(...) >= 1
};

// The widest group the callers hand over: wider ones keep the packed
// product (each load feeds 8 sums at most; the product's tile reuses more).
constexpr int64_t kGroupedConvMaxChannels = 32;
constexpr int64_t kGroupedConvSlack = 32;
// Floats of a padded row: w + 2 at stride 1, two halves of ceil((w + 2) / 2)
// at stride 2.
constexpr int64_t grouped_conv3x3_row_floats(int64_t w, int64_t stride) {
  return stride == 1 ? w + 2 : (w + 3) / 2 * 2;
}
// Floats for the whole plane in one band.
constexpr int64_t grouped_conv3x3_scratch_floats(int64_t cg, int64_t mg, int64_t h, int64_t w, int64_t stride) {
  return cg * 9 * mg + cg * (h + 2) * grouped_conv3x3_row_floats(w, stride) + kGroupedConvSlack;
}
// Output rows per band in `floats` of scratch (a band of r output rows
// reads stride * (r - 1) + 3 padded rows); 0 where not even one fits.
constexpr int64_t grouped_conv3x3_band_rows(int64_t cg, int64_t mg, int64_t w, int64_t stride, int64_t floats) {
  const int64_t rows = (floats - cg * 9 * mg - kGroupedConvSlack) / (cg * grouped_conv3x3_row_floats(w, stride));
  return rows < 3 ? 0 : (rows - 3) / stride + 1;
}

// Whether grouped_conv3x3 runs on this processor under the ISA switch
// (kiln/kernels/isa.h): AVX2 or AVX-512 on x86-64.
bool grouped_conv3x3_available();

// The convolution, then the activation; false, having done nothing, where
// grouped_conv3x3_available() is false, the stride is neither 1 nor 2 or
// the scratch holds no band.
bool grouped_conv3x3(const GroupedConv3x3& conv, const fb::FusedActivation* activation);

// Each path's kernel (tests call them directly; false where the processor
// lacks it, the stride is neither 1 nor 2 or the scratch holds no band);
// RELU and CLIP as a clamp to [lo, hi].
bool grouped_conv3x3_avx2(const GroupedConv3x3& conv, bool clamp, float lo, float hi);
bool grouped_conv3x3_avx512(const GroupedConv3x3& conv, bool clamp, float lo, float hi);

// What both kernels do in plain code first (grouped_conv.cc, x86-64 only):
// the weights out of gemm_prepack_a's panels into [cg][9][up to `chunk`]
// per `chunk` output channels at the scratch's start; padded rows
// [r0, r0 + rows) of every channel into `pad` (the layout above), then the
// slack.
void grouped_conv3x3_prepare_weights(const GroupedConv3x3& conv, int64_t chunk);
void grouped_conv3x3_prepare_band(const GroupedConv3x3& conv, int64_t r0, int64_t rows, float* pad);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_GROUPED_CONV_H_
