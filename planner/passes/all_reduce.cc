#include "passes/all_reduce.h"

#include <algorithm>
#include <map>

#include "core/device.h"
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
  const bool operand_dies = !lives_after(method, method.root(input), at);
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
                         : "--allreduce two-shot, but the operand is read after the call "
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
           ", but the operand is read after the call (two-shot writes its slice over it)";
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
    const BackendPlanner* backend =
        input.device.type() == fb::DeviceType::CPU ? nullptr : backend_planner_for(input.device.type());
    const DeviceAllReduce kernels = backend != nullptr && backend->runs_collectives()
                                        ? backend->device_all_reduce(choice.bytes)
                                        : DeviceAllReduce{};
    if (kernels.blocks == 0) {
      choice.why = "on the host";
    } else if (choice.ranks < 2) {
      choice.why = "one rank: a copy";
    } else if (choice.ranks > kernels.max_ranks) {
      choice.why = "more ranks than the kernels address (" + std::to_string(kernels.max_ranks) + ")";
    } else if (input.dtype != DType::FLOAT32) {
      choice.why = "the kernels reduce float32 only";
    } else {
      ins.algorithm = pick(method, i, mode, choice.ranks, &choice.why);
      ins.blocks = kernels.blocks;
      ins.state_bytes = kernels.state_bytes;
      uint64_t& need = signals[method.tensors[static_cast<size_t>(method.root(ins.inputs.at(0)))].arena];
      need = std::max(need, kernels.signal_bytes);
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

}  // namespace kiln::planner
