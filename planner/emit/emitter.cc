#include "emit/emitter.h"

#include <map>
#include <unordered_map>

#include "core/error.h"
#include "kiln/schema/bookkeeping.h"

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

uint64_t count_operands(const LInstruction& ins) {
  if (ins.kind == LInstruction::Kind::kCopy) return 2;
  return ins.inputs.size() + ins.outputs.size() + ins.scratch.size();
}

}  // namespace

uint64_t method_bookkeeping_bytes(const LMethod& method) {
  abi::MethodCounts counts;
  counts.tensors = method.tensors.size();
  counts.instructions = method.instructions.size();
  for (const LInstruction& ins : method.instructions) counts.operands += count_operands(ins);
  counts.arenas = method.arenas.size();
  return abi::bookkeeping_bytes(counts);
}

std::string emit_program(const LProgram& program) {
  fb::ProgramT root;
  root.version = static_cast<uint32_t>(fb::SchemaVersion::Current);
  root.producer = kProducer;
  root.segment_alignment = kSegmentAlignment;
  SegmentWriter segment;
  std::vector<int> constant_ref(program.constants.size(), -1);
  auto constant_index = [&](int c) {
    if (constant_ref[static_cast<size_t>(c)] < 0) {
      constant_ref[static_cast<size_t>(c)] = static_cast<int>(segment.add(*program.constants[static_cast<size_t>(c)]));
    }
    return static_cast<uint32_t>(constant_ref[static_cast<size_t>(c)]);
  };

  for (const LMethod& method : program.methods) {
    auto m = std::make_unique<fb::MethodT>();
    m->name = method.name;
    for (const LTensor& t : method.tensors) {
      auto tensor = std::make_unique<fb::TensorT>();
      tensor->name = t.name;
      tensor->dtype = to_fb(t.dtype);
      tensor->shape = t.shape;
      tensor->nbytes = t.nbytes();
      tensor->device = std::make_unique<fb::Device>(t.device);
      switch (t.storage) {
        case Storage::kPlanned: {
          if (t.arena < 0) fail("internal error: tensor '", t.name, "' has no memory plan");
          tensor->storage.Set(*planned(t));
          break;
        }
        case Storage::kConstant: {
          fb::ConstantStorageT c;
          c.index = constant_index(t.constant);
          tensor->storage.Set(std::move(c));
          break;
        }
        case Storage::kAlias: {
          fb::AliasStorageT a;
          a.base = static_cast<uint32_t>(t.alias_of);
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
      m->tensors.push_back(std::move(tensor));
    }
    for (int t : method.inputs) m->inputs.push_back(static_cast<uint32_t>(t));
    for (int t : method.outputs) m->outputs.push_back(static_cast<uint32_t>(t));
    std::map<std::string, uint32_t> operator_index;
    for (const LInstruction& ins : method.instructions) {
      auto instruction = std::make_unique<fb::InstructionT>();
      instruction->name = ins.name;
      switch (ins.kind) {
        case LInstruction::Kind::kKernel: {
          auto it = operator_index.find(ins.op);
          if (it == operator_index.end()) {
            it = operator_index.emplace(ins.op, static_cast<uint32_t>(m->operators.size())).first;
            auto op = std::make_unique<fb::OperatorT>();
            op->name = ins.op;
            m->operators.push_back(std::move(op));
          }
          fb::KernelCallT call;
          call.op = it->second;
          call.inputs.assign(ins.inputs.begin(), ins.inputs.end());
          call.outputs.assign(ins.outputs.begin(), ins.outputs.end());
          call.scratch.assign(ins.scratch.begin(), ins.scratch.end());
          call.params = ins.params;
          instruction->kind.Set(std::move(call));
          break;
        }
        case LInstruction::Kind::kCopy: {
          fb::CopyCallT copy;
          copy.src = static_cast<uint32_t>(ins.inputs.at(0));
          copy.dst = static_cast<uint32_t>(ins.outputs.at(0));
          instruction->kind.Set(std::move(copy));
          break;
        }
        default:
          fail("internal error: instruction kind not emitted yet");
      }
      m->instructions.push_back(std::move(instruction));
    }
    for (const LArena& a : method.arenas) {
      auto arena = std::make_unique<fb::ArenaT>();
      arena->size = a.size;
      arena->alignment = a.alignment;
      arena->device = std::make_unique<fb::Device>(a.device);
      arena->kind = a.kind;
      arena->group = a.group;
      m->arenas.push_back(std::move(arena));
    }
    m->bookkeeping_bytes = method_bookkeeping_bytes(method);
    root.methods.push_back(std::move(m));
  }
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
