// LoweringContext: what an op definition's lowering (OpDef::lower) sees of
// the lowerer. Ops ask it for the method tensors of graph values and emit
// kernel calls through it; which device a tensor lives on, the copies that
// keep devices apart and the method being built stay with the implementation
// (lower/lowerer.h). Ops depend on this interface only, so ops/ never
// includes lower/; the lowerer includes ops/ to find each node's definition.
//
// An instance lives for one lower_graph() call; an op must not keep it.

#ifndef KILN_PLANNER_OPS_LOWERING_CONTEXT_H_
#define KILN_PLANNER_OPS_LOWERING_CONTEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/host_tensor.h"
#include "kiln/schema/program_generated.h"

namespace kiln::planner {

// Choices of kernel that trade memory for speed.
struct LowerOptions {
  // Conv, Gemm and MatMul get scratch tensors for their packed, blocked
  // product (kernels/cpu/include/kiln/kernels/gemm_blocking.h). Off:
  // plain loops and smaller arenas (microcontrollers).
  bool packing_scratch = true;
  // With packing: constant weights of Conv (one group), Gemm and MatMul on
  // the CPU are packed in BF16 (gemm_blocking.h), and those products run
  // in BF16 with FP32 accumulation (kiln plan --precision bf16; the
  // runtime refuses such a program on a processor without AVX512-BF16).
  bool bf16_weights = false;
  // A float32 nearest or linear Resize of the last two axes on the CPU gets
  // its taps as a constant input of 4 (rows + columns) floats
  // (kernels/cpu/include/kiln/kernels/resize_taps.h). Off: the kernel
  // computes them on every call.
  bool resize_taps = true;
  // Lowered for inputs bounded above (passes/bounds.h): every extent may be
  // smaller at run time, so no choice is made because one is 1 (a product
  // of one row still gets the packed kernel the larger sizes get).
  bool bounded = false;
  // The most threads the program is planned for: kernels that give each
  // thread scratch blocks of its own (grouped convolutions, batched and
  // row-split products, Winograd by ranges of tiles; gemm_blocking.h) get
  // at most this many (kiln plan --threads). 1: none, the smallest arenas,
  // every kernel still split step by step on a pool. Above 4 changes
  // nothing: the kernels ask for 4 blocks at most.
  int64_t thread_blocks = 4;
};

class LoweringContext {
 public:
  virtual ~LoweringContext() = default;

  virtual const LowerOptions& options() const = 0;
  // The device the current node runs on.
  virtual fb::Device device() const = 0;

  // The method tensor holding graph value `value` where it lives (created on
  // first use).
  virtual int tensor(int value) = 0;
  // A new intermediate tensor on the current node's device.
  virtual int temp(const std::string& stem, DType dtype, std::vector<int64_t> shape) = 0;
  // A constant tensor holding `data`.
  virtual int constant(const std::string& name, HostTensor data) = 0;

  // A kernel call on the current node's device; inputs that live elsewhere
  // are replaced by their copy on this device. `scratch` tensors (from
  // temp()) are planned memory the kernel may use while it runs.
  void kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs, fb::ParamsUnion params = {},
              std::vector<int> scratch = {}) {
    add_kernel(std::move(op), std::move(inputs), std::move(outputs), std::move(params), std::move(scratch));
  }
  // Bytes of `src` into `dst` unchanged (a reshape): a Copy kernel the
  // in-place pass can turn into a view.
  void view(int src, int dst) { kernel("Copy", {src}, {dst}); }

  // A collective over communicator group 0 (the ranks running the graph,
  // Graph::ranks): `output` receives `input` reduced with `op` across them.
  // Symmetric placement (passes/symmetric) later decides where `input` lives.
  virtual void collective(fb::CollectiveKind kind, fb::ReduceOp op, int input, int output) = 0;

 protected:
  // kernel() without defaults (default arguments stay off virtual functions).
  virtual void add_kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs, fb::ParamsUnion params,
                          std::vector<int> scratch) = 0;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_OPS_LOWERING_CONTEXT_H_
