// The all-reduce kernels (CollectiveCall ONE_SHOT and TWO_SHOT), written
// once like the other kernels (kernels.cuh): nvcc compiles them for GPUs,
// the host compiler for the host execution model, where the peers' arenas
// are an MPI shared window between processes (comm/mpi) and these kernels
// synchronise real processes through it.
//
// Every rank's copy of the symmetric arena is reachable through
// PeerReduceArgs::peers (Communicator::device_peers); the operand lies at
// the same offset in each. Block b of every rank works on the same part of
// the message, and synchronises with block b of every peer only, through
// one signal counter per block in each rank's copy (cuda_abi.h draws it):
//
//   step    block b of rank r, thread 0
//   ----    ---------------------------------------------------------
//   publish fence (system scope), then counter[b] of r's copy = target
//           (release: what the block wrote or read before it is done)
//   wait    until counter[b] of every peer's copy >= target, then fence
//           (acquire: what the peer's block did before it is visible)
//
// Only its owner writes a counter, and it only grows: a call takes the
// block's counter as it finds it (`done`) and publishes done + 1, done + 2
// (, done + 3): nothing is reset, so a recorded CUDA graph replays the
// same launch for ever. Every rank makes the same calls with the same
// grids (one plan), so the same block of every rank counts alike.
//
//   one-shot  arrive (done + 1: every input written), then sum chunk b of
//             every rank's operand in rank order 0..N-1 into the output,
//             then depart (done + 2: no peer reads my operand any more,
//             so the next kernel may overwrite it);
//   two-shot  arrive; reduce-scatter: sum chunk b of slice r (slices of
//             count / N, rounded to 64 bytes) of every operand, in rank
//             order, over r's own operand (only rank r reads slice r);
//             reduced (done + 2); all-gather: chunk b of every slice q from
//             rank q's operand into the output; depart (done + 3).
//
// Every rank adds the same values in the same order: the same bits on
// every rank. Fused addends (a bias, a residual: PeerReduceArgs::addends)
// are this rank's own, added to each element as it is written (one-shot's
// sum, two-shot's all-gather); in place, the own slice takes them after
// the last step, when no peer reads it.
//
// A wait longer than PeerReduceArgs::timeout_ns prints which peer and
// step, then traps: the launch fails (a sticky error on a GPU) instead of
// hanging; where the communicator watches its peers' processes
// (PeerReduceArgs::peer_exited), a peer's exit ends the wait at once. The
// grid is small enough (cuda_abi.h) for all its blocks to be resident at
// once, which waiting between blocks of peers needs.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_ALL_REDUCE_CUH_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_ALL_REDUCE_CUH_

#include <stdint.h>
#include <stdio.h>

#include "launch.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

using Signal = unsigned long long;

