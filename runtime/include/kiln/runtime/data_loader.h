// Data loaders give Program::load the bytes of a .kiln file.
//
// A loader returns spans that stay valid and unchanged for as long as the
// loader lives; the Program and every Method loaded from it point into them
// (zero copy: a program in flash or in a memory-mapped file is never copied).
//
// - BufferDataLoader: a program already in memory (a const array in flash, a
//   buffer the app filled).
// - FileDataLoader (hosted builds): reads a file into a buffer the app hands it.
// - MmapDataLoader (POSIX): maps a file read-only.
//
// None of them allocates. Not thread safe.

#ifndef KILN_RUNTIME_DATA_LOADER_H_
#define KILN_RUNTIME_DATA_LOADER_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"

namespace kiln {

class DataLoader {
 public:
  // The `size` bytes at `offset`. kInvalidArgument when the range is not
  // inside the data.
  virtual Result<Span<const uint8_t>> load(uint64_t offset, uint64_t size) = 0;
  // Total number of bytes available.
  virtual uint64_t size() const = 0;

 protected:
  // Protected and non-virtual: the application owns each loader; nothing
  // destroys one through this interface.
  ~DataLoader() = default;
};

// Serves a program that is already in memory. Does not take ownership of
// `data`, which must outlive the loader and every Program loaded from it.
class BufferDataLoader final : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}

  Result<Span<const uint8_t>> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

#if !defined(KILN_BARE_METAL)

// Reads a whole file into `buffer` when opened. The buffer (owned by the
// caller, at least 16-byte aligned) must be at least as large as the file
// and outlive the loader and every Program loaded from it.
class FileDataLoader final : public DataLoader {
 public:
  static Result<FileDataLoader> open(const char* path, Span<uint8_t> buffer);
  // The size of the file at `path`, to size the buffer.
  static Result<uint64_t> file_size(const char* path);

  Result<Span<const uint8_t>> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  FileDataLoader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

// Maps a file read-only. The mapping is removed when the loader is destroyed,
// so the loader must outlive every Program loaded from it.
class MmapDataLoader final : public DataLoader {
 public:
  static Result<MmapDataLoader> open(const char* path);
  MmapDataLoader(MmapDataLoader&& other) noexcept;
  MmapDataLoader(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(MmapDataLoader&&) = delete;
  ~MmapDataLoader();

  Result<Span<const uint8_t>> load(uint64_t offset, uint64_t size) override;
  uint64_t size() const override { return size_; }

 private:
  MmapDataLoader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

#endif  // !KILN_BARE_METAL

}  // namespace kiln

#endif  // KILN_RUNTIME_DATA_LOADER_H_
