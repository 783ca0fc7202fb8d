#include "passes/inplace.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kiln/schema/device.h"
#include "ops/host_kernels.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

class InplacePass {
 public:
  InplacePass(LMethod& method, const InplaceOptions& options) : method_(method), options_(options) {}

  InplaceStats run() {
    if (allowed("Concat")) place_concats();
    compute_last_uses();
    std::vector<bool> remove(method_.instructions.size(), false);
    for (size_t k = 0; k < method_.instructions.size(); ++k) {
      LInstruction& ins = method_.instructions[k];
      if (ins.kind != LInstruction::Kind::kKernel || ins.outputs.empty()) continue;
      if (!allowed(ins.source_op)) continue;
      if (ins.op == "Copy" && view_ops().count(ins.source_op) && try_view(ins)) {
        remove[k] = true;
        ++stats_.views;
        continue;
      }
      const uint32_t declared = declared_inputs(ins);
      if (declared == 0) continue;
      for (size_t i = 0; i < ins.inputs.size() && i < 32; ++i) {
        if ((declared & (1u << i)) == 0) continue;
        if (try_inplace(static_cast<int>(k), ins, i)) {
          ++stats_.outputs_in_place;
          // A copy onto its own bytes has nothing left to do.
          if (ins.op == "Copy") remove[k] = true;
          break;
        }
      }
    }
    std::vector<LInstruction> kept;
    for (size_t k = 0; k < method_.instructions.size(); ++k) {
      if (!remove[k]) kept.push_back(std::move(method_.instructions[k]));
    }
    method_.instructions = std::move(kept);
    return stats_;
  }

 private:
  static bool on_cpu(const fb::Device& device) { return device.type() == fb::DeviceType::CPU; }

  // Bytes a block may be placed in: planned CPU memory of the run (not a
  // constant uploaded at load, not a collective's symmetric operand).
  bool plain_cpu_bytes(int t) const {
    const LTensor& tensor = method_.tensors[static_cast<size_t>(t)];
    return tensor.storage == Storage::kPlanned && !tensor.persistent && tensor.symmetric_group < 0 &&
           on_cpu(tensor.device) && !collective_operand_[static_cast<size_t>(t)];
  }

  // Concat in place (see the header): later Concats first.
  void place_concats() {
    const size_t n = method_.tensors.size();
    std::vector<int> writers(n, 0);  // instructions writing each tensor
    collective_operand_.assign(n, false);
    for (const auto* list : {&method_.instructions, &method_.init_instructions}) {
      for (const LInstruction& ins : *list) {
        for (int t : ins.outputs) {
          if (t >= 0) ++writers[static_cast<size_t>(t)];
        }
        for (int t : ins.scratch) {
          if (t >= 0) ++writers[static_cast<size_t>(t)];
        }
        if (ins.kind != LInstruction::Kind::kCollective) continue;
        for (const auto* operands : {&ins.inputs, &ins.outputs}) {
          for (int t : *operands) {
            if (t >= 0) collective_operand_[static_cast<size_t>(t)] = true;
          }
        }
      }
    }
    // The one kernel writing each tensor, where it is a CPU kernel (-1: none
    // such, or written by something else too).
    cpu_writer_.assign(n, -1);
    for (size_t k = 0; k < method_.instructions.size(); ++k) {
      const LInstruction& ins = method_.instructions[k];
      if (ins.kind != LInstruction::Kind::kKernel || !on_cpu(ins.device)) continue;
      for (int t : ins.outputs) {
        if (t >= 0 && writers[static_cast<size_t>(t)] == 1) cpu_writer_[static_cast<size_t>(t)] = static_cast<int>(k);
      }
    }
    std::vector<bool> remove(method_.instructions.size(), false);
    std::vector<std::vector<LInstruction>> copies(method_.instructions.size());
    for (size_t k = method_.instructions.size(); k-- > 0;) {
      const LInstruction& ins = method_.instructions[k];
      if (ins.kind != LInstruction::Kind::kKernel || ins.op != "Concat" || !allowed(ins.source_op) ||
          !on_cpu(ins.device) || ins.outputs.size() != 1 || ins.params.AsAxisParams() == nullptr) {
        continue;
      }
      // Blocks at offsets that move with a bounded input's size stay copies.
      const auto& varying = options_.varying_tensors;
      if (varying.count(ins.outputs[0]) != 0 ||
          std::any_of(ins.inputs.begin(), ins.inputs.end(), [&](int t) { return varying.count(t) != 0; })) {
        continue;
      }
      remove[k] = place_concat(static_cast<int>(k), copies[k]);
    }
    std::vector<LInstruction> kept;
    for (size_t k = 0; k < method_.instructions.size(); ++k) {
      for (LInstruction& copy : copies[k]) kept.push_back(std::move(copy));
      if (!remove[k]) kept.push_back(std::move(method_.instructions[k]));
    }
    method_.instructions = std::move(kept);
  }

