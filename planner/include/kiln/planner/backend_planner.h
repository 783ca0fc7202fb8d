// The planner's interface to backends: everything a backend folder
// (backends/<name>/) implements for the planner and everything of the
// planner it may call. A backend includes this header and nothing else of
// planner/.
//
// A backend has two halves, each registered once:
//
//   - its planner half, a BackendPlanner: which nodes it runs (after shape
//     inference), which inputs its kernels may overwrite, the alignment of
//     its device arenas and the host state a delegate needs at run time.
//     Most backends describe their support as a table (TablePlannerSpec,
//     one entry per ONNX op) that their runtime half reads too, so the two
//     cannot drift;
//   - its runtime half for kiln's host tools (`kiln run`, the tests,
//     benchmarks): a HostBackend that makes the runtime's kiln::Backend on
//     first use, from options the backend reads itself (its environment
//     variables), and releases it at the end of a run.
//
// Registration: a backend's CMakeLists.txt calls kiln_add_backend()
// (cmake/KilnBackends.cmake) naming a function of each half,
// `void register_<name>_backend_planner()` and, when the runtime half is
// built, `void register_<name>_host_backend()`, defined in the backend's
// folder and calling register_backend_planner() / register_host_backend()
// below. The build generates the one call list that runs them
// (register_builtin_backends()). Applications that embed the runtime
// without the planner register the runtime half directly (see
// runtime/include/kiln/runtime/backend.h).
//
// Threading: registration happens once, before planning starts; lookups
// are read-only afterwards.

#ifndef KILN_PLANNER_BACKEND_PLANNER_H_
#define KILN_PLANNER_BACKEND_PLANNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/backend.h"
#include "kiln/schema/program_generated.h"

namespace kiln::planner {

class Graph;
struct Node;
struct Value;

// One tensor operand of a node as a backend sees it.
class ValueView {
 public:
  explicit ValueView(const Value& value) : value_(&value) {}
  fb::DType dtype() const;
  bool has_shape() const;
  const std::vector<int64_t>& shape() const;
  size_t rank() const { return shape().size(); }
  int64_t numel() const;
  uint64_t nbytes() const;
  // Known when the model is planned (an initializer or a folded value).
  bool is_constant() const;

 private:
  const Value* value_;
};

// One node (an ONNX op after shape inference and constant folding) as a
// backend sees it. Valid during the call it is passed to.
class NodeView {
 public:
  NodeView(const Graph& graph, const Node& node) : graph_(&graph), node_(&node) {}
  const std::string& op() const;      // "Conv"
  const std::string& domain() const;  // "" for the default ONNX domain
  // Optional inputs and outputs may be absent.
  size_t num_inputs() const;
  size_t num_outputs() const;
  bool has_input(size_t i) const;
  bool has_output(size_t i) const;
  ValueView input(size_t i) const;   // has_input(i) must hold
  ValueView output(size_t i) const;  // has_output(i) must hold
  // "node 'conv1' (Conv)", for messages.
  std::string describe() const;

