/* kiln's C API: load a planned program from memory, ask what it needs, load
 * a method into memory the application provides, bind inputs and outputs,
 * execute, and read errors as codes and names. For apps, firmware and FFI
 * (C99; every type is plain data).
 *
 * Memory: the library allocates nothing. The application owns every byte:
 *   - the program bytes (64-byte aligned; must outlive the program and every
 *     method loaded from it);
 *   - kiln_program and kiln_method, opaque structs of fixed size the
 *     application places anywhere (stack, static, its own heap);
 *   - the method's bookkeeping buffer (kiln_method_info.bookkeeping_bytes,
 *     16-byte aligned) and one buffer per host arena (kiln_arena_info.size,
 *     aligned to .alignment); device arenas are allocated by their backend.
 * All of it must outlive the method; kiln_method_destroy() releases what the
 * backends allocated (device arenas, delegates) and nothing else.
 *
 *   kiln_program program;
 *   kiln_register_cpu_kernels();
 *   kiln_program_load(&program, bytes, size);
 *   kiln_method_info info;
 *   kiln_program_method_info(&program, "forward", &info);
 *   ... one buffer per kiln_program_arena_info(&program, "forward", i, &a) ...
 *   kiln_method method;
 *   kiln_method_load(&method, &program, "forward", bookkeeping, info.bookkeeping_bytes,
 *                    arenas, arena_sizes, info.num_arenas);
 *   kiln_method_set_input(&method, 0, x, sizeof x);
 *   kiln_method_set_output(&method, 0, y, sizeof y);
 *   kiln_method_execute(&method);
 *   kiln_method_destroy(&method);
 *
 * Errors: every fallible call returns a kiln_status (KILN_OK is 0);
 * kiln_status_name() gives its stable name ("ArenaTooSmall"). The detailed
 * message (which tensor, arena or operator) goes to the platform log
 * (kiln_pal_log, platform/include/kiln/platform/platform.h), which an
 * application may replace.
 *
 * Threads: one thread at a time per method; separate methods may run
 * concurrently. kiln_register_cpu_kernels() before any method load.
 * Within one execute, the kernels can split large work across threads the
 * application lends (kiln_method_set_thread_pool); the library starts none. */

#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_C_API_VERSION 1
#define KILN_MAX_RANK 8

/* The runtime's error codes (kiln::Error), same values. */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT,
  KILN_INVALID_PROGRAM,
  KILN_VERSION_MISMATCH,
  KILN_NOT_FOUND,
  KILN_KERNEL_NOT_FOUND,
  KILN_REGISTRY_FULL,
  KILN_OUT_OF_MEMORY,
  KILN_ARENA_MISSING,
  KILN_ARENA_TOO_SMALL,
  KILN_ARENA_MISALIGNED,
  KILN_DTYPE_MISMATCH,
  KILN_SHAPE_MISMATCH,
  KILN_BUFFER_TOO_SMALL,
  KILN_BUFFER_MISALIGNED,
  KILN_NOT_BOUND,
  KILN_DEVICE_MISMATCH,
  KILN_BACKEND_NOT_FOUND,
  KILN_DELEGATE_INIT_FAILED,
  KILN_DEVICE_ALLOCATION_FAILED,
  KILN_DEVICE_ERROR,
  KILN_INVALID_INPUT,
  KILN_IO_ERROR,
  KILN_NOT_SUPPORTED,
  KILN_INTERNAL,
  KILN_COMMUNICATOR_MISMATCH,
  KILN_PEER_FAILED
} kiln_status;

/* The program's element types (schema/program.fbs DType), same values. */
typedef enum kiln_dtype {
  KILN_FLOAT32 = 0,
  KILN_FLOAT16 = 1,
  KILN_BFLOAT16 = 2,
  KILN_FLOAT64 = 3,
  KILN_INT8 = 4,
  KILN_UINT8 = 5,
  KILN_INT16 = 6,
  KILN_UINT16 = 7,
  KILN_INT32 = 8,
  KILN_UINT32 = 9,
  KILN_INT64 = 10,
  KILN_UINT64 = 11,
  KILN_BOOL = 12
} kiln_dtype;

