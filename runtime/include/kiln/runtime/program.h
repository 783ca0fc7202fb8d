// Program: a verified, loaded .kiln file.
//
// Program::load() is the runtime's first trust boundary. It checks the
// flatbuffer with the flatbuffers Verifier, then every semantic rule the rest
// of the runtime relies on: indices in range, shapes and byte sizes that
// agree (with overflow-checked arithmetic), every planned tensor inside its
// arena and aligned, aliases that form no cycle and stay inside their base,
// constants inside the data segment, nothing written that must stay
// read-only. A program that fails any check gets an Error and a log line
// naming what is wrong; nothing after load re-checks these facts.
//
// Lifetime: the Program points into the bytes its DataLoader returned (zero
// copy); the loader must outlive the Program and every Method loaded from it.
// A Program is small and may be copied. Loading is not thread safe; a loaded
// Program may be read from several threads.

#ifndef KILN_RUNTIME_PROGRAM_H_
#define KILN_RUNTIME_PROGRAM_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/data_loader.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/method.h"
#include "kiln/runtime/method_meta.h"
#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"

namespace kiln {

class Program {
 public:
  // The program buffer must start at a 16-byte aligned address.
  static Result<Program> load(DataLoader& loader);

  size_t num_methods() const;
  // kInvalidArgument when index >= num_methods().
  Result<const char*> method_name(size_t index) const;
  // kNotFound when no method has that name.
  Result<MethodMeta> method_meta(const char* name) const;

  // Methods that never run at the same time (`kiln plan --method`, an
  // arena group of the program) may place their host arenas in one buffer:
  // each method's MethodMeta::split_host_arenas() lays its arenas from the
  // buffer's start. The Methods may all be loaded at once, but only one of
  // them may run at a time, and what one leaves in the buffer (its planned
  // fallback inputs and outputs included) is gone once another runs.
  //
  // The bytes of the buffer method `name` shares with its group: the
  // largest member's MethodMeta::host_arena_bytes(); for a method in no
  // group, its own. Align the buffer to the largest of the members'
  // MethodMeta::host_arena_alignment(). kNotFound for an unknown name.
  Result<uint64_t> shared_arena_bytes(const char* name) const;
  // Whether methods `a` and `b` may share that buffer (the same method, or
  // both in one group). kNotFound for an unknown name.
  Result<bool> may_share_arenas(const char* a, const char* b) const;

  // Loads a method: takes its state from memory.bookkeeping, places its
  // tensors in memory.arenas, resolves and checks every kernel in `kernels`.
  // The returned Method points into this Program's data, into the
  // bookkeeping buffer and into the arenas; all must outlive it.
  // Device arenas, copies and delegates are served by `backends`.
  Result<Method> load_method(const char* name, const MemoryManager& memory,
                             const KernelRegistry& kernels = global_kernel_registry(),
                             const BackendRegistry& backends = global_backend_registry()) const;

  const fb::Program* flatbuffer() const { return program_; }
  // The bytes of constant `index` (in the data segment).
  Span<const uint8_t> constant(uint32_t index) const;
  Span<const uint8_t> segment() const { return segment_; }
  // The program's size-prefixed flatbuffer (what its digest covers, see
  // schema/include/kiln/schema/digest.h).
  Span<const uint8_t> flatbuffer_bytes() const { return flatbuffer_bytes_; }

 private:
  Result<uint32_t> method_index(const char* name) const;
  const fb::ArenaGroup* arena_group_of(uint32_t method) const;

  Program(const fb::Program* program, Span<const uint8_t> segment, Span<const uint8_t> flatbuffer_bytes)
      : program_(program), segment_(segment), flatbuffer_bytes_(flatbuffer_bytes) {}

  const fb::Program* program_;
  Span<const uint8_t> segment_;
  Span<const uint8_t> flatbuffer_bytes_;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_PROGRAM_H_
