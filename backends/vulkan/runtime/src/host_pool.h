// HostPool: a general-purpose allocator (allocate, reallocate, free, any
// power-of-two alignment) over one span of memory, for the Vulkan driver's
// host allocations (VkAllocationCallbacks). The driver frees and
// reallocates, so a bump allocator does not do; this is a first-fit free
// list kept in address order, merging neighbours on free.
//
// Layout of the span: blocks back to back, each starting with a header.
//
//   +--------+--------------+---------+--------+----------+---------+
//   | header | padding ...  | payload | header | free ... | header  |
//   +--------+--------------+---------+--------+----------+---------+
//   ^ block start, multiple of kGranule
//
// An allocated payload is preceded by a word holding its block's start, so
// free() finds the header whatever padding the alignment took.
//
// Thread safety: every call takes a spin lock; drivers may allocate from
// their own threads. Does not own the span.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_HOST_POOL_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_HOST_POOL_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace kiln::backends::vulkan::internal {

class HostPool {
 public:
  HostPool() = default;
  // An empty span gives a pool that fails every allocation.
  void reset(uint8_t* data, size_t size);

  // nullptr when no free block fits.
  void* allocate(size_t bytes, size_t alignment);
  // Like C's realloc: nullptr `p` allocates, the old bytes are kept up to
  // the smaller size; nullptr (and `p` untouched) when nothing fits.
  void* reallocate(void* p, size_t bytes, size_t alignment);
  void free(void* p);

  bool empty() const { return size_ == 0; }
  uint64_t allocations() const { return allocations_; }
  uint64_t bytes_in_use() const { return in_use_; }
  uint64_t bytes_peak() const { return peak_; }
  size_t capacity() const { return size_; }

 private:
  struct Block {
    size_t size;  // bytes of the block, header included
    Block* next;  // next free block (address order); unused while allocated
    bool free;
  };
  static constexpr size_t kGranule = 16;

  void* allocate_locked(size_t bytes, size_t alignment);
  void free_locked(void* p);
  static Block* block_of(void* p);
  static size_t payload_capacity(Block* block, void* p);

  void lock();
  void unlock() { lock_.clear(std::memory_order_release); }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  Block* free_list_ = nullptr;
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  uint64_t allocations_ = 0;
  uint64_t in_use_ = 0;
  uint64_t peak_ = 0;
};

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_HOST_POOL_H_
