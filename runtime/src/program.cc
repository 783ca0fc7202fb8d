// Program::load: reads a .kiln file through a DataLoader, checks it, and
// keeps pointers into the loader's bytes (zero copy).
//
// Loading happens in three steps, each relying on the one before:
//   1. the file's framing (size prefix, identifier, 16-byte alignment), read
//      here;
//   2. the flatbuffers Verifier: the buffer is a well-formed flatbuffer;
//   3. the semantic checks of program_validator.cc: the data segment's
//      tables, then every method.
// Trust boundary: validate once at load; execute runs without checks.
// Nothing after Program::load re-checks what these steps establish, so a
// rule the runtime relies on is added to the validator, not where it is used.

#include "kiln/runtime/program.h"

#include <string.h>

#include "kiln/runtime/check.h"
#include "kiln/schema/arena_layout.h"
#include "names.h"
#include "program_validator.h"

namespace kiln {

using internal::add_overflows;
using internal::is_power_of_two;

Result<Program> Program::load(DataLoader& loader) {
  const uint64_t file_size = loader.size();
  KILN_CHECK_OR_RETURN(file_size >= 8, Error::kInvalidProgram,
                       "program is %llu bytes, too short to hold a kiln program",
                       static_cast<unsigned long long>(file_size));
  KILN_ASSIGN_OR_RETURN(Span<const uint8_t> head, loader.load(0, 8));
  KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(head.data()) % 16 == 0, Error::kInvalidArgument,
                       "program data must start at a 16-byte aligned address");
  KILN_CHECK_OR_RETURN(fb::SizePrefixedProgramBufferHasIdentifier(head.data()), Error::kInvalidProgram,
                       "not a kiln program (file identifier is not '%s')", fb::ProgramIdentifier());
  uint32_t prefix = 0;
  memcpy(&prefix, head.data(), sizeof(prefix));
  KILN_CHECK_OR_RETURN(prefix <= file_size - 4, Error::kInvalidProgram,
                       "program says its flatbuffer is %u bytes, the file has %llu after the prefix", prefix,
                       static_cast<unsigned long long>(file_size - 4));
  KILN_ASSIGN_OR_RETURN(Span<const uint8_t> buffer, loader.load(0, uint64_t{prefix} + 4));
  flatbuffers::Verifier verifier(buffer.data(), buffer.size(), /*max_depth=*/64, /*max_tables=*/4000000);
  KILN_CHECK_OR_RETURN(fb::VerifySizePrefixedProgramBuffer(verifier), Error::kInvalidProgram,
                       "program failed flatbuffer verification (truncated or corrupt)");
  const fb::Program* program = fb::GetSizePrefixedProgram(buffer.data());
  KILN_CHECK_OR_RETURN(program->version() == static_cast<uint32_t>(fb::SchemaVersion::Current), Error::kVersionMismatch,
                       "program schema version %u, this runtime reads version %u", program->version(),
                       static_cast<unsigned>(fb::SchemaVersion::Current));
  const uint32_t alignment = program->segment_alignment();
  KILN_CHECK_OR_RETURN(is_power_of_two(alignment) && alignment >= 16 && alignment <= 65536, Error::kInvalidProgram,
                       "segment alignment %u is not a power of two in [16, 65536]", alignment);
  const uint64_t base = (uint64_t{prefix} + 4 + alignment - 1) / alignment * alignment;
  Span<const uint8_t> segment;
  if (program->segment_size() > 0) {
    uint64_t segment_end = 0;
    KILN_CHECK_OR_RETURN(!add_overflows(base, program->segment_size(), &segment_end) && segment_end <= file_size,
                         Error::kInvalidProgram,
                         "data segment (%llu bytes at %llu) extends past the end of the %llu-byte file",
                         static_cast<unsigned long long>(program->segment_size()),
                         static_cast<unsigned long long>(base), static_cast<unsigned long long>(file_size));
    KILN_ASSIGN_OR_RETURN(segment, loader.load(base, program->segment_size()));
  }
  KILN_RETURN_IF_ERROR(
      internal::validate_data_refs(program->constants(), program->segment_size(), alignment, "constant"));
  KILN_RETURN_IF_ERROR(
      internal::validate_data_refs(program->segments(), program->segment_size(), 16, "delegate segment"));
  const auto* methods = program->methods();
  KILN_CHECK_OR_RETURN(methods != nullptr && methods->size() > 0, Error::kInvalidProgram, "program has no methods");
  for (uint32_t i = 0; i < methods->size(); ++i) {
    KILN_RETURN_IF_ERROR(internal::validate_method(*program, *methods->Get(i)));
  }
  KILN_RETURN_IF_ERROR(internal::validate_arena_groups(*program));
  return Program(program, segment, buffer);
}

size_t Program::num_methods() const { return program_->methods()->size(); }

Result<const char*> Program::method_name(size_t index) const {
  KILN_CHECK_OR_RETURN(index < num_methods(), Error::kInvalidArgument, "program has no method %u (it has %u)",
                       static_cast<unsigned>(index), static_cast<unsigned>(num_methods()));
  return program_->methods()->Get(static_cast<uint32_t>(index))->name()->c_str();
}

Result<MethodMeta> Program::method_meta(const char* name) const {
  KILN_CHECK_OR_RETURN(name != nullptr, Error::kInvalidArgument, "method name is null");
  const auto* methods = program_->methods();
  for (uint32_t i = 0; i < methods->size(); ++i) {
    if (internal::same_name(methods->Get(i)->name()->c_str(), name)) return MethodMeta(methods->Get(i));
  }
  KILN_RETURN_ERROR(Error::kNotFound, "program has no method named '%s'", name);
}

Result<uint32_t> Program::method_index(const char* name) const {
  KILN_CHECK_OR_RETURN(name != nullptr, Error::kInvalidArgument, "method name is null");
  const auto* methods = program_->methods();
  for (uint32_t i = 0; i < methods->size(); ++i) {
    if (internal::same_name(methods->Get(i)->name()->c_str(), name)) return i;
  }
  KILN_RETURN_ERROR(Error::kNotFound, "program has no method named '%s'", name);
}

// The arena group method `m` is in, or nullptr.
const fb::ArenaGroup* Program::arena_group_of(uint32_t m) const {
  const auto* groups = program_->arena_groups();
  for (uint32_t g = 0; groups != nullptr && g < groups->size(); ++g) {
    const auto* members = groups->Get(g)->methods();
    for (uint32_t k = 0; members != nullptr && k < members->size(); ++k) {
      if (members->Get(k) == m) return groups->Get(g);
    }
  }
  return nullptr;
}

Result<uint64_t> Program::shared_arena_bytes(const char* name) const {
  KILN_ASSIGN_OR_RETURN(const uint32_t m, method_index(name));
  const fb::ArenaGroup* group = arena_group_of(m);
  return group != nullptr ? group->host_bytes() : abi::host_arena_bytes(*program_->methods()->Get(m));
}

Result<bool> Program::may_share_arenas(const char* a, const char* b) const {
  KILN_ASSIGN_OR_RETURN(const uint32_t ma, method_index(a));
  KILN_ASSIGN_OR_RETURN(const uint32_t mb, method_index(b));
  return ma == mb || (arena_group_of(ma) != nullptr && arena_group_of(ma) == arena_group_of(mb));
}

Span<const uint8_t> Program::constant(uint32_t index) const {
  const fb::DataRef& ref = *program_->constants()->Get(index);
  return segment_.subspan(static_cast<size_t>(ref.offset()), static_cast<size_t>(ref.size()));
}

}  // namespace kiln
