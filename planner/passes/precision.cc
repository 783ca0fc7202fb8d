#include "passes/precision.h"

#include <map>
#include <memory>
#include <vector>

#include "kiln/kernels/float16.h"
#include "kiln/schema/device.h"

namespace kiln::planner {
namespace {

using Kind = LInstruction::Kind;

// Kernels whose results need FP32 storage: Softmax and LogSoftmax
// (exponentials of differences, and sums of them), LayerNormalization
// (mean and variance of a row), the reductions (statistics: a 16-bit sum
// of many elements, or of their squares, loses most of its digits or
// overflows).
bool keeps_fp32(const std::string& op) {
  return op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" || op.rfind("Reduce", 0) == 0;
}

// Kernels that only move elements: in 16 bits only where what they move
// already is (else a Cast in and a Cast out would round bytes that were
// only being moved).
bool moves_only(const std::string& op) {
  return op == "Copy" || op == "Transpose" || op == "Slice" || op == "Concat" || op == "Split";
}

bool is_device_kernel(const LInstruction& ins) { return ins.kind == Kind::kKernel && !is_host(ins.device); }

HostTensor converted(const HostTensor& c, DType storage) {
  HostTensor out(storage, c.shape);
  const float* src = c.data<float>();
  uint16_t* dst = out.data<uint16_t>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    dst[i] = storage == DType::FLOAT16 ? float_to_half(src[i]) : float_to_bfloat16(src[i]);
  }
  return out;
}

class Rewriter {
 public:
  Rewriter(LMethod& method, LProgram& program, DType storage)
      : method_(method), program_(program), storage_(storage), suffix_(storage == DType::FLOAT16 ? "/fp16" : "/bf16") {
    stats_.storage = storage;
  }

  PrecisionStats run(const PrecisionOptions& options) {
    classify(options);
    mark_accesses();
    const size_t tensors = method_.tensors.size();
    twin_.assign(tensors, -1);
    before_.assign(method_.instructions.size(), {});
    after_.assign(method_.instructions.size(), {});
    for (size_t t = 0; t < tensors; ++t) place(static_cast<int>(t));
    rebuild();
    return stats_;
  }

 private:
  // Step 1: which device kernels run on 16-bit storage.
  void classify(const PrecisionOptions& options) {
    const auto& list = method_.instructions;
    low_.assign(list.size(), false);
    std::set<std::string> named;
    for (size_t k = 0; k < list.size(); ++k) {
      const LInstruction& ins = list[k];
      if (!is_device_kernel(ins) || ins.op == "Cast") continue;
      named.insert(ins.name);
      bool floats = true;
      for (int t : ins.inputs) floats = floats && (t < 0 || dtype(t) == DType::FLOAT32);
      for (int t : ins.outputs) floats = floats && dtype(t) == DType::FLOAT32;
      low_[k] = floats && !keeps_fp32(ins.op) && options.keep_fp32.count(ins.name) == 0;
    }
    std::vector<bool> low_written(method_.tensors.size(), false);
    for (size_t k = 0; k < list.size(); ++k) {
      if (low_[k] && moves_only(list[k].op)) {
        bool moves_16bit = false;
        for (int t : list[k].inputs) moves_16bit = moves_16bit || (t >= 0 && low_written[static_cast<size_t>(t)]);
        low_[k] = moves_16bit;
      }
      for (int t : list[k].outputs) low_written[static_cast<size_t>(t)] = low_[k];
    }
    for (const std::string& n : options.keep_fp32) {
      if (named.count(n) == 0) stats_.named_unknown.insert(n);
    }
    // A 16-bit kernel may not share an output with an FP32 writer.
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<bool> other_writer(method_.tensors.size(), false);
      for (size_t k = 0; k < list.size(); ++k) {
        if (low_[k]) continue;
        for (int t : list[k].outputs) other_writer[static_cast<size_t>(t)] = true;
      }
      for (const LInstruction& ins : method_.init_instructions) {
        for (int t : ins.outputs) other_writer[static_cast<size_t>(t)] = true;
      }
      for (size_t k = 0; k < list.size(); ++k) {
        if (!low_[k]) continue;
        for (int t : list[k].outputs) {
          if (other_writer[static_cast<size_t>(t)]) low_[k] = false;
        }
        changed = changed || !low_[k];
      }
    }
    for (size_t k = 0; k < list.size(); ++k) {
      if (!is_device_kernel(list[k]) || list[k].op == "Cast") continue;
      ++(low_[k] ? stats_.kernels_16bit : stats_.kernels_fp32);
    }
  }

  // Step 2: who touches each float32 device tensor.
  void mark_accesses() {
    const size_t n = method_.tensors.size();
    low_reader_.assign(n, -1);
    low_writer_.assign(n, -1);
    other_.assign(n, false);
    const auto& list = method_.instructions;
    for (size_t k = 0; k < list.size(); ++k) {
      for (int t : list[k].inputs) {
        if (t < 0) continue;
        if (!low_[k]) other_[static_cast<size_t>(t)] = true;
        if (low_[k] && low_reader_[static_cast<size_t>(t)] < 0)
          low_reader_[static_cast<size_t>(t)] = static_cast<int>(k);
      }
      for (int t : list[k].outputs) {
        if (!low_[k]) other_[static_cast<size_t>(t)] = true;
        if (low_[k]) low_writer_[static_cast<size_t>(t)] = static_cast<int>(k);
      }
    }
    // A constant's upload at load is no FP32 access: the constant can be
    // converted here instead (upload_converted).
    upload_.assign(n, -1);
    for (size_t k = 0; k < method_.init_instructions.size(); ++k) {
      const LInstruction& ins = method_.init_instructions[k];
      const LTensor& source = method_.tensors[static_cast<size_t>(ins.inputs[0])];
      const size_t t = static_cast<size_t>(ins.outputs[0]);
      if (ins.kind == Kind::kCopy && source.storage == Storage::kConstant && source.dtype == DType::FLOAT32 &&
          upload_[t] < 0) {
        upload_[t] = static_cast<int>(k);
      } else {
        other_[t] = true;
      }
    }
    for (size_t t = 0; t < n; ++t) {
      if (method_.tensors[t].storage != Storage::kPlanned) other_[t] = true;
    }
  }

