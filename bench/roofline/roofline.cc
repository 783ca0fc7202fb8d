// The roofline of the CPU kernels: how close the GEMM and convolution
// micro-kernels come to what the core can retire, on every x86 path.
//
// For each path it measures, on one core:
//   - the core clock, from a chain of dependent integer adds (one a cycle on
//     every x86 core since the Pentium 4), so figures are per cycle of the
//     clock the core actually ran at, not per TSC tick;
//   - the path's peak: the instruction the micro-kernel is built on (FMA on
//     8 or 16 floats; vdpbf16ps, two BF16 products a lane; vpdpbusd; AVX2's
//     vpmaddubsw + vpmaddwd + vpaddd),
//     issued with enough independent accumulators to hide its latency, and
//     nothing else: no loads, no stores;
//   - the register tile alone on L1-resident panels (kc 256, as the blocked
//     GEMM calls it);
//   - the whole product on large shapes, as a MatMul or a convolution of a
//     planned program runs it: weights packed ahead (as at plan time),
//     activations packed on every call, the epilogue included.
// Each figure is the fastest of --reps timed repetitions, as FLOP (float) or
// MAC (int8) per cycle and as a share of the path's measured peak.
//
// usage: kiln_roofline [--reps N] [--quick] [--check]
//   --quick   small shapes, a few repetitions (the CI smoke run)
//   --check   compare every product with a plain reference first, exit 1 on
//             a mismatch

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"
#include "isa_switch.h"
#include "kiln/kernels/float16.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"
#include "qgemm.h"

#if KILN_X86
#include <immintrin.h>

#include "x86/x86.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int reps = 15;
  bool quick = false;
  bool check = false;
  // --gemm M,N,K[,w]: only these float products (w: B holds the weights,
  // prepacked), on every float path; for trying a layer's shape.
  struct Gemm {
    int64_t m, n, k;
    bool weights_b;
  };
  std::vector<Gemm> gemms;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The fastest of `reps` timed calls of `fn` (after one untimed call): what
// the kernel reaches when nothing else takes the core, the figure a
// roofline compares with the peak. (This virtual machine's cores are
// shared: the median of the same calls moves by 20% from run to run, the
// fastest by a few percent.)
double best_seconds(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    t.push_back(seconds_since(start));
  }
  std::sort(t.begin(), t.end());
  return t.front();
}

#if KILN_X86

// Cycles per second of this core: 2^27 dependent adds, one a cycle.
__attribute__((noinline)) uint64_t add_chain(uint64_t n, uint64_t x) {
  for (uint64_t i = 0; i < n; i += 8) {
    __asm__ volatile(
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
        : "+r"(x));
  }
  return x;
}

double core_hz() {
  constexpr uint64_t kAdds = uint64_t{1} << 27;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const auto start = Clock::now();
    const uint64_t x = add_chain(kAdds, r);
    const double s = seconds_since(start);
    if (x == 0) puts("");  // keeps the chain
    best = std::max(best, kAdds / s);
  }
  return best;
}

// Peaks: the path's instruction on 12 independent accumulators (registers
// 0-11, sources in 12 and 13), n rounds, written in assembly so no compiler
// adds loads, stores or moves. Returns the operations (FLOP or MAC) done.
#define KILN_TWELVE(op, dst_prefix)                                                                           \
  op " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "0\n\t" op " %%" dst_prefix "12, %%" dst_prefix \
     "13, %%" dst_prefix "1\n\t" op " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "2\n\t" op       \
     " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "3\n\t" op " %%" dst_prefix "12, %%" dst_prefix \
     "13, %%" dst_prefix "4\n\t" op " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "5\n\t" op       \
     " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "6\n\t" op " %%" dst_prefix "12, %%" dst_prefix \
     "13, %%" dst_prefix "7\n\t" op " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "8\n\t" op       \
     " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "9\n\t" op " %%" dst_prefix "12, %%" dst_prefix \
     "13, %%" dst_prefix "10\n\t" op " %%" dst_prefix "12, %%" dst_prefix "13, %%" dst_prefix "11\n\t"

#define KILN_CLOBBER_12 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"

