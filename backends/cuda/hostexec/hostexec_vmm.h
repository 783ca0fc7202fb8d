// hostexec's CUDA virtual memory management: the subset of the CUDA
// driver's VMM API (cuMemCreate and friends) that comm/cuda_ipc uses to
// share device memory between processes, over host memory, so the
// communicator's one source compiles and runs under the host execution
// model (hostexec.h) as it does on a GPU. TEST INFRASTRUCTURE, like the
// rest of hostexec.
//
//   cuMemCreate                     memfd_create + ftruncate; the handle is the fd
//   cuMemExportToShareableHandle    dup of the fd (POSIX file descriptors only)
//   cuMemImportFromShareableHandle  dup of the given fd: the caller keeps its
//                                   own and closes it, as with the driver
//   cuMemAddressReserve             an inaccessible anonymous mapping
//   cuMemMap                        mmap(MAP_SHARED | MAP_FIXED) of the fd into it
//   cuMemSetAccess                  nothing (mapped read/write already)
//   cuMemUnmap                      the range made inaccessible again
//   cuMemAddressFree                munmap
//   cuMemRelease                    close of the fd (a mapping keeps the memory)
//
// Two processes that map each other's allocation see the same bytes, with
// the host's coherence (stronger than a GPU's across NVLink). Thread safe as
// the system calls are.

#ifndef KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_VMM_H_
#define KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_VMM_H_

#include <stddef.h>

namespace kiln::backends::cuda::hostexec {

enum CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;

enum CUmemAllocationHandleType {
  CU_MEM_HANDLE_TYPE_NONE = 0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
};
enum CUmemAllocationType { CU_MEM_ALLOCATION_TYPE_INVALID = 0, CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
enum CUmemLocationType { CU_MEM_LOCATION_TYPE_INVALID = 0, CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum CUmemAllocationGranularity_flags {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
};
enum CUmemAccess_flags { CU_MEM_ACCESS_FLAGS_PROT_NONE = 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };

// Plain C structs, as the driver's (callers zero them).
struct CUmemLocation {
  CUmemLocationType type;
  int id;
};
struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

CUresult cuInit(unsigned flags);
// Any device the model pretends to have (KILN_HOSTEXEC_DEVICES).
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuGetErrorString(CUresult error, const char** out_text);
// The host's page size.
CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option);
// `size` a multiple of the granularity; pinned device memory with a POSIX
// file-descriptor handle only.
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
// `shareable_handle` points to an int that receives a new file descriptor.
CUresult cuMemExportToShareableHandle(void* shareable_handle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags);
// `os_handle` is the file descriptor itself, cast to a pointer (as with the driver).
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type);
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count);

}  // namespace kiln::backends::cuda::hostexec

#endif  // KILN_BACKENDS_CUDA_HOSTEXEC_HOSTEXEC_VMM_H_
