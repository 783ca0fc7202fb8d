#include "passes/all_reduce.h"

#include <algorithm>
#include <map>

#include "core/device.h"
#include "core/error.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

uint32_t group_size(const LMethod& method, uint32_t group) {
  for (const LCommunicator& c : method.communicators) {
    if (c.group == group) return c.size;
  }
  return 1;
}

// Whether a tensor sharing `root`'s bytes is read after instruction `at`,
// or is a method output: then the collective's operand lives on.
bool lives_after(const LMethod& method, int root, size_t at) {
  for (int t : method.outputs) {
    if (method.root(t) == root) return true;
  }
  for (size_t i = at + 1; i < method.instructions.size(); ++i) {
    const LInstruction& ins = method.instructions[i];
    for (const std::vector<int>* list : {&ins.inputs, &ins.scratch}) {
      for (int t : *list) {
        if (t >= 0 && method.root(t) == root) return true;
      }
    }
  }
  return false;
}

std::string bytes_text(uint64_t bytes) {
  std::string digits = std::to_string(bytes), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// One-shot or two-shot for collective `at` (a device call the kernels
// take), and why.
fb::AllReduceAlgorithm pick(const LMethod& method, size_t at, AllReduceMode mode, uint32_t ranks, std::string* why) {
  const LInstruction& ins = method.instructions[at];
  const int input = ins.inputs.at(0), output = ins.outputs.at(0);
  const uint64_t bytes = method.tensors[static_cast<size_t>(input)].nbytes();
  const bool in_place =
      method.root(input) == method.root(output) &&
      method.tensors[static_cast<size_t>(input)].offset == method.tensors[static_cast<size_t>(output)].offset;
  // A fused addend that shares the operand's bytes is read as the output
  // is written, after two-shot has written its slice over them.
  bool addend_is_operand = false;
  for (size_t a = 1; a < ins.inputs.size(); ++a) {
    addend_is_operand = addend_is_operand || method.root(ins.inputs[a]) == method.root(input);
  }
  const bool operand_dies = !lives_after(method, method.root(input), at) && !addend_is_operand;
  const bool two_shot_runs = in_place || operand_dies;
  if (in_place) {
    *why = mode == AllReduceMode::kOneShot ? "in place: one-shot would write the sum over an operand its peers read"
                                           : "in place";
    return fb::AllReduceAlgorithm::TWO_SHOT;
  }
  if (mode == AllReduceMode::kOneShot) {
    *why = "--allreduce one-shot";
    return fb::AllReduceAlgorithm::ONE_SHOT;
  }
  if (mode == AllReduceMode::kTwoShot) {
    *why = two_shot_runs ? "--allreduce two-shot"
                         : "--allreduce two-shot, but the operand is read after the call, or is its addend "
                           "(two-shot writes its slice over it)";
    return two_shot_runs ? fb::AllReduceAlgorithm::TWO_SHOT : fb::AllReduceAlgorithm::ONE_SHOT;
  }
  const uint64_t threshold = two_shot_min_bytes(ranks);
  if (bytes < threshold) {
    *why = bytes_text(bytes) + " bytes < " + bytes_text(threshold) + " (two-shot from 512 KiB / " +
           std::to_string(ranks) + " ranks)";
    return fb::AllReduceAlgorithm::ONE_SHOT;
  }
  if (!two_shot_runs) {
    *why = bytes_text(bytes) + " bytes >= " + bytes_text(threshold) +
           ", but the operand is read after the call, or is its addend (two-shot writes its slice over it)";
    return fb::AllReduceAlgorithm::ONE_SHOT;
  }
  *why = bytes_text(bytes) + " bytes >= " + bytes_text(threshold) + " (two-shot from 512 KiB / " +
         std::to_string(ranks) + " ranks)";
  return fb::AllReduceAlgorithm::TWO_SHOT;
}

}  // namespace

bool parse_all_reduce_mode(const std::string& text, AllReduceMode* out_mode) {
  if (text == "auto")
    *out_mode = AllReduceMode::kAuto;
  else if (text == "one-shot")
    *out_mode = AllReduceMode::kOneShot;
  else if (text == "two-shot")
    *out_mode = AllReduceMode::kTwoShot;
  else
    return false;
  return true;
}

const char* all_reduce_algorithm_name(fb::AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case fb::AllReduceAlgorithm::ONE_SHOT: return "one-shot";
    case fb::AllReduceAlgorithm::TWO_SHOT: return "two-shot";
    default: return "communicator";
  }
}

