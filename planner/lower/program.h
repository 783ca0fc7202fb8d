// The lowered program: what the emitter writes, one step before the
// flatbuffer. Tensors carry dtype, shape, device and storage; instructions
// are kernel calls (with their final parameters), copies, delegate and
// collective calls. Memory planning fills in arenas and offsets.

#ifndef KILN_PLANNER_LOWER_PROGRAM_H_
#define KILN_PLANNER_LOWER_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "kiln/schema/program_generated.h"

namespace kiln::planner {

enum class Storage { kPlanned, kConstant, kUser, kAlias };

struct LTensor {
  std::string name;
  DType dtype = DType::FLOAT32;
  std::vector<int64_t> shape;
  fb::Device device{fb::DeviceType::CPU, 0};
  Storage storage = Storage::kPlanned;
  int constant = -1;          // kConstant: index into LProgram::constants
  int alias_of = -1;          // kAlias: the tensor whose bytes it reuses
  uint64_t alias_offset = 0;  // kAlias: where in alias_of's bytes it starts
  bool is_input = false;
  bool is_output = false;
  // kUser tensors given planned fallback memory (--plan-io, device inputs
  // and outputs).
  bool user_fallback = false;
  // A quantized method input or output (--quantized-io): real value =
  // (q - zero_point) * scale.
  bool quantized = false;
  float scale = 0.f;
  int32_t zero_point = 0;
  // Written once at load (a constant uploaded to a device): alive for the
  // whole method.
  bool persistent = false;
  // Set by symmetric placement (passes/symmetric): the tensor lives in the
  // symmetric arena of this communicator group, at the same offset on every
  // rank. -1: an ordinary arena.
  int symmetric_group = -1;
  // Filled by memory planning (kPlanned, and kUser with fallback).
  int arena = -1;
  uint64_t offset = 0;
  // The memory region it was assigned (index into the plan's regions), -1: none.
  int region = -1;

