// 16-bit storage on devices (kiln plan --precision fp16|bf16): after
// lowering, the float32 tensors device kernels read and write are stored
// in float16 or bfloat16, half the arena bytes; the kernels load 16 bits,
// compute and accumulate in FP32 and round once on store (the backend's
// contract: backends/cuda/cuda_kernels.h).
//
//   1. A device kernel runs on 16-bit storage unless it is known to need
//      FP32 (Softmax and LogSoftmax, LayerNormalization's statistics, the
//      reductions: keeps_fp32 in precision.cc), the user named its model
//      node (--keep-fp32), it only moves elements (Copy, Transpose, Slice,
//      Concat, Split) and none it reads was written in 16 bits, or an
//      output it writes is also written by an instruction that stays FP32.
//   2. A device tensor only such kernels touch becomes 16-bit in place, as
//      does the float32 scratch of such a kernel (a column buffer).
//   3. A device tensor they share with anything else (a copy to or from
//      the host, a kernel kept FP32, a collective, the application) stays
//      float32 and gets a 16-bit twin, which the 16-bit kernels use:
//        - written by a 16-bit kernel: a Cast (twin -> tensor) right after
//          the write;
//        - a constant uploaded at load: the twin is uploaded at load too,
//          from the constant converted here (no Cast at run time);
//        - otherwise: a Cast (tensor -> twin) right before the first
//          16-bit reader.
//      The Casts are device kernels, so they run inside the delegate, and
//      the bytes that cross the device boundary stay float32: the host
//      sees the program's own dtypes.
//
// Run after cluster_copies (so the Casts land inside the runs of device
// kernels), before compact_tensors (which drops the float32 tensors and
// constants nothing reads any more).

#ifndef KILN_PLANNER_PASSES_PRECISION_H_
#define KILN_PLANNER_PASSES_PRECISION_H_

#include <cstdint>
#include <set>
#include <string>

#include "lower/program.h"

namespace kiln::planner {

struct PrecisionOptions {
  std::string precision = "fp32";   // only fp16 and bf16 change storage
  std::set<std::string> keep_fp32;  // model node names whose kernels stay FP32
};

struct PrecisionStats {
  DType storage = DType::FLOAT32;       // FLOAT16 or BFLOAT16 when the pass ran
  int kernels_16bit = 0;                // device kernels on 16-bit storage
  int kernels_fp32 = 0;                 // device kernels kept FP32
  int casts = 0;                        // Casts placed (run every call)
  int tensors_16bit = 0;                // device tensors stored in 16 bits (twins included)
  int constants_converted = 0;          // constants converted at plan time
  std::set<std::string> named_unknown;  // --keep-fp32 names no device kernel has
  // --precision bf16 on the CPU (LowerOptions::bf16_weights): kernels whose
  // packed weights are BF16, and those weights' bytes.
  int cpu_bf16_products = 0;
  uint64_t cpu_bf16_weight_bytes = 0;
};

// Rewrites `method` (its constants into `program`); nothing happens unless
// options.precision is fp16 or bf16.
PrecisionStats store_16bit(LMethod& method, LProgram& program, const PrecisionOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_PRECISION_H_