KILN_AVX2 double peak_fma256(int64_t n) {
  int64_t i = n;
  __asm__ volatile(
      "vxorps %%ymm12, %%ymm12, %%ymm12\n\tvxorps %%ymm13, %%ymm13, %%ymm13\n\t"
      "1:\n\t" KILN_TWELVE("vfmadd231ps", "ymm") "dec %0\n\tjnz 1b"
      : "+r"(i)
      :
      : KILN_CLOBBER_12, "xmm12", "xmm13", "cc");
  return 12.0 * 8 * 2 * n;
}

KILN_AVX512 double peak_fma512(int64_t n) {
  int64_t i = n;
  __asm__ volatile(
      "vxorps %%ymm12, %%ymm12, %%ymm12\n\tvxorps %%ymm13, %%ymm13, %%ymm13\n\t"
      "1:\n\t" KILN_TWELVE("vfmadd231ps", "zmm") "dec %0\n\tjnz 1b"
      : "+r"(i)
      :
      : KILN_CLOBBER_12, "xmm12", "xmm13", "cc");
  return 12.0 * 16 * 2 * n;
}

KILN_AVX512_VNNI double peak_vnni(int64_t n) {
  int64_t i = n;
  __asm__ volatile(
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      "1:\n\t" KILN_TWELVE("vpdpbusd", "zmm") "dec %0\n\tjnz 1b"
      : "+r"(i)
      :
      : KILN_CLOBBER_12, "xmm12", "xmm13", "cc");
  return 12.0 * 64 * n;
}

// BF16 (kiln plan --precision bf16): 16 lanes of two products each.
KILN_AVX512_BF16 double peak_bf16(int64_t n) {
  int64_t i = n;
  __asm__ volatile(
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\t"
      "1:\n\t" KILN_TWELVE("vdpbf16ps", "zmm") "dec %0\n\tjnz 1b"
      : "+r"(i)
      :
      : KILN_CLOBBER_12, "xmm12", "xmm13", "cc");
  return 12.0 * 16 * 4 * n;
}

// AVX2 int8: the tile's step for panels with bytes <= 127, 32 MAC per
// vpmaddubsw + vpmaddwd + vpaddd; six independent chains (temporaries in
// registers 6-11).
KILN_AVX2 double peak_avx2_int8(int64_t n) {
  int64_t i = n;
#define KILN_I8_STEP(acc, t)                \
  "vpmaddubsw %%ymm12, %%ymm13, %%ymm" #t   \
  "\n\t"                                    \
  "vpmaddwd %%ymm14, %%ymm" #t ", %%ymm" #t \
  "\n\t"                                    \
  "vpaddd %%ymm" #t ", %%ymm" #acc ", %%ymm" #acc "\n\t"
  __asm__ volatile(
      "vpxor %%ymm12, %%ymm12, %%ymm12\n\tvpxor %%ymm13, %%ymm13, %%ymm13\n\tvpxor %%ymm14, %%ymm14, %%ymm14\n\t"
      "1:\n\t" KILN_I8_STEP(0, 6) KILN_I8_STEP(1, 7) KILN_I8_STEP(2, 8) KILN_I8_STEP(3, 9) KILN_I8_STEP(4, 10)
          KILN_I8_STEP(5, 11) "dec %0\n\tjnz 1b"
      : "+r"(i)
      :
      : KILN_CLOBBER_12, "xmm12", "xmm13", "xmm14", "cc");
#undef KILN_I8_STEP
  return 6.0 * 32 * n;
}

#endif  // KILN_X86

struct Row {
  std::string path, what, shape;
  double ops = 0;      // per call
  double seconds = 0;  // per call (the fastest)
  double peak = 0;     // the path's peak, ops per cycle
  const char* unit = "FLOP";
};

double hz = 0;

void print_header() {
  printf("| path | kernel | shape | %s | per cycle | of the path's peak | GFLOP/s or GMAC/s |\n", "ms");
  printf("|---|---|---|---:|---:|---:|---:|\n");
}