  uint64_t nbytes() const { return static_cast<uint64_t>(shape_numel(shape)) * dtype_bytes(dtype); }
  bool has_memory() const { return storage == Storage::kPlanned || (storage == Storage::kUser && user_fallback); }
};

struct LInstruction {
  enum class Kind { kKernel, kCopy, kDelegate, kCollective };
  Kind kind = Kind::kKernel;
  std::string op;            // kernel name (kKernel)
  std::vector<int> inputs;   // -1 for an absent optional input; a copy's source
  std::vector<int> outputs;  // a copy's destination
  std::vector<int> scratch;
  fb::ParamsUnion params;
  std::string name;       // the model node it came from
  std::string source_op;  // that node's ONNX op type ("Reshape" for a Copy)
  // kCollective: what it computes and over which communicator group; one
  // input and one output per instruction.
  fb::CollectiveKind collective = fb::CollectiveKind::ALL_REDUCE;
  fb::ReduceOp reduce_op = fb::ReduceOp::SUM;
  uint32_t group = 0;
  // kCollective on a device: how it runs and what its kernels use
  // (passes/all_reduce.h; CollectiveCall's fields of the same names).
  fb::AllReduceAlgorithm algorithm = fb::AllReduceAlgorithm::COMMUNICATOR;
  uint64_t signal_offset = 0;
  uint32_t blocks = 0;
  uint64_t state_bytes = 0;
  // kCollective: inputs after the first are addends, each added to the
  // reduced sum as it is written (passes/all_reduce.h,
  // fuse_all_reduce_addends); the Add nodes they came from, for reports.
  std::vector<std::string> fused_adds;
  // kKernel on a device whose backend chose how to run it
  // (BackendPlanner::plan_kernel): the choice and why, for reports.
  std::string choice;
  std::string choice_why;
  // What it does, for reports: the kernel's name, "copy" or "all-reduce".
  std::string what() const { return kind == Kind::kCopy ? "copy" : kind == Kind::kCollective ? "all-reduce" : op; }
  // Where a kernel runs; the emitter groups consecutive kernels of one
  // device into a delegate call. Copies say nothing here (their tensors do).
  fb::Device device{fb::DeviceType::CPU, 0};
};

struct LArena {
  uint64_t size = 0;
  uint32_t alignment = 64;
  fb::Device device{fb::DeviceType::CPU, 0};
  fb::ArenaKind kind = fb::ArenaKind::ORDINARY;
  uint32_t group = 0;
  // Most bytes live at one instruction, where, and the tensors (roots of
  // alias chains) live there (see memory/).
  uint64_t lower_bound = 0;
  int peak_instruction = -1;
  std::vector<int> peak_tensors;
  // How the plan was made: algorithm, greedy first fit's size for
  // comparison, whether it is proven optimal, and the search effort.
  std::string algorithm;
  uint64_t first_fit = 0;
  bool optimal = false;
  uint64_t search_nodes = 0;
  double solve_seconds = 0;
  // A memory region's arena (memory/regions.h): its name, capacity, speed
  // (memory::RegionSpeed) and the bytes a run reads and writes in it.
  std::string region;
  uint64_t capacity = 0;
  int speed = 1;
  uint64_t traffic = 0;
  // Constants copied into the region at load (memory/regions.h,
  // --hot-constants): how many, their bytes (after the planned tensors)
  // and the bytes a run reads of them (part of `traffic`).
  int hot_constants = 0;
  uint64_t hot_constant_bytes = 0;
  uint64_t hot_constant_reads = 0;
};

// A group of ranks running collectives together (groups are numbered from 0).
struct LCommunicator {
  uint32_t group = 0;
  uint32_t size = 1;
};

// A method input dimension bound above (Method.symbols; passes/bounds.h).
struct LSymbol {
  std::string name;
  int input = 0;  // index into LMethod::inputs
  uint32_t axis = 0;
  int64_t min = 1;
  int64_t max = 1;
};

// A dimension that follows the symbols (Method.dynamic_dims):
// scale * floor((mul * S + bias) / divisor) + offset, S the product of the
// symbols in the `symbols` mask.
struct LDynamicDim {
  uint32_t tensor = 0;
  uint32_t axis = 0;
  uint32_t symbols = 0;
  int64_t scale = 1;
  int64_t mul = 1;
  int64_t bias = 0;
  int64_t divisor = 1;
  int64_t offset = 0;
};

struct LMethod {
  std::string name = "forward";
  std::vector<LTensor> tensors;
  std::vector<LInstruction> instructions;
  // Copies run once at load: constants uploaded to device arenas.
  std::vector<LInstruction> init_instructions;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<LArena> arenas;
  std::vector<LCommunicator> communicators;
  // Inputs bounded above: empty when every shape is fixed.
  std::vector<LSymbol> symbols;
  std::vector<LDynamicDim> dynamic_dims;  // sorted by tensor, then axis

  int add_tensor(LTensor tensor) {
    tensors.push_back(std::move(tensor));
    return static_cast<int>(tensors.size()) - 1;
  }
  // Follows aliases to the tensor that owns the bytes.
  int root(int t) const {
    while (tensors[static_cast<size_t>(t)].storage == Storage::kAlias) t = tensors[static_cast<size_t>(t)].alias_of;
    return t;
  }
  // Where t's bytes start in its root's (the offsets down its alias chain).
  uint64_t root_offset(int t) const {
    uint64_t offset = 0;
    while (tensors[static_cast<size_t>(t)].storage == Storage::kAlias) {
      offset += tensors[static_cast<size_t>(t)].alias_offset;
      t = tensors[static_cast<size_t>(t)].alias_of;
    }
    return offset;
  }
};

struct LProgram {
  std::vector<LMethod> methods;
  std::vector<std::shared_ptr<const HostTensor>> constants;
  // Constants that differ per rank (weights the tensor-parallel pass
  // sharded), by constant index: empty where every rank shares
  // constants[c], else one tensor per rank of `rank_group` (entry 0 is
  // constants[c]).
  std::vector<std::vector<std::shared_ptr<const HostTensor>>> rank_constants;
  uint32_t rank_group = 0;
  // Methods (indices into `methods`) that never run at the same time: each
  // group's host arenas may share one buffer (Program.arena_groups).
  std::vector<std::vector<int>> arena_groups;
};

// Same kind, kernel, operands, device, group and parameters (the
// parameters compared as packed flatbuffers).
bool same_instruction(const LInstruction& a, const LInstruction& b);
// Same in everything but its memory plan (arena, offset, region).
bool same_tensor(const LTensor& a, const LTensor& b);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_LOWER_PROGRAM_H_
