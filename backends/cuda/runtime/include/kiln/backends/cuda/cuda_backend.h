// The CUDA backend's runtime half: device arenas in GPU memory, copies on
// the backend's stream, and delegates that run kiln's CUDA kernels (and
// cuBLASLt for Gemm/MatMul and convolutions through a GEMM), each delegate
// call captured once as a CUDA graph and replayed.
//
//   static kiln::backends::cuda::gpu::CudaBackend backend{kiln::backends::cuda::CudaOptions{}};
//   kiln::global_backend_registry().register_backend(&backend);
//
// Memory: one cudaMalloc per device arena, when a method loads
// (Backend::allocate), freed with the Method; per device, a stream. Each
// Gemm/MatMul's cuBLASLt workspace is planned scratch in the device arena,
// and so are a Conv's column buffer and workspace where the planner sends
// it through a GEMM (the planner half's plan_kernel, cuda_abi.h); only a program
// planned without it makes the backend allocate one per device
// (CudaOptions::gemm_workspace_bytes, one cudaMalloc when such a delegate
// loads, kept until the backend is destroyed or shutdown() is called).
// execute() allocates nothing.
// Copies: cudaMemcpyAsync on the device's stream; copy_to_host waits for
// the stream (the host reads the bytes next). Host memory is pageable
// unless the application registered it.
// Delegates: init() checks every kernel call (lower.cc) and records its
// launches, with every device address fixed, in the delegate's state
// (DelegateContext::allocator, sized by the planner half: cuda_abi.h);
// cuBLASLt descriptors live there too (initialised in place). The first
// execute() launches directly (warm-up: modules load, cuBLASLt settles),
// the second captures the launches as a CUDA graph and every later one
// replays it. Each delegate captures on a stream of its own (created at
// init, destroyed with it), so another Method's copies and launches on the
// device's stream never fall into its graph; graphs, copies and direct
// launches all run on the device's stream, in the order they are issued.
// A kernel or cuBLASLt call that fails makes execute() return the error,
// also during the capture (no graph is kept then, and the next call
// captures again). Where capture itself fails the delegate keeps launching
// directly, and says so once in the log.
// Device arenas the application gives (MemoryManager::device_arenas) must
// be aligned to kArenaAlignment (cuda_abi.h), as cudaMalloc's are.
// A device that is missing (no GPU, no driver, index out of range) is an
// Error naming it (cuda:N) when a method loads, never a crash.
//
// Two builds of this class exist (cuda_flavor.h): `gpu`, the real one, and
// `hostexec`, the same source over the host execution model (test
// infrastructure, backends/cuda/hostexec).
//
// Threading: one thread loads or executes a given Method at a time.

#ifndef KILN_BACKENDS_CUDA_CUDA_BACKEND_H_
#define KILN_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/backends/cuda/cuda_flavor.h"
#include "kiln/runtime/backend.h"

namespace kiln::backends::cuda {

struct CudaOptions {
  // cuBLASLt workspace per device for GEMMs planned without one (0: none;
  // cuBLASLt then only picks algorithms that need none). NVIDIA suggests
  // 32 MiB on Hopper.
  uint64_t gemm_workspace_bytes = uint64_t{32} << 20;
  // Capture each delegate call as a CUDA graph after the warm-up call.
  bool graphs = true;
  // When set, every device is unavailable for this reason (a kiln built
  // without the CUDA Toolkit). Not owned; a string literal.
  const char* unavailable = nullptr;
  // In a multi-rank program, this rank's rank on its node (-1: a program of
  // one rank). cuda:N then names GPU (rank_local_device(node_rank, count) +
  // N) % count of the node's `count` GPUs: cuda:0 is the rank's local
  // device, the one a device communicator picks (kiln/runtime/
  // communicator.h), so a rank computes and reduces on one GPU.
  int node_rank = -1;
};

// What a backend did, for tests and benchmarks.
struct CudaStats {
  uint64_t direct_calls = 0;      // delegate calls launched kernel by kernel
  uint64_t graph_replays = 0;     // delegate calls replayed from a graph
  uint64_t captures = 0;          // graphs captured
  uint64_t capture_failures = 0;  // delegates that fell back to direct launches
  uint64_t gemm_library = 0;      // Gemm/MatMul kernels set up on cuBLASLt
  uint64_t gemm_reference = 0;    // ... on the reference GEMM kernel
};

namespace KILN_CUDA_FLAVOR {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& options) : options_(options) {}
  ~CudaBackend() { shutdown(); }

  const char* id() const override { return "cuda"; }
  DeviceType device_type() const override { return DeviceType::CUDA; }
  Error allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) override;
  void release(Device device, DeviceBuffer buffer) override;
  Error copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  Error copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) override;
  Error copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src, uint64_t src_offset,
                       uint64_t bytes) override;
  // One launch of the binary kernel's Add on the device's stream.
  Error accumulate(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src, uint64_t src_offset,
                   uint64_t count, uint64_t period) override;
  uint64_t state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const override;
  Result<void*> init(const DelegateContext& context) override;
  Error execute(void* delegate, const DelegateCallArgs& args) override;
  void destroy(void* delegate) override;
  // An all-reduce run by the kernels of all_reduce.cuh over the peers'
  // symmetric arenas: one launch, run like a delegate of one kernel (the
  // first call direct, the second captured as a CUDA graph on its own
  // stream, then replayed on the device's stream). A peer that does not
  // arrive in time fails the call with kPeerFailed. Without peers
  // (CollectiveContext::peers nullptr), the communicator's own all-reduce
  // (Communicator::enqueue_all_reduce, NCCL's) enqueued on the device's
  // stream instead of the kernel, then the addend's launch, run, captured
  // and replayed the same way; kNotSupported for two addends.
  Result<void*> init_collective(const CollectiveContext& context) override;

  // Releases every device's stream, workspace and cuBLASLt handle (after
  // the last Method using the backend is gone).
  void shutdown();
  const CudaStats& stats() const { return stats_; }
  // Arenas allocated and not yet released.
  uint32_t live_arenas() const { return live_; }
  // The GPU cuda:`index` names (CudaOptions::node_rank); -1 before the
  // device is opened.
  int physical_device(int index) const {
    return index >= 0 && index < 16 && devices_[index].open ? devices_[index].physical : -1;
  }

  // Per device: opened on its first arena.
  struct DeviceState {
    bool open = false;
    int physical = 0;           // the GPU cuda:N names (CudaOptions::node_rank)
    void* stream = nullptr;     // cudaStream_t
    void* workspace = nullptr;  // cuBLASLt workspace
    uint64_t workspace_bytes = 0;
    void* blas = nullptr;  // cublasLtHandle_t
  };

 private:
  Error open_device(int index);
  Error execute_record(void* record);
  Result<void*> init_enqueued_collective(const CollectiveContext& context);
  Result<void*> collective_record(const CollectiveContext& context);

  CudaOptions options_;
  DeviceState devices_[16];
  CudaStats stats_;
  uint32_t live_ = 0;
};

}  // namespace KILN_CUDA_FLAVOR
}  // namespace kiln::backends::cuda

#endif  // KILN_BACKENDS_CUDA_CUDA_BACKEND_H_
