// The CPU kernels: every operator kiln runs on a processor, in C++17 with no
// heap, exceptions or RTTI, for any target the runtime builds for, Cortex-M
// included.
//
// What they compute: float32 (and float16/float64 where ONNX ops take them,
// the integer and bool dtypes of shape arithmetic, indices and masks), and
// int8: ConvInt8, GemmInt8, AvgPoolInt8, AddInt8, MulInt8, LookupInt8, ChannelAffineInt8, MatMulInt8 (what the planner
// lowers QLinearConv, QLinearMatMul and quantized graphs to) in exact
// integer sums with fixed-point requantization (kiln/kernels/qgemm.h).
//
// How: each kernel has plain C++ loops, the reference every other path
// matches; the hot ones also have vector paths, picked each time they run
// from what the processor has: AVX2+FMA, AVX-512 and AVX-512 VNNI on
// x86-64 (built into every x86-64 build with per-function target
// attributes), NEON (with the dot-product extension) on arm64, the DSP
// extension's SMLAD on Cortex-M. kiln/kernels/isa.h caps that choice
// (KILN_ISA, `kiln run --isa`).
//
// Threads: given the Method's thread pool (KernelArgs::pool), the large
// kernels split their work across it with the same output bits on any
// number of threads; they start no threads of their own, and firmware
// builds run every kernel on the calling thread.
//
// Call register_cpu_kernels() once before loading methods; it fills the
// registry with every CPU kernel (replacing entries of the same name).
//
// Each kernel is also its own object, `const KernelEntry
// kiln::kernels::kernel_<Name>` (kernel_Conv, kernel_Relu, ...). Firmware
// that registers only those its program calls links only those: `kiln pack`
// writes that registration (NAME_kernels.cc) for a program.

#ifndef KILN_KERNELS_CPU_H_
#define KILN_KERNELS_CPU_H_

#include "kiln/runtime/kernel.h"

namespace kiln {

Error register_cpu_kernels(KernelRegistry& registry = global_kernel_registry());

}  // namespace kiln

#endif  // KILN_KERNELS_CPU_H_
