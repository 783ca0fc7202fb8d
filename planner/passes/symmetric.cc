#include "passes/symmetric.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/device.h"

namespace kiln::planner {
namespace {

LTensor symmetric_copy_of(const LTensor& source, int group, const char* suffix) {
  LTensor t;
  t.name = source.name + suffix;
  t.dtype = source.dtype;
  t.shape = source.shape;
  t.device = source.device;
  t.symmetric_group = group;
  return t;
}

LInstruction copy_instruction(int src, int dst, const LInstruction& collective) {
  LInstruction copy;
  copy.kind = LInstruction::Kind::kCopy;
  copy.inputs = {src};
  copy.outputs = {dst};
  copy.name = collective.name;
  copy.source_op = "Copy";
  return copy;
}

}  // namespace

SymmetricStats place_symmetric(LMethod& method) {
  SymmetricStats stats;
  std::vector<LInstruction> entry;  // (b) copies, run first
  std::vector<LInstruction> body;
  std::map<std::pair<int, int>, int> input_buffer;  // (method input root, group) -> symmetric tensor
  body.reserve(method.instructions.size());
  for (LInstruction& ins : method.instructions) {
    if (ins.kind != LInstruction::Kind::kCollective) {
      body.push_back(std::move(ins));
      continue;
    }
    ++stats.collectives;
    const std::string device = device_str(ins.device);
    if (std::find(stats.devices.begin(), stats.devices.end(), device) == stats.devices.end()) {
      stats.devices.push_back(device);
    }
    const int group = static_cast<int>(ins.group);
    int& operand = ins.inputs.at(0);
    const int root = method.root(operand);
    LTensor& base = method.tensors[static_cast<size_t>(root)];
    const bool planned_here = base.storage == Storage::kPlanned && !base.persistent &&
                              (base.symmetric_group < 0 || base.symmetric_group == group);
    if (planned_here) {
      base.symmetric_group = group;
      ++stats.zero_copy;
      stats.zero_copy_bytes += method.tensors[static_cast<size_t>(operand)].nbytes();
    } else if (base.storage == Storage::kUser && base.is_input) {
      const auto key = std::make_pair(root, group);
      auto it = input_buffer.find(key);
      if (it == input_buffer.end()) {
        const int buffer =
            method.add_tensor(symmetric_copy_of(method.tensors[static_cast<size_t>(root)], group, "@symmetric"));
        it = input_buffer.emplace(key, buffer).first;
        entry.push_back(copy_instruction(root, buffer, ins));
        ++stats.input_buffers;
        ++stats.input_copies;
        stats.input_buffer_bytes += method.tensors[static_cast<size_t>(buffer)].nbytes();
      }
      operand = it->second;
    } else {
      const LTensor& source = method.tensors[static_cast<size_t>(operand)];
      const int staged = method.add_tensor(symmetric_copy_of(source, group, "@symmetric_copy"));
      body.push_back(copy_instruction(operand, staged, ins));
      ++stats.explicit_copies;
      stats.explicit_copy_bytes += method.tensors[static_cast<size_t>(staged)].nbytes();
      operand = staged;
    }
    body.push_back(std::move(ins));
  }
  if (stats.collectives == 0) {
    method.instructions = std::move(body);
    return stats;
  }
  method.instructions = std::move(entry);
  for (LInstruction& ins : body) method.instructions.push_back(std::move(ins));
  return stats;
}

}  // namespace kiln::planner
