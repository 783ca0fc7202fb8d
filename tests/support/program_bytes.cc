#include "support/program_bytes.h"

#include <cstring>

namespace kiln::testing {

AlignedBytes::AlignedBytes(const std::string& bytes) : storage_(bytes.size() / 8 + 16), size_(bytes.size()) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(storage_.data());
  data_ = reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t{63});
  if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
}

std::string mutate_program(const std::string& bytes, const std::function<void(fb::ProgramT&)>& mutate) {
  AlignedBytes aligned(bytes);
  uint32_t prefix = 0;
  std::memcpy(&prefix, aligned.data(), 4);
  const fb::Program* program = fb::GetSizePrefixedProgram(aligned.data());
  std::unique_ptr<fb::ProgramT> object(program->UnPack());
  const uint64_t align = program->segment_alignment();
  const uint64_t base = (uint64_t{prefix} + 4 + align - 1) / align * align;
  const std::string segment = base < bytes.size() ? bytes.substr(base) : std::string();
  mutate(*object);
  flatbuffers::FlatBufferBuilder builder;
  builder.FinishSizePrefixed(fb::Program::Pack(builder, object.get()), fb::ProgramIdentifier());
  std::string out(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  if (!segment.empty()) {
    while (out.size() % align != 0) out.push_back('\0');
    out += segment;
  }
  return out;
}

Error load_error(const std::string& bytes) {
  AlignedBytes aligned(bytes);
  BufferDataLoader loader(aligned.data(), aligned.size());
  Result<Program> program = Program::load(loader);
  return program.error();
}

LoadedProgram::LoadedProgram(const std::string& bytes)
    : file(bytes), loader(file.data(), file.size()), program(Program::load(loader)) {}

MethodMemory::MethodMemory(const MethodMeta& meta) {
  for (size_t i = 0; i < meta.num_arenas(); ++i) {
    arenas.push_back(std::make_unique<AlignedBytes>(std::string(meta.arena(i)->size, '\0')));
    arena_spans.emplace_back(arenas.back()->data(), arenas.back()->size());
  }
  bookkeeping_bytes = std::make_unique<AlignedBytes>(std::string(meta.bookkeeping_bytes(), '\0'));
  bookkeeping = BumpAllocator(bookkeeping_bytes->data(), bookkeeping_bytes->size());
}

MemoryManager MethodMemory::manager() {
  MemoryManager m;
  m.bookkeeping = &bookkeeping;
  m.arenas = Span<const Span<uint8_t>>(arena_spans.data(), arena_spans.size());
  return m;
}

}  // namespace kiln::testing
