// hostexec's CUDA virtual memory management over memfd and mmap (see
// hostexec_vmm.h; test infrastructure).

#include "hostexec_vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hostexec.h"

namespace kiln::backends::cuda::hostexec {
namespace {

size_t page_size() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

bool page_multiple(size_t value) { return value > 0 && value % page_size() == 0; }

int fd_of(CUmemGenericAllocationHandle handle) { return static_cast<int>(handle); }

}  // namespace

CUresult cuInit(unsigned) { return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (cudaSetDevice(ordinal) != cudaSuccess) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** out_text) {
  if (out_text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *out_text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *out_text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *out_text = "out of memory"; break;
    case CUDA_ERROR_INVALID_DEVICE: *out_text = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_HANDLE: *out_text = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *out_text = "operation not supported"; break;
    default: *out_text = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = page_size();
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  if (handle == nullptr || prop == nullptr || flags != 0 || !page_multiple(size)) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const int fd = memfd_create("kiln-hostexec-vmm", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handle = static_cast<CUmemGenericAllocationHandle>(fd);
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return close(fd_of(handle)) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuMemExportToShareableHandle(void* shareable_handle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  if (shareable_handle == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = fcntl(fd_of(handle), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  *static_cast<int*>(shareable_handle) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = fcntl(static_cast<int>(reinterpret_cast<intptr_t>(os_handle)), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  *handle = static_cast<CUmemGenericAllocationHandle>(fd);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  if (ptr == nullptr || flags != 0 || addr != 0 || !page_multiple(size)) return CUDA_ERROR_INVALID_VALUE;
  if (alignment < page_size()) alignment = page_size();
  if ((alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  // Over-reserve, then trim to an aligned range.
  const size_t span = size + alignment - page_size();
  void* base = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = (start + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  if (aligned > start) munmap(base, aligned - start);
  if (aligned + size < start + span) munmap(reinterpret_cast<void*>(aligned + size), start + span - aligned - size);
  *ptr = static_cast<CUdeviceptr>(aligned);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return munmap(reinterpret_cast<void*>(ptr), size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (flags != 0 || !page_multiple(size) || offset % page_size() != 0) return CUDA_ERROR_INVALID_VALUE;
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_of(handle),
                  static_cast<off_t>(offset));
  if (at == MAP_FAILED) return errno == EBADF ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return at == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  (void)ptr;
  (void)size;
  return desc != nullptr && count > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace kiln::backends::cuda::hostexec
