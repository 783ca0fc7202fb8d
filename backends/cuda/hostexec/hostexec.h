// hostexec: a small execution model of CUDA on the host, so the kernels the
// CUDA backend writes (backends/cuda/runtime/src/kernels.cuh) run for real
// on a machine without a GPU. It is TEST INFRASTRUCTURE: nothing an
// application links, no claim about speed, and only the subset of CUDA the
// backend uses.
//
// What it models:
//   - a launch runs its grid's blocks one after another (x fastest), so
//     blocks never run concurrently, as CUDA allows;
//   - a block's threads are cooperative fibers (ucontext) on the calling
//     thread. A fiber runs until it reaches a synchronisation point:
//     __syncthreads() (block barrier), __syncwarp() and the warp shuffles
//     (__shfl_down_sync, __shfl_xor_sync, __shfl_sync: a warp barrier
//     before the exchange and one after), or an atomic (a yield after the
//     read-modify-write, so other threads interleave between atomics) or
//     __nanosleep (a spin wait);
//   - atomics are real hardware read-modify-writes (relaxed, as CUDA's)
//     and the fences real fences, so kernels in different processes that
//     share memory (MPI shared windows standing in for peers' device
//     memory) synchronise through them for real;
//   - __shared__ variables are function statics: one instance shared by
//     every thread, fresh (in the sense of "unspecified") for each block
//     because blocks run in turn;
//   - a barrier some live thread can never reach (divergent __syncthreads,
//     a warp barrier with a lane that exited) is a deadlock: the launch
//     stops and reports cudaErrorLaunchFailure, instead of hanging;
//   - threads that exit count as arrived at later block barriers (as on
//     sm_70 and later);
//   - the 16-bit float types (__half, __nv_bfloat16) are software types
//     with the GPU's conversions (round to nearest even), so kernels that
//     store in 16 bits round exactly as on a GPU;
//   - __trap() ends the launch: its block's threads return (the kernel
//     returns after the call), no later block runs, and the launch fails
//     with cudaErrorLaunchFailure, as a trap fails it on a GPU.
//
// The CUDA runtime API the backend calls (memory, async copies, streams,
// stream capture, graphs) is implemented over host memory in namespace
// kiln::backends::cuda::hostexec. Streams run synchronously; stream capture records each
// launch and copy (the kernel, a copy of its argument bytes, the grid) and
// a graph launch replays that record, so the backend's capture-and-replay
// path runs here exactly as on a GPU. cuBLASLt is not modelled.
//
// Threading: each OS thread runs its own launches; the device memory API is
// thread safe only in that malloc/free are.

#ifndef KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_H_
#define KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kernels/float16.h"

namespace kiln::backends::cuda::hostexec {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(16) float4 {
  float x, y, z, w;
};

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
constexpr unsigned cudaStreamNonBlocking = 1;

struct Stream;
struct Graph;
using cudaStream_t = Stream*;
using cudaGraph_t = Graph*;
using cudaGraphExec_t = Graph*;

// Devices the model pretends to have (KILN_HOSTEXEC_DEVICES, default 4).
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
// The error of the last launch (cleared by reading it).
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t error);

// A kernel as the model runs it: a function of the argument bytes.
using KernelFn = void (*)(const void* args);
// Runs (or, on a capturing stream, records) `fn` over `grid` x `block`.
// `args` is copied. Errors are reported through cudaGetLastError().
void launch(dim3 grid, dim3 block, cudaStream_t stream, KernelFn fn, const void* args, size_t args_bytes);

// What ran, for tests (per OS thread; reset_stats() zeroes it).
struct Stats {
  uint64_t launches = 0;        // kernels run (direct or from a graph)
  uint64_t graph_launches = 0;  // cudaGraphLaunch calls
  uint64_t captured = 0;        // launches and copies recorded by capture
  uint64_t switches = 0;        // fiber switches
  uint64_t deadlocks = 0;
};
Stats& stats();
void reset_stats();

// Faults for tests (per OS thread), standing in for what only a GPU or a
// library shows: the next `count` launches fail (not run, not recorded by
// a capture; cudaGetLastError() reports cudaErrorLaunchFailure), as a
// cuBLASLt call that returns an error enqueues nothing.
void fail_next_launches(uint32_t count);
// Calls `hook(arg)` once a capture has begun on any stream (nullptr: none),
// so a test can make another Method's work arrive in the middle of it.
void set_capture_hook(void (*hook)(void* arg), void* arg);

// --- The device side: what kernels see. ---