  // Steps 2 and 3 for tensor `t`.
  void place(int t) {
    const size_t i = static_cast<size_t>(t);
    if (low_reader_[i] < 0 && low_writer_[i] < 0) return;
    ++stats_.tensors_16bit;
    if (!other_[i]) {
      method_.tensors[i].dtype = storage_;
      if (upload_[i] >= 0) {
        LInstruction& upload = method_.init_instructions[static_cast<size_t>(upload_[i])];
        upload.inputs[0] = converted_constant(upload.inputs[0]);
      }
      return;
    }
    LTensor twin;
    twin.name = method_.tensors[i].name + suffix_;
    twin.dtype = storage_;
    twin.shape = method_.tensors[i].shape;
    twin.device = method_.tensors[i].device;
    const int id = method_.add_tensor(std::move(twin));
    twin_[i] = id;
    if (low_writer_[i] >= 0) {
      after_[static_cast<size_t>(low_writer_[i])].push_back(cast(id, t, low_writer_[i]));
      return;
    }
    if (upload_[i] >= 0) {
      // Uploaded at load as well, from the constant converted here.
      LInstruction copy = method_.init_instructions[static_cast<size_t>(upload_[i])];
      copy.inputs = {converted_constant(copy.inputs[0])};
      copy.outputs = {id};
      method_.tensors[static_cast<size_t>(id)].persistent = true;
      method_.init_instructions.push_back(std::move(copy));
      return;
    }
    before_[static_cast<size_t>(low_reader_[i])].push_back(cast(t, id, low_reader_[i]));
  }

  // The constant tensor `source` (float32) converted to 16 bits, made once.
  int converted_constant(int source) {
    auto it = converted_.find(source);
    if (it != converted_.end()) return it->second;
    LTensor low = method_.tensors[static_cast<size_t>(source)];
    const HostTensor& bytes = *program_.constants[static_cast<size_t>(low.constant)];
    low.name += suffix_;
    low.dtype = storage_;
    low.constant = static_cast<int>(program_.constants.size());
    program_.constants.push_back(std::make_shared<HostTensor>(converted(bytes, storage_)));
    ++stats_.constants_converted;
    const int id = method_.add_tensor(std::move(low));
    converted_.emplace(source, id);
    return id;
  }

  LInstruction cast(int from, int to, int at) {
    const LInstruction& ins = method_.instructions[static_cast<size_t>(at)];
    LInstruction c;
    c.kind = Kind::kKernel;
    c.op = "Cast";
    c.inputs = {from};
    c.outputs = {to};
    c.name = ins.name;
    c.source_op = "Cast";
    c.device = ins.device;
    ++stats_.casts;
    return c;
  }

  // The instruction list with the Casts in place and the 16-bit kernels
  // reading and writing the twins.
  void rebuild() {
    std::vector<LInstruction> list;
    auto& old = method_.instructions;
    for (size_t k = 0; k < old.size(); ++k) {
      for (LInstruction& c : before_[k]) list.push_back(std::move(c));
      if (low_[k]) {
        for (int& t : old[k].inputs) {
          if (t >= 0 && twin_[static_cast<size_t>(t)] >= 0) t = twin_[static_cast<size_t>(t)];
        }
        for (int& t : old[k].outputs) {
          if (twin_[static_cast<size_t>(t)] >= 0) t = twin_[static_cast<size_t>(t)];
        }
        // Its float scratch (a convolution's column buffer) holds elements
        // of its storage too; only this call touches it.
        for (int t : old[k].scratch) {
          if (dtype(t) != DType::FLOAT32) continue;
          method_.tensors[static_cast<size_t>(t)].dtype = storage_;
          ++stats_.tensors_16bit;
        }
      }
      list.push_back(std::move(old[k]));
      for (LInstruction& c : after_[k]) list.push_back(std::move(c));
    }
    old = std::move(list);
  }

  DType dtype(int t) const { return method_.tensors[static_cast<size_t>(t)].dtype; }

  LMethod& method_;
  LProgram& program_;
  const DType storage_;
  const std::string suffix_;
  PrecisionStats stats_;
  std::vector<bool> low_;         // per instruction: runs on 16-bit storage
  std::vector<int> low_reader_;   // per tensor: the first 16-bit kernel reading it, or -1
  std::vector<int> low_writer_;   // per tensor: the 16-bit kernel writing it, or -1
  std::vector<bool> other_;       // per tensor: touched by anything else
  std::vector<int> upload_;       // per tensor: the init copy uploading a float32 constant into it, or -1
  std::vector<int> twin_;         // per tensor: its 16-bit twin, or -1
  std::map<int, int> converted_;  // constant tensor -> its converted constant
  std::vector<std::vector<LInstruction>> before_, after_;  // Casts around each instruction
};

}  // namespace

PrecisionStats store_16bit(LMethod& method, LProgram& program, const PrecisionOptions& options) {
  if (options.precision != "fp16" && options.precision != "bf16") {
    PrecisionStats none;
    none.named_unknown = options.keep_fp32;
    return none;
  }
  Rewriter rewriter(method, program, options.precision == "fp16" ? DType::FLOAT16 : DType::BFLOAT16);
  return rewriter.run(options);
}

}  // namespace kiln::planner
