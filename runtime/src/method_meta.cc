// MethodMeta: answers what a method needs (arenas, inputs and outputs,
// bookkeeping bytes) straight from the program's tables, before and without
// loading it. The program passed Program::load's validation (validate once
// at load; nothing after it re-checks), so the only checks here are on the
// application's indices.

#include "kiln/runtime/method_meta.h"

#include "kiln/runtime/check.h"
#include "kiln/schema/arena_layout.h"
#include "kiln/schema/device.h"
#include "method_internal.h"

namespace kiln {
namespace {

TensorInfo tensor_info(const fb::Tensor& tensor) {
  TensorInfo info;
  info.name = tensor.name() != nullptr ? tensor.name()->c_str() : "";
  info.dtype = tensor.dtype();
  info.rank = tensor.shape() != nullptr ? tensor.shape()->size() : 0;
  info.dims = tensor.shape() != nullptr ? tensor.shape()->data() : nullptr;
  info.nbytes = tensor.nbytes();
  info.device = device_or_cpu(tensor.device());
  if (const fb::Quantization* q = tensor.quantization()) {
    info.quantized = true;
    info.scale = q->scale();
    info.zero_point = q->zero_point();
  }
  return info;
}

}  // namespace

const char* MethodMeta::name() const { return method_->name()->c_str(); }

size_t MethodMeta::num_arenas() const { return method_->arenas() != nullptr ? method_->arenas()->size() : 0; }

Result<ArenaInfo> MethodMeta::arena(size_t index) const {
  KILN_CHECK_OR_RETURN(index < num_arenas(), Error::kInvalidArgument, "method '%s' has no arena %u (it has %u)", name(),
                       static_cast<unsigned>(index), static_cast<unsigned>(num_arenas()));
  const fb::Arena& arena = *method_->arenas()->Get(static_cast<uint32_t>(index));
  ArenaInfo info;
  info.size = arena.size();
  info.alignment = arena.alignment();
  info.device = device_or_cpu(arena.device());
  info.kind = arena.kind();
  info.group = arena.group();
  if (arena.region() != nullptr) info.region = arena.region()->c_str();
  return info;
}

uint64_t MethodMeta::arena_bytes(Device device) const {
  uint64_t total = 0;
  for (size_t i = 0; i < num_arenas(); ++i) {
    const fb::Arena& arena = *method_->arenas()->Get(static_cast<uint32_t>(i));
    if (same_device(device_or_cpu(arena.device()), device)) total += arena.size();
  }
  return total;
}

uint64_t MethodMeta::host_arena_bytes() const { return abi::host_arena_bytes(*method_); }

uint32_t MethodMeta::host_arena_alignment() const { return abi::host_arena_alignment(*method_); }

Error MethodMeta::split_host_arenas(Span<uint8_t> buffer, Span<Span<uint8_t>> out_arenas) const {
  KILN_CHECK_OR_RETURN(out_arenas.size() >= num_arenas(), Error::kInvalidArgument,
                       "method '%s' has %u arenas, room for %u spans was given", name(),
                       static_cast<unsigned>(num_arenas()), static_cast<unsigned>(out_arenas.size()));
  const uint64_t needs = host_arena_bytes();
  KILN_CHECK_OR_RETURN(buffer.size() >= needs, Error::kBufferTooSmall,
                       "method '%s': its host arenas need %llu bytes in one buffer, %llu were given", name(),
                       static_cast<unsigned long long>(needs), static_cast<unsigned long long>(buffer.size()));
  KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(buffer.data()) % host_arena_alignment() == 0,
                       Error::kBufferMisaligned, "method '%s': the arena buffer must be aligned to %u bytes", name(),
                       host_arena_alignment());
  for (uint32_t i = 0; i < num_arenas(); ++i) {
    uint64_t end = 0;
    const uint64_t offset = abi::host_arena_offset(*method_, i, &end);
    out_arenas[i] =
        offset == abi::kNoHostArena
            ? Span<uint8_t>()
            : buffer.subspan(static_cast<size_t>(offset), static_cast<size_t>(method_->arenas()->Get(i)->size()));
  }
  return Error::kOk;
}

size_t MethodMeta::num_inputs() const { return internal::list_size(method_->inputs()); }
size_t MethodMeta::num_outputs() const { return internal::list_size(method_->outputs()); }

Result<TensorInfo> MethodMeta::input(size_t index) const {
  KILN_CHECK_OR_RETURN(index < num_inputs(), Error::kInvalidArgument, "method '%s' has no input %u (it has %u)", name(),
                       static_cast<unsigned>(index), static_cast<unsigned>(num_inputs()));
  return tensor_info(*method_->tensors()->Get(method_->inputs()->Get(static_cast<uint32_t>(index))));
}

Result<TensorInfo> MethodMeta::output(size_t index) const {
  KILN_CHECK_OR_RETURN(index < num_outputs(), Error::kInvalidArgument, "method '%s' has no output %u (it has %u)",
                       name(), static_cast<unsigned>(index), static_cast<unsigned>(num_outputs()));
  return tensor_info(*method_->tensors()->Get(method_->outputs()->Get(static_cast<uint32_t>(index))));
}

size_t MethodMeta::num_instructions() const {
  return method_->instructions() != nullptr ? method_->instructions()->size() : 0;
}

size_t MethodMeta::num_symbols() const { return method_->symbols() != nullptr ? method_->symbols()->size() : 0; }

Result<SymbolInfo> MethodMeta::symbol(size_t index) const {
  KILN_CHECK_OR_RETURN(index < num_symbols(), Error::kInvalidArgument, "method '%s' has no symbol %u (it has %u)",
                       name(), static_cast<unsigned>(index), static_cast<unsigned>(num_symbols()));
  const fb::Symbol& s = *method_->symbols()->Get(static_cast<uint32_t>(index));
  SymbolInfo info;
  info.name = s.name() != nullptr ? s.name()->c_str() : "";
  info.input = s.input();
  info.axis = s.axis();
  info.min = s.min();
  info.max = s.max();
  return info;
}

uint64_t MethodMeta::bookkeeping_bytes() const { return method_->bookkeeping_bytes(); }

}  // namespace kiln