  // One Concat at instruction k: true when the instruction goes (its
  // output became a view, or its inputs are all in their blocks, or copied
  // there by the Copy instructions left in `out_copies`).
  bool place_concat(int k, std::vector<LInstruction>& out_copies) {
    const LInstruction& ins = method_.instructions[static_cast<size_t>(k)];
    const int out = ins.outputs[0];
    if (out < 0) return false;
    const LTensor& wide = method_.tensors[static_cast<size_t>(out)];
    const int axis = ins.params.AsAxisParams()->axis;
    if (axis < 0 || static_cast<size_t>(axis) >= wide.shape.size() || !on_cpu(wide.device)) return false;
    for (int d = 0; d < axis; ++d) {
      if (wide.shape[static_cast<size_t>(d)] != 1) return false;
    }
    // Each input's block: the bytes of the inputs before it.
    std::vector<uint64_t> offsets;
    uint64_t offset = 0;
    for (int t : ins.inputs) {
      if (t < 0) return false;
      const LTensor& piece = method_.tensors[static_cast<size_t>(t)];
      if (piece.dtype != wide.dtype) return false;
      offsets.push_back(offset);
      offset += piece.nbytes();
    }
    if (offset != wide.nbytes()) return false;
    if (try_concat_view(ins, offsets)) return true;
    // The output's bytes: its own, or a block of a later Concat's.
    const int root = method_.root(out);
    if (!plain_cpu_bytes(root) || (root != out && collective_operand_[static_cast<size_t>(out)])) return false;
    const uint64_t base = method_.root_offset(out);
    std::vector<size_t> left;
    int in_block = 0;  // inputs in their blocks (placed now or before)
    std::vector<int> seen;
    for (size_t i = 0; i < ins.inputs.size(); ++i) {
      const int t = ins.inputs[i];
      const bool again = std::find(seen.begin(), seen.end(), t) != seen.end();
      seen.push_back(t);
      if (method_.root(t) == root && method_.root_offset(t) == base + offsets[i] && !again) {
        ++in_block;
        continue;
      }
      if (!again && t != out && plain_cpu_bytes(t) && cpu_writer_[static_cast<size_t>(t)] >= 0 &&
          cpu_writer_[static_cast<size_t>(t)] < k) {
        LTensor& piece = method_.tensors[static_cast<size_t>(t)];
        piece.storage = Storage::kAlias;
        piece.alias_of = out;
        piece.alias_offset = offsets[i];
        ++in_block;
        ++stats_.concat_pieces;
        stats_.concat_bytes += piece.nbytes();
        continue;
      }
      left.push_back(i);
    }
    if (in_block == 0) return false;
    if (left.empty()) {
      ++stats_.concats_removed;
      return true;
    }
    // The rest copied into their blocks, one Copy each (an input already in
    // its block is not written again: the Concat kernel would write its
    // output over that input).
    const std::string wide_name = wide.name;
    const fb::Device device = wide.device;
    for (size_t i : left) {
      LTensor block;
      block.name = wide_name + "/concat_input" + std::to_string(i);
      block.dtype = method_.tensors[static_cast<size_t>(ins.inputs[i])].dtype;
      block.shape = method_.tensors[static_cast<size_t>(ins.inputs[i])].shape;
      block.device = device;
      block.storage = Storage::kAlias;
      block.alias_of = out;
      block.alias_offset = offsets[i];
      const int dst = method_.add_tensor(std::move(block));
      LInstruction copy;
      copy.kind = LInstruction::Kind::kKernel;
      copy.op = "Copy";
      copy.inputs = {ins.inputs[i]};
      copy.outputs = {dst};
      copy.name = ins.name;
      copy.source_op = ins.source_op;
      copy.device = ins.device;
      out_copies.push_back(std::move(copy));
    }
    // add_tensor may have moved the tensors; sizes of the per-tensor tables
    // follow (the blocks are written once, by their Copy, on the CPU).
    collective_operand_.resize(method_.tensors.size(), false);
    cpu_writer_.resize(method_.tensors.size(), -1);
    return true;
  }

  // A Concat whose inputs already lie consecutively, in order, in one base
  // (blocks of a later Concat) becomes a view of that base: nothing to copy.
  bool try_concat_view(const LInstruction& ins, const std::vector<uint64_t>& offsets) {
    const int out = ins.outputs[0];
    if (!plain_cpu_bytes(out)) return false;
    const int first = ins.inputs[0];
    const int root = method_.root(first);
    if (root == first || root == out || !plain_cpu_bytes(root)) return false;
    const uint64_t start = method_.root_offset(first);
    for (size_t i = 0; i < ins.inputs.size(); ++i) {
      const int t = ins.inputs[i];
      if (method_.root(t) != root || method_.root_offset(t) != start + offsets[i]) return false;
    }
    LTensor& view = method_.tensors[static_cast<size_t>(out)];
    view.storage = Storage::kAlias;
    view.alias_of = root;
    view.alias_offset = start;
    ++stats_.concats_removed;
    stats_.concat_bytes += view.nbytes();
    return true;
  }

