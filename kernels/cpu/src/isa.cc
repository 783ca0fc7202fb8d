// The ISA switch (kiln/kernels/isa.h): the processor's best path, capped by
// set_isa() or the KILN_ISA environment variable. Every x86 dispatch in the
// kernels asks x86::has_avx2_fma() / has_avx512f(), every arm64 one
// neon::enabled() (isa_switch.h), which read active_isa(), so one switch
// forces every kernel at once. The processor's own extensions beyond a
// path (AVX-512 VNNI, the dot-product instructions) are detected here too.

#include "kiln/kernels/isa.h"

#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <initializer_list>

#include "isa_switch.h"
#include "kiln/runtime/log.h"

#if KILN_NEON && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace kiln {
namespace kernels {
namespace {

// -1 until first read; then the active Isa as an int.
std::atomic<int> g_active{-1};

Isa detect_processor() {
#if KILN_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return __builtin_cpu_supports("avx512f") ? Isa::kAvx512 : Isa::kAvx2;
  }
#elif KILN_NEON
  return Isa::kNeon;  // Advanced SIMD is part of every AArch64 processor
#endif
  return Isa::kScalar;
}

Isa from_environment() {
  const Isa best = processor_isa();
#if KILN_X86 || KILN_NEON
  const char* requested = getenv("KILN_ISA");
  if (requested == nullptr || requested[0] == '\0') return best;
  Isa cap = best;
  if (!parse_isa(requested, &cap)) {
    KILN_LOG(WARNING, "KILN_ISA=%s is not scalar, avx2, avx512 or neon; using %s", requested, isa_name(best));
    return best;
  }
  if (!processor_has(cap)) {
    KILN_LOG(WARNING, "KILN_ISA=%s: this processor has no %s; using %s", requested, isa_name(cap), isa_name(best));
    return best;
  }
  return cap;
#else
  return best;
#endif
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

bool parse_isa(const char* name, Isa* out) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

Isa processor_isa() { return detect_processor(); }

bool processor_has(Isa isa) {
  const Isa best = processor_isa();
  if (isa == Isa::kScalar || isa == best) return true;
  return best != Isa::kNeon && isa != Isa::kNeon && isa < best;
}

Isa active_isa() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    // Racing first readers compute the same value.
    v = static_cast<int>(from_environment());
    g_active.store(v, std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

Error set_isa(Isa isa) {
  if (!processor_has(isa)) {
    KILN_LOG(ERROR, "cannot run the %s path: this processor's best is %s", isa_name(isa), isa_name(processor_isa()));
    return Error::kNotSupported;
  }
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
  return Error::kOk;
}

#if KILN_X86
bool x86::has_avx2_fma() { return active_isa() >= Isa::kAvx2; }
bool x86::has_avx512f() { return active_isa() >= Isa::kAvx512; }

bool bf16_available() {
  if (active_isa() < Isa::kAvx512) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}
bool processor_has_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}
bool processor_has_avx512_vnni_vl() {
  __builtin_cpu_init();
  return processor_has_avx512_vnni() && __builtin_cpu_supports("avx512vl");
}
bool avx512_vbmi_active() {
  if (active_isa() < Isa::kAvx512) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
}
#endif
#if !KILN_X86
bool bf16_available() { return false; }
#endif
#if KILN_NEON
bool neon::enabled() { return active_isa() == Isa::kNeon; }

bool processor_has_dotprod() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}
#endif

}  // namespace kernels
}  // namespace kiln
