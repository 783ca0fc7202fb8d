// The emitter: writes a lowered, memory-planned program as a .kiln file
// (size-prefixed flatbuffer, then the data segment with every constant at a
// 64-byte aligned offset; identical constants are stored once).

#ifndef KILN_PLANNER_EMIT_EMITTER_H_
#define KILN_PLANNER_EMIT_EMITTER_H_

#include <string>

#include "lower/program.h"

namespace kiln::planner {

constexpr uint32_t kSegmentAlignment = 64;
constexpr const char* kProducer = "kiln-planner 0.1.0";

// Returns the bytes of the .kiln file.
std::string emit_program(const LProgram& program);

// The bookkeeping figure of one method, computed from the lowered form with
// schema/bookkeeping.h.
uint64_t method_bookkeeping_bytes(const LMethod& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EMIT_EMITTER_H_
