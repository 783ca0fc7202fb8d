// The cuda-ipc communicator's CUDA calls (kiln/comm/cuda_ipc_driver.h), one
// source for both builds: with KILN_CUDA_HOSTEXEC=1 the host execution
// model's runtime and virtual memory API (backends/cuda/hostexec), else the
// CUDA Toolkit's runtime (static, as the CUDA backend's) and the driver's
// virtual memory API. The driver's functions are reached through the
// runtime (cudaGetDriverEntryPointByVersion) rather than by linking
// libcuda, so a program holding this build still starts where no driver
// is installed (kiln-runner's host execution model on CI machines); the
// host execution model's are the same table filled directly.

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

// The driver functions used, by the names the driver exports.
#define KILN_CUDA_IPC_DRIVER_FUNCTIONS(X) \
  X(cuGetErrorString)                     \
  X(cuDeviceGet)                          \
  X(cuMemGetAllocationGranularity)        \
  X(cuMemCreate)                          \
  X(cuMemRelease)                         \
  X(cuMemExportToShareableHandle)         \
  X(cuMemImportFromShareableHandle)       \
  X(cuMemAddressReserve)                  \
  X(cuMemAddressFree)                     \
  X(cuMemMap)                             \
  X(cuMemUnmap)                           \
  X(cuMemSetAccess)

struct DriverApi {
#define KILN_CUDA_IPC_MEMBER(name) decltype(&::name) name = nullptr;
#if KILN_CUDA_HOSTEXEC
#undef KILN_CUDA_IPC_MEMBER
#define KILN_CUDA_IPC_MEMBER(name) decltype(&::kiln::backends::cuda::hostexec::name) name = nullptr;
#endif
  KILN_CUDA_IPC_DRIVER_FUNCTIONS(KILN_CUDA_IPC_MEMBER)
#undef KILN_CUDA_IPC_MEMBER
};

DriverApi g_api;

#if !KILN_CUDA_HOSTEXEC
// The driver's `symbol` as of CUDA 12 (before CUDA 12.5 runtimes, the
// entry point of the driver's own version).
cudaError_t driver_entry_point(const char* symbol, void** out_fn, cudaDriverEntryPointQueryResult* out_status) {
#if CUDART_VERSION >= 12050
  return cudaGetDriverEntryPointByVersion(symbol, out_fn, 12000, cudaEnableDefault, out_status);
#else
  return cudaGetDriverEntryPoint(symbol, out_fn, cudaEnableDefault, out_status);
#endif
}
#endif

// Fills g_api once (open_device runs before any other call).
bool load_driver_api() {
  if (g_api.cuMemCreate != nullptr) return true;
  DriverApi api;
#if KILN_CUDA_HOSTEXEC
#define KILN_CUDA_IPC_RESOLVE(name) api.name = &::kiln::backends::cuda::hostexec::name;
#else
  bool found = true;
#define KILN_CUDA_IPC_RESOLVE(name)                                                                        \
  {                                                                                                        \
    void* fn = nullptr;                                                                                    \
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;                           \
    if (driver_entry_point(#name, &fn, &status) != cudaSuccess || status != cudaDriverEntryPointSuccess || \
        fn == nullptr) {                                                                                   \
      KILN_LOG(ERROR, "cuda-ipc: the CUDA driver has no %s (CUDA 12 virtual memory management)", #name);   \
      found = false;                                                                                       \
    }                                                                                                      \
    api.name = reinterpret_cast<decltype(api.name)>(fn);                                                   \
  }
#endif
  KILN_CUDA_IPC_DRIVER_FUNCTIONS(KILN_CUDA_IPC_RESOLVE)
#undef KILN_CUDA_IPC_RESOLVE
#if !KILN_CUDA_HOSTEXEC
  if (!found) return false;
#endif
  g_api = api;
  return true;
}

const char* driver_error(CUresult status) {
  const char* text = nullptr;
  if (g_api.cuGetErrorString == nullptr || g_api.cuGetErrorString(status, &text) != CUDA_SUCCESS || text == nullptr) {
    return "unknown CUDA driver error";
  }
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
  KILN_CHECK_OR_RETURN(load_driver_api(), Error::kNotSupported,
                       "cuda-ipc: the CUDA driver lacks the virtual memory management calls cuda-ipc needs");
  CUdevice handle = 0;
  KILN_CU_CHECK(g_api.cuDeviceGet(&handle, device), Error::kNotSupported, "cuda-ipc: device %d", device);
  const CUmemAllocationProp prop = allocation_properties(device);
  size_t granularity = 0;
  KILN_CU_CHECK(g_api.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                Error::kNotSupported,
                "cuda-ipc: device %d: shareable allocations (CUDA virtual memory with POSIX file descriptors)", device);
  *out_device = device;
  *out_granularity = granularity > 0 ? granularity : 1;
  return Error::kOk;
}

Error create(int device, uint64_t bytes, uint64_t* out_handle, int* out_fd) {
  const CUmemAllocationProp prop = allocation_properties(device);
  CUmemGenericAllocationHandle handle = 0;
  KILN_CU_CHECK(g_api.cuMemCreate(&handle, static_cast<size_t>(bytes), &prop, 0), Error::kOutOfMemory,
                "cuda-ipc: device %d: cuMemCreate of %llu bytes", device, static_cast<unsigned long long>(bytes));
  int fd = -1;
  const CUresult exported =
      g_api.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (exported != CUDA_SUCCESS) {
    (void)g_api.cuMemRelease(handle);
    KILN_RETURN_ERROR(Error::kNotSupported, "cuda-ipc: device %d: exporting an allocation as a file descriptor: %s",
                      device, driver_error(exported));
  }
  *out_handle = handle;
  *out_fd = fd;
  return Error::kOk;
}

Error import(int fd, uint64_t* out_handle) {
  CUmemGenericAllocationHandle handle = 0;
  KILN_CU_CHECK(g_api.cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                Error::kNotSupported, "cuda-ipc: importing a peer's allocation (file descriptor %d)", fd);
  *out_handle = handle;
  return Error::kOk;
}

Error map(int device, uint64_t handle, uint64_t bytes, uint64_t granularity, void** out_address) {
  CUdeviceptr address = 0;
  KILN_CU_CHECK(g_api.cuMemAddressReserve(&address, static_cast<size_t>(bytes), static_cast<size_t>(granularity), 0, 0),
                Error::kOutOfMemory, "cuda-ipc: reserving %llu bytes of addresses",
                static_cast<unsigned long long>(bytes));
  CUresult status = g_api.cuMemMap(address, static_cast<size_t>(bytes), 0, handle, 0);
  if (status == CUDA_SUCCESS) {
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = g_api.cuMemSetAccess(address, static_cast<size_t>(bytes), &access, 1);
    if (status != CUDA_SUCCESS) (void)g_api.cuMemUnmap(address, static_cast<size_t>(bytes));
  }
  if (status != CUDA_SUCCESS) {
    (void)g_api.cuMemAddressFree(address, static_cast<size_t>(bytes));
    KILN_RETURN_ERROR(Error::kNotSupported, "cuda-ipc: device %d: mapping %llu bytes read/write: %s", device,
                      static_cast<unsigned long long>(bytes), driver_error(status));
  }
  *out_address = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  return Error::kOk;
}

void unmap(void* address, uint64_t bytes) {
  const CUdeviceptr at = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(address));
  (void)g_api.cuMemUnmap(at, static_cast<size_t>(bytes));
  (void)g_api.cuMemAddressFree(at, static_cast<size_t>(bytes));
}

void release(uint64_t handle) { (void)g_api.cuMemRelease(handle); }

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