  // Inputs the kernel running `ins` may overwrite: the CPU kernel's
  // declaration, or the device backend's for that kernel name (the table
  // its runtime half checks at load).
  static uint32_t declared_inputs(const LInstruction& ins) {
    if (ins.device.type() == fb::DeviceType::CPU) {
      const KernelEntry* entry = host_kernel_registry().find(ins.op.c_str());
      return entry != nullptr ? entry->inplace_inputs : 0;
    }
    const BackendPlanner* backend = backend_planner_for(ins.device.type());
    return backend != nullptr ? backend->inplace_inputs(ins.op) : 0;
  }

  bool allowed(const std::string& op) const { return !options_.ops.has_value() || options_.ops->count(op) != 0; }

  // Last instruction touching each tensor (by itself, not through aliases).
  void compute_last_uses() {
    last_.assign(method_.tensors.size(), -1);
    for (size_t k = 0; k < method_.instructions.size(); ++k) {
      const LInstruction& ins = method_.instructions[k];
      for (const auto* list : {&ins.inputs, &ins.outputs, &ins.scratch}) {
        for (int t : *list) {
          if (t >= 0) last_[static_cast<size_t>(t)] = static_cast<int>(k);
        }
      }
    }
    // The last use of a root's bytes, over the root and its aliases so far.
    group_last_ = last_;
    for (size_t t = 0; t < method_.tensors.size(); ++t) {
      if (method_.tensors[t].storage == Storage::kAlias) join(static_cast<int>(t));
    }
  }

  // Folds tensor t's uses into its root's.
  void join(int t) {
    const size_t r = static_cast<size_t>(method_.root(t));
    group_last_[r] = std::max(group_last_[r], group_last_[static_cast<size_t>(t)]);
  }

  bool planned(int t) const { return method_.tensors[static_cast<size_t>(t)].storage == Storage::kPlanned; }

  void make_alias(int out, int base) {
    LTensor& o = method_.tensors[static_cast<size_t>(out)];
    o.storage = Storage::kAlias;
    o.alias_of = base;
    join(out);
  }

  // A view's output may always share its input's bytes: neither is written
  // again through the view. Later in-place decisions see the view's uses as
  // uses of the base.
  bool try_view(const LInstruction& ins) {
    const int in = ins.inputs.at(0), out = ins.outputs.at(0);
    const LTensor& a = method_.tensors[static_cast<size_t>(in)];
    const LTensor& b = method_.tensors[static_cast<size_t>(out)];
    if (!planned(out) || a.nbytes() != b.nbytes() || !same_device(a.device, b.device)) return false;
    make_alias(out, in);
    return true;
  }

  // Whether tensors a and b are the same elements at the same bytes (`x * x`,
  // or x and a view of it with x's shape): an element-wise kernel reads both
  // at one index before it writes that index.
  bool same_elements(int a, int b) const {
    if (a == b) return true;
    const LTensor& ta = method_.tensors[static_cast<size_t>(a)];
    const LTensor& tb = method_.tensors[static_cast<size_t>(b)];
    return method_.root_offset(a) == method_.root_offset(b) && ta.shape == tb.shape && ta.dtype == tb.dtype;
  }

  bool try_inplace(int k, const LInstruction& ins, size_t i) {
    const int in = ins.inputs[i];
    const int out = ins.outputs[0];
    if (in < 0 || in == out) return false;
    const int root = method_.root(in);
    // Rule 3: planned memory on both sides (no method input or output, no
    // constant, no constant uploaded to a device at load).
    if (!planned(root) || !planned(out) || method_.tensors[static_cast<size_t>(root)].persistent) return false;
    // Rule 4: same bytes, dtype and device.
    const LTensor& a = method_.tensors[static_cast<size_t>(in)];
    const LTensor& b = method_.tensors[static_cast<size_t>(out)];
    if (a.nbytes() != b.nbytes() || a.dtype != b.dtype || !same_device(a.device, b.device)) return false;
    // Rule 1: nothing uses these bytes after k.
    if (group_last_[static_cast<size_t>(root)] != k) return false;
    // Rule 2: no other operand of k reaches the same bytes, unless it reads
    // the very same elements through an input the kernel also declares.
    const uint32_t declared = declared_inputs(ins);
    for (size_t j = 0; j < ins.inputs.size(); ++j) {
      if (j == i || ins.inputs[j] < 0 || method_.root(ins.inputs[j]) != root) continue;
      if (!same_elements(in, ins.inputs[j]) || j >= 32 || (declared & (1u << j)) == 0) return false;
    }
    for (size_t j = 1; j < ins.outputs.size(); ++j) {
      if (method_.root(ins.outputs[j]) == root) return false;
    }
    for (int s : ins.scratch) {
      if (method_.root(s) == root) return false;
    }
    make_alias(out, in);
    return true;
  }

  LMethod& method_;
  const InplaceOptions& options_;
  std::vector<int> last_;
  std::vector<int> group_last_;
  std::vector<bool> collective_operand_;
  std::vector<int> cpu_writer_;
  InplaceStats stats_;
};

}  // namespace

const std::set<std::string>& view_ops() {
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  return ops;
}

InplaceStats apply_inplace(LMethod& method, const InplaceOptions& options) {
  if (!options.enabled) return {};
  return InplacePass(method, options).run();
}

}  // namespace kiln::planner
