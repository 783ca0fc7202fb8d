#include "emit/emitter.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/device.h"
#include "core/error.h"
#include "kiln/schema/arena_layout.h"
#include "kiln/schema/bookkeeping.h"
#include "kiln/schema/delegate_generated.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

fb::DType to_fb(DType d) { return d; }

std::unique_ptr<fb::PlannedStorageT> planned(const LTensor& t) {
  auto p = std::make_unique<fb::PlannedStorageT>();
  p->arena = static_cast<uint32_t>(t.arena);
  p->offset = t.offset;
  return p;
}

// Stores each distinct constant once in the segment.
class SegmentWriter {
 public:
  uint32_t add(const HostTensor& tensor) {
    const std::string key(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    while (data_.size() % kSegmentAlignment != 0) data_.push_back('\0');
    refs_.emplace_back(data_.size(), tensor.bytes.size());
    data_ += key;
    const uint32_t id = static_cast<uint32_t>(refs_.size() - 1);
    index_.emplace(key, id);
    return id;
  }
  const std::string& data() const { return data_; }
  const std::vector<fb::DataRef>& refs() const { return refs_; }

 private:
  std::string data_;
  std::vector<fb::DataRef> refs_;
  std::unordered_map<std::string, uint32_t> index_;
};

std::unique_ptr<fb::InstructionT> copy_instruction(const LInstruction& ins) {
  auto instruction = std::make_unique<fb::InstructionT>();
  instruction->name = ins.name;
  fb::CopyCallT copy;
  copy.src = static_cast<uint32_t>(ins.inputs.at(0));
  copy.dst = static_cast<uint32_t>(ins.outputs.at(0));
  instruction->kind.Set(std::move(copy));
  return instruction;
}

fb::KernelCallT kernel_call(const LInstruction& ins, uint32_t op) {
  fb::KernelCallT call;
  call.op = op;
  call.inputs.assign(ins.inputs.begin(), ins.inputs.end());
  call.outputs.assign(ins.outputs.begin(), ins.outputs.end());
  call.scratch.assign(ins.scratch.begin(), ins.scratch.end());
  call.params = ins.params;
  return call;
}

// Index of `name` in an operator table, added on first use.
uint32_t operator_index(std::vector<std::unique_ptr<fb::OperatorT>>& operators, const std::string& name) {
  for (size_t i = 0; i < operators.size(); ++i) {
    if (operators[i]->name == name) return static_cast<uint32_t>(i);
  }
  auto op = std::make_unique<fb::OperatorT>();
  op->name = name;
  operators.push_back(std::move(op));
  return static_cast<uint32_t>(operators.size() - 1);
}

// Emits instructions [begin, end) of `method`, all kernels on one device, as
// one delegate and the call of it.
void emit_delegate(const LMethod& method, size_t begin, size_t end, fb::MethodT& out) {
  const auto& list = method.instructions;
  const fb::Device device = list[begin].device;
  const BackendPlanner* backend = backend_planner_for(device.type());
  if (backend == nullptr) {
    fail("internal error: kernels on ", device_str(device), " but no backend planner serves that device");
  }
  fb::DelegateGraphT graph;
  std::vector<bool> written(method.tensors.size(), false);
  std::vector<int> inputs;
  for (size_t k = begin; k < end; ++k) {
    const LInstruction& ins = list[k];
    graph.kernels.push_back(
        std::make_unique<fb::KernelCallT>(kernel_call(ins, operator_index(graph.operators, ins.op))));
    graph.names.push_back(ins.name);
    for (int t : ins.inputs) {
      if (t >= 0 && !written[static_cast<size_t>(method.root(t))] &&
          std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
        inputs.push_back(t);
      }
    }
    for (int t : ins.outputs) written[static_cast<size_t>(method.root(t))] = true;
  }
  // Outputs: bytes written here that someone reads later (through any alias).
  std::vector<bool> read_later(method.tensors.size(), false);
  for (size_t k = end; k < list.size(); ++k) {
    for (int t : list[k].inputs) {
      if (t >= 0) read_later[static_cast<size_t>(method.root(t))] = true;
    }
  }
  for (size_t t = 0; t < method.tensors.size(); ++t) {
    if (method.tensors[t].is_output) read_later[static_cast<size_t>(method.root(static_cast<int>(t)))] = true;
  }
  std::vector<int> outputs;
  for (size_t k = begin; k < end; ++k) {
    for (int t : list[k].outputs) {
      if (read_later[static_cast<size_t>(method.root(t))] &&
          std::find(outputs.begin(), outputs.end(), t) == outputs.end()) {
        outputs.push_back(t);
      }
    }
  }
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(fb::DelegateGraph::Pack(builder, &graph), fb::DelegateGraphIdentifier());
  auto delegate = std::make_unique<fb::DelegateT>();
  delegate->backend = backend->name();
  delegate->device = std::make_unique<fb::Device>(device);
  auto spec = std::make_unique<fb::CompileSpecT>();
  spec->key = "device";
  const std::string where = device_str(device);
  spec->value.assign(where.begin(), where.end());
  delegate->compile_specs.push_back(std::move(spec));
  delegate->inline_blob.assign(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  DelegateSummary summary;
  summary.kernels = end - begin;
  for (size_t k = begin; k < end; ++k) {
    summary.operands += list[k].inputs.size() + list[k].outputs.size() + list[k].scratch.size();
  }
  delegate->state_bytes = backend->state_bytes(summary);
  fb::DelegateCallT call;
  call.delegate = static_cast<uint32_t>(out.delegates.size());
  call.inputs.assign(inputs.begin(), inputs.end());
  call.outputs.assign(outputs.begin(), outputs.end());
  out.delegates.push_back(std::move(delegate));
  auto instruction = std::make_unique<fb::InstructionT>();
  instruction->name = list[begin].name;
  instruction->kind.Set(std::move(call));
  out.instructions.push_back(std::move(instruction));
}

// Without names, a view of the same dtype and shape as its base that no
// instruction writes and the application does not bind (what a Cast to the
// same type, an Identity or a Reshape to the same shape leaves) carries
// nothing its base does not: its readers read the base instead, and the
// tensor is left out. Returns the method with tensors renumbered.
LMethod without_renaming_views(const LMethod& method) {
  const size_t n = method.tensors.size();
  std::vector<bool> written(n, false);
  for (const auto* list : {&method.instructions, &method.init_instructions}) {
    for (const LInstruction& ins : *list) {
      for (int t : ins.outputs) written[static_cast<size_t>(t)] = true;
      for (int t : ins.scratch) written[static_cast<size_t>(t)] = true;
    }
  }
  // Tensors whose extents follow bounded inputs keep their own formulas.
  std::vector<bool> varying(n, false);
  for (const LDynamicDim& d : method.dynamic_dims) varying[d.tensor] = true;
  std::vector<bool> dropped(n, false);
  for (size_t t = 0; t < n; ++t) {
    const LTensor& v = method.tensors[t];
    if (v.storage != Storage::kAlias || v.alias_offset != 0 || written[t] || v.is_input || v.is_output || varying[t] ||
        varying[static_cast<size_t>(v.alias_of)]) {
      continue;
    }
    const LTensor& base = method.tensors[static_cast<size_t>(v.alias_of)];
    dropped[t] = base.dtype == v.dtype && base.shape == v.shape && same_device(base.device, v.device);
  }
  std::vector<int> index(n, -1);  // the new numbering of the tensors kept
  int kept = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!dropped[t]) index[t] = kept++;
  }
  // A dropped view's readers read the first kept tensor down its chain.
  auto map = [&](int t) {
    if (t < 0) return t;
    while (dropped[static_cast<size_t>(t)]) t = method.tensors[static_cast<size_t>(t)].alias_of;
    return index[static_cast<size_t>(t)];
  };
  LMethod out = method;
  out.tensors.clear();
  for (size_t t = 0; t < n; ++t) {
    if (index[t] < 0) continue;
    LTensor tensor = method.tensors[t];
    if (tensor.storage == Storage::kAlias) tensor.alias_of = map(tensor.alias_of);
    out.tensors.push_back(std::move(tensor));
  }
  for (auto* list : {&out.instructions, &out.init_instructions}) {
    for (LInstruction& ins : *list) {
      for (auto* operands : {&ins.inputs, &ins.outputs, &ins.scratch}) {
        for (int& t : *operands) t = map(t);
      }
    }
  }
  for (int& t : out.inputs) t = map(t);
  for (int& t : out.outputs) t = map(t);
  for (LArena& arena : out.arenas) {
    for (int& t : arena.peak_tensors) t = map(t);
  }
  for (LDynamicDim& d : out.dynamic_dims) d.tensor = static_cast<uint32_t>(index[d.tensor]);
  return out;
}
}  // namespace