__device__ __forceinline__ uint64_t global_ns() {
#if KILN_CUDA_HOSTEXEC
  return hostexec::global_timer_ns();
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

__device__ __forceinline__ volatile Signal* signal_of(const PeerReduceArgs& p, uint32_t rank) {
  return reinterpret_cast<volatile Signal*>(p.peers[rank] + p.signal_offset) + blockIdx.x;
}

__device__ __forceinline__ const float* operand_of(const PeerReduceArgs& p, uint32_t rank) {
  return reinterpret_cast<const float*>(p.peers[rank] + p.input_offset);
}

// One step of the protocol above, called by every thread of the block.
// False when a peer did not reach it in time (thread 0 said so and
// trapped): the block then returns.
__device__ bool peer_step(const PeerReduceArgs& p, Signal target) {
  __shared__ uint32_t late;  // the peer that did not arrive, or p.ranks
  __syncthreads();           // the block's work before the step is done
  if (threadIdx.x == 0) {
    late = p.ranks;
    uint32_t exited = 0;  // rank + 1 of a peer the communicator saw exit
    __threadfence_system();
    *signal_of(p, p.rank) = target;
    const uint64_t start = global_ns();
    for (uint32_t q = 0; q < p.ranks && late == p.ranks; ++q) {
      while (q != p.rank && *signal_of(p, q) < target) {
        exited = p.peer_exited != nullptr ? *p.peer_exited : 0;
        if (exited != 0 || global_ns() - start > p.timeout_ns) {
          late = q;
          break;
        }
        __nanosleep(100);
      }
    }
    __threadfence_system();
    if (late != p.ranks && exited != 0) {
      printf(
          "kiln: all-reduce kernel, rank %u of %u, block %u: peer rank %u exited (its communicator saw it) while "
          "rank %u had not reached step %llu; the launch fails\n",
          p.rank, p.ranks, blockIdx.x, exited - 1, late, target);
      __trap();
    }
    if (late != p.ranks) {
      printf(
          "kiln: all-reduce kernel, rank %u of %u, block %u: peer rank %u did not reach step %llu within %llu "
          "ms (it exited, hangs, or runs another program); the launch fails\n",
          p.rank, p.ranks, blockIdx.x, late, target, static_cast<unsigned long long>(p.timeout_ns / 1000000));
      __trap();
    }
  }
  __syncthreads();
  return late == p.ranks;
}

__device__ __forceinline__ float combine(uint32_t op, float a, float b) {
  switch (op) {
    case 1: return a * b;          // PROD
    case 2: return a > b ? a : b;  // MAXIMUM
    case 3: return a < b ? a : b;  // MINIMUM
    default: return a + b;         // SUM, AVERAGE
  }
}

// Element i reduced over every rank's operand, in rank order.
__device__ __forceinline__ float reduce_at(const PeerReduceArgs& p, uint64_t i) {
  float acc = operand_of(p, 0)[i];
  for (uint32_t q = 1; q < p.ranks; ++q) acc = combine(p.op, acc, operand_of(p, q)[i]);
  return p.op == 4 ? acc / static_cast<float>(p.ranks) : acc;
}

// `value`, the sum at element i, with the fused addends added in order.
__device__ __forceinline__ float with_addends(const PeerReduceArgs& p, uint64_t i, float value) {
  for (uint32_t a = 0; a < p.num_addends; ++a) value += p.addends[a][i % p.periods[a]];
  return value;
}

// Part `part` of `parts` of [begin, end), parts of whole 64-byte lines.
__device__ __forceinline__ void part_of(uint64_t begin, uint64_t end, uint32_t part, uint32_t parts,
                                        uint64_t* out_begin, uint64_t* out_end) {
  const uint64_t n = end - begin;
  const uint64_t size = ((n + parts - 1) / parts + 15) / 16 * 16;
  const uint64_t first = uint64_t{part} * size;
  *out_begin = begin + (first < n ? first : n);
  *out_end = begin + (first + size < n ? first + size : n);
}

__global__ void all_reduce_kernel(PeerReduceArgs p) {
  __shared__ Signal done;  // steps this block completed in earlier calls
  if (threadIdx.x == 0) done = *signal_of(p, p.rank);
  __syncthreads();
  const Signal base = done;
  uint64_t begin = 0, end = 0;
  if (!p.two_shot) {
    if (!peer_step(p, base + 1)) return;
    part_of(0, p.count, blockIdx.x, gridDim.x, &begin, &end);
    for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) p.output[i] = with_addends(p, i, reduce_at(p, i));
    peer_step(p, base + 2);
    return;
  }
  if (!peer_step(p, base + 1)) return;
  uint64_t slice_begin = 0, slice_end = 0;
  part_of(0, p.count, p.rank, p.ranks, &slice_begin, &slice_end);
  part_of(slice_begin, slice_end, blockIdx.x, gridDim.x, &begin, &end);
  float* own = reinterpret_cast<float*>(p.peers[p.rank] + p.input_offset);
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) own[i] = reduce_at(p, i);
  if (!peer_step(p, base + 2)) return;
  for (uint32_t q = 0; q < p.ranks; ++q) {
    if (q == p.rank && p.output == own) continue;
    part_of(0, p.count, q, p.ranks, &slice_begin, &slice_end);
    part_of(slice_begin, slice_end, blockIdx.x, gridDim.x, &begin, &end);
    const float* source = operand_of(p, q);
    for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) p.output[i] = with_addends(p, i, source[i]);
  }
  if (!peer_step(p, base + 3) || p.output != own || p.num_addends == 0) return;
  // In place: the own reduced slice takes its addends only now, when no
  // peer reads it any more (block b's part of it, read by block b of each).
  part_of(0, p.count, p.rank, p.ranks, &slice_begin, &slice_end);
  part_of(slice_begin, slice_end, blockIdx.x, gridDim.x, &begin, &end);
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) own[i] = with_addends(p, i, own[i]);
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_ALL_REDUCE_CUH_
