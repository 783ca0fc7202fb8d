#include "emit/program_file.h"

#include <cstring>

#include "core/error.h"

namespace kiln::planner {

ProgramFile::ProgramFile(const std::string& bytes, const std::string& what) {
  file_size_ = bytes.size();
  if (bytes.size() < 8) fail(what, ": too short to be a kiln program");
  storage_.resize((bytes.size() + 7) / 8);
  std::memcpy(storage_.data(), bytes.data(), bytes.size());
  if (!fb::SizePrefixedProgramBufferHasIdentifier(data())) {
    fail(what, ": not a kiln program (file identifier is not '", fb::ProgramIdentifier(), "')");
  }
  uint32_t prefix = 0;
  std::memcpy(&prefix, data(), 4);
  if (prefix > bytes.size() - 4) fail(what, ": truncated (the flatbuffer says ", prefix, " bytes)");
  flatbuffer_size_ = uint64_t{prefix} + 4;
  flatbuffers::Verifier verifier(data(), flatbuffer_size_, 64, 4000000);
  if (!fb::VerifySizePrefixedProgramBuffer(verifier)) fail(what, ": corrupt (flatbuffer verification failed)");
  program_ = fb::GetSizePrefixedProgram(data());
  const uint64_t align = program_->segment_alignment() ? program_->segment_alignment() : 1;
  segment_offset_ = (flatbuffer_size_ + align - 1) / align * align;
}

}  // namespace kiln::planner
