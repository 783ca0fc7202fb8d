// The C API (kiln/kiln.h) over the C++ runtime. Each opaque C struct holds
// the C++ object placed in it; nothing is allocated.

#include "kiln/kiln.h"

#include <string.h>

#include <new>

#include "kiln/kernels/cpu.h"
#include "kiln/runtime/program.h"

namespace {

using kiln::Error;

// What a kiln_program holds: the loader the Program reads through, then
// the Program.
struct ProgramBox {
  kiln::BufferDataLoader loader;
  kiln::Program program;
};
static_assert(sizeof(ProgramBox) <= sizeof(kiln_program), "kiln_program is too small for the C++ program");
static_assert(alignof(ProgramBox) <= alignof(kiln_program), "kiln_program alignment");
static_assert(sizeof(kiln::Method) <= sizeof(kiln_method), "kiln_method is too small for the C++ method");
static_assert(alignof(kiln::Method) <= alignof(kiln_method), "kiln_method alignment");

// The two enums are one list.
static_assert(static_cast<int>(Error::kPeerFailed) == KILN_PEER_FAILED, "kiln_status and kiln::Error differ");
static_assert(static_cast<int>(Error::kInternal) == KILN_INTERNAL, "kiln_status and kiln::Error differ");
static_assert(static_cast<int>(Error::kArenaTooSmall) == KILN_ARENA_TOO_SMALL, "kiln_status and kiln::Error differ");
static_assert(static_cast<int>(kiln::fb::DType::BOOL) == KILN_BOOL, "kiln_dtype and DType differ");
static_assert(static_cast<int>(kiln::fb::DeviceType::NULL_DEVICE) == KILN_DEVICE_NULL, "device types differ");

kiln_status status(Error error) { return static_cast<kiln_status>(error); }

const ProgramBox* box_of(const kiln_program* program) {
  return program != nullptr ? std::launder(reinterpret_cast<const ProgramBox*>(program)) : nullptr;
}

// The application's kiln_thread_pool as a kiln::ThreadPool, placed in the
// struct's own opaque_ words.
class CThreadPool final : public kiln::ThreadPool {
 public:
  explicit CThreadPool(const kiln_thread_pool* pool) : pool_(pool) {}
  int concurrency() const override { return pool_->concurrency; }
  void parallel_for(int64_t count, Task task, void* context) override {
    pool_->parallel_for(pool_->pool_context, count, task, context);
  }

 private:
  const kiln_thread_pool* pool_;
};
static_assert(sizeof(CThreadPool) <= sizeof(kiln_thread_pool::opaque_), "kiln_thread_pool is too small");
static_assert(alignof(CThreadPool) <= alignof(uint64_t), "kiln_thread_pool alignment");

kiln::Method* method_of(kiln_method* method) { return std::launder(reinterpret_cast<kiln::Method*>(method)); }
const kiln::Method* method_of(const kiln_method* method) {
  return std::launder(reinterpret_cast<const kiln::Method*>(method));
}

kiln::Result<kiln::MethodMeta> meta_of(const kiln_program* program, const char* name) {
  const ProgramBox* box = box_of(program);
  if (box == nullptr || name == nullptr) return Error::kInvalidArgument;
  return box->program.method_meta(name);
}

void fill(const kiln::TensorInfo& t, kiln_tensor_info* out) {
  memset(out, 0, sizeof(*out));
  out->name = t.name;
  out->dtype = static_cast<kiln_dtype>(t.dtype);
  out->rank = t.rank;
  for (uint32_t i = 0; i < t.rank && i < KILN_MAX_RANK; ++i) out->dims[i] = t.dims[i];
  out->nbytes = t.nbytes;
  out->device_type = static_cast<kiln_device_type>(t.device.type());
  out->device_index = t.device.index();
}

kiln_status tensor_info(const kiln_program* program, const char* method, size_t index, bool output,
                        kiln_tensor_info* out_info) {
  if (out_info == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, method);
  if (!meta.ok()) return status(meta.error());
  kiln::Result<kiln::TensorInfo> info = output ? meta->output(index) : meta->input(index);
  if (!info.ok()) return status(info.error());
  fill(info.get(), out_info);
  return KILN_OK;
}

kiln_status quantization(const kiln_program* program, const char* method, size_t index, bool output,
                         kiln_quantization* out_quantization) {
  if (out_quantization == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, method);
  if (!meta.ok()) return status(meta.error());
  kiln::Result<kiln::TensorInfo> info = output ? meta->output(index) : meta->input(index);
  if (!info.ok()) return status(info.error());
  memset(out_quantization, 0, sizeof(*out_quantization));
  out_quantization->quantized = info->quantized ? 1 : 0;
  out_quantization->scale = info->scale;
  out_quantization->zero_point = info->zero_point;
  return KILN_OK;
}

}  // namespace