uint64_t two_shot_min_bytes(uint32_t ranks) { return (uint64_t{512} << 10) / (ranks > 0 ? ranks : 1); }

namespace {

// Why the device kernels cannot run collective `ins` of `ranks` ranks
// ("" when they can: `*out_kernels` says with what).
std::string kernels_refuse(const LMethod& method, const LInstruction& ins, uint32_t ranks,
                           DeviceAllReduce* out_kernels) {
  const LTensor& input = method.tensors[static_cast<size_t>(ins.inputs.at(0))];
  const BackendPlanner* backend =
      input.device.type() == fb::DeviceType::CPU ? nullptr : backend_planner_for(input.device.type());
  *out_kernels = backend != nullptr && backend->runs_collectives() ? backend->device_all_reduce(input.nbytes())
                                                                   : DeviceAllReduce{};
  if (out_kernels->blocks == 0) return "on the host";
  if (ranks < 2) return "one rank: a copy";
  if (ranks > out_kernels->max_ranks) {
    return "more ranks than the kernels address (" + std::to_string(out_kernels->max_ranks) + ")";
  }
  if (input.dtype != DType::FLOAT32) return "the kernels reduce float32 only";
  return "";
}

}  // namespace

std::vector<AllReduceChoice> choose_all_reduce(LMethod& method, AllReduceMode mode) {
  std::vector<AllReduceChoice> choices;
  // Per symmetric arena the kernels use: the signal bytes its calls need.
  std::map<int, uint64_t> signals;
  for (size_t i = 0; i < method.instructions.size(); ++i) {
    LInstruction& ins = method.instructions[i];
    if (ins.kind != LInstruction::Kind::kCollective) continue;
    const LTensor& input = method.tensors[static_cast<size_t>(ins.inputs.at(0))];
    AllReduceChoice choice;
    choice.name = ins.name;
    choice.device = device_str(input.device);
    choice.bytes = input.nbytes();
    choice.ranks = group_size(method, ins.group);
    choice.fused_adds = ins.fused_adds;
    DeviceAllReduce kernels;
    choice.why = kernels_refuse(method, ins, choice.ranks, &kernels);
    if (choice.why.empty()) {
      ins.algorithm = pick(method, i, mode, choice.ranks, &choice.why);
      ins.blocks = kernels.blocks;
      ins.state_bytes = kernels.state_bytes;
      uint64_t& need = signals[method.tensors[static_cast<size_t>(method.root(ins.inputs.at(0)))].arena];
      need = std::max(need, kernels.signal_bytes);
    } else if (ins.inputs.size() > 1) {
      fail("internal error: all-reduce '", ins.name, "' has fused addends but no device kernels (", choice.why, ")");
    } else if (kernels.blocks > 0 && choice.ranks > 1) {
      // On a device that runs collectives, with a dtype or rank count its
      // kernels do not take: the communicator's, whose library call the
      // runtime enqueues on the backend's stream where it can (room for
      // that record, as for the kernels').
      ins.state_bytes = kernels.state_bytes;
    }
    choice.algorithm = ins.algorithm;
    choice.blocks = ins.blocks;
    choices.push_back(choice);
  }
  for (const auto& [arena_index, bytes] : signals) {
    LArena& arena = method.arenas.at(static_cast<size_t>(arena_index));
    const uint64_t offset = align_up(arena.size, arena.alignment);
    arena.size = offset + bytes;
    // The words live for the whole run: part of any plan's peak.
    arena.lower_bound += bytes;
    arena.first_fit = offset + bytes;
    for (LInstruction& ins : method.instructions) {
      if (ins.kind != LInstruction::Kind::kCollective || ins.algorithm == fb::AllReduceAlgorithm::COMMUNICATOR)
        continue;
      if (method.tensors[static_cast<size_t>(method.root(ins.inputs.at(0)))].arena == arena_index)
        ins.signal_offset = offset;
    }
  }
  return choices;
}

