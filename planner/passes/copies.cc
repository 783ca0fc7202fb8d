#include "passes/copies.h"

#include <cstddef>
#include <vector>

#include "kiln/schema/device.h"

namespace kiln::planner {

int remove_round_trips(LMethod& method) {
  auto& list = method.instructions;
  // Which instruction writes each tensor (lowered code is single-assignment).
  std::vector<int> writer(method.tensors.size(), -1);
  for (size_t k = 0; k < list.size(); ++k) {
    for (int t : list[k].outputs) writer[static_cast<size_t>(t)] = static_cast<int>(k);
  }
  // The tensor whose bytes `t` holds unchanged: follow copies and view
  // kernels back to where the bytes were made.
  auto origin = [&](int t) {
    for (;;) {
      const int k = writer[static_cast<size_t>(t)];
      if (k < 0) return t;
      const LInstruction& ins = list[static_cast<size_t>(k)];
      const bool moves_bytes =
          ins.kind == LInstruction::Kind::kCopy || (ins.kind == LInstruction::Kind::kKernel && ins.op == "Copy");
      if (!moves_bytes) return t;
      const int src = ins.inputs[0];
      if (method.tensors[static_cast<size_t>(src)].nbytes() != method.tensors[static_cast<size_t>(t)].nbytes()) {
        return t;
      }
      t = src;
    }
  };
  std::vector<bool> drop(list.size(), false);
  std::vector<int> replace(method.tensors.size(), -1);
  int removed = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const LInstruction& up = list[k];
    if (up.kind != LInstruction::Kind::kCopy) continue;
    const int host = up.inputs[0], dev = up.outputs[0];
    const LTensor& dev_t = method.tensors[static_cast<size_t>(dev)];
    if (!is_host(method.tensors[static_cast<size_t>(host)].device) || is_host(dev_t.device) ||
        dev_t.storage != Storage::kPlanned) {
      continue;
    }
    const int source = origin(host);
    const LTensor& src_t = method.tensors[static_cast<size_t>(source)];
    if (source == host || !same_device(src_t.device, dev_t.device) || src_t.dtype != dev_t.dtype) continue;
    // These bytes already exist on the device: read the original.
    replace[static_cast<size_t>(dev)] = source;
    drop[k] = true;
    ++removed;
  }
  if (removed == 0) return 0;
  std::vector<LInstruction> kept;
  for (size_t k = 0; k < list.size(); ++k) {
    if (drop[k]) continue;
    for (int& t : list[k].inputs) {
      if (t >= 0 && replace[static_cast<size_t>(t)] >= 0) t = replace[static_cast<size_t>(t)];
    }
    kept.push_back(std::move(list[k]));
  }
  list = std::move(kept);
  // The copy down and host views that only fed the removed copy are dead now.
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> read(method.tensors.size(), false);
    for (const LInstruction& ins : list) {
      for (int t : ins.inputs) {
        if (t >= 0) read[static_cast<size_t>(t)] = true;
      }
    }
    for (size_t k = list.size(); k-- > 0;) {
      const LInstruction& ins = list[k];
      const bool moves_bytes =
          ins.kind == LInstruction::Kind::kCopy || (ins.kind == LInstruction::Kind::kKernel && ins.op == "Copy");
      const LTensor& out = method.tensors[static_cast<size_t>(ins.outputs[0])];
      if (moves_bytes && !read[static_cast<size_t>(ins.outputs[0])] && out.storage == Storage::kPlanned) {
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(k));
        changed = true;
      }
    }
  }
  return removed;
}

void cluster_copies(LMethod& method) {
  auto& list = method.instructions;
  for (size_t p = 0; p < list.size(); ++p) {
    if (list[p].kind != LInstruction::Kind::kCopy) continue;
    const fb::Device dst = method.tensors[static_cast<size_t>(list[p].outputs[0])].device;
    if (is_host(dst)) continue;
    // The run of dst's kernels and copies into dst that ends here.
    size_t start = p;
    while (start > 0) {
      const LInstruction& prev = list[start - 1];
      const bool same_run = (prev.kind == LInstruction::Kind::kKernel && same_device(prev.device, dst)) ||
                            (prev.kind == LInstruction::Kind::kCopy &&
                             same_device(method.tensors[static_cast<size_t>(prev.outputs[0])].device, dst));
      if (!same_run) break;
      --start;
    }
    if (start == p) continue;
    // The copy may move only above instructions that do not write its source.
    const int source_root = method.root(list[p].inputs[0]);
    bool blocked = false;
    for (size_t k = start; k < p && !blocked; ++k) {
      for (int out : list[k].outputs) blocked = blocked || method.root(out) == source_root;
    }
    if (blocked) continue;
    LInstruction copy = std::move(list[p]);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(p));
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(start), std::move(copy));
  }
}

void compact_tensors(LMethod& method) {
  const size_t n = method.tensors.size();
  std::vector<bool> used(n, false);
  auto mark = [&](int t) {
    // A tensor in use keeps its whole alias chain.
    while (t >= 0 && !used[static_cast<size_t>(t)]) {
      used[static_cast<size_t>(t)] = true;
      const LTensor& tensor = method.tensors[static_cast<size_t>(t)];
      t = tensor.storage == Storage::kAlias ? tensor.alias_of : -1;
    }
  };
  for (const auto* list : {&method.instructions, &method.init_instructions}) {
    for (const LInstruction& ins : *list) {
      for (int t : ins.inputs) mark(t);
      for (int t : ins.outputs) mark(t);
      for (int t : ins.scratch) mark(t);
    }
  }
  for (int t : method.inputs) mark(t);
  for (int t : method.outputs) mark(t);
  std::vector<int> renumber(n, -1);
  std::vector<LTensor> kept;
  for (size_t t = 0; t < n; ++t) {
    if (!used[t]) continue;
    renumber[t] = static_cast<int>(kept.size());
    kept.push_back(std::move(method.tensors[t]));
  }
  if (kept.size() == n) {
    method.tensors = std::move(kept);
    return;
  }
  auto fix = [&](int& t) {
    if (t >= 0) t = renumber[static_cast<size_t>(t)];
  };
  for (auto* list : {&method.instructions, &method.init_instructions}) {
    for (LInstruction& ins : *list) {
      for (int& t : ins.inputs) fix(t);
      for (int& t : ins.outputs) fix(t);
      for (int& t : ins.scratch) fix(t);
    }
  }
  for (int& t : method.inputs) fix(t);
  for (int& t : method.outputs) fix(t);
  for (LTensor& t : kept) {
    if (t.storage == Storage::kAlias) fix(t.alias_of);
  }
  method.tensors = std::move(kept);
}

}  // namespace kiln::planner