extern "C" {

const char* kiln_status_name(kiln_status s) { return kiln::error_name(static_cast<Error>(s)); }

kiln_status kiln_register_cpu_kernels(void) {
  static bool registered = false;
  if (registered) return KILN_OK;
  const Error error = kiln::register_cpu_kernels();
  registered = error == Error::kOk;
  return status(error);
}

kiln_status kiln_program_load(kiln_program* program, const void* data, size_t size) {
  if (program == nullptr || data == nullptr) return KILN_INVALID_ARGUMENT;
  memset(program, 0, sizeof(*program));
  auto* loader = new (program) kiln::BufferDataLoader(data, size);
  kiln::Result<kiln::Program> loaded = kiln::Program::load(*loader);
  if (!loaded.ok()) return status(loaded.error());
  // The Program sits after the loader it read through (ProgramBox).
  new (&std::launder(reinterpret_cast<ProgramBox*>(program))->program) kiln::Program(loaded.get());
  return KILN_OK;
}

size_t kiln_program_num_methods(const kiln_program* program) {
  const ProgramBox* box = box_of(program);
  return box != nullptr ? box->program.num_methods() : 0;
}

const char* kiln_program_method_name(const kiln_program* program, size_t index) {
  const ProgramBox* box = box_of(program);
  if (box == nullptr) return nullptr;
  kiln::Result<const char*> name = box->program.method_name(index);
  return name.ok() ? name.get() : nullptr;
}

kiln_status kiln_program_method_info(const kiln_program* program, const char* method, kiln_method_info* out_info) {
  if (out_info == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, method);
  if (!meta.ok()) return status(meta.error());
  out_info->num_arenas = meta->num_arenas();
  out_info->num_inputs = meta->num_inputs();
  out_info->num_outputs = meta->num_outputs();
  out_info->bookkeeping_bytes = meta->bookkeeping_bytes();
  out_info->num_symbols = meta->num_symbols();
  return KILN_OK;
}

kiln_status kiln_program_symbol_info(const kiln_program* program, const char* method, size_t index,
                                     kiln_symbol_info* out_info) {
  if (out_info == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, method);
  if (!meta.ok()) return status(meta.error());
  kiln::Result<kiln::SymbolInfo> symbol = meta->symbol(index);
  if (!symbol.ok()) return status(symbol.error());
  out_info->name = symbol->name;
  out_info->input = symbol->input;
  out_info->axis = symbol->axis;
  out_info->min = symbol->min;
  out_info->max = symbol->max;
  return KILN_OK;
}

kiln_status kiln_program_arena_info(const kiln_program* program, const char* method, size_t index,
                                    kiln_arena_info* out_info) {
  if (out_info == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, method);
  if (!meta.ok()) return status(meta.error());
  kiln::Result<kiln::ArenaInfo> arena = meta->arena(index);
  if (!arena.ok()) return status(arena.error());
  memset(out_info, 0, sizeof(*out_info));
  out_info->size = arena->size;
  out_info->alignment = arena->alignment;
  out_info->device_type = static_cast<kiln_device_type>(arena->device.type());
  out_info->device_index = arena->device.index();
  out_info->symmetric = arena->kind == kiln::fb::ArenaKind::SYMMETRIC;
  out_info->group = arena->group;
  out_info->region = arena->region;
  return KILN_OK;
}

kiln_status kiln_program_input_info(const kiln_program* program, const char* method, size_t index,
                                    kiln_tensor_info* out_info) {
  return tensor_info(program, method, index, false, out_info);
}

kiln_status kiln_program_output_info(const kiln_program* program, const char* method, size_t index,
                                     kiln_tensor_info* out_info) {
  return tensor_info(program, method, index, true, out_info);
}

kiln_status kiln_program_input_quantization(const kiln_program* program, const char* method, size_t index,
                                            kiln_quantization* out_quantization) {
  return quantization(program, method, index, false, out_quantization);
}

kiln_status kiln_program_output_quantization(const kiln_program* program, const char* method, size_t index,
                                             kiln_quantization* out_quantization) {
  return quantization(program, method, index, true, out_quantization);
}

kiln_status kiln_method_load(kiln_method* method, const kiln_program* program, const char* name, void* bookkeeping,
                             size_t bookkeeping_size, void* const* arenas, const size_t* arena_sizes,
                             size_t num_arenas) {
  const ProgramBox* box = box_of(program);
  if (method == nullptr || box == nullptr || name == nullptr ||
      (num_arenas > 0 && (arenas == nullptr || arena_sizes == nullptr))) {
    return KILN_INVALID_ARGUMENT;
  }
  // Loading reads the arena spans and keeps nothing of them, so they can
  // live on this stack.
  constexpr size_t kMaxArenas = 32;
  if (num_arenas > kMaxArenas) return KILN_NOT_SUPPORTED;
  kiln::Span<uint8_t> spans[kMaxArenas];
  for (size_t i = 0; i < num_arenas; ++i) {
    spans[i] = kiln::Span<uint8_t>(static_cast<uint8_t*>(arenas[i]), arena_sizes[i]);
  }
  kiln::BumpAllocator allocator(bookkeeping, bookkeeping_size);
  kiln::MemoryManager memory;
  memory.bookkeeping = &allocator;
  memory.arenas = kiln::Span<const kiln::Span<uint8_t>>(spans, num_arenas);
  kiln::Result<kiln::Method> loaded = box->program.load_method(name, memory);
  if (!loaded.ok()) return status(loaded.error());
  new (method) kiln::Method(static_cast<kiln::Method&&>(loaded.get()));
  return KILN_OK;
}

kiln_status kiln_program_shared_arena_bytes(const kiln_program* program, const char* method, uint64_t* out_bytes,
                                            uint32_t* out_alignment) {
  const ProgramBox* box = box_of(program);
  if (box == nullptr || out_bytes == nullptr || out_alignment == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<uint64_t> bytes = box->program.shared_arena_bytes(method);
  if (!bytes.ok()) return status(bytes.error());
  uint32_t alignment = 1;
  for (size_t m = 0; m < box->program.num_methods(); ++m) {
    const char* other = box->program.method_name(m).get();
    kiln::Result<bool> shares = box->program.may_share_arenas(method, other);
    if (shares.ok() && shares.get()) {
      const uint32_t a = box->program.method_meta(other)->host_arena_alignment();
      alignment = a > alignment ? a : alignment;
    }
  }
  *out_bytes = bytes.get();
  *out_alignment = alignment;
  return KILN_OK;
}

kiln_status kiln_program_may_share_arenas(const kiln_program* program, const char* a, const char* b, int* out_may) {
  const ProgramBox* box = box_of(program);
  if (box == nullptr || out_may == nullptr) return KILN_INVALID_ARGUMENT;
  kiln::Result<bool> may = box->program.may_share_arenas(a, b);
  if (!may.ok()) return status(may.error());
  *out_may = may.get() ? 1 : 0;
  return KILN_OK;
}

kiln_status kiln_method_load_shared(kiln_method* method, const kiln_program* program, const char* name,
                                    void* bookkeeping, size_t bookkeeping_size, void* buffer, size_t size) {
  kiln::Result<kiln::MethodMeta> meta = meta_of(program, name);
  if (!meta.ok()) return status(meta.error());
  constexpr size_t kMaxArenas = 32;
  if (meta->num_arenas() > kMaxArenas) return KILN_NOT_SUPPORTED;
  kiln::Span<uint8_t> spans[kMaxArenas];
  const Error split = meta->split_host_arenas(kiln::Span<uint8_t>(static_cast<uint8_t*>(buffer), size), spans);
  if (split != Error::kOk) return status(split);
  void* arenas[kMaxArenas];
  size_t sizes[kMaxArenas];
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    arenas[i] = spans[i].data();
    sizes[i] = spans[i].size();
  }
  return kiln_method_load(method, program, name, bookkeeping, bookkeeping_size, arenas, sizes, meta->num_arenas());
}

kiln_status kiln_method_set_input(kiln_method* method, size_t index, const void* data, size_t size) {
  if (method == nullptr) return KILN_INVALID_ARGUMENT;
  return status(method_of(method)->set_input(index, data, size));
}

kiln_status kiln_method_set_input_shaped(kiln_method* method, size_t index, const void* data, size_t size,
                                         const int64_t* dims, uint32_t rank) {
  if (method == nullptr || (dims == nullptr && rank > 0) || rank > kiln::kMaxRank) return KILN_INVALID_ARGUMENT;
  const kiln::Tensor* input = method_of(method)->input(index);
  if (input == nullptr) return KILN_INVALID_ARGUMENT;
  const kiln::Tensor given(const_cast<void*>(data), input->dtype(), dims, rank);
  if (size < given.nbytes()) return KILN_BUFFER_TOO_SMALL;
  return status(method_of(method)->set_input(index, given));
}

const int64_t* kiln_method_output_dims(const kiln_method* method, size_t index, uint32_t* out_rank) {
  const kiln::Tensor* output = method != nullptr ? method_of(method)->output(index) : nullptr;
  if (out_rank != nullptr) *out_rank = output != nullptr ? output->rank() : 0;
  return output != nullptr ? output->dims() : nullptr;
}

kiln_status kiln_method_set_output(kiln_method* method, size_t index, void* data, size_t size) {
  if (method == nullptr) return KILN_INVALID_ARGUMENT;
  return status(method_of(method)->set_output(index, data, size));
}

kiln_status kiln_method_execute(kiln_method* method) {
  if (method == nullptr) return KILN_INVALID_ARGUMENT;
  return status(method_of(method)->execute());
}

const void* kiln_method_input_data(const kiln_method* method, size_t index) {
  const kiln::Tensor* t = method != nullptr ? method_of(method)->input(index) : nullptr;
  return t != nullptr ? t->data() : nullptr;
}

const void* kiln_method_output_data(const kiln_method* method, size_t index) {
  const kiln::Tensor* t = method != nullptr ? method_of(method)->output(index) : nullptr;
  return t != nullptr ? t->data() : nullptr;
}

void kiln_method_destroy(kiln_method* method) {
  if (method != nullptr) method_of(method)->~Method();
}

kiln_status kiln_method_set_thread_pool(kiln_method* method, kiln_thread_pool* pool) {
  if (method == nullptr) return KILN_INVALID_ARGUMENT;
  if (pool == nullptr) {
    method_of(method)->set_thread_pool(nullptr);
    return KILN_OK;
  }
  if (pool->parallel_for == nullptr || pool->concurrency < 1) return KILN_INVALID_ARGUMENT;
  method_of(method)->set_thread_pool(new (pool->opaque_) CThreadPool(pool));
  return KILN_OK;
}

}  // extern "C"
