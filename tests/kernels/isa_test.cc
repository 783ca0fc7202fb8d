// The ISA switch (kiln/kernels/isa.h): names, refusing paths the processor
// lacks, and capping what the kernels' dispatch sees.

#include "kiln/kernels/isa.h"

#include <gtest/gtest.h>

#include "isa_switch.h"

namespace kiln::kernels {
namespace {

// Restores the switch a test changed.
class IsaTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = active_isa(); }
  void TearDown() override { ASSERT_EQ(set_isa(saved_), Error::kOk); }
  Isa saved_ = Isa::kScalar;
};

TEST_F(IsaTest, NamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    Isa parsed = Isa::kScalar;
    ASSERT_TRUE(parse_isa(isa_name(isa), &parsed)) << isa_name(isa);
    EXPECT_EQ(parsed, isa);
  }
  Isa unchanged = Isa::kAvx2;
  EXPECT_FALSE(parse_isa("avx", &unchanged));
  EXPECT_FALSE(parse_isa("AVX2", &unchanged));
  EXPECT_FALSE(parse_isa("", &unchanged));
  EXPECT_EQ(unchanged, Isa::kAvx2);
}

TEST_F(IsaTest, ActiveNeverExceedsTheProcessor) { EXPECT_LE(active_isa(), processor_isa()); }

TEST_F(IsaTest, RefusesAPathTheProcessorLacks) {
  if (processor_isa() == Isa::kAvx512) GTEST_SKIP() << "this processor has every path";
  const Isa before = active_isa();
  EXPECT_EQ(set_isa(Isa::kAvx512), Error::kNotSupported);
  EXPECT_EQ(active_isa(), before);
}

TEST_F(IsaTest, CapsTheKernelsDispatch) {
  ASSERT_EQ(set_isa(Isa::kScalar), Error::kOk);
  EXPECT_EQ(active_isa(), Isa::kScalar);
#if KILN_X86
  EXPECT_FALSE(x86::has_avx2_fma());
  EXPECT_FALSE(x86::has_avx512f());
  if (processor_isa() >= Isa::kAvx2) {
    ASSERT_EQ(set_isa(Isa::kAvx2), Error::kOk);
    EXPECT_TRUE(x86::has_avx2_fma());
    EXPECT_FALSE(x86::has_avx512f());
  }
  if (processor_isa() >= Isa::kAvx512) {
    ASSERT_EQ(set_isa(Isa::kAvx512), Error::kOk);
    EXPECT_TRUE(x86::has_avx2_fma());
    EXPECT_TRUE(x86::has_avx512f());
  }
#endif
#if KILN_NEON
  EXPECT_FALSE(neon::enabled());
  ASSERT_EQ(set_isa(Isa::kNeon), Error::kOk);
  EXPECT_TRUE(neon::enabled());
  EXPECT_EQ(set_isa(Isa::kAvx2), Error::kNotSupported);  // no x86 path on arm64
  EXPECT_TRUE(neon::enabled());
#endif
}

}  // namespace
}  // namespace kiln::kernels
