// The AVX2 Softmax and LayerNormalization rows against double-precision
// references (the checks of row_checks.h, which the NEON rows share).

#include <gtest/gtest.h>

#include "isa_switch.h"
#include "row_checks.h"
#include "x86/x86.h"

namespace kiln::kernels {
namespace {

#if KILN_X86

using namespace row_checks;

#define KILN_SKIP_WITHOUT_AVX2 \
  if (!x86::has_avx2_fma()) GTEST_SKIP() << "the AVX2 path is off (processor or KILN_ISA)"

TEST(SoftmaxAvx2Test, MatchesReferenceWithinAFewUlp) {
  KILN_SKIP_WITHOUT_AVX2;
  check_softmax_matches_reference(x86::softmax_row_avx2);
}

TEST(SoftmaxAvx2Test, ExpIsAccurateAcrossItsRange) {
  KILN_SKIP_WITHOUT_AVX2;
  check_softmax_exp_range(x86::softmax_row_avx2);
}

TEST(SoftmaxAvx2Test, SpecialValuesBehaveAsTheScalarKernel) {
  KILN_SKIP_WITHOUT_AVX2;
  check_softmax_special_values(x86::softmax_row_avx2);
}

TEST(LayerNormAvx2Test, MatchesReference) {
  KILN_SKIP_WITHOUT_AVX2;
  check_layer_norm_matches_reference(x86::layer_norm_row_avx2);
}

#endif  // KILN_X86

}  // namespace
}  // namespace kiln::kernels