typedef enum kiln_device_type {
  KILN_DEVICE_CPU = 0,
  KILN_DEVICE_CUDA = 1,
  KILN_DEVICE_VULKAN = 2,
  KILN_DEVICE_NULL = 3
} kiln_device_type;

/* Opaque, fixed-size storage the application provides. */
typedef struct kiln_program {
  uint64_t opaque_[8];
} kiln_program;

typedef struct kiln_method {
  uint64_t opaque_[16];
} kiln_method;

typedef struct kiln_method_info {
  size_t num_arenas;
  size_t num_inputs;
  size_t num_outputs;
  uint64_t bookkeeping_bytes; /* exact size of the bookkeeping buffer */
  size_t num_symbols;         /* dimensions bounded above (kiln_program_symbol_info) */
} kiln_method_info;

/* A dimension of an input bounded above (kiln plan --input-shape
 * NAME=MIN:MAXx...): input `input`'s axis `axis` takes any extent from min
 * to max (kiln_method_set_input_shaped). */
typedef struct kiln_symbol_info {
  const char* name; /* the model's dimension name, or "input[axis]"; owned by the program */
  size_t input;
  uint32_t axis;
  int64_t min;
  int64_t max;
} kiln_symbol_info;

typedef struct kiln_arena_info {
  uint64_t size;
  uint32_t alignment;
  kiln_device_type device_type; /* KILN_DEVICE_CPU: the application provides it */
  uint32_t device_index;
  int symmetric; /* shared across ranks (collectives); group below */
  uint32_t group;
  const char* region; /* the memory region (kiln plan --memory-region), "" when none; lives in the program */
} kiln_arena_info;

typedef struct kiln_tensor_info {
  const char* name; /* "" when the program carries no names; lives in the program */
  kiln_dtype dtype;
  uint32_t rank;
  int64_t dims[KILN_MAX_RANK];
  uint64_t nbytes;
  kiln_device_type device_type;
  uint32_t device_index;
} kiln_tensor_info;

/* "ArenaTooSmall"; never NULL. */
const char* kiln_status_name(kiln_status status);

/* Registers the CPU kernels in the process-wide kernel table (once;
 * later calls do nothing). */
kiln_status kiln_register_cpu_kernels(void);

/* Verifies `size` bytes at `data` (flatbuffer and semantics) and fills
 * `program`. KILN_INVALID_PROGRAM for anything corrupt, never a crash. */
kiln_status kiln_program_load(kiln_program* program, const void* data, size_t size);
size_t kiln_program_num_methods(const kiln_program* program);
/* NULL for an index out of range. */
const char* kiln_program_method_name(const kiln_program* program, size_t index);

kiln_status kiln_program_method_info(const kiln_program* program, const char* method, kiln_method_info* out_info);
kiln_status kiln_program_arena_info(const kiln_program* program, const char* method, size_t index,
                                    kiln_arena_info* out_info);
kiln_status kiln_program_input_info(const kiln_program* program, const char* method, size_t index,
                                    kiln_tensor_info* out_info);
kiln_status kiln_program_output_info(const kiln_program* program, const char* method, size_t index,
                                     kiln_tensor_info* out_info);

/* A quantized input or output (`kiln plan --quantized-io`) takes or gives
 * INT8 or UINT8 data whose real value is (q - zero_point) * scale. */
typedef struct kiln_quantization {
  int quantized; /* 0: the tensor holds its values as they are */
  float scale;
  int32_t zero_point;
} kiln_quantization;

kiln_status kiln_program_input_quantization(const kiln_program* program, const char* method, size_t index,
                                            kiln_quantization* out_quantization);
kiln_status kiln_program_output_quantization(const kiln_program* program, const char* method, size_t index,
                                             kiln_quantization* out_quantization);

/* Loads `name` into `method`. `arenas[i]` is host arena i's buffer of
 * `arena_sizes[i]` bytes (NULL for a device arena); `num_arenas` is the
 * method's arena count (at most 32: KILN_NOT_SUPPORTED beyond). Kernels
 * from the process-wide table, backends from the process-wide registry. */
kiln_status kiln_method_load(kiln_method* method, const kiln_program* program, const char* name, void* bookkeeping,
                             size_t bookkeeping_size, void* const* arenas, const size_t* arena_sizes,
                             size_t num_arenas);
