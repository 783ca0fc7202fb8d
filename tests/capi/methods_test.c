/* Two methods of one program that never run at the same time, loaded
 * through the C API into ONE host buffer (kiln_method_load_shared): the
 * buffer is the larger method's size, not the sum; each method's output
 * stays right when the other ran in between; a buffer one byte short or
 * misaligned is refused. Inputs and expected outputs are raw float32 files
 * (method_models.py via tests/cli/methods_test.py). A method's inputs may
 * be int64 tokens: an input file's bytes are taken as they are.
 *
 *   methods_test PROGRAM A IN_A EXPECTED_A B IN_B... EXPECTED_B
 *
 * Method A has one input, method B one to three; each compares output 0. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#include "c_test_support.h"

/* One loaded method with its inputs, output and expected output. */
typedef struct {
  const char* name;
  kiln_method method;
  void* bookkeeping;
  void* inputs[3];
  size_t input_sizes[3];
  size_t num_inputs;
  float* expected;
  size_t expected_size;
  float* output;
  /* Outputs after the first: bound to buffers of their own, not compared. */
  void* others[4];
  size_t other_sizes[4];
  size_t num_outputs;
} Loaded;

static int run_and_check(Loaded* m) {
  size_t i;
  for (i = 0; i < m->num_inputs; ++i) {
    if (kiln_method_set_input(&m->method, i, m->inputs[i], m->input_sizes[i]) != KILN_OK) return 0;
  }
  memset(m->output, 0, m->expected_size);
  if (kiln_method_set_output(&m->method, 0, m->output, m->expected_size) != KILN_OK) return 0;
  for (i = 1; i < m->num_outputs; ++i) {
    if (kiln_method_set_output(&m->method, i, m->others[i], m->other_sizes[i]) != KILN_OK) return 0;
  }
  if (kiln_method_execute(&m->method) != KILN_OK) return 0;
  return relative_error(m->output, m->expected, m->expected_size / sizeof(float)) < 1e-4;
}

static int load(Loaded* m, const kiln_program* program, void* buffer, size_t size) {
  kiln_method_info info;
  kiln_tensor_info out;
  size_t i;
  if (kiln_program_method_info(program, m->name, &info) != KILN_OK || info.num_outputs > 4) return 0;
  m->num_outputs = info.num_outputs;
  for (i = 1; i < info.num_outputs; ++i) {
    if (kiln_program_output_info(program, m->name, i, &out) != KILN_OK) return 0;
    m->other_sizes[i] = (size_t)out.nbytes;
    if (posix_memalign(&m->others[i], 64, m->other_sizes[i] + 64) != 0) return 0;
  }
  if (posix_memalign(&m->bookkeeping, 16, (size_t)info.bookkeeping_bytes + 16) != 0) return 0;
  return kiln_method_load_shared(&m->method, program, m->name, m->bookkeeping, (size_t)info.bookkeeping_bytes, buffer,
                                 size) == KILN_OK;
}

/* Bytes of the method's host arenas, one buffer each (the plan alone). */
static uint64_t arena_sum(const kiln_program* program, const char* name) {
  kiln_method_info info;
  kiln_arena_info arena;
  uint64_t total = 0;
  size_t i;
  if (kiln_program_method_info(program, name, &info) != KILN_OK) return 0;
  for (i = 0; i < info.num_arenas; ++i) {
    if (kiln_program_arena_info(program, name, i, &arena) == KILN_OK && arena.device_type == KILN_DEVICE_CPU) {
      total += arena.size;
    }
  }
  return total;
}

/* Frees what read_method and load allocated. */
static void release(Loaded* m) {
  size_t i;
  for (i = 0; i < 3; ++i) free(m->inputs[i]);
  for (i = 0; i < 4; ++i) free(m->others[i]);
  free(m->expected);
  free(m->output);
  free(m->bookkeeping);
}

static int read_method(Loaded* m, char** argv, int num_inputs) {
  int i;
  m->name = argv[0];
  m->num_inputs = (size_t)num_inputs;
  for (i = 0; i < num_inputs; ++i) {
    m->inputs[i] = read_file(argv[1 + i], &m->input_sizes[i]);
    if (m->inputs[i] == NULL) return 0;
  }
  m->expected = (float*)read_file(argv[1 + num_inputs], &m->expected_size);
  m->output = (float*)malloc(m->expected_size + 64);
  return m->expected != NULL && m->output != NULL;
}

