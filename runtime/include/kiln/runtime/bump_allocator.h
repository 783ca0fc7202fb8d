// BumpAllocator hands out aligned pieces of one span, front to back, and
// frees them all at once (reset). It is how the runtime takes memory: the
// method's bookkeeping comes from a BumpAllocator over a buffer the
// application owns. It never calls the heap.
//
// Lifetime: does not own the span; the span must outlive the allocator and
// everything allocated from it. Not thread safe.

#ifndef KILN_RUNTIME_BUMP_ALLOCATOR_H_
#define KILN_RUNTIME_BUMP_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/span.h"

namespace kiln {

class BumpAllocator {
 public:
  BumpAllocator() = default;
  explicit BumpAllocator(Span<uint8_t> buffer) : begin_(buffer.data()), size_(buffer.size()) {}
  BumpAllocator(void* data, size_t size) : begin_(static_cast<uint8_t*>(data)), size_(size) {}

  // Returns `bytes` bytes aligned to `alignment` (a power of two), or nullptr
  // when the buffer cannot hold them.
  void* allocate(size_t bytes, size_t alignment = 16) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(begin_);
    const uintptr_t current = base + used_;
    const uintptr_t aligned = (current + (alignment - 1)) & ~static_cast<uintptr_t>(alignment - 1);
    const size_t padding = static_cast<size_t>(aligned - current);
    if (padding > size_ - used_ || bytes > size_ - used_ - padding) return nullptr;
    used_ += padding + bytes;
    return reinterpret_cast<void*>(aligned);
  }

  // Uninitialised storage for `count` objects of type T.
  template <typename T>
  T* allocate_array(size_t count, size_t alignment = alignof(T)) {
    if (count > static_cast<size_t>(-1) / sizeof(T)) return nullptr;
    return static_cast<T*>(allocate(count * sizeof(T), alignment));
  }

  void reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t capacity() const { return size_; }

 private:
  uint8_t* begin_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_BUMP_ALLOCATOR_H_
