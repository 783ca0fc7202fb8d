// The cuda-ipc communicator's CUDA calls (kiln/comm/cuda_ipc_driver.h), one
// source for both builds: with KILN_CUDA_HOSTEXEC=1 the host execution
// model's runtime and virtual memory API (backends/cuda/hostexec), else the
// CUDA Toolkit's runtime and driver (linked against the driver's library,
// libcuda). The calls are found unqualified in either, as the CUDA
// backend's are (backends/cuda/runtime/src/cuda_compat.h).

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/comm/cuda_ipc_driver.h"
#include "kiln/runtime/check.h"
#include "kiln/runtime/communicator.h"

#if KILN_CUDA_HOSTEXEC
#include "backends/cuda/hostexec/hostexec.h"
#include "backends/cuda/hostexec/hostexec_vmm.h"
#define KILN_CUDA_IPC_DRIVER_NAME "hostexec"
#define KILN_CUDA_IPC_DRIVER_FUNCTION hostexec_cuda_ipc_driver
#else
#include <cuda.h>
#include <cuda_runtime.h>
#define KILN_CUDA_IPC_DRIVER_NAME "gpu"
#define KILN_CUDA_IPC_DRIVER_FUNCTION gpu_cuda_ipc_driver
#endif

namespace kiln {
namespace comm {
namespace {

#if KILN_CUDA_HOSTEXEC
using namespace ::kiln::backends::cuda::hostexec;  // NOLINT: the CUDA API of this build
#endif

const char* driver_error(CUresult status) {
  const char* text = nullptr;
  if (cuGetErrorString(status, &text) != CUDA_SUCCESS || text == nullptr) return "unknown CUDA driver error";
  return text;
}

#define KILN_CU_CHECK(call, error, ...) KILN_CHECK_STATUS(call, CUDA_SUCCESS, driver_error, error, __VA_ARGS__)
#define KILN_CUDART_CHECK(call, error, ...) KILN_CHECK_STATUS(call, cudaSuccess, cudaGetErrorString, error, __VA_ARGS__)

CUmemAllocationProp allocation_properties(int device) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

Error open_device(int local_rank, int* out_device, uint64_t* out_granularity) {
  int devices = 0;
  KILN_CUDART_CHECK(cudaGetDeviceCount(&devices), Error::kNotSupported, "cuda-ipc: counting the CUDA devices");
  const int device = rank_local_device(local_rank, devices);
  KILN_CUDART_CHECK(cudaSetDevice(device), Error::kNotSupported, "cuda-ipc: selecting CUDA device %d", device);
  // The runtime's primary context, current in this thread, is the one the
  // driver calls below act in.
  KILN_CUDART_CHECK(cudaFree(nullptr), Error::kNotSupported, "cuda-ipc: starting CUDA on device %d", device);
  KILN_CU_CHECK(cuInit(0), Error::kNotSupported, "cuda-ipc: starting the CUDA driver");
  CUdevice handle = 0;
  KILN_CU_CHECK(cuDeviceGet(&handle, device), Error::kNotSupported, "cuda-ipc: device %d", device);
  const CUmemAllocationProp prop = allocation_properties(device);
  size_t granularity = 0;
  KILN_CU_CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                Error::kNotSupported,
                "cuda-ipc: device %d: shareable allocations (CUDA virtual memory with POSIX file descriptors)", device);
  *out_device = device;
  *out_granularity = granularity > 0 ? granularity : 1;
  return Error::kOk;
}

Error create(int device, uint64_t bytes, uint64_t* out_handle, int* out_fd) {
  const CUmemAllocationProp prop = allocation_properties(device);
  CUmemGenericAllocationHandle handle = 0;
  KILN_CU_CHECK(cuMemCreate(&handle, static_cast<size_t>(bytes), &prop, 0), Error::kOutOfMemory,
                "cuda-ipc: device %d: cuMemCreate of %llu bytes", device, static_cast<unsigned long long>(bytes));
  int fd = -1;
  const CUresult exported = cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (exported != CUDA_SUCCESS) {
    (void)cuMemRelease(handle);
    KILN_RETURN_ERROR(Error::kNotSupported, "cuda-ipc: device %d: exporting an allocation as a file descriptor: %s",
                      device, driver_error(exported));
  }
  *out_handle = handle;
  *out_fd = fd;
  return Error::kOk;
}

Error import(int fd, uint64_t* out_handle) {
  CUmemGenericAllocationHandle handle = 0;
  KILN_CU_CHECK(cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                Error::kNotSupported, "cuda-ipc: importing a peer's allocation (file descriptor %d)", fd);
  *out_handle = handle;
  return Error::kOk;
}

Error map(int device, uint64_t handle, uint64_t bytes, uint64_t granularity, void** out_address) {
  CUdeviceptr address = 0;
  KILN_CU_CHECK(cuMemAddressReserve(&address, static_cast<size_t>(bytes), static_cast<size_t>(granularity), 0, 0),
                Error::kOutOfMemory, "cuda-ipc: reserving %llu bytes of addresses",
                static_cast<unsigned long long>(bytes));
  CUresult status = cuMemMap(address, static_cast<size_t>(bytes), 0, handle, 0);
  if (status == CUDA_SUCCESS) {
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = cuMemSetAccess(address, static_cast<size_t>(bytes), &access, 1);
    if (status != CUDA_SUCCESS) (void)cuMemUnmap(address, static_cast<size_t>(bytes));
  }
  if (status != CUDA_SUCCESS) {
    (void)cuMemAddressFree(address, static_cast<size_t>(bytes));
    KILN_RETURN_ERROR(Error::kNotSupported, "cuda-ipc: device %d: mapping %llu bytes read/write: %s", device,
                      static_cast<unsigned long long>(bytes), driver_error(status));
  }
  *out_address = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  return Error::kOk;
}

void unmap(void* address, uint64_t bytes) {
  const CUdeviceptr at = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(address));
  (void)cuMemUnmap(at, static_cast<size_t>(bytes));
  (void)cuMemAddressFree(at, static_cast<size_t>(bytes));
}

void release(uint64_t handle) { (void)cuMemRelease(handle); }

Error synchronize() {
  KILN_CUDART_CHECK(cudaStreamSynchronize(nullptr), Error::kDeviceError, "cuda-ipc: waiting for the device");
#if !KILN_CUDA_HOSTEXEC
  KILN_CUDART_CHECK(cudaDeviceSynchronize(), Error::kDeviceError, "cuda-ipc: waiting for the device");
#endif
  return Error::kOk;
}

Error zero(void* address, uint64_t bytes) {
  KILN_CUDART_CHECK(cudaMemsetAsync(address, 0, static_cast<size_t>(bytes), nullptr), Error::kDeviceError,
                    "cuda-ipc: zeroing %llu bytes", static_cast<unsigned long long>(bytes));
  return synchronize();
}

Error copy(void* dst, const void* src, uint64_t bytes) {
  KILN_CUDART_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, nullptr),
                    Error::kDeviceError, "cuda-ipc: copying %llu bytes", static_cast<unsigned long long>(bytes));
  KILN_CUDART_CHECK(cudaStreamSynchronize(nullptr), Error::kDeviceError, "cuda-ipc: waiting for a copy");
  return Error::kOk;
}

