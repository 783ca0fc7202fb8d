// The emitter: writes a lowered, memory-planned program as a .kiln file
// (size-prefixed flatbuffer, then the data segment with every constant at a
// 64-byte aligned offset; identical constants are stored once).
//
// Consecutive kernels on one device become one delegate call: the kernels
// go into the delegate's DelegateGraph blob (schema/delegate.fbs) with
// operands that index the method's tensors; the call's inputs are the
// tensors the run reads but does not write, its outputs those it writes
// and anything after it (or the application) reads.

#ifndef KILN_PLANNER_EMIT_EMITTER_H_
#define KILN_PLANNER_EMIT_EMITTER_H_

#include <string>
#include <vector>

#include "lower/program.h"

namespace kiln::planner {

constexpr uint32_t kSegmentAlignment = 64;
constexpr const char* kProducer = "kiln-planner 0.1.0";

// A kernel that runs on a device other than the CPU (in a delegate).
bool is_device_kernel(const LInstruction& ins);

// The delegate call that starts at instruction `begin`: the end of the run
// of device kernels on one device from there, or `begin` when none starts.
size_t delegate_run_end(const std::vector<LInstruction>& list, size_t begin);

struct EmitOptions {
  // Tensor and instruction names (for messages, profiles and `kiln
  // inspect`). Without them a method's inputs and outputs keep theirs (the
  // application's interface, MethodMeta); nothing else in the runtime reads
  // a name, and the program is smaller (firmware in flash).
  bool names = true;
  // PlanOptions::precision: each device delegate's compile spec
  // "precision" where it is not "fp32".
  std::string precision = "fp32";
};

// Returns the bytes of the .kiln file.
std::string emit_program(const LProgram& program, const EmitOptions& options = {});

// The bookkeeping figure of an emitted method, with schema/bookkeeping.h.
uint64_t method_bookkeeping_bytes(const fb::MethodT& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EMIT_EMITTER_H_
