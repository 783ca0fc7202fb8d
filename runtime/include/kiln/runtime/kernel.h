// Kernels and the kernel registry.
//
// A kernel is a pair of plain functions:
//   - check(args) runs once, when a method is loaded. It validates everything
//     the kernel will rely on (dtypes, ranks, shapes, parameters against the
//     tensors) and logs what is wrong. This is the trust boundary: after it
//     passes, run() does no validation of its own.
//   - run(args) computes the outputs. It returns an Error only for what no
//     load-time check can see (an index value inside an input tensor that is
//     out of range).
// Kernels keep no state between calls; any scratch memory they need is a
// tensor planned by the planner and passed in `scratch`. A kernel may split
// its work across `pool` (the Method's ThreadPool, or nullptr: one thread)
// only in ways that give the same bits on any number of threads and need no
// scratch beyond what the planner gave it (a kernel given several blocks of
// scratch may run as many tasks at once, one block each).
//
// The registry is a fixed-size table filled by explicit calls such as
// register_cpu_kernels(); no static constructors. Registration is not
// thread safe; lookups are (the table is read-only after registration).

#ifndef KILN_RUNTIME_KERNEL_H_
#define KILN_RUNTIME_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/error.h"
#include "kiln/runtime/result.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/thread_pool.h"

namespace kiln {

struct KernelArgs {
  // Absent optional inputs are nullptr.
  const Tensor* const* inputs = nullptr;
  const Tensor* const* outputs = nullptr;
  const Tensor* const* scratch = nullptr;
  uint16_t num_inputs = 0;
  uint16_t num_outputs = 0;
  uint16_t num_scratch = 0;
  // The instruction, for its parameters and (in messages) its name.
  const fb::KernelCall* call = nullptr;
  const char* node_name = nullptr;
  // The application's workers (Method::set_thread_pool), or nullptr.
  ThreadPool* pool = nullptr;

  const Tensor& in(uint32_t i) const { return *inputs[i]; }
  const Tensor& out(uint32_t i) const { return *outputs[i]; }
  bool has_input(uint32_t i) const { return i < num_inputs && inputs[i] != nullptr; }
  // The parameters as P, or nullptr when the instruction carries others.
  template <typename P>
  const P* params() const {
    return call->params_as<P>();
  }
};

using KernelCheckFn = Error (*)(const KernelArgs& args);
using KernelRunFn = Error (*)(const KernelArgs& args);

struct KernelEntry {
  // The operator name the planner writes ("Conv", "Add", ...).
  const char* name = nullptr;
  KernelCheckFn check = nullptr;
  KernelRunFn run = nullptr;
  // Bit i set: the kernel may write output 0 over input i (same byte size),
  // because it reads every element of that input before writing the output
  // element in the same place. The planner places outputs in place only
  // through declared inputs, and Method loading refuses an output aliasing
  // an input the kernel did not declare.
  uint32_t inplace_inputs = 0;
};

constexpr uint32_t kInplaceInput0 = 1u << 0;
constexpr uint32_t kInplaceInput1 = 1u << 1;
constexpr uint32_t kInplaceInput2 = 1u << 2;

class KernelRegistry {
 public:
  static constexpr size_t kCapacity = 192;

  constexpr KernelRegistry() = default;

  // Adds or replaces the kernel named entry.name. kRegistryFull when the
  // table has no room left; kInvalidArgument for an entry without a name or
  // run function.
  Error register_kernel(const KernelEntry& entry);
  Error register_kernels(const KernelEntry* entries, size_t count);
  // nullptr when no kernel has that name.
  const KernelEntry* find(const char* name) const;
  size_t size() const { return count_; }
  const KernelEntry& entry(size_t i) const { return entries_[i]; }

 private:
  KernelEntry entries_[kCapacity] = {};
  size_t count_ = 0;
};

// The registry methods use unless they are given another. Constant-initialised
// (no static constructor runs).
KernelRegistry& global_kernel_registry();

}  // namespace kiln

#endif  // KILN_RUNTIME_KERNEL_H_
