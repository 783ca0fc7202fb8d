// Which instruction-set path the CPU kernels take on this processor:
// plain C++ (scalar), AVX2+FMA or AVX-512 on x86-64, NEON on arm64. The kernels pick, each time they
// run, the best path the processor has; this switch caps that choice so
// every path can be forced, tested and timed on one machine.
//
// The cap comes from, in order: set_isa() (what `kiln run --isa` calls), or
// the environment variable KILN_ISA=scalar|avx2|avx512 (x86-64) or
// KILN_ISA=scalar|neon (arm64), read once the first time a kernel asks
// (elsewhere there is one path).
// A cap above what the processor has falls back to the processor's best,
// with one warning in the log; set_isa() refuses it instead.
//
// Thread safety: active_isa() is one relaxed atomic load and may be called
// from any thread; call set_isa() before methods run, not while they run.
// Nothing here allocates.

#ifndef KILN_KERNELS_ISA_H_
#define KILN_KERNELS_ISA_H_

#include <stdint.h>

#include "kiln/runtime/error.h"

namespace kiln {
namespace kernels {

// The x86 paths are ordered: each may use the instructions of the ones
// before it. kNeon is arm64's one vector path (processor_has() says which
// paths a processor can run).
enum class Isa : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

// "scalar", "avx2", "avx512" or "neon".
const char* isa_name(Isa isa);

// Parses isa_name()'s spellings; false (and *out unchanged) for anything else.
bool parse_isa(const char* name, Isa* out);

// The best path this processor can run (kNeon on arm64, kScalar where
// there is no vector path).
Isa processor_isa();

// Whether this processor can run `isa`: scalar everywhere, the x86 paths up
// to processor_isa() on x86-64, NEON on arm64.
bool processor_has(Isa isa);

// The path the kernels take: processor_isa(), capped by set_isa() or KILN_ISA.
Isa active_isa();

// Whether the linear kernels can multiply BF16 weights (programs planned
// with `kiln plan --precision bf16`): the AVX-512 path is active and the
// processor has AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake and
// Sapphire Rapids and later). Such programs are refused at load where it
// is false.
bool bf16_available();

// Caps the kernels at `isa` from now on. kNotSupported (nothing changed)
// when the processor cannot run it.
Error set_isa(Isa isa);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_ISA_H_
