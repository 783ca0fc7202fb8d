/* An application using kiln through its installed package and C API: loads
 * a planned program, sizes every buffer from what the program says, runs
 * one input and writes the outputs.
 *
 *   kiln_app PROGRAM.kiln INPUT.bin OUTPUT.bin
 *
 * INPUT.bin holds the raw bytes of the method's one input; OUTPUT.bin gets
 * the raw bytes of its first output. Built against the installed package
 * (examples/app/CMakeLists.txt: find_package(kiln)) or with pkg-config:
 *   cc -std=c99 app.c $(pkg-config --cflags --libs kiln) -o kiln_app */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

/* The application owns its memory; here it comes from its heap. */
static void* aligned_buffer(size_t size, size_t alignment) {
  void* p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, size > 0 ? size : 1) != 0) {
    return NULL;
  }
  return p;
}

static void* read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = aligned_buffer((size_t)size, 64);
  if (data != NULL && fread(data, 1, (size_t)size, f) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *out_size = (size_t)size;
  return data;
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    kiln_status status_ = (call);                                                     \
    if (status_ != KILN_OK) {                                                         \
      fprintf(stderr, "kiln_app: %s failed: %s\n", #call, kiln_status_name(status_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: kiln_app PROGRAM.kiln INPUT.bin OUTPUT.bin\n");
    return 2;
  }
  size_t program_size = 0, input_size = 0;
  void* program_bytes = read_file(argv[1], &program_size);
  void* input = read_file(argv[2], &input_size);
  if (program_bytes == NULL || input == NULL) {
    fprintf(stderr, "kiln_app: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }

  kiln_program program;
  CHECK(kiln_register_cpu_kernels());
  CHECK(kiln_program_load(&program, program_bytes, program_size));
  const char* name = kiln_program_method_name(&program, 0);
  kiln_method_info info;
  CHECK(kiln_program_method_info(&program, name, &info));
  printf("method '%s': %zu inputs, %zu outputs, %zu arenas, %llu bookkeeping bytes\n", name, info.num_inputs,
         info.num_outputs, info.num_arenas, (unsigned long long)info.bookkeeping_bytes);

  void* arenas[32] = {0};
  size_t arena_sizes[32] = {0};
  if (info.num_arenas > 32) return 1;
  for (size_t i = 0; i < info.num_arenas; ++i) {
    kiln_arena_info arena;
    CHECK(kiln_program_arena_info(&program, name, i, &arena));
    if (arena.device_type == KILN_DEVICE_CPU) {
      arenas[i] = aligned_buffer((size_t)arena.size, arena.alignment);
      arena_sizes[i] = (size_t)arena.size;
    }
    printf("  arena %zu: %llu bytes, aligned to %u\n", i, (unsigned long long)arena.size, arena.alignment);
  }
  void* bookkeeping = aligned_buffer((size_t)info.bookkeeping_bytes, 16);

  kiln_tensor_info in_info, out_info;
  CHECK(kiln_program_input_info(&program, name, 0, &in_info));
  CHECK(kiln_program_output_info(&program, name, 0, &out_info));
  if (input_size != in_info.nbytes) {
    fprintf(stderr, "kiln_app: input '%s' needs %llu bytes, %s has %zu\n", in_info.name,
            (unsigned long long)in_info.nbytes, argv[2], input_size);
    return 1;
  }
  void* output = aligned_buffer((size_t)out_info.nbytes, 64);

  kiln_method method;
  CHECK(kiln_method_load(&method, &program, name, bookkeeping, (size_t)info.bookkeeping_bytes, arenas, arena_sizes,
                         info.num_arenas));
  CHECK(kiln_method_set_input(&method, 0, input, input_size));
  CHECK(kiln_method_set_output(&method, 0, output, (size_t)out_info.nbytes));
  CHECK(kiln_method_execute(&method));
  kiln_method_destroy(&method);

  FILE* f = fopen(argv[3], "wb");
  int status = f != NULL && fwrite(output, 1, (size_t)out_info.nbytes, f) == (size_t)out_info.nbytes ? 0 : 1;
  if (f != NULL) fclose(f);
  if (status == 0) {
    printf("output '%s': %llu bytes written to %s\n", out_info.name, (unsigned long long)out_info.nbytes, argv[3]);
  }
  for (size_t i = 0; i < info.num_arenas; ++i) free(arenas[i]);
  free(bookkeeping);
  free(output);
  free(input);
  free(program_bytes);
  return status;
}
