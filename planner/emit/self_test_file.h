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

// The tolerance a self-test of `method` gets unless one is given: 0 when
// every output is an integer (int8 programs give the same bytes on every
// path), else 8 * u * sqrt(D), u = 2^-24, relative to each output's largest
// magnitude. D counts the roundings along the longest chain of
// instructions from an input to an output: a product or sum over K terms
// K (Conv: C/group * kH * kW; Gemm and MatMul: the inner dimension; a
// reduction, pooling, Softmax or LayerNormalization: the elements each
// output element reads), a vector math function 4 (its polynomial differs
// between instruction sets), any other element-wise op 1, a delegate call
// 4096. Paths differ by summation order, fused multiply-adds and
// polynomials, whose roundings add like a random walk: sqrt(D) of them,
// with a factor 8 for the chain's growth. `out_roundings` gets D.
float derived_self_test_tolerance(const std::string& program_bytes, const std::string& method,
                                  uint64_t* out_roundings = nullptr);

// The .kiln.test bytes for `method` of the program `program_bytes`.
std::string make_self_test(const std::string& program_bytes, const std::string& method,
                           const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                           float tolerance);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EMIT_SELF_TEST_FILE_H_