bool is_device_kernel(const LInstruction& ins) {
  return ins.kind == LInstruction::Kind::kKernel && ins.device.type() != fb::DeviceType::CPU;
}

size_t delegate_run_end(const std::vector<LInstruction>& list, size_t begin) {
  if (begin >= list.size() || !is_device_kernel(list[begin])) return begin;
  size_t end = begin + 1;
  while (end < list.size() && is_device_kernel(list[end]) && same_device(list[end].device, list[begin].device)) ++end;
  return end;
}

// Packs `method` and counts the packed table with the runtime's own
// definition (schema/bookkeeping.h), so the two cannot drift apart.
uint64_t method_bookkeeping_bytes(const fb::MethodT& method) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(fb::Method::Pack(builder, &method));
  return abi::method_bookkeeping_bytes(*flatbuffers::GetRoot<fb::Method>(builder.GetBufferPointer()));
}

namespace {

// The program's constants in the segment, each stored once and added on
// first use.
class ConstantTable {
 public:
  explicit ConstantTable(const LProgram& program) : program_(program), ref_(program.constants.size(), -1) {}

  // The segment entry of constant `c`.
  uint32_t index(int c) {
    if (ref_[static_cast<size_t>(c)] < 0) {
      ref_[static_cast<size_t>(c)] = static_cast<int>(segment_.add(*program_.constants[static_cast<size_t>(c)]));
    }
    return static_cast<uint32_t>(ref_[static_cast<size_t>(c)]);
  }
  // The storage of constant `c`: one segment entry, or one per rank where
  // the tensor-parallel pass split it.
  fb::ConstantStorageT storage(int c) {
    fb::ConstantStorageT out;
    out.index = index(c);
    const size_t k = static_cast<size_t>(c);
    if (k < program_.rank_constants.size() && !program_.rank_constants[k].empty()) {
      for (const auto& shard : program_.rank_constants[k]) out.ranks.push_back(segment_.add(*shard));
      out.index = out.ranks.front();
      out.group = program_.rank_group;
    }
    return out;
  }
  const SegmentWriter& segment() const { return segment_; }