int main(int argc, char** argv) {
  kiln_program program;
  Loaded a, b;
  size_t size = 0;
  uint64_t bytes = 0, bytes_b = 0;
  uint32_t alignment = 0;
  int may = 0;
  void* data;
  unsigned char* buffer = NULL;
  kiln_method spare;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  if (argc < 8 || argc > 10) {
    fprintf(stderr, "usage: methods_test PROGRAM A IN_A EXPECTED_A B IN_B... EXPECTED_B\n");
    return 2;
  }
  data = read_file(argv[1], &size);
  if (data == NULL || !read_method(&a, argv + 2, 1) || !read_method(&b, argv + 5, argc - 7)) {
    fprintf(stderr, "methods_test: cannot read the files\n");
    return 2;
  }
  EXPECT(kiln_register_cpu_kernels() == KILN_OK, "kernels registered");
  EXPECT(kiln_program_load(&program, data, size) == KILN_OK, "program loads");
  EXPECT(kiln_program_may_share_arenas(&program, a.name, b.name, &may) == KILN_OK && may == 1,
         "the two methods may share arenas");
  EXPECT(kiln_program_may_share_arenas(&program, a.name, "nope", &may) == KILN_NOT_FOUND, "unknown method");
  EXPECT(kiln_program_shared_arena_bytes(&program, a.name, &bytes, &alignment) == KILN_OK && alignment >= 1,
         "shared arena bytes");
  EXPECT(kiln_program_shared_arena_bytes(&program, b.name, &bytes_b, &alignment) == KILN_OK && bytes_b == bytes,
         "both methods name the same buffer size");
  printf("shared buffer %llu bytes; alone %llu + %llu\n", (unsigned long long)bytes,
         (unsigned long long)arena_sum(&program, a.name), (unsigned long long)arena_sum(&program, b.name));
  EXPECT(bytes >= arena_sum(&program, a.name) && bytes >= arena_sum(&program, b.name) &&
             bytes < arena_sum(&program, a.name) + arena_sum(&program, b.name),
         "the shared buffer is the larger plan's, less than both together");
  if (posix_memalign((void**)&buffer, alignment < 64 ? 64 : alignment, (size_t)bytes + 64) != 0) return 2;
  {
    kiln_method_info info;
    void* bookkeeping = NULL;
    int short_ok, misaligned_ok;
    kiln_program_method_info(&program, a.name, &info);
    if (posix_memalign(&bookkeeping, 16, (size_t)info.bookkeeping_bytes + 16) != 0) return 2;
    short_ok = kiln_method_load_shared(&spare, &program, a.name, bookkeeping, (size_t)info.bookkeeping_bytes, buffer,
                                       (size_t)arena_sum(&program, a.name) - 1) == KILN_BUFFER_TOO_SMALL;
    misaligned_ok = arena_sum(&program, a.name) == 0 ||
                    kiln_method_load_shared(&spare, &program, a.name, bookkeeping, (size_t)info.bookkeeping_bytes,
                                            buffer + 4, (size_t)bytes) == KILN_BUFFER_MISALIGNED;
    EXPECT(short_ok, "a buffer one byte short is refused");
    EXPECT(misaligned_ok, "a misaligned buffer is refused");
    free(bookkeeping);
  }
  EXPECT(load(&a, &program, buffer, (size_t)bytes), "method A loads into the shared buffer");
  EXPECT(load(&b, &program, buffer, (size_t)bytes), "method B loads into the same buffer");
  EXPECT(run_and_check(&a), "method A's output");
  EXPECT(run_and_check(&b), "method B's output, after A used the buffer");
  EXPECT(run_and_check(&a), "method A's output again, after B used the buffer");
  kiln_method_destroy(&a.method);
  kiln_method_destroy(&b.method);
  release(&a);
  release(&b);
  free(buffer);
  free(data);
  printf("%s: %d failure%s\n", failures == 0 ? "passed" : "FAILED", failures, failures == 1 ? "" : "s");
  return failures == 0 ? 0 : 1;
}
