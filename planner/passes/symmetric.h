// Symmetric placement: every collective's input must sit in the symmetric
// arena of its communicator group (the same offset on every rank, mapped by
// every peer), so that a one-shot all-reduce reads its peers' operands where
// they are. Each input takes the first of these paths that applies:
//
//   (a) zero copy: the input is planned memory this method writes (a
//       kernel's or copy's output, through any in-place alias): that tensor
//       itself is planned in the symmetric arena;
//   (b) method input: one symmetric buffer per input, filled by one copy at
//       method entry, serving every collective that reads the input (never
//       copied twice);
//   (c) anything else (a constant, a method output, a tensor already in
//       another group's arena): one explicit copy into the symmetric arena
//       just before the collective.
//
// Collective outputs stay ordinary tensors: planned and reused like any
// other. Symmetric buffers are planned like any tensor too, within their own
// arena, so one buffer serves a chain of layers whose collective inputs do
// not overlap in time. Run after in-place reuse (aliases are final), before
// memory planning.

#ifndef KILN_PLANNER_PASSES_SYMMETRIC_H_
#define KILN_PLANNER_PASSES_SYMMETRIC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lower/program.h"

namespace kiln::planner {

struct SymmetricStats {
  int collectives = 0;
  // The devices the collectives run on ("cuda:0"), each once, in order:
  // the device whose symmetric arena holds their operands.
  std::vector<std::string> devices;
  // (a): operands planned straight into the symmetric arena.
  int zero_copy = 0;
  uint64_t zero_copy_bytes = 0;
  // (b): method inputs given a symmetric buffer, and the copies at entry.
  int input_buffers = 0;
  uint64_t input_buffer_bytes = 0;
  int input_copies = 0;
  // (c): explicit copies before a collective.
  int explicit_copies = 0;
  uint64_t explicit_copy_bytes = 0;

  int copies() const { return input_copies + explicit_copies; }
  uint64_t copied_bytes() const { return input_buffer_bytes + explicit_copy_bytes; }
};

SymmetricStats place_symmetric(LMethod& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_SYMMETRIC_H_