/* Methods that never run at the same time (an arena group, `kiln plan
 * --method`) may keep their host arenas in one buffer: load each with
 * kiln_method_load_shared() on the same buffer; only one of them may execute
 * at a time, and what one leaves there is gone once another runs. The
 * bytes of the buffer `method` shares with its group (its own host arenas'
 * when it is in none) and the alignment the buffer's start needs (the
 * largest of the group's). */
kiln_status kiln_program_shared_arena_bytes(const kiln_program* program, const char* method, uint64_t* out_bytes,
                                            uint32_t* out_alignment);
/* *out_may = 1 when methods `a` and `b` may share that buffer, else 0. */
kiln_status kiln_program_may_share_arenas(const kiln_program* program, const char* a, const char* b, int* out_may);
/* kiln_method_load with every host arena of `name` laid out in `buffer`
 * (schema/arena_layout.h); device arenas are allocated by their backend.
 * KILN_BUFFER_TOO_SMALL or KILN_BUFFER_MISALIGNED for a buffer that does not
 * fit the method. */
kiln_status kiln_method_load_shared(kiln_method* method, const kiln_program* program, const char* name,
                                    void* bookkeeping, size_t bookkeeping_size, void* buffer, size_t size);
kiln_status kiln_program_symbol_info(const kiln_program* program, const char* method, size_t index,
                                     kiln_symbol_info* out_info);
/* Binds the application's buffers, zero copy, until bound again. */
kiln_status kiln_method_set_input(kiln_method* method, size_t index, const void* data, size_t size);
kiln_status kiln_method_set_output(kiln_method* method, size_t index, void* data, size_t size);
/* An input bounded above (kiln plan --input-shape NAME=MIN:MAXx...): binds it
 * with the extents `dims` (rank entries, each bounded one within its bound);
 * every extent that follows it is recomputed at the next execute, without
 * allocating. KILN_SHAPE_MISMATCH for an extent out of bounds or inputs that
 * disagree on a shared dimension; KILN_BUFFER_TOO_SMALL when `size` is
 * below the extents' bytes. An output that follows a bounded input is bound
 * with room for its largest extents (kiln_program_output_info's nbytes). */
kiln_status kiln_method_set_input_shaped(kiln_method* method, size_t index, const void* data, size_t size,
                                         const int64_t* dims, uint32_t rank);
kiln_status kiln_method_execute(kiln_method* method);
/* Output `index`'s extents as of the last execute (its rank in *out_rank);
 * NULL when out of range. They differ from kiln_program_output_info's only
 * for outputs that follow a bounded input. */
const int64_t* kiln_method_output_dims(const kiln_method* method, size_t index, uint32_t* out_rank);
/* Where input or output `index` is now (bound, or planned fallback memory);
 * NULL when unbound without fallback or out of range. */
const void* kiln_method_input_data(const kiln_method* method, size_t index);
const void* kiln_method_output_data(const kiln_method* method, size_t index);
/* Releases what backends allocated for the method. */
void kiln_method_destroy(kiln_method* method);

/* Worker threads the application lends a method (its own pool: pthreads,
 * a platform's work queue, ...). parallel_for(pool_context, count, task,
 * task_context) must call task(task_context, i) once for every i in
 * [0, count), on any of its threads and the calling one, and return when
 * all calls have returned; it must not allocate if the application wants
 * none, and a call from inside a task must run inline. `concurrency` is
 * how many threads run tasks at once, the caller included. The kernels
 * split products, convolutions and large element-wise passes into tasks
 * that write disjoint outputs in one thread's order of operations, so the
 * outputs are the same bits on any number of threads. */
typedef void (*kiln_task_fn)(void* task_context, int64_t index);
typedef struct kiln_thread_pool {
  int concurrency;
  void (*parallel_for)(void* pool_context, int64_t count, kiln_task_fn task, void* task_context);
  void* pool_context;
  uint64_t opaque_[2]; /* kiln's own use */
} kiln_thread_pool;
/* Lends `pool` to the method's kernels from the next execute on; NULL
 * stops. The pool must outlive the method or be unset first.
 * KILN_INVALID_ARGUMENT for a null method, a pool without parallel_for or
 * a concurrency below 1. */
kiln_status kiln_method_set_thread_pool(kiln_method* method, kiln_thread_pool* pool);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H_ */
