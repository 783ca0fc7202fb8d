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

  bool allowed(const std::string& op) const {
    return !options_.ops.has_value() || options_.ops->count(op) != 0;
  }

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
    // Rule 2: no other operand of k reaches the same bytes.
    for (size_t j = 0; j < ins.inputs.size(); ++j) {
      if (j != i && ins.inputs[j] >= 0 && method_.root(ins.inputs[j]) == root) return false;
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
