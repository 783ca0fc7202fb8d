/* The C API from C99: a planned program loads, describes itself and runs
 * against the expected output; corrupt programs, short buffers and unbound
 * inputs come back as the right status, never a crash. With a thread pool
 * of the application's (one that runs its tasks backwards on the calling
 * thread, and every kernel made to split: KILN_PARALLEL_MIN_WORK=0) the
 * output is the same bytes.
 *
 *   capi_test PROGRAM.kiln INPUT.bin EXPECTED.bin
 *
 * Built with -std=c99 -pedantic -Werror: kiln.h must stay plain C. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#include "c_test_support.h"

/* A pool that claims two threads and runs the tasks backwards, counting
 * its calls: the kernels' results must not depend on the order. */
static int pool_calls = 0;
static void backwards_parallel_for(void* pool_context, int64_t count, kiln_task_fn task, void* task_context) {
  int64_t i;
  (void)pool_context;
  ++pool_calls;
  for (i = count - 1; i >= 0; --i) task(task_context, i);
}

static void* zeroed(size_t size, size_t alignment) {
  void* p = NULL;
  if (posix_memalign(&p, alignment < 16 ? 16 : alignment, size + 1) != 0) return NULL;
  memset(p, 0, size + 1);
  return p;
}

int main(int argc, char** argv) {
  size_t program_size = 0, input_size = 0, expected_size = 0, i;
  void *bytes, *input, *expected, *corrupt, *bookkeeping, *output;
  void* arenas[32];
  size_t sizes[32];
  kiln_program program, bad;
  kiln_method_info info;
  kiln_tensor_info in_info, out_info;
  kiln_quantization quantization;
  kiln_method method;
  kiln_status status;
  const char* name;
  double max_error = 0, max_value = 0;

  if (argc != 4) return 2;
  setenv("KILN_PARALLEL_MIN_WORK", "0", 1); /* every kernel that can split does, on a pool */
  bytes = read_file(argv[1], &program_size);
  input = read_file(argv[2], &input_size);
  expected = read_file(argv[3], &expected_size);
  if (bytes == NULL || input == NULL || expected == NULL) return 2;

  EXPECT(strcmp(kiln_status_name(KILN_ARENA_TOO_SMALL), "ArenaTooSmall") == 0, "status names");
  EXPECT(kiln_register_cpu_kernels() == KILN_OK && kiln_register_cpu_kernels() == KILN_OK,
         "kernels register (twice is harmless)");

  /* A corrupt program is refused. */
  corrupt = zeroed(program_size, 64);
  memcpy(corrupt, bytes, program_size);
  memset((char*)corrupt + 8, 0xFF, 16);
  status = kiln_program_load(&bad, corrupt, program_size);
  EXPECT(status == KILN_INVALID_PROGRAM || status == KILN_VERSION_MISMATCH, "a corrupt program is refused");
  EXPECT(kiln_program_load(&bad, bytes, 16) != KILN_OK, "a truncated program is refused");
  EXPECT(kiln_program_load(NULL, bytes, program_size) == KILN_INVALID_ARGUMENT, "NULL program storage");

  EXPECT(kiln_program_load(&program, bytes, program_size) == KILN_OK, "the program loads");
  EXPECT(kiln_program_num_methods(&program) == 1, "one method");
  name = kiln_program_method_name(&program, 0);
  EXPECT(name != NULL && strcmp(name, "forward") == 0, "method 'forward'");
  EXPECT(kiln_program_method_name(&program, 5) == NULL, "no method 5");
  EXPECT(kiln_program_method_info(&program, "nope", &info) == KILN_NOT_FOUND, "unknown method is NotFound");
  EXPECT(kiln_program_method_info(&program, name, &info) == KILN_OK && info.num_inputs == 1 && info.num_outputs == 1 &&
             info.bookkeeping_bytes > 0 && info.num_arenas >= 1 && info.num_arenas <= 32,
         "method info");
  EXPECT(kiln_program_input_info(&program, name, 0, &in_info) == KILN_OK && in_info.dtype == KILN_FLOAT32 &&
             in_info.nbytes == input_size && in_info.rank == 4,
         "input info matches the input file");
  EXPECT(kiln_program_output_info(&program, name, 0, &out_info) == KILN_OK && out_info.nbytes == expected_size,
         "output info matches the expected file");
  EXPECT(kiln_program_input_info(&program, name, 3, &in_info) == KILN_INVALID_ARGUMENT, "no input 3");
  quantization.quantized = 7;
  EXPECT(kiln_program_input_quantization(&program, name, 0, &quantization) == KILN_OK && quantization.quantized == 0,
         "a float input is not quantized");
  EXPECT(kiln_program_output_quantization(&program, name, 1, &quantization) == KILN_INVALID_ARGUMENT, "no output 1");

  for (i = 0; i < info.num_arenas; ++i) {
    kiln_arena_info arena;
    EXPECT(kiln_program_arena_info(&program, name, i, &arena) == KILN_OK && arena.region != NULL,
           "arena info names its memory region (\"\" without regions)");
    if (arena.region != NULL && arena.region[0] != '\0')
      printf("      arena %u: region '%s'\n", (unsigned)i, arena.region);
    arenas[i] = zeroed((size_t)arena.size, arena.alignment);
    sizes[i] = (size_t)arena.size;
  }
  bookkeeping = zeroed((size_t)info.bookkeeping_bytes, 16);
  output = zeroed((size_t)out_info.nbytes, 64);

  /* Short buffers are refused at load. */
  if (sizes[0] > 0) {
    sizes[0] -= 1;
    EXPECT(kiln_method_load(&method, &program, name, bookkeeping, (size_t)info.bookkeeping_bytes, arenas, sizes,
                            info.num_arenas) == KILN_ARENA_TOO_SMALL,
           "an arena one byte short is ArenaTooSmall");
    sizes[0] += 1;
  }
  EXPECT(kiln_method_load(&method, &program, name, bookkeeping, (size_t)info.bookkeeping_bytes - 16, arenas, sizes,
                          info.num_arenas) == KILN_OUT_OF_MEMORY,
         "bookkeeping 16 bytes short is OutOfMemory");

  EXPECT(kiln_method_load(&method, &program, name, bookkeeping, (size_t)info.bookkeeping_bytes, arenas, sizes,
                          info.num_arenas) == KILN_OK,
         "the method loads into the application's buffers");
  EXPECT(kiln_method_execute(&method) == KILN_NOT_BOUND, "executing unbound is NotBound");
  EXPECT(kiln_method_set_input(&method, 0, input, input_size - 4) == KILN_BUFFER_TOO_SMALL,
         "a short input is BufferTooSmall");
  EXPECT(kiln_method_set_input(&method, 7, input, input_size) == KILN_INVALID_ARGUMENT, "no input 7");
  EXPECT(kiln_method_set_input(&method, 0, input, input_size) == KILN_OK, "input bound");
  EXPECT(kiln_method_set_output(&method, 0, output, (size_t)out_info.nbytes) == KILN_OK, "output bound");
  EXPECT(kiln_method_execute(&method) == KILN_OK, "execute");
  EXPECT(kiln_method_output_data(&method, 0) == output, "the output is where it was bound");
  for (i = 0; i < expected_size / sizeof(float); ++i) {
    const double got = ((const float*)output)[i], want = ((const float*)expected)[i];
    if (fabs(got - want) > max_error) max_error = fabs(got - want);
    if (fabs(want) > max_value) max_value = fabs(want);
  }
  printf("max relative error %.3g\n", max_error / max_value);
  EXPECT(max_error <= 1e-4 * max_value, "the output matches PyTorch's within 1e-4 relative");
  EXPECT(kiln_method_execute(&method) == KILN_OK, "execute again");
  {
    kiln_thread_pool pool;
    void* one_thread = malloc((size_t)out_info.nbytes);
    memset(&pool, 0, sizeof pool);
    pool.concurrency = 2;
    EXPECT(kiln_method_set_thread_pool(&method, &pool) == KILN_INVALID_ARGUMENT, "a pool without parallel_for");
    pool.parallel_for = backwards_parallel_for;
    memcpy(one_thread, output, (size_t)out_info.nbytes);
    memset(output, 0, (size_t)out_info.nbytes);
    EXPECT(kiln_method_set_thread_pool(&method, &pool) == KILN_OK, "the application's pool is set");
    EXPECT(kiln_method_execute(&method) == KILN_OK, "execute on the pool");
    EXPECT(pool_calls > 0, "the kernels handed the pool work");
    EXPECT(memcmp(one_thread, output, (size_t)out_info.nbytes) == 0, "the same bytes as on one thread");
    EXPECT(kiln_method_set_thread_pool(&method, NULL) == KILN_OK, "the pool is unset");
    free(one_thread);
  }
  kiln_method_destroy(&method);

  for (i = 0; i < info.num_arenas; ++i) free(arenas[i]);
  free(bookkeeping);
  free(output);
  free(corrupt);
  free(bytes);
  free(input);
  free(expected);

  printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