namespace {

// Element i of a tensor of `shape` adds element i mod numel(addend) of
// `addend`: the addend's shape, leading 1s dropped, is `shape`'s trailing
// axes.
bool broadcasts_along_leading_axes(const std::vector<int64_t>& addend, const std::vector<int64_t>& shape) {
  size_t first = 0;
  while (first < addend.size() && addend[first] == 1) ++first;
  const size_t n = addend.size() - first;
  if (n > shape.size()) return false;
  return std::equal(addend.begin() + static_cast<std::ptrdiff_t>(first), addend.end(),
                    shape.end() - static_cast<std::ptrdiff_t>(n));
}

bool reads_root(const LMethod& method, const LInstruction& ins, int root) {
  for (const std::vector<int>* list : {&ins.inputs, &ins.scratch}) {
    for (int t : *list) {
      if (t >= 0 && method.root(t) == root) return true;
    }
  }
  return false;
}

bool writes_root(const LMethod& method, const LInstruction& ins, int root) {
  for (const std::vector<int>* list : {&ins.outputs, &ins.scratch}) {
    for (int t : *list) {
      if (t >= 0 && method.root(t) == root) return true;
    }
  }
  return false;
}

// The Add at `add` that the collective at `at` may take into its write, and
// its addend (the Add's other operand); -1 when there is none such.
int fusable_add(const LMethod& method, size_t at, size_t* out_add) {
  const LInstruction& collective = method.instructions[at];
  const int y = collective.outputs.at(0);
  const int root = method.root(y);
  for (int t : method.outputs) {
    if (method.root(t) == root) return -1;
  }
  const LTensor& out = method.tensors[static_cast<size_t>(y)];
  // The one later reader of the output (or of a view of it).
  size_t reader = SIZE_MAX;
  for (size_t k = at + 1; k < method.instructions.size(); ++k) {
    if (!reads_root(method, method.instructions[k], root)) continue;
    if (reader != SIZE_MAX) return -1;
    reader = k;
  }
  if (reader == SIZE_MAX) return -1;
  const LInstruction& add = method.instructions[reader];
  if (add.kind != LInstruction::Kind::kKernel || add.op != "Add" || add.source_op != "Add" ||
      !same_device(add.device, collective.device) || add.inputs.size() != 2 || add.outputs.size() != 1) {
    return -1;
  }
  const fb::BinaryParamsT* params = add.params.AsBinaryParams();
  if (params == nullptr || (params->activation != nullptr && params->activation->kind != fb::Activation::NONE)) {
    return -1;
  }
  const int a = add.inputs[0], b = add.inputs[1];
  if (a < 0 || b < 0 || (a == y) == (b == y)) return -1;  // y itself, once
  const int addend = a == y ? b : a;
  const LTensor& z = method.tensors[static_cast<size_t>(add.outputs[0])];
  const LTensor& c = method.tensors[static_cast<size_t>(addend)];
  if (z.storage == Storage::kAlias || z.dtype != DType::FLOAT32 || z.shape != out.shape ||
      !same_device(z.device, out.device) || c.dtype != DType::FLOAT32 || !same_device(c.device, out.device) ||
      shape_numel(c.shape) < 1 || !broadcasts_along_leading_axes(c.shape, out.shape)) {
    return -1;
  }
  // The addend holds its value from before the collective to the Add.
  const int addend_root = method.root(addend);
  for (size_t k = at; k < reader; ++k) {
    if (writes_root(method, method.instructions[k], addend_root)) return -1;
  }
  // The Add's output is not touched before the Add (it is written there).
  const int z_root = method.root(add.outputs[0]);
  for (size_t k = at; k < reader; ++k) {
    if (reads_root(method, method.instructions[k], z_root) || writes_root(method, method.instructions[k], z_root)) {
      return -1;
    }
  }
  *out_add = reader;
  return addend;
}

}  // namespace

int fuse_all_reduce_addends(LMethod& method) {
  int fused = 0;
  for (size_t i = 0; i < method.instructions.size(); ++i) {
    LInstruction& ins = method.instructions[i];
    if (ins.kind != LInstruction::Kind::kCollective) continue;
    DeviceAllReduce kernels;
    if (!kernels_refuse(method, ins, group_size(method, ins.group), &kernels).empty()) continue;
    while (ins.inputs.size() < 1 + kMaxCollectiveAddends) {
      size_t add = 0;
      const int addend = fusable_add(method, i, &add);
      if (addend < 0) break;
      LInstruction& adder = method.instructions[add];
      ins.inputs.push_back(addend);
      ins.outputs[0] = adder.outputs[0];
      ins.fused_adds.push_back(adder.name);
      method.instructions.erase(method.instructions.begin() + static_cast<std::ptrdiff_t>(add));
      ++fused;
    }
  }
  return fused;
}

}  // namespace kiln::planner
