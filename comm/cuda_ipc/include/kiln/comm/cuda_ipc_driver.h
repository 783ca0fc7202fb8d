// The CUDA calls the cuda-ipc communicator makes, as a table of functions,
// one per build of CUDA: the GPU's (the driver's virtual memory API and the
// CUDA runtime, kiln_comm_cuda_ipc_gpu) and the host execution model's
// (backends/cuda/hostexec/hostexec_vmm.h, kiln_comm_cuda_ipc_hostexec, test
// infrastructure). Both are the same source (src/cuda_ipc_driver.cc)
// compiled twice, as the CUDA backend is; the communicator itself is built
// once and is handed one of them (CudaIpcOptions::driver), so one program
// may link both and choose at run time, as kiln's tools choose the CUDA
// backend's build.
//
// Every function logs its failure (the call and CUDA's own error string).
// The tables are constants: thread safe.

#ifndef KILN_COMM_CUDA_IPC_DRIVER_H_
#define KILN_COMM_CUDA_IPC_DRIVER_H_

#include <stdint.h>

#include "kiln/runtime/error.h"

namespace kiln {
namespace comm {

struct CudaIpcDriver {
  // "gpu" or "hostexec", for messages.
  const char* name;
  // Makes the GPU of `local_rank` (rank_local_device over the devices
  // present) current in this thread: its device number, and the
  // granularity its shareable allocations are sized and mapped in.
  Error (*open)(int local_rank, int* out_device, uint64_t* out_granularity);
  // A new allocation of `bytes` (a multiple of the granularity) on
  // `device`, shareable as a POSIX file descriptor: its handle, and the
  // exported descriptor (the caller closes it).
  Error (*create)(int device, uint64_t bytes, uint64_t* out_handle, int* out_fd);
  // The allocation a peer exported as `fd` (not taken: the caller closes it).
  Error (*import)(int fd, uint64_t* out_handle);
  // Reserves `bytes` of addresses on `device`, maps `handle` there and
  // gives this device read/write access: the address.
  Error (*map)(int device, uint64_t handle, uint64_t bytes, uint64_t granularity, void** out_address);
  void (*unmap)(void* address, uint64_t bytes);
  void (*release)(uint64_t handle);
  // Zeroes device memory; waits until done.
  Error (*zero)(void* address, uint64_t bytes);
  // Waits until all work queued on the device is done.
  Error (*synchronize)();
  // Copies between any two addresses (device or host); waits until done.
  Error (*copy)(void* dst, const void* src, uint64_t bytes);
  // A 64-byte word of host memory the device's kernels can read (mapped,
  // pinned host memory on a GPU), zeroed; and its release.
  Error (*alloc_host_word)(uint32_t** out_word);
  void (*free_host_word)(uint32_t* word);
};

// The host execution model's table (kiln_comm_cuda_ipc_hostexec).
const CudaIpcDriver& hostexec_cuda_ipc_driver();
// The GPU's (kiln_comm_cuda_ipc_gpu, where the CUDA Toolkit is found:
// KILN_WITH_CUDA_IPC_GPU).
const CudaIpcDriver& gpu_cuda_ipc_driver();

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_CUDA_IPC_DRIVER_H_