void print_row(const Row& r) {
  const double per_cycle = r.ops / r.seconds / hz;
  printf("| %s | %s | %s | %.3f | %.1f %s | %.0f%% | %.1f |\n", r.path.c_str(), r.what.c_str(), r.shape.c_str(),
         r.seconds * 1e3, per_cycle, r.unit, 100.0 * per_cycle / r.peak, r.ops / r.seconds / 1e9);
  fflush(stdout);
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Plain reference: C = A B (row-major).
std::vector<float> reference_gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * n + j];
    }
  }
  return c;
}

bool close_enough(const std::vector<float>& got, const std::vector<float>& want, int64_t k) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > 1e-5f * k + 1e-4f) {
      fprintf(stderr, "mismatch at %zu: %g against %g\n", i, got[i], want[i]);
      return false;
    }
  }
  return true;
}

using kiln::kernels::GemmPath;

// The whole float product: A (weights) prepacked, B row-major packed on
// every call, or the im2col view of an image.
// With weights_b, B (k x n) holds the weights, prepacked, and A the
// activations, packed on every call: a MatMul or Gemm with constant
// weights (x W). With bf16, the weights are prepacked in BF16 (kiln plan
// --precision bf16) and the values are BF16 numbers to begin with, so the
// plain reference checks the product as closely as in FP32.
bool float_gemm(const Options& o, const char* path_name, GemmPath path, double peak, int64_t m, int64_t n, int64_t k,
                const kiln::kernels::GemmIm2col* im2col, const char* what, std::vector<Row>* rows,
                bool weights_b = false, bool bf16 = false) {
  using namespace kiln::kernels;
  std::vector<float> a = random_floats(static_cast<size_t>(m * k), 1);
  std::vector<float> b;
  if (im2col == nullptr) b = random_floats(static_cast<size_t>(k * n), 2);
  if (bf16) {
    for (float& v : a) v = kiln::bfloat16_to_float(kiln::float_to_bfloat16(v));
    for (float& v : b) v = kiln::bfloat16_to_float(kiln::float_to_bfloat16(v));
  }
  std::vector<float> packed_a, packed_b, pack_a, pack_b;
  std::vector<uint16_t> packed_bf16;
  GemmMatrix am, bm;
  if (weights_b) {
    if (bf16) {
      packed_bf16.resize(static_cast<size_t>(gemm_prepacked_b_bf16_elements(k, n)));
      gemm_prepack_b_bf16(k, n, b.data(), false, packed_bf16.data());
      bm.data = reinterpret_cast<const float*>(packed_bf16.data());
      bm.bf16 = true;
    } else {
      packed_b.resize(static_cast<size_t>(gemm_prepacked_b_floats(k, n)));
      gemm_prepack_b(k, n, b.data(), false, packed_b.data());
      bm.data = packed_b.data();
    }
    pack_a.resize(static_cast<size_t>(gemm_pack_a_floats(m, k)));
    am.data = a.data();
    am.ld = k;
    bm.prepacked = true;
  } else {
    if (bf16) {
      packed_bf16.resize(static_cast<size_t>(gemm_prepacked_a_bf16_elements(m, k)));
      gemm_prepack_a_bf16(m, k, a.data(), packed_bf16.data());
      am.data = reinterpret_cast<const float*>(packed_bf16.data());
      am.bf16 = true;
    } else {
      packed_a.resize(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
      gemm_prepack_a(m, k, a.data(), packed_a.data());
      am.data = packed_a.data();
    }
    pack_b.resize(static_cast<size_t>(gemm_pack_b_floats(k, n)));
    am.prepacked = true;
    bm.data = b.data();
    bm.ld = n;
  }
  std::vector<float> c(static_cast<size_t>(m * n));
  const GemmEpilogue epilogue;
  const auto call = [&] {
    gemm_packed(m, n, k, am, bm, im2col, c.data(), n, epilogue, pack_a.empty() ? nullptr : pack_a.data(),
                pack_b.empty() ? nullptr : pack_b.data(), path, nullptr);
  };
  if (o.check && im2col == nullptr) {
    call();
    if (!close_enough(c, reference_gemm(m, n, k, a.data(), b.data()), k)) return false;
  }
  Row r;
  r.path = path_name;
  r.what = what;
  r.shape = "m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k);
  r.ops = 2.0 * m * n * k;
  r.seconds = best_seconds(o.reps, call);
  r.peak = peak;
  print_row(r);
  rows->push_back(r);
  return true;
}

// The int8 product's operands: full-range weights and activations,
// activations at most 127 (PyTorch's reduced-range activations), or weights
// in [-64, 64] (reduce_range weights: QGemmProblem::w_narrow).
enum class Int8Data { kFull, kSmallActivations, kNarrowWeights };

// The int8 product: weights [m][kp] packed, activations in panels, uint8
// output requantized per channel (a convolution's epilogue).
bool int8_gemm(const Options& o, const char* path_name, kiln::kernels::Isa isa, double peak, int64_t m, int64_t n,
               int64_t k, Int8Data data, std::vector<Row>* rows) {
  using namespace kiln::kernels;
  const int64_t kp = qgemm_kp(k);
  std::mt19937 gen(3);
  std::vector<int8_t> w(static_cast<size_t>(m * kp));
  const bool narrow = data == Int8Data::kNarrowWeights;
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(gen() % (narrow ? 129 : 255)) - (narrow ? 64 : 127));
  std::vector<uint8_t> x(static_cast<size_t>(qgemm_packed_x_bytes(k, n)));
  for (auto& v : x) v = static_cast<uint8_t>(gen() % (data == Int8Data::kSmallActivations ? 128 : 256));
  std::vector<int32_t> bias(m, 0), multiplier(m), shift(m);
  for (int64_t i = 0; i < m; ++i) qgemm_quantize_multiplier(1.0 / (64.0 * k), &multiplier[i], &shift[i]);
  std::vector<uint8_t> y(static_cast<size_t>(m * n));
  QGemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.w = w.data();
  p.x = x.data();
  p.bias = bias.data();
  p.multiplier = multiplier.data();
  p.shift = shift.data();
  p.y_zp = 128;
  p.y_min = 0;
  p.y_max = 255;
  p.y_dtype = kiln::DType::UINT8;
  p.y = y.data();
  p.y_channel_stride = n;
  p.y_column_stride = 1;
  p.isa = isa;
  p.w_narrow = narrow;
  const QGemmTileFn tile = qgemm_tile_for(isa);
  if (o.check) {
    // Exact int32 sums against the portable tile's, through int32 output.
    std::vector<int32_t> got(static_cast<size_t>(m * n)), want(static_cast<size_t>(m * n));
    QGemmProblem q = p;
    q.multiplier = nullptr;
    q.shift = nullptr;
    q.y_dtype = kiln::DType::INT32;
    q.y = got.data();
    qgemm(q, tile);
    q.y = want.data();
    qgemm(q, qgemm_tile_portable);
    if (got != want) {
      fprintf(stderr, "int8 %s: sums differ from the portable tile's\n", path_name);
      return false;
    }
  }
  Row r;
  r.path = path_name;
  r.what = data == Int8Data::kSmallActivations ? "int8 product (activations <= 127)"
           : narrow                            ? "int8 product (weights in [-64, 64])"
                                               : "int8 product";
  r.shape = "m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k);
  r.ops = 1.0 * m * n * k;
  r.seconds = best_seconds(o.reps, [&] { qgemm(p, tile); });
  r.peak = peak;
  r.unit = "MAC";
  print_row(r);
  rows->push_back(r);
  return true;
}

