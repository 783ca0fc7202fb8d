/* An input bounded above, through the C API: one loaded method (its input
 * x of shape [n, 16], n bounded, its output [n, 16]) run at several n with
 * kiln_method_set_input_shaped; each run's output extents
 * (kiln_method_output_dims) and values are checked against the expected
 * raw float32 file, and an n above the bound is refused with
 * KILN_SHAPE_MISMATCH. Files come from tests/ops/bounded_cases.py.
 *
 *   bounded_test PROGRAM MAX N IN EXPECTED [N IN EXPECTED ...]
 */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#include "c_test_support.h"

int main(int argc, char** argv) {
  kiln_program program;
  kiln_method method;
  kiln_method_info info;
  kiln_tensor_info out_info;
  size_t size = 0;
  void* data;
  void* bookkeeping = NULL;
  void* buffer = NULL;
  float* output = NULL;
  uint64_t bytes = 0;
  uint32_t alignment = 0;
  long max;
  int i;
  if (argc < 6 || (argc - 3) % 3 != 0) {
    fprintf(stderr, "usage: bounded_test PROGRAM MAX N IN EXPECTED [N IN EXPECTED ...]\n");
    return 2;
  }
  max = strtol(argv[2], NULL, 10);
  data = read_file(argv[1], &size);
  if (data == NULL) {
    fprintf(stderr, "bounded_test: cannot read %s\n", argv[1]);
    return 2;
  }
  EXPECT(kiln_register_cpu_kernels() == KILN_OK, "kernels registered");
  EXPECT(kiln_program_load(&program, data, size) == KILN_OK, "program loads");
  EXPECT(kiln_program_method_info(&program, "forward", &info) == KILN_OK, "method info");
  EXPECT(kiln_program_output_info(&program, "forward", 0, &out_info) == KILN_OK &&
             out_info.nbytes == (uint64_t)max * 16 * sizeof(float),
         "the output's planned bytes are those of the largest n");
  EXPECT(kiln_program_shared_arena_bytes(&program, "forward", &bytes, &alignment) == KILN_OK, "arena bytes");
  if (posix_memalign(&bookkeeping, 16, (size_t)info.bookkeeping_bytes + 16) != 0 ||
      posix_memalign(&buffer, alignment < 64 ? 64 : alignment, (size_t)bytes + 64) != 0 ||
      posix_memalign((void**)&output, 64, (size_t)out_info.nbytes + 64) != 0) {
    return 2;
  }
  EXPECT(kiln_method_load_shared(&method, &program, "forward", bookkeeping, (size_t)info.bookkeeping_bytes, buffer,
                                 (size_t)bytes) == KILN_OK,
         "method loads");
  EXPECT(kiln_method_set_output(&method, 0, output, (size_t)out_info.nbytes) == KILN_OK,
         "the output is bound with room for the largest n");
  EXPECT(kiln_method_set_output(&method, 0, output, (size_t)out_info.nbytes - 4) == KILN_BUFFER_TOO_SMALL,
         "an output buffer below the largest n's bytes is refused");
  EXPECT(kiln_method_set_output(&method, 0, output, (size_t)out_info.nbytes) == KILN_OK, "bound again");
  for (i = 3; i + 2 < argc; i += 3) {
    const int64_t n = strtol(argv[i], NULL, 10);
    const int64_t dims[2] = {n, 16};
    size_t in_size = 0, expected_size = 0;
    float* input = (float*)read_file(argv[i + 1], &in_size);
    float* expected = (float*)read_file(argv[i + 2], &expected_size);
    const int64_t* got_dims;
    uint32_t rank = 0;
    char what[96];
    if (input == NULL || expected == NULL) return 2;
    snprintf(what, sizeof what, "n=%ld: bound, executed", (long)n);
    EXPECT(kiln_method_set_input_shaped(&method, 0, input, in_size, dims, 2) == KILN_OK &&
               kiln_method_execute(&method) == KILN_OK,
           what);
    got_dims = kiln_method_output_dims(&method, 0, &rank);
    snprintf(what, sizeof what, "n=%ld: the output is [%ld, 16]", (long)n, (long)n);
    EXPECT(got_dims != NULL && rank == 2 && got_dims[0] == n && got_dims[1] == 16, what);
    snprintf(what, sizeof what, "n=%ld: the output's values", (long)n);
    EXPECT(expected_size == (size_t)n * 16 * sizeof(float) &&
               relative_error(output, expected, expected_size / sizeof(float)) < 1e-5,
           what);
    free(input);
    free(expected);
  }
  {
    const int64_t dims[2] = {max + 1, 16};
    float* big = (float*)calloc((size_t)(max + 1) * 16, sizeof(float));
    EXPECT(big != NULL && kiln_method_set_input_shaped(&method, 0, big, (size_t)(max + 1) * 16 * sizeof(float), dims,
                                                       2) == KILN_SHAPE_MISMATCH,
           "an n above the bound is refused");
    free(big);
  }
  kiln_method_destroy(&method);
  free(output);
  free(buffer);
  free(bookkeeping);
  free(data);
  printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
