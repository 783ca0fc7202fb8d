#include "host_pool.h"

#include <string.h>

namespace kiln::backends::vulkan::internal {
namespace {

uintptr_t align_up(uintptr_t v, size_t alignment) { return (v + alignment - 1) & ~(uintptr_t{alignment} - 1); }

}  // namespace

void HostPool::reset(uint8_t* data, size_t size) {
  data_ = nullptr;
  size_ = 0;
  free_list_ = nullptr;
  allocations_ = in_use_ = peak_ = 0;
  if (data == nullptr) return;
  const uintptr_t begin = align_up(reinterpret_cast<uintptr_t>(data), kGranule);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(uintptr_t{kGranule} - 1);
  if (end <= begin || end - begin < 4 * kGranule) return;
  data_ = reinterpret_cast<uint8_t*>(begin);
  size_ = static_cast<size_t>(end - begin);
  free_list_ = reinterpret_cast<Block*>(data_);
  free_list_->size = size_;
  free_list_->next = nullptr;
  free_list_->free = true;
}

void HostPool::lock() {
  while (lock_.test_and_set(std::memory_order_acquire)) {
  }
}

HostPool::Block* HostPool::block_of(void* p) {
  Block* block;
  memcpy(&block, static_cast<uint8_t*>(p) - sizeof(Block*), sizeof(Block*));
  return block;
}

size_t HostPool::payload_capacity(Block* block, void* p) {
  return static_cast<size_t>(reinterpret_cast<uintptr_t>(block) + block->size - reinterpret_cast<uintptr_t>(p));
}

// First fit: the payload goes after the header and the back pointer, at
// the requested alignment; the rest of the block, when large enough,
// becomes a free block of its own.
void* HostPool::allocate_locked(size_t bytes, size_t alignment) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if ((alignment & (alignment - 1)) != 0 || bytes > size_) return nullptr;
  Block* prev = nullptr;
  for (Block* block = free_list_; block != nullptr; prev = block, block = block->next) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(block);
    const uintptr_t payload = align_up(start + sizeof(Block) + sizeof(Block*), alignment);
    const uintptr_t needed = align_up(payload + bytes - start, kGranule);
    if (needed > block->size) continue;
    Block* next_free = block->next;
    if (block->size - needed >= sizeof(Block) + 2 * kGranule) {
      Block* rest = reinterpret_cast<Block*>(start + needed);
      rest->size = block->size - needed;
      rest->next = block->next;
      rest->free = true;
      block->size = needed;
      next_free = rest;
    }
    if (prev != nullptr) {
      prev->next = next_free;
    } else {
      free_list_ = next_free;
    }
    block->free = false;
    block->next = nullptr;
    memcpy(reinterpret_cast<uint8_t*>(payload) - sizeof(Block*), &block, sizeof(Block*));
    ++allocations_;
    in_use_ += block->size;
    if (in_use_ > peak_) peak_ = in_use_;
    return reinterpret_cast<void*>(payload);
  }
  return nullptr;
}

// Puts the block back in address order and merges it with free neighbours.
void HostPool::free_locked(void* p) {
  Block* block = block_of(p);
  in_use_ -= block->size;
  block->free = true;
  Block* prev = nullptr;
  Block* next = free_list_;
  while (next != nullptr && next < block) {
    prev = next;
    next = next->next;
  }
  block->next = next;
  if (next != nullptr && reinterpret_cast<uint8_t*>(block) + block->size == reinterpret_cast<uint8_t*>(next)) {
    block->size += next->size;
    block->next = next->next;
  }
  if (prev != nullptr) {
    prev->next = block;
    if (reinterpret_cast<uint8_t*>(prev) + prev->size == reinterpret_cast<uint8_t*>(block)) {
      prev->size += block->size;
      prev->next = block->next;
    }
  } else {
    free_list_ = block;
  }
}

void* HostPool::allocate(size_t bytes, size_t alignment) {
  lock();
  void* p = allocate_locked(bytes, alignment);
  unlock();
  return p;
}

void* HostPool::reallocate(void* p, size_t bytes, size_t alignment) {
  if (p == nullptr) return allocate(bytes, alignment);
  lock();
  Block* block = block_of(p);
  const size_t old_capacity = payload_capacity(block, p);
  if (bytes <= old_capacity && (reinterpret_cast<uintptr_t>(p) & (alignment - 1)) == 0) {
    unlock();
    return p;
  }
  void* fresh = allocate_locked(bytes, alignment);
  if (fresh != nullptr) {
    memcpy(fresh, p, old_capacity < bytes ? old_capacity : bytes);
    free_locked(p);
  }
  unlock();
  return fresh;
}

void HostPool::free(void* p) {
  if (p == nullptr) return;
  lock();
  free_locked(p);
  unlock();
}

}  // namespace kiln::backends::vulkan::internal
