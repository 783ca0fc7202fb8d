// The one place that says which instruction sets the CPU kernels are built
// for and how a kernel asks which one it may use. Internal.
//
// Where the code of each path lives:
//   src/        the plain C++ loops (the reference every path matches) and,
//               per op family, the dispatch that picks a path
//   src/x86/    x86-64: one file per op family and instruction set
//               (gemm_avx2.cc, gemm_avx512.cc, qgemm_vnni.cc, ...)
//   src/arm/    AArch64 NEON (gemm_neon.cc, qgemm_neon_dot.cc, ...) and the
//               Cortex-M DSP extension (qgemm_cortexm.cc)
// A file's vector code is of one instruction set: every function in it
// that uses intrinsics carries that set's target attribute below (SSE2,
// the x86-64 baseline, needs none).
//
// Compile time (what the compiler targets; each is 0 or 1):
//   KILN_X86          x86-64 with GCC or Clang. The x86 paths are built into
//                     every x86-64 build with per-function target attributes
//                     (no global -mavx2), so the library runs on any x86-64
//                     processor and calls them only where it has them.
//   KILN_NEON         AArch64: Advanced SIMD is part of the base
//                     architecture, so nothing is detected at run time.
//   KILN_CORTEXM_DSP  32-bit Arm with the DSP extension (Cortex-M4, M7,
//                     M33, ...): the int8 loops use SMLAD whenever the image
//                     is compiled for such a core.
//
// Run time: the ISA switch (kiln/kernels/isa.h, isa.cc) caps the path at
// what the processor has and KILN_ISA / set_isa() allow; the queries below
// read it, so one switch forces every kernel at once.

#ifndef KILN_KERNELS_CPU_SRC_ISA_SWITCH_H_
#define KILN_KERNELS_CPU_SRC_ISA_SWITCH_H_

#if defined(__x86_64__) && defined(__GNUC__)
#define KILN_X86 1
#else
#define KILN_X86 0
#endif

#if defined(__aarch64__) && defined(__GNUC__)
#define KILN_NEON 1
#else
#define KILN_NEON 0
#endif

#if defined(__ARM_FEATURE_DSP) && !defined(__aarch64__) && defined(__GNUC__)
#define KILN_CORTEXM_DSP 1
#else
#define KILN_CORTEXM_DSP 0
#endif

#if KILN_X86
// The target attributes of the x86 files, one per instruction set.
//   KILN_AVX2         AVX2 and FMA (x86/*_avx2.cc)
//   KILN_AVX512       AVX-512F, with AVX2 and FMA (x86/*_avx512.cc); its
//                     256-bit code has sixteen ymm registers, not 32 (those
//                     need AVX512VL): keep a ymm tile's accumulators, loads
//                     and broadcasts within sixteen, or GCC spills them
//   KILN_AVX512_VNNI  AVX-512 VNNI's vpdpbusd, with AVX512BW (x86/*_vnni.cc)
//   KILN_AVX512_BF16  AVX512-BF16's vdpbf16ps and conversions, with AVX512BW
//                     and VL (x86/*_bf16_avx512.cc)
//   KILN_AVX512_VBMI  AVX512-VBMI's vpermi2b, with AVX512BW (LookupInt8)
#define KILN_AVX2 __attribute__((target("avx2,fma")))
#define KILN_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define KILN_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define KILN_AVX512_VNNI_VL __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define KILN_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
#define KILN_AVX512_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#endif

#if KILN_NEON
// The dot-product extension (sdot) for one function, the rest of the build
// staying on the base architecture (arm/qgemm_neon_dot.cc). GCC declares
// vdotq_s32 for a function with the target attribute; clang before 16 only
// when the whole file is built for it, so there sdot is written as one
// instruction of inline assembly (KILN_SDOT_ASM).
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
#define KILN_NEON_DOT __attribute__((target("dotprod")))
#define KILN_SDOT_ASM 1
#elif defined(__clang__)
#define KILN_NEON_DOT
#define KILN_SDOT_ASM 0
#else
#define KILN_NEON_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#define KILN_SDOT_ASM 0
#endif
#endif

namespace kiln {
namespace kernels {

#if KILN_X86
namespace x86 {
// Whether the AVX2+FMA (AVX-512) kernels may run: the processor has them
// and the ISA switch does not cap below them.
bool has_avx2_fma();
bool has_avx512f();
}  // namespace x86
// Whether the processor has AVX512-VNNI (and AVX512BW); the avx512 path
// uses vpdpbusd only then, the AVX2 loops otherwise.
bool processor_has_avx512_vnni();
// ... and AVX512VL (vpdpbusd on 256 bits: qgemm_tile_rows_vnni_half).
bool processor_has_avx512_vnni_vl();
// Whether the avx512 path is active on a processor with AVX512-VBMI
// (vpermi2b: LookupInt8's 64 table look-ups at a time).
bool avx512_vbmi_active();
#endif

#if KILN_NEON
namespace neon {
// Whether the NEON kernels may run: the ISA switch is not capped to scalar.
bool enabled();
}  // namespace neon
// Whether the processor has the dot-product extension (sdot).
bool processor_has_dotprod();
#endif

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_ISA_SWITCH_H_
