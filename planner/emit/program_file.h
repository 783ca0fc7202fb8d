// A .kiln file read back by the host tools (inspect, verify, pack): its bytes
// in 8-byte aligned memory, its flatbuffer checked by the flatbuffers
// Verifier, and its data segment located.

#ifndef KILN_PLANNER_EMIT_PROGRAM_FILE_H_
#define KILN_PLANNER_EMIT_PROGRAM_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/schema/program_generated.h"

namespace kiln::planner {

class ProgramFile {
 public:
  // Throws PlanError naming `what` when the bytes are not a kiln program.
  ProgramFile(const std::string& bytes, const std::string& what);

  const fb::Program& program() const { return *program_; }
  uint64_t flatbuffer_size() const { return flatbuffer_size_; }
  uint64_t segment_offset() const { return segment_offset_; }
  uint64_t file_size() const { return file_size_; }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(storage_.data()); }

 private:
  std::vector<uint64_t> storage_;
  const fb::Program* program_ = nullptr;
  uint64_t flatbuffer_size_ = 0;
  uint64_t segment_offset_ = 0;
  uint64_t file_size_ = 0;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EMIT_PROGRAM_FILE_H_