 private:
  const LProgram& program_;
  SegmentWriter segment_;
  std::vector<int> ref_;  // the segment entry of each constant, -1 before its first use
};

std::unique_ptr<fb::TensorT> emit_tensor(const LTensor& t, bool names, ConstantTable& constants) {
  auto tensor = std::make_unique<fb::TensorT>();
  if (names || t.is_input || t.is_output) tensor->name = t.name;
  tensor->dtype = to_fb(t.dtype);
  tensor->shape = t.shape;
  tensor->nbytes = t.nbytes();
  tensor->device = std::make_unique<fb::Device>(t.device);
  if (t.quantized) {
    tensor->quantization = std::make_unique<fb::QuantizationT>();
    tensor->quantization->scale = t.scale;
    tensor->quantization->zero_point = t.zero_point;
  }
  switch (t.storage) {
    case Storage::kPlanned: {
      if (t.arena < 0) fail("internal error: tensor '", t.name, "' has no memory plan");
      tensor->storage.Set(*planned(t));
      break;
    }
    case Storage::kConstant: tensor->storage.Set(constants.storage(t.constant)); break;
    case Storage::kAlias: {
      fb::AliasStorageT a;
      a.base = static_cast<uint32_t>(t.alias_of);
      a.offset = t.alias_offset;
      tensor->storage.Set(std::move(a));
      break;
    }
    case Storage::kUser: {
      fb::UserStorageT u;
      if (t.user_fallback) u.fallback = planned(t);
      tensor->storage.Set(std::move(u));
      break;
    }
  }
  return tensor;
}

std::unique_ptr<fb::InstructionT> collective_instruction(const LInstruction& ins) {
  auto instruction = std::make_unique<fb::InstructionT>();
  instruction->name = ins.name;
  fb::CollectiveCallT call;
  call.kind = ins.collective;
  call.op = ins.reduce_op;
  call.group = ins.group;
  call.inputs.assign(ins.inputs.begin(), ins.inputs.end());
  call.outputs.assign(ins.outputs.begin(), ins.outputs.end());
  call.algorithm = ins.algorithm;
  call.signal_offset = ins.signal_offset;
  call.blocks = ins.blocks;
  call.state_bytes = ins.state_bytes;
  instruction->kind.Set(std::move(call));
  return instruction;
}

// The method's instructions in order; each run of kernels on one device
// becomes one delegate and the call of it.
void emit_instructions(const LMethod& method, fb::MethodT& m) {
  const auto& list = method.instructions;
  for (size_t k = 0; k < list.size();) {
    const LInstruction& ins = list[k];
    if (const size_t end = delegate_run_end(list, k); end > k) {
      emit_delegate(method, k, end, m);
      k = end;
      continue;
    }
    if (ins.kind == LInstruction::Kind::kCopy) {
      m.instructions.push_back(copy_instruction(ins));
    } else if (ins.kind == LInstruction::Kind::kKernel) {
      auto instruction = std::make_unique<fb::InstructionT>();
      instruction->name = ins.name;
      instruction->kind.Set(kernel_call(ins, operator_index(m.operators, ins.op)));
      m.instructions.push_back(std::move(instruction));
    } else if (ins.kind == LInstruction::Kind::kCollective) {
      m.instructions.push_back(collective_instruction(ins));
    } else {
      fail("internal error: instruction kind not emitted yet");
    }
    ++k;
  }
}

void emit_arenas(const LMethod& method, fb::MethodT& m) {
  for (const LArena& a : method.arenas) {
    auto arena = std::make_unique<fb::ArenaT>();
    arena->size = a.size;
    arena->alignment = a.alignment;
    arena->device = std::make_unique<fb::Device>(a.device);
    arena->kind = a.kind;
    arena->group = a.group;
    arena->region = a.region;
    m.arenas.push_back(std::move(arena));
  }
  for (const LCommunicator& c : method.communicators) {
    auto communicator = std::make_unique<fb::CommunicatorT>();
    communicator->group = c.group;
    communicator->size = c.size;
    m.communicators.push_back(std::move(communicator));
  }
}

std::unique_ptr<fb::MethodT> emit_method(const LMethod& named, const EmitOptions& options, ConstantTable& constants) {
  const LMethod compact = options.names ? LMethod{} : without_renaming_views(named);
  const LMethod& method = options.names ? named : compact;
  auto m = std::make_unique<fb::MethodT>();
  m->name = method.name;
  for (const LTensor& t : method.tensors) m->tensors.push_back(emit_tensor(t, options.names, constants));
  for (int t : method.inputs) m->inputs.push_back(static_cast<uint32_t>(t));
  for (int t : method.outputs) m->outputs.push_back(static_cast<uint32_t>(t));
  for (const LInstruction& ins : method.init_instructions) m->init_instructions.push_back(copy_instruction(ins));
  emit_instructions(method, *m);
  if (options.precision != "fp32") {
    for (auto& delegate : m->delegates) {
      auto spec = std::make_unique<fb::CompileSpecT>();
      spec->key = "precision";
      spec->value.assign(options.precision.begin(), options.precision.end());
      delegate->compile_specs.push_back(std::move(spec));
    }
  }
  emit_arenas(method, *m);
  for (const LSymbol& s : method.symbols) {
    auto symbol = std::make_unique<fb::SymbolT>();
    symbol->name = s.name;
    symbol->input = static_cast<uint32_t>(s.input);
    symbol->axis = s.axis;
    symbol->min = s.min;
    symbol->max = s.max;
    m->symbols.push_back(std::move(symbol));
  }
  for (const LDynamicDim& d : method.dynamic_dims) {
    m->dynamic_dims.emplace_back(d.tensor, d.axis, d.symbols, d.scale, d.mul, d.bias, d.divisor, d.offset);
  }
  if (!options.names) {
    for (auto& instruction : m->init_instructions) instruction->name.clear();
    for (auto& instruction : m->instructions) instruction->name.clear();
  }
  m->bookkeeping_bytes = method_bookkeeping_bytes(*m);
  return m;
}

// Bytes of one buffer holding the method's host arenas, laid out as the
// runtime lays them (schema/arena_layout.h).
uint64_t host_arena_bytes(const fb::MethodT& method) {
  uint64_t end = 0;
  for (const auto& arena : method.arenas) {
    if (arena->device != nullptr && arena->device->type() != fb::DeviceType::CPU) continue;
    (void)abi::next_arena_offset(end, arena->size, arena->alignment, &end);
  }
  return end;
}

// Each group of methods that never run at the same time, with the bytes of
// the one buffer their host arenas share: the largest member's.
void emit_arena_groups(const LProgram& program, fb::ProgramT& root) {
  for (const std::vector<int>& members : program.arena_groups) {
    auto group = std::make_unique<fb::ArenaGroupT>();
    for (int m : members) {
      group->methods.push_back(static_cast<uint32_t>(m));
      group->host_bytes = std::max(group->host_bytes, host_arena_bytes(*root.methods.at(static_cast<size_t>(m))));
    }
    root.arena_groups.push_back(std::move(group));
  }
}

}  // namespace

std::string emit_program(const LProgram& program, const EmitOptions& options) {
  fb::ProgramT root;
  root.version = static_cast<uint32_t>(fb::SchemaVersion::Current);
  root.producer = kProducer;
  root.segment_alignment = kSegmentAlignment;
  ConstantTable constants(program);
  for (const LMethod& named : program.methods) root.methods.push_back(emit_method(named, options, constants));
  emit_arena_groups(program, root);
  const SegmentWriter& segment = constants.segment();
  root.constants = segment.refs();
  root.segment_size = segment.data().size();

  flatbuffers::FlatBufferBuilder builder(1 << 16);
  builder.FinishSizePrefixed(fb::Program::Pack(builder, &root), fb::ProgramIdentifier());
  std::string out(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  if (!segment.data().empty()) {
    while (out.size() % kSegmentAlignment != 0) out.push_back('\0');
    out += segment.data();
  }
  return out;
}

}  // namespace kiln::planner
