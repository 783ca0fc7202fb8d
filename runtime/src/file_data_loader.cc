// File loaders for hosted (POSIX) builds. They use open/read/mmap directly:
// stdio's fopen would allocate its FILE from the heap.

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/runtime/check.h"
#include "kiln/runtime/data_loader.h"

namespace kiln {
namespace {

// Closes a file descriptor when the function that opened it returns (after
// any failure was logged, so the message still sees the call's errno).
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Result<Span<const uint8_t>> load_range(const uint8_t* data, uint64_t total, uint64_t offset, uint64_t size) {
  KILN_CHECK_OR_RETURN(offset <= total && size <= total - offset, Error::kInvalidArgument,
                       "load of %llu bytes at offset %llu is outside the %llu-byte file",
                       static_cast<unsigned long long>(size), static_cast<unsigned long long>(offset),
                       static_cast<unsigned long long>(total));
  return Span<const uint8_t>(data + offset, static_cast<size_t>(size));
}

}  // namespace

Result<uint64_t> FileDataLoader::file_size(const char* path) {
  KILN_CHECK_OR_RETURN(path != nullptr, Error::kInvalidArgument, "file path is null");
  struct stat st;
  KILN_CHECK_OR_RETURN(stat(path, &st) == 0, Error::kIoError, "%s: %s", path, strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

Result<FileDataLoader> FileDataLoader::open(const char* path, Span<uint8_t> buffer) {
  KILN_CHECK_OR_RETURN(path != nullptr, Error::kInvalidArgument, "file path is null");
  const ScopedFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  KILN_CHECK_OR_RETURN(fd.get() >= 0, Error::kIoError, "%s: %s", path, strerror(errno));
  struct stat st;
  KILN_CHECK_OR_RETURN(fstat(fd.get(), &st) == 0, Error::kIoError, "%s: %s", path, strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  KILN_CHECK_OR_RETURN(size <= buffer.size(), Error::kBufferTooSmall,
                       "%s: file is %llu bytes, the buffer given holds %llu", path,
                       static_cast<unsigned long long>(size), static_cast<unsigned long long>(buffer.size()));
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd.get(), buffer.data() + done, static_cast<size_t>(size - done));
    if (n < 0 && errno == EINTR) continue;
    KILN_CHECK_OR_RETURN(n > 0, Error::kIoError, "%s: read failed after %llu of %llu bytes: %s", path,
                         static_cast<unsigned long long>(done), static_cast<unsigned long long>(size),
                         n == 0 ? "unexpected end of file" : strerror(errno));
    done += static_cast<uint64_t>(n);
  }
  return FileDataLoader(buffer.data(), static_cast<size_t>(size));
}

Result<Span<const uint8_t>> FileDataLoader::load(uint64_t offset, uint64_t size) {
  return load_range(data_, size_, offset, size);
}

Result<MmapDataLoader> MmapDataLoader::open(const char* path) {
  KILN_CHECK_OR_RETURN(path != nullptr, Error::kInvalidArgument, "file path is null");
  void* data = MAP_FAILED;
  size_t size = 0;
  {
    const ScopedFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    KILN_CHECK_OR_RETURN(fd.get() >= 0, Error::kIoError, "%s: %s", path, strerror(errno));
    struct stat st;
    KILN_CHECK_OR_RETURN(fstat(fd.get(), &st) == 0, Error::kIoError, "%s: %s", path, strerror(errno));
    size = static_cast<size_t>(st.st_size);
    KILN_CHECK_OR_RETURN(size != 0, Error::kIoError, "%s: file is empty", path);
    data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  }
  // The mapping outlives the descriptor.
  KILN_CHECK_OR_RETURN(data != MAP_FAILED, Error::kIoError, "%s: mmap failed: %s", path, strerror(errno));
  return MmapDataLoader(static_cast<const uint8_t*>(data), size);
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept : data_(other.data_), size_(other.size_) {
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
