// The runtime half of the Python package: a program and its methods through
// the C API (kiln/kiln.h), exactly as an application uses it. The program's
// bytes are copied once into 64-byte aligned memory the ProgramHandle owns;
// each method's bookkeeping and host arenas are allocated when the method is
// first loaded and live as long as it.
//
// Thread safety: a MethodHandle runs one call at a time (a mutex); separate
// methods may run at once. The GIL is released while a method executes.

#ifndef KILN_PYTHON_RUNTIME_H_
#define KILN_PYTHON_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "log_capture.h"

namespace kiln::python {

// A failed runtime call: the status name ("ShapeMismatch") and a message
// with what the runtime logged. Raised in Python as kiln.RunError.
struct RunFailure {
  std::string status;
  std::string message;
};

// Memory on `alignment` bytes, not initialized; 2 MiB or more is advised as
// transparent huge pages, as `kiln run` does.
class AlignedBlock {
 public:
  AlignedBlock(size_t size, size_t alignment);
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct TensorDescription {
  std::string name;
  kiln_dtype dtype = KILN_FLOAT32;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  std::string device;  // "cpu:0", "vulkan:0"
  kiln_quantization quantization{};
};

struct ArenaDescription {
  uint64_t size = 0;
  uint32_t alignment = 0;
  std::string device;
  std::string region;  // kiln plan --memory-region; "" when none
  bool symmetric = false;
  uint32_t group = 0;
};

// A dimension of an input bounded above (kiln_symbol_info).
struct SymbolDescription {
  std::string name;
  size_t input = 0;
  uint32_t axis = 0;
  int64_t min = 1;
  int64_t max = 1;
};

struct MethodDescription {
  std::string name;
  std::vector<SymbolDescription> symbols;
  std::vector<TensorDescription> inputs, outputs;
  std::vector<ArenaDescription> arenas;
  uint64_t bookkeeping_bytes = 0;
};

class ProgramHandle {
 public:
  // Verifies the program (RunFailure when it is not one) and makes the
  // backends its devices name (PlanError when one is not built in).
  explicit ProgramHandle(const std::string& bytes);
  ProgramHandle(const ProgramHandle&) = delete;
  ProgramHandle& operator=(const ProgramHandle&) = delete;

  const kiln_program* get() const { return &program_; }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return size_; }
  std::vector<std::string> method_names() const;
  MethodDescription describe(const std::string& method) const;

 private:
  size_t size_;
  AlignedBlock bytes_;
  kiln_program program_;
};

class MethodHandle {
 public:
  // Loads the method into memory of its own (RunFailure when it cannot).
  MethodHandle(std::shared_ptr<const ProgramHandle> program, const std::string& name);
  ~MethodHandle();
  MethodHandle(const MethodHandle&) = delete;
  MethodHandle& operator=(const MethodHandle&) = delete;

  // Binds `inputs` and `outputs` (one buffer per input and output, of its
  // size) and executes. The buffers are the caller's: zero copy.
  struct Buffer {
    const void* data;
    size_t size;
    std::vector<int64_t> dims;  // an input's extents, bound with them when given
  };
  // Returns each output's extents after the run (those of outputs that
  // follow an input bounded above are the run's).
  std::vector<std::vector<int64_t>> run(const std::vector<Buffer>& inputs, const std::vector<Buffer>& outputs);

  // Kernels split their work across `threads` threads, this one included.
  void set_threads(int threads);
  int threads() const { return threads_; }

 private:
  std::shared_ptr<const ProgramHandle> program_;
  std::string name_;
  std::vector<AlignedBlock> memory_;  // bookkeeping, then the host arenas
  kiln_method method_;
  std::unique_ptr<PosixThreadPool> pool_;
  kiln_thread_pool c_pool_{};
  int threads_ = 1;
  std::mutex mutex_;
};

// Throws RunFailure naming `what` and carrying what the runtime logged into
// `log` unless `status` is KILN_OK.
void check_status(kiln_status status, const std::string& what, const LogCapture& log);

}  // namespace kiln::python

#endif  // KILN_PYTHON_RUNTIME_H_
