// MethodMeta: what a method needs, answered before it is loaded, so an
// application can size every buffer from the program itself (or, on firmware,
// from the header `kiln pack` generates) instead of by trial and error.
//
// A MethodMeta points into its Program and is valid as long as the Program's
// data is.

#ifndef KILN_RUNTIME_METHOD_META_H_
#define KILN_RUNTIME_METHOD_META_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

struct ArenaInfo {
  uint64_t size = 0;
  uint32_t alignment = 0;
  Device device;
  fb::ArenaKind kind = fb::ArenaKind::ORDINARY;
  // Communicator group of a symmetric arena.
  uint32_t group = 0;
  // The memory region it is (`kiln plan --memory-region`), "" when none;
  // lives in the program.
  const char* region = "";
};

struct TensorInfo {
  const char* name = nullptr;  // "" when the program carries no names
  DType dtype = DType::FLOAT32;
  const int64_t* dims = nullptr;
  uint32_t rank = 0;
  uint64_t nbytes = 0;
  Device device;
  // A quantized input or output (`kiln plan --quantized-io`): INT8 or UINT8
  // data, real value = (q - zero_point) * scale. Checked at load.
  bool quantized = false;
  float scale = 0.f;
  int32_t zero_point = 0;
};

// A dimension of an input bound above (`kiln plan --input-shape
// x=MIN:MAXx...`): the application binds the input with any extent from min
// to max on that axis (Method::set_input with a Tensor); the tensors' dims
// in TensorInfo are those at max.
struct SymbolInfo {
  const char* name = "";  // the model's dimension name, or "input[axis]"
  uint32_t input = 0;     // index of the input that gives its value
  uint32_t axis = 0;
  int64_t min = 1;
  int64_t max = 1;
};

class MethodMeta {
 public:
  explicit MethodMeta(const fb::Method* method) : method_(method) {}

  const char* name() const;
  size_t num_arenas() const;
  // kInvalidArgument when index >= num_arenas().
  Result<ArenaInfo> arena(size_t index) const;
  size_t num_inputs() const;
  Result<TensorInfo> input(size_t index) const;
  size_t num_outputs() const;
  Result<TensorInfo> output(size_t index) const;
  size_t num_instructions() const;
  size_t num_symbols() const;
  // kInvalidArgument when index >= num_symbols().
  Result<SymbolInfo> symbol(size_t index) const;
  // Exact size of the bookkeeping buffer (16-byte aligned) the method needs.
  uint64_t bookkeeping_bytes() const;
  // Sum of the sizes of the arenas on `device`.
  uint64_t arena_bytes(Device device) const;
  // One buffer for all of the method's host arenas (schema/arena_layout.h):
  // its bytes, and the alignment its start needs.
  uint64_t host_arena_bytes() const;
  uint32_t host_arena_alignment() const;
  // Fills out_arenas[i] with host arena i's span in `buffer` (an empty span
  // for an arena on a device), ready for MemoryManager::arenas.
  // kInvalidArgument when out_arenas has fewer than num_arenas() entries,
  // kBufferTooSmall when the buffer is smaller than host_arena_bytes(),
  // kBufferMisaligned when its start is not aligned to
  // host_arena_alignment(). The spans point into `buffer`, not owned.
  Error split_host_arenas(Span<uint8_t> buffer, Span<Span<uint8_t>> out_arenas) const;

  const fb::Method* flatbuffer() const { return method_; }

 private:
  const fb::Method* method_;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_METHOD_META_H_
