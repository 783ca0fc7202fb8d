// File loaders for hosted (POSIX) builds. They use open/read/mmap directly:
// stdio's fopen would allocate its FILE from the heap.

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/runtime/data_loader.h"
#include "kiln/runtime/log.h"

namespace kiln {
namespace {

Result<Span<const uint8_t>> load_range(const uint8_t* data, uint64_t total, uint64_t offset,
                                       uint64_t size) {
  if (offset > total || size > total - offset) {
    KILN_LOG(ERROR, "load of %llu bytes at offset %llu is outside the %llu-byte file",
             static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
             static_cast<unsigned long long>(total));
    return Error::kInvalidArgument;
  }
  return Span<const uint8_t>(data + offset, static_cast<size_t>(size));
}

}  // namespace

Result<uint64_t> FileDataLoader::file_size(const char* path) {
  if (path == nullptr) return Error::kInvalidArgument;
  struct stat st;
  if (stat(path, &st) != 0) {
    KILN_LOG(ERROR, "%s: %s", path, strerror(errno));
    return Error::kIoError;
  }
  return static_cast<uint64_t>(st.st_size);
}

Result<FileDataLoader> FileDataLoader::open(const char* path, Span<uint8_t> buffer) {
  if (path == nullptr) return Error::kInvalidArgument;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    KILN_LOG(ERROR, "%s: %s", path, strerror(errno));
    return Error::kIoError;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    KILN_LOG(ERROR, "%s: %s", path, strerror(errno));
    ::close(fd);
    return Error::kIoError;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > buffer.size()) {
    KILN_LOG(ERROR, "%s: file is %llu bytes, the buffer given holds %llu", path,
             static_cast<unsigned long long>(size), static_cast<unsigned long long>(buffer.size()));
    ::close(fd);
    return Error::kBufferTooSmall;
  }
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buffer.data() + done, static_cast<size_t>(size - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      KILN_LOG(ERROR, "%s: read failed after %llu of %llu bytes: %s", path,
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(size),
               n == 0 ? "unexpected end of file" : strerror(errno));
      ::close(fd);
      return Error::kIoError;
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return FileDataLoader(buffer.data(), static_cast<size_t>(size));
}

Result<Span<const uint8_t>> FileDataLoader::load(uint64_t offset, uint64_t size) {
  return load_range(data_, size_, offset, size);
}

Result<MmapDataLoader> MmapDataLoader::open(const char* path) {
  if (path == nullptr) return Error::kInvalidArgument;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    KILN_LOG(ERROR, "%s: %s", path, strerror(errno));
    return Error::kIoError;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    KILN_LOG(ERROR, "%s: %s", path, strerror(errno));
    ::close(fd);
    return Error::kIoError;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    KILN_LOG(ERROR, "%s: file is empty", path);
    return Error::kIoError;
  }
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) {
    KILN_LOG(ERROR, "%s: mmap failed: %s", path, strerror(errno));
    return Error::kIoError;
  }
  return MmapDataLoader(static_cast<const uint8_t*>(data), size);
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MmapDataLoader::~MmapDataLoader() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

Result<Span<const uint8_t>> MmapDataLoader::load(uint64_t offset, uint64_t size) {
  return load_range(data_, size_, offset, size);
}

}  // namespace kiln
