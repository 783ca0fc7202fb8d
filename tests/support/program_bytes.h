// Test helpers for program files: unpack a .kiln into the flatbuffers object
// API to mutate it, pack it back with its segment, and hold program bytes in
// aligned memory as the runtime requires.

#ifndef KILN_TESTS_SUPPORT_PROGRAM_BYTES_H_
#define KILN_TESTS_SUPPORT_PROGRAM_BYTES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/program.h"
#include "kiln/schema/program_generated.h"

namespace kiln::testing {

// Bytes at a 64-byte aligned address.
class AlignedBytes {
 public:
  explicit AlignedBytes(const std::string& bytes);
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> storage_;
  uint8_t* data_;
  size_t size_;
};

// Returns `bytes` with its Program table changed by `mutate` (segment kept).
std::string mutate_program(const std::string& bytes, const std::function<void(fb::ProgramT&)>& mutate);

// Program::load on a copy of `bytes`; the error (kOk when it loads).
Error load_error(const std::string& bytes);

// A program loaded with buffers sized from MethodMeta, kept alive together.
struct LoadedProgram {
  explicit LoadedProgram(const std::string& bytes);
  AlignedBytes file;
  BufferDataLoader loader;
  Result<Program> program;
};

// Heap-backed 64-byte aligned buffers for a method's bookkeeping and arenas.
struct MethodMemory {
  explicit MethodMemory(const MethodMeta& meta);
  std::vector<std::unique_ptr<AlignedBytes>> arenas;
  std::vector<Span<uint8_t>> arena_spans;
  std::unique_ptr<AlignedBytes> bookkeeping_bytes;
  BumpAllocator bookkeeping;
  MemoryManager manager();
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_PROGRAM_BYTES_H_