struct ThreadContext {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
// The running fiber's context (valid inside a kernel).
const ThreadContext& this_thread();

void syncthreads();
void syncwarp();
// Exchanges 8 bytes with lane `src_lane` of the warp (own value when that
// lane does not exist).
uint64_t shfl_bits(uint64_t bits, int src_lane);
// Lets other threads run (after an atomic).
void yield();
// Gives the processor to other processes (a spin wait on a peer).
void relax();
// Nanoseconds of a monotonic clock (the GPU's %globaltimer).
uint64_t global_timer_ns();
// Ends the launch of the running thread (CUDA's __trap()): the rest of its
// grid does not run and cudaGetLastError() reports cudaErrorLaunchFailure.
// Unlike on a GPU the call returns: the kernel returns after it.
void trap();
int lane_id();

template <typename T>
T shfl_any(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  bits = shfl_bits(bits, src_lane);
  memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace kiln::backends::cuda::hostexec

// CUDA's built-in names, for kernel source compiled by the host compiler.
#define threadIdx (::kiln::backends::cuda::hostexec::this_thread().thread_idx)
#define blockIdx (::kiln::backends::cuda::hostexec::this_thread().block_idx)
#define blockDim (::kiln::backends::cuda::hostexec::this_thread().block_dim)
#define gridDim (::kiln::backends::cuda::hostexec::this_thread().grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
// One instance per kernel, shared by the block's fibers (blocks run in turn).
#define __shared__ static thread_local

inline void __syncthreads() { ::kiln::backends::cuda::hostexec::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::kiln::backends::cuda::hostexec::syncwarp(); }
template <typename T>
T __shfl_sync(unsigned, T v, int src_lane, int = 32) {
  return ::kiln::backends::cuda::hostexec::shfl_any(v, src_lane);
}
template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int = 32) {
  return ::kiln::backends::cuda::hostexec::shfl_any(
      v, ::kiln::backends::cuda::hostexec::lane_id() + static_cast<int>(delta));
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return ::kiln::backends::cuda::hostexec::shfl_any(v, ::kiln::backends::cuda::hostexec::lane_id() ^ mask);
}
namespace kiln::backends::cuda::hostexec {

// A read-modify-write of `*address` that is atomic for real (a hardware
// compare-and-swap), so it holds between processes sharing the memory (an
// MPI shared window standing in for a peer's device memory), not only
// between the fibers of one launch. Relaxed, like CUDA's atomics: ordering
// comes from the fences. Then a yield, so other threads interleave.
template <typename T, typename Update>
T atomic_update(T* address, Update update) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T next = update(old);
  while (!__atomic_compare_exchange(address, &old, &next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    next = update(old);
  }
  yield();
  return old;
}

}  // namespace kiln::backends::cuda::hostexec

template <typename T>
T atomicAdd(T* address, T v) {
  return ::kiln::backends::cuda::hostexec::atomic_update(address, [v](T old) { return static_cast<T>(old + v); });
}
template <typename T>
T atomicMax(T* address, T v) {
  return ::kiln::backends::cuda::hostexec::atomic_update(address, [v](T old) { return v > old ? v : old; });
}
template <typename T>
T atomicCAS(T* address, T compare, T v) {
  return ::kiln::backends::cuda::hostexec::atomic_update(address,
                                                         [compare, v](T old) { return old == compare ? v : old; });
}
template <typename T>
T atomicExch(T* address, T v) {
  return ::kiln::backends::cuda::hostexec::atomic_update(address, [v](T) { return v; });
}
// System scope (memory other processors and processes see): on the host
// every atomic already is.
template <typename T>
T atomicAdd_system(T* address, T v) {
  return atomicAdd(address, v);
}
template <typename T>
T atomicCAS_system(T* address, T compare, T v) {
  return atomicCAS(address, compare, v);
}
template <typename T>
T atomicExch_system(T* address, T v) {
  return atomicExch(address, v);
}
// Fences: real ones (a full barrier), at every scope. On the host (x86 is
// TSO) this orders more than a GPU needs, so a missing fence in a kernel
// may go unnoticed here: see docs/ranks.md.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __trap() { ::kiln::backends::cuda::hostexec::trap(); }
// A spinning thread lets the others of its launch run (a fiber that never
// yields would starve them), then the other processes of the machine.
inline void __nanosleep(unsigned) {
  ::kiln::backends::cuda::hostexec::yield();
  ::kiln::backends::cuda::hostexec::relax();
}

// The 16-bit float storage types (cuda_fp16.h, cuda_bf16.h) in software: the
// bits and CUDA's conversions to and from float, rounding to nearest, ties
// to even, as the GPU's __float2half_rn and __float2bfloat16_rn do (the
// bit-exact conversions of kiln/kernels/float16.h). Arithmetic is never
// done on them: kernels convert to float, compute, and round on store.
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) { return ::kiln::half_to_float(h.bits); }
inline __half __float2half_rn(float f) { return __half{::kiln::float_to_half(f)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return ::kiln::bfloat16_to_float(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{::kiln::float_to_bfloat16(f)}; }

#endif  // KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_H_