#if KILN_X86
// The float register tile alone: kc 256 of L1-resident panels, 6 x 16.
// kind 0: AVX2 6x16; 1: AVX-512 6x16 (one 512-bit register a row); 2:
// AVX-512 6x32 (two B panels); 3: BF16 6x32; 4: AVX-512 12x16 (two A
// panels).
double tile_seconds(int reps, int kind, int64_t calls) {
  using namespace kiln::kernels;
  constexpr int64_t kc = 256;
  const std::vector<float> a = random_floats(kGemmMr * kc, 4), b = random_floats(2 * kGemmNr * kc, 5);
  const std::vector<float> a2 = random_floats(kGemmMr * kc, 6);
  std::vector<float> c(2 * kGemmMr * 2 * kGemmNr);
  return best_seconds(reps, [&] {
    for (int64_t i = 0; i < calls; ++i) {
      if (kind == 1) {
        x86::micro_kernel_avx512(kc, a.data(), b.data(), kGemmNr, c.data(), kGemmNr, kGemmMr, kGemmNr, false, nullptr,
                                 nullptr, false, 0.f, 0.f);
      } else if (kind == 2) {
        x86::micro_kernel_avx512_x2(kc, a.data(), b.data(), b.data() + kGemmNr * kc, kGemmNr, c.data(), 2 * kGemmNr,
                                    kGemmMr, false, nullptr, nullptr, false, 0.f, 0.f);
      } else if (kind == 4) {
        x86::micro_kernel_avx512_rows2(kc, a.data(), a2.data(), b.data(), kGemmNr, c.data(), kGemmNr, 2 * kGemmMr,
                                       kGemmNr, false, nullptr, nullptr, false, 0.f, 0.f);
      } else if (kind == 3) {
        // BF16 panels of kc values of k (kc / 2 pairs) read from the same
        // bytes: their values do not change the timing.
        const auto* a16 = reinterpret_cast<const uint16_t*>(a.data());
        const auto* b16 = reinterpret_cast<const uint16_t*>(b.data());
        x86::micro_kernel_bf16_x2(kc / 2, a16, b16, b16 + kGemmNr * kc, c.data(), 2 * kGemmNr, kGemmMr, false, nullptr,
                                  nullptr, false, 0.f, 0.f);
      } else {
        x86::micro_kernel_avx2(kc, a.data(), b.data(), kGemmNr, c.data(), kGemmNr, kGemmMr, kGemmNr, false, nullptr,
                               nullptr, false, 0.f, 0.f);
      }
    }
  });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--quick")) {
      o.quick = true;
      o.reps = 3;
    } else if (!strcmp(argv[i], "--check")) {
      o.check = true;
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      o.reps = atoi(argv[++i]);
      if (o.reps < 1) {
        fprintf(stderr, "kiln_roofline: --reps must be 1 or more\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) {
      long long m = 0, n = 0, k = 0;
      char w = 0;
      const int got = sscanf(argv[++i], "%lld,%lld,%lld,%c", &m, &n, &k, &w);
      if (got < 3 || m < 1 || n < 1 || k < 1 || (got == 4 && w != 'w')) {
        fprintf(stderr, "kiln_roofline: --gemm takes M,N,K or M,N,K,w with M, N and K 1 or more, not '%s'\n", argv[i]);
        return 2;
      }
      o.gemms.push_back({m, n, k, got == 4});
    } else {
      fprintf(stderr, "usage: kiln_roofline [--reps N] [--quick] [--check] [--gemm M,N,K[,w]]...\n");
      return 2;
    }
  }
#if !KILN_X86
  fprintf(stderr, "kiln_roofline: x86-64 only (the NEON paths are counted by bench/arm64)\n");
  return 0;
#else
  using kiln::kernels::Isa;
  using kiln::kernels::processor_has;
  hz = core_hz();
  const int64_t peak_rounds = o.quick ? 1 << 16 : 1 << 22;
  const auto peak_per_cycle = [&](double (*fn)(int64_t)) {
    double best = 0;
    for (int r = 0; r < 3; ++r) {
      const auto start = Clock::now();
      const double ops = fn(peak_rounds);
      best = std::max(best, ops / seconds_since(start) / hz);
    }
    return best;
  };
  printf("core clock (dependent adds): %.2f GHz\n\n", hz / 1e9);
  const bool avx2 = processor_has(Isa::kAvx2), avx512 = processor_has(Isa::kAvx512);
  const bool vnni = avx512 && kiln::kernels::processor_has_avx512_vnni();
  const bool bf16 = kiln::kernels::bf16_available();
  double p_fma256 = 0, p_fma512 = 0, p_vnni = 0, p_i8 = 0, p_bf16 = 0;
  printf("| path | peak instruction | per cycle |\n|---|---|---:|\n");
  if (avx2) {
    p_fma256 = peak_per_cycle(peak_fma256);
    p_i8 = peak_per_cycle(peak_avx2_int8);
    printf("| avx2 | vfmadd231ps ymm | %.1f FLOP |\n", p_fma256);
    printf("| avx2 int8 | vpmaddubsw + vpmaddwd + vpaddd ymm | %.1f MAC |\n", p_i8);
  }
  if (avx512) {
    p_fma512 = peak_per_cycle(peak_fma512);
    printf("| avx512 | vfmadd231ps zmm | %.1f FLOP |\n", p_fma512);
  }
  if (bf16) {
    p_bf16 = peak_per_cycle(peak_bf16);
    printf("| avx512 bf16 | vdpbf16ps zmm | %.1f FLOP |\n", p_bf16);
  }
  if (vnni) {
    p_vnni = peak_per_cycle(peak_vnni);
    printf("| avx512 vnni int8 | vpdpbusd zmm | %.1f MAC |\n", p_vnni);
  }
  printf("\n");

  std::vector<Row> rows;
  print_header();
  if (!o.gemms.empty()) {
    for (const bool is512 : {true, false}) {
      if (is512 ? !avx512 : !avx2) continue;
      for (const Options::Gemm& g : o.gemms) {
        if (!float_gemm(o, is512 ? "avx512" : "avx2", is512 ? GemmPath::kAuto : GemmPath::kAvx2,
                        is512 ? p_fma512 : p_fma256, g.m, g.n, g.k, nullptr, "--gemm", &rows, g.weights_b, false)) {
          return 1;
        }
      }
    }
    return 0;
  }
  // The register tile alone.
  const int64_t calls = o.quick ? 100 : 20000;
  struct TileRow {
    bool on;
    const char* path;
    const char* what;
    int kind, rows, cols;
    double peak;
  };
  for (const TileRow& t : {TileRow{avx2, "avx2", "float register tile 6x16, kc 256 (L1)", 0, 6, 16, p_fma256},
                           TileRow{avx512, "avx512", "float register tile 6x16, kc 256 (L1)", 1, 6, 16, p_fma512},
                           TileRow{avx512, "avx512", "float register tile 6x32, kc 256 (L1)", 2, 6, 32, p_fma512},
                           TileRow{avx512, "avx512", "float register tile 12x16, kc 256 (L1)", 4, 12, 16, p_fma512}}) {
    if (!t.on) continue;
    Row r{t.path, t.what, "-", 2.0 * t.rows * t.cols * 256 * calls, tile_seconds(o.reps, t.kind, calls), t.peak};
    print_row(r);
  }
  if (bf16) {
    Row r{"avx512 bf16",
          "BF16 register tile 6x32, kc 256 (L1)",
          "-",
          2.0 * 6 * 32 * 256 * calls,
          tile_seconds(o.reps, 3, calls),
          p_bf16};
    print_row(r);
  }

  struct Shape {
    int64_t m, n, k;
    const char* what;
    bool weights_b;
  };
  // Convolutions multiply their weights (A, prepacked) by the image (B);
  // a MatMul with constant weights multiplies the activations (A) by the
  // weights (B, prepacked).
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{48, 80, 72, "weights x activations", false},
                                   {40, 72, 56, "activations x weights", true}}
              : std::vector<Shape>{{1024, 1024, 1024, "weights x activations, square", false},
                                   {1024, 1024, 1024, "activations x weights, square", true},
                                   {256, 3072, 768, "MatMul x W (GPT MLP up, sequence 256)", true},
                                   {256, 768, 3072, "MatMul x W (GPT MLP down, sequence 256)", true},
                                   {256, 2304, 768, "MatMul x W (GPT QKV, sequence 256)", true},
                                   {256, 3136, 64, "1x1 conv (ResNet-50 layer1 expand)", false},
                                   {512, 784, 128, "1x1 conv (ResNet-50 layer2 expand)", false},
                                   {2048, 49, 512, "1x1 conv (ResNet-50 layer4 expand, 7x7)", false},
                                   {3136, 384, 96, "MatMul x W (ConvNeXt-T stage 1 MLP up)", true},
                                   {3136, 96, 384, "MatMul x W (ConvNeXt-T stage 1 MLP down)", true},
                                   {49, 3072, 768, "MatMul x W (ConvNeXt-T stage 4 MLP up)", true},
                                   {49, 768, 3072, "MatMul x W (ConvNeXt-T stage 4 MLP down)", true}};
  struct Conv {
    int64_t c, h, w, m, kernel, stride;
    const char* what;
  };
  const std::vector<Conv> convs =
      o.quick
          ? std::vector<Conv>{{8, 10, 10, 16, 3, 1, "3x3 conv (im2col)"}, {8, 10, 10, 16, 1, 2, "1x1 conv, stride 2"}}
          : std::vector<Conv>{{64, 56, 56, 64, 3, 1, "3x3 conv, ResNet-50 layer1 (im2col)"},
                              {128, 28, 28, 128, 3, 1, "3x3 conv, ResNet-50 layer2 (im2col)"},
                              {256, 14, 14, 256, 3, 1, "3x3 conv, ResNet-50 layer3 (im2col)"},
                              {128, 56, 56, 128, 3, 2, "3x3 conv stride 2, ResNet-50 layer2.0 (im2col)"},
                              {512, 14, 14, 512, 3, 2, "3x3 conv stride 2, ResNet-50 layer4.0 (im2col)"},
                              {256, 56, 56, 512, 1, 2, "1x1 conv stride 2, ResNet-50 layer2 shortcut"},
                              {1024, 14, 14, 2048, 1, 2, "1x1 conv stride 2, ResNet-50 layer4 shortcut"}};
  std::vector<std::vector<float> > images;
  for (const char* which : {"avx512 bf16", "avx512", "avx2"}) {
    const bool is_bf16 = !strcmp(which, "avx512 bf16"), is512 = !strcmp(which, "avx512") || is_bf16;
    if (is_bf16 ? !bf16 : (is512 ? !avx512 : !avx2)) continue;
    const GemmPath path = is512 ? GemmPath::kAuto : GemmPath::kAvx2;
    const double peak = is_bf16 ? p_bf16 : (is512 ? p_fma512 : p_fma256);
    for (const Shape& s : shapes) {
      if (!float_gemm(o, which, path, peak, s.m, s.n, s.k, nullptr, s.what, &rows, s.weights_b, is_bf16)) return 1;
    }
    for (const Conv& cv : convs) {
      images.push_back(random_floats(static_cast<size_t>(cv.c * cv.h * cv.w), 6));
      kiln::kernels::GemmIm2col g;
      g.x = images.back().data();
      g.channels = cv.c;
      g.h = cv.h;
      g.w = cv.w;
      g.kh = g.kw = cv.kernel;
      g.sh = g.sw = cv.stride;
      g.pt = g.pl = cv.kernel / 2;
      g.oh = (cv.h + 2 * g.pt - cv.kernel) / cv.stride + 1;
      g.ow = (cv.w + 2 * g.pl - cv.kernel) / cv.stride + 1;
      const int64_t k = cv.c * cv.kernel * cv.kernel;
      if (!float_gemm(o, which, path, peak, cv.m, g.oh * g.ow, k, &g, cv.what, &rows, false, is_bf16)) return 1;
    }
  }
  const std::vector<Shape> qshapes = o.quick ? std::vector<Shape>{{24, 48, 72, "", false}}
                                             : std::vector<Shape>{{1024, 1024, 1024, "", false},
                                                                  {256, 3136, 576, "", false},
                                                                  {512, 784, 1152, "", false},
                                                                  {768, 256, 3072, "", false}};
  for (const Shape& s : qshapes) {
    if (vnni && !int8_gemm(o, "avx512 vnni", Isa::kAvx512, p_vnni, s.m, s.n, s.k, Int8Data::kFull, &rows)) return 1;
    for (Int8Data data : {Int8Data::kSmallActivations, Int8Data::kNarrowWeights, Int8Data::kFull}) {
      if (avx2 && !int8_gemm(o, "avx2", Isa::kAvx2, p_i8, s.m, s.n, s.k, data, &rows)) return 1;
    }
  }
  return 0;
#endif
}