Error alloc_host_word(uint32_t** out_word) {
  void* word = nullptr;
#if KILN_CUDA_HOSTEXEC
  word = aligned_alloc(64, 64);
  KILN_CHECK_OR_RETURN(word != nullptr, Error::kOutOfMemory, "cuda-ipc: allocating the peer-exit word");
#else
  // Mapped, pinned host memory: with unified addressing its host address is
  // the one kernels read.
  KILN_CUDART_CHECK(cudaHostAlloc(&word, 64, cudaHostAllocMapped), Error::kOutOfMemory,
                    "cuda-ipc: allocating the peer-exit word in mapped host memory");
#endif
  memset(word, 0, 64);
  *out_word = static_cast<uint32_t*>(word);
  return Error::kOk;
}

void free_host_word(uint32_t* word) {
#if KILN_CUDA_HOSTEXEC
  free(word);
#else
  (void)cudaFreeHost(word);
#endif
}

}  // namespace

const CudaIpcDriver& KILN_CUDA_IPC_DRIVER_FUNCTION() {
  static const CudaIpcDriver driver = {
      KILN_CUDA_IPC_DRIVER_NAME, open_device,   create, import, map, unmap, release, zero, synchronize, copy,
      alloc_host_word,           free_host_word};
  return driver;
}

}  // namespace comm
}  // namespace kiln
