// Writes a bundled self-test (schema/selftest.fbs): a program's inputs and
// the outputs the host computed for them, tied to the program by its digest
// (schema/include/kiln/schema/digest.h).

#ifndef KILN_PLANNER_EMIT_SELF_TEST_FILE_H_
#define KILN_PLANNER_EMIT_SELF_TEST_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace kiln::planner {

// The digest of a program's bytes (its size-prefixed flatbuffer), as
// self-tests and traces record it; 0 for bytes too short to be a program.
uint64_t program_digest(const std::string& program_bytes);

// The .kiln.test bytes for `method` of the program `program_bytes`.
std::string make_self_test(const std::string& program_bytes, const std::string& method,
                           const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                           float tolerance);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EMIT_SELF_TEST_FILE_H_