 private:
  const Graph* graph_;
  const Node* node_;
};

// What the planner knows of one delegate when it sizes the delegate's
// host state: the kernel calls the runtime half will resolve.
struct DelegateSummary {
  size_t kernels = 0;
  // Tensor operands over all calls (inputs, outputs and scratch).
  size_t operands = 0;
};

// What one all-reduce of `bytes` takes when a device backend runs it with
// kernels of its own over its peers' symmetric arenas (CollectiveCall
// ONE_SHOT / TWO_SHOT): the grid (the same on every rank), the signal
// words it synchronises through (bytes per rank's copy of the arena), the
// host state of the call, and the most ranks the kernels address. blocks 0:
// the backend runs no such kernels.
struct DeviceAllReduce {
  uint32_t blocks = 0;
  uint64_t signal_bytes = 0;
  uint64_t state_bytes = 0;
  uint32_t max_ranks = 0;
};

// One kernel call as an op's lowering made it, on a device of the
// backend (BackendPlanner::plan_kernel). Valid during the call.
struct KernelCallInfo {
  std::string kernel;  // the lowered kernel name: "Conv"
  // Operand shapes; an absent optional input's is empty.
  std::vector<std::vector<int64_t>> inputs;
  std::vector<std::vector<int64_t>> outputs;
  // The call's parameters, which the backend may complete with its choice
  // (ConvParams.algorithm).
  fb::ParamsUnion* params = nullptr;
};

// What a backend adds to a kernel call: planned device scratch, and the
// choice it made where it had one (for the plan's report).
struct KernelPlan {
  // A scratch tensor "<node>/<stem>" of `elements` elements, used only
  // while the call runs, appended after any the op's lowering asked for.
  // Float32 scratch of a kernel on 16-bit storage (kiln plan --precision
  // fp16/bf16) is stored in 16 bits like the kernel's other tensors.
  struct Scratch {
    std::string stem;
    fb::DType dtype = fb::DType::UINT8;
    int64_t elements = 0;
  };
  std::vector<Scratch> scratch;
  // "im2col+GEMM", "direct": how the call runs and why; empty where the
  // kernel runs one way only.
  std::string choice;
  std::string why;
};

// A backend's planner half.
class BackendPlanner {
 public:
  virtual ~BackendPlanner() = default;
  // "vulkan", "cuda": the target prefix (vulkan:0) and the Delegate.backend
  // id the runtime looks up.
  virtual std::string name() const = 0;
  virtual fb::DeviceType device_type() const = 0;
  // Device indices the backend can address: 0 .. max_devices() - 1.
  virtual int max_devices() const = 0;
  // Empty when the backend runs `node`; otherwise why not, for messages
  // ("input 0 is float64 (float32 only)").
  virtual std::string unsupported_reason(const NodeView& node) const = 0;
  // Alignment of every offset in this backend's device arenas (at least the
  // device's storage-buffer offset alignment).
  virtual uint32_t arena_alignment() const = 0;
  // Inputs kernel `kernel` (a lowered kernel name) may write its output
  // over (bit i), as the backend's runtime half declares; 0 for none.
  virtual uint32_t inplace_inputs(const std::string& kernel) const { return 0; }
  // Host bytes a delegate needs at run time (the backend's runtime half
  // must need no more: it checks when a method loads).
  virtual uint64_t state_bytes(const DelegateSummary& delegate) const = 0;
  // Whether collectives (AllReduce) run on this backend's devices, over
  // symmetric arenas in device memory: a collective whose operands a kernel
  // of this backend produces then stays on the device (passes/partition.h).
  virtual bool runs_collectives() const { return false; }
  // For a backend that runs collectives: its all-reduce kernels for a call
  // of `bytes` (passes/all_reduce.h picks one-shot or two-shot).
  virtual DeviceAllReduce device_all_reduce(uint64_t bytes) const {
    (void)bytes;
    return {};
  }
  // How the backend runs a kernel call on one of its devices: the scratch
  // it needs beside any the op's lowering asked for (a library's
  // workspace, cuBLASLt's for Gemm/MatMul/Conv on CUDA; a convolution's
  // column buffer), so it is arena memory the memory planner shares
  // between kernels, not an allocation of the backend; and the algorithm
  // where the backend chooses one (recorded in `call.params`). Default:
  // nothing added.
  virtual KernelPlan plan_kernel(KernelCallInfo& call) const {
    (void)call;
    return {};
  }
  // Empty when the backend's delegates run `precision` (kiln plan
  // --precision: "fp32", "tf32", "fp16", "bf16"); otherwise why not.
  virtual std::string precision_refusal(const std::string& precision) const {
    return precision == "fp32" ? "" : "it runs FP32 only";
  }
};

// A backend whose support is a table of ONNX ops.
struct OpSupport {
  std::string op;
  // Conditions beyond "every tensor operand is float32" (the table's
  // rule): "" when supported, else the reason. May be empty.
  std::function<std::string(const NodeView&)> check;
  // Inputs that must be constants (shape arguments); exempt from the
  // float32 rule.
  std::vector<int> constant_inputs;
};

OpSupport op_support(std::string op, std::function<std::string(const NodeView&)> check = nullptr,
                     std::vector<int> constant_inputs = {});

// What a device's kernels need of every tensor operand (the first
// `tensor_inputs` inputs, the rest being shape arguments, and every
// output): a static shape, rank at most max_rank, at least one element and
// at most max_elements ("input 0 " + too_large otherwise, e.g. "has 2^31
// elements or more").
struct OperandLimits {
  size_t max_rank = 8;
  int64_t max_elements = INT64_MAX;
  std::string too_large;
};

// A check: the operand limits, then `extra` (may be null).
std::function<std::string(const NodeView&)> operand_rules(const OperandLimits& limits,
                                                          std::function<std::string(const NodeView&)> extra = nullptr,
                                                          size_t tensor_inputs = SIZE_MAX);

// Conv, MaxPool and AveragePool with 1-D or 2-D windows (NCW, NCHW) and
// without MaxPool's Indices output: what the device backends run.
std::string windows_1d_2d(const NodeView& node);

// Inputs a kernel of the backend may write its output over (bit i), by the
// kernel name the planner lowers to ("Add", "Copy"): what the runtime half
// accepts when it checks a delegate.
struct KernelInplace {
  std::string kernel;
  uint32_t inputs = 0;
};

struct TablePlannerSpec {
  std::string name;
  fb::DeviceType device_type = fb::DeviceType::CPU;
  int max_devices = 1;
  uint32_t arena_alignment = 256;
  // Host state of a delegate: fixed + per kernel call + per operand.
  uint64_t state_bytes_fixed = 0;
  uint64_t state_bytes_per_kernel = 0;
  uint64_t state_bytes_per_operand = 0;
  std::vector<OpSupport> ops;
  std::vector<KernelInplace> inplace;
  // BackendPlanner::runs_collectives().
  bool collectives = false;
  // BackendPlanner::device_all_reduce; null: no all-reduce kernels.
  std::function<DeviceAllReduce(uint64_t bytes)> all_reduce;
  // The --precision values its delegates run.
  std::vector<std::string> precisions = {"fp32"};
  // BackendPlanner::plan_kernel; null: nothing added.
  std::function<KernelPlan(KernelCallInfo& call)> plan_kernel;
};

std::unique_ptr<BackendPlanner> make_table_planner(TablePlannerSpec spec);

// Adds a planner half (replacing one of the same name).
void register_backend_planner(std::unique_ptr<BackendPlanner> planner);

// A backend's runtime half as kiln's host tools use it.
class HostBackend {
 public:
  virtual ~HostBackend() = default;
  // The runtime's backend object; lives as long as this HostBackend.
  virtual Backend& backend() = 0;
  // Releases every device after the last Method using it is gone, and
  // returns how many diagnostics (validation messages) the backend
  // reported during the run; any makes `kiln run` fail.
  virtual uint64_t shutdown() = 0;
};

struct HostBackendInfo {
  std::string name;  // the planner half's name
  // Made on first use (opening a device may be slow or fail).
  std::function<std::unique_ptr<HostBackend>()> make;
  // Lines for `kiln run --help`: the environment variables it reads.
  std::string options_help;
};

void register_host_backend(HostBackendInfo info);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_BACKEND_PLANNER_H_
