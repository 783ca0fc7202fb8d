// Program::load and the semantic validation of a program: the runtime's trust
// boundary. Everything below uses overflow-checked arithmetic on values read
// from the file; nothing after this file re-checks what it establishes.

#include "kiln/runtime/program.h"

#include <string.h>

#include "kiln/runtime/log.h"
#include "method_internal.h"

namespace kiln {
namespace {

constexpr uint32_t kMaxOperandsPerInstruction = 0xFFFF;

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// The flatbuffers verifier checks the alignment of a vector's length, not
// of 8-byte elements; the runtime reads int64 shapes in place, so a hostile
// buffer must not place them at an address that is not a multiple of 8.
template <typename T>
bool aligned8(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0;
}

bool valid_device(const fb::Device* device) {
  return device == nullptr || device->type() <= fb::DeviceType::MAX;
}

const char* name_or(const flatbuffers::String* name, const char* fallback) {
  return name != nullptr ? name->c_str() : fallback;
}

// Validates one method. `what` helps messages name the method.
class MethodValidator {
 public:
  MethodValidator(const fb::Program& program, const fb::Method& method) : program_(program), method_(method) {}

  Error run() {
    name_ = method_.name()->c_str();
    num_tensors_ = method_.tensors() != nullptr ? method_.tensors()->size() : 0;
    KILN_RETURN_IF_ERROR(check_arenas());
    KILN_RETURN_IF_ERROR(check_tensors());
    KILN_RETURN_IF_ERROR(check_aliases());
    KILN_RETURN_IF_ERROR(check_io());
    KILN_RETURN_IF_ERROR(check_delegates());
    KILN_RETURN_IF_ERROR(check_instructions());
    return check_bookkeeping();
  }

 private:
  const fb::Tensor& tensor(uint32_t i) const { return *method_.tensors()->Get(i); }
  const char* tensor_name(uint32_t i) const { return name_or(tensor(i).name(), "?"); }

  Error invalid() const { return Error::kInvalidProgram; }

  Error check_arenas() {
    const auto* arenas = method_.arenas();
    if (arenas == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < arenas->size(); ++i) {
      const fb::Arena& arena = *arenas->Get(i);
      if (!is_power_of_two(arena.alignment()) || arena.alignment() > 4096) {
        KILN_LOG(ERROR, "method '%s': arena %u alignment %u is not a power of two <= 4096", name_,
                 i, arena.alignment());
        return invalid();
      }
      if (!valid_device(arena.device()) || arena.kind() > fb::ArenaKind::MAX) {
        KILN_LOG(ERROR, "method '%s': arena %u has an unknown device or kind", name_, i);
        return invalid();
      }
      if (arena.kind() == fb::ArenaKind::SYMMETRIC && !has_communicator(arena.group())) {
        KILN_LOG(ERROR, "method '%s': symmetric arena %u names group %u, which has no communicator",
                 name_, i, arena.group());
        return invalid();
      }
    }
    return Error::kOk;
  }

  bool has_communicator(uint32_t group) const {
    const auto* comms = method_.communicators();
    if (comms == nullptr) return false;
    for (uint32_t i = 0; i < comms->size(); ++i) {
      if (comms->Get(i)->group() == group) return true;
    }
    return false;
  }

  Error check_planned(uint32_t t, const fb::PlannedStorage& planned, uint64_t nbytes,
                      fb::Device device) {
    const auto* arenas = method_.arenas();
    if (arenas == nullptr || planned.arena() >= arenas->size()) {
      KILN_LOG(ERROR, "method '%s': tensor %u '%s' names arena %u, which does not exist", name_, t,
               tensor_name(t), planned.arena());
      return invalid();
    }
    const fb::Arena& arena = *arenas->Get(planned.arena());
    uint64_t end = 0;
    if (add_overflows(planned.offset(), nbytes, &end) || end > arena.size()) {
      KILN_LOG(ERROR,
               "method '%s': tensor %u '%s' at offset %llu + %llu bytes lies outside arena %u "
               "(%llu bytes)",
               name_, t, tensor_name(t), static_cast<unsigned long long>(planned.offset()),
               static_cast<unsigned long long>(nbytes), planned.arena(),
               static_cast<unsigned long long>(arena.size()));
      return invalid();
    }
    if (planned.offset() % arena.alignment() != 0) {
      KILN_LOG(ERROR, "method '%s': tensor %u '%s' offset %llu is not aligned to arena %u's %u",
               name_, t, tensor_name(t), static_cast<unsigned long long>(planned.offset()),
               planned.arena(), arena.alignment());
      return invalid();
    }
    if (device_or_cpu(arena.device()) != device) {
      KILN_LOG(ERROR, "method '%s': tensor %u '%s' is on %s:%u but arena %u is on %s:%u", name_, t,
               tensor_name(t), device_type_name(device.type()), device.index(), planned.arena(),
               device_type_name(device_or_cpu(arena.device()).type()),
               device_or_cpu(arena.device()).index());
      return Error::kInvalidProgram;
    }
    return Error::kOk;
  }

  Error check_tensors() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      const fb::Tensor& tensor = this->tensor(t);
      const size_t element = dtype_size(tensor.dtype());
      if (element == 0) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' has unknown dtype %u", name_, t,
                 tensor_name(t), static_cast<unsigned>(tensor.dtype()));
        return invalid();
      }
      const auto* shape = tensor.shape();
      const uint32_t rank = shape != nullptr ? shape->size() : 0;
      if (!aligned8(shape)) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' has a misaligned shape", name_, t, tensor_name(t));
        return invalid();
      }
      if (rank > kMaxRank) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' has rank %u (at most %u)", name_, t,
                 tensor_name(t), rank, kMaxRank);
        return invalid();
      }
      uint64_t numel = 1;
      for (uint32_t d = 0; d < rank; ++d) {
        const int64_t dim = shape->Get(d);
        if (dim < 0 || mul_overflows(numel, static_cast<uint64_t>(dim), &numel) ||
            numel > (uint64_t{1} << 62)) {
          KILN_LOG(ERROR, "method '%s': tensor %u '%s' has an invalid or too large shape", name_,
                   t, tensor_name(t));
          return invalid();
        }
      }
      uint64_t nbytes = 0;
      if (mul_overflows(numel, element, &nbytes) || nbytes != tensor.nbytes()) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' says %llu bytes, its shape and dtype make %llu",
                 name_, t, tensor_name(t), static_cast<unsigned long long>(tensor.nbytes()),
                 static_cast<unsigned long long>(nbytes));
        return invalid();
      }
      if (!valid_device(tensor.device())) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' has an unknown device", name_, t,
                 tensor_name(t));
        return invalid();
      }
      const fb::Device device = device_or_cpu(tensor.device());
      switch (tensor.storage_type()) {
        case fb::Storage::ConstantStorage: {
          const auto* constants = program_.constants();
          const uint32_t index = tensor.storage_as_ConstantStorage()->index();
          if (constants == nullptr || index >= constants->size()) {
            KILN_LOG(ERROR, "method '%s': tensor %u '%s' names constant %u, which does not exist",
                     name_, t, tensor_name(t), index);
            return invalid();
          }
          if (constants->Get(index)->size() < nbytes) {
            KILN_LOG(ERROR, "method '%s': tensor %u '%s' needs %llu bytes, constant %u has %llu",
                     name_, t, tensor_name(t), static_cast<unsigned long long>(nbytes), index,
                     static_cast<unsigned long long>(constants->Get(index)->size()));
            return invalid();
          }
          if (device.type() != fb::DeviceType::CPU) {
            // Device constants are uploaded by their backend (delegate blobs).
            KILN_LOG(ERROR, "method '%s': constant tensor %u '%s' is not on the host", name_, t,
                     tensor_name(t));
            return invalid();
          }
          break;
        }
        case fb::Storage::PlannedStorage:
          KILN_RETURN_IF_ERROR(
              check_planned(t, *tensor.storage_as_PlannedStorage(), nbytes, device));
          break;
        case fb::Storage::AliasStorage:
          if (tensor.storage_as_AliasStorage()->base() >= num_tensors_) {
            KILN_LOG(ERROR, "method '%s': tensor %u '%s' aliases tensor %u, which does not exist",
                     name_, t, tensor_name(t), tensor.storage_as_AliasStorage()->base());
            return invalid();
          }
          break;
        case fb::Storage::UserStorage: {
          const fb::PlannedStorage* fallback = tensor.storage_as_UserStorage()->fallback();
          if (fallback != nullptr) {
            KILN_RETURN_IF_ERROR(check_planned(t, *fallback, nbytes, device));
          }
          break;
        }
        default:
          KILN_LOG(ERROR, "method '%s': tensor %u '%s' has no storage", name_, t, tensor_name(t));
          return invalid();
      }
    }
    return Error::kOk;
  }

  // The tensor whose storage `t` uses, following aliases; num_tensors_ for a
  // cycle (a chain longer than the tensor count).
  uint32_t root_of(uint32_t t) const {
    for (uint32_t steps = 0; steps <= num_tensors_; ++steps) {
      const fb::Tensor& tensor = this->tensor(t);
      if (tensor.storage_type() != fb::Storage::AliasStorage) return t;
      t = tensor.storage_as_AliasStorage()->base();
    }
    return num_tensors_;
  }

  Error check_aliases() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      if (tensor(t).storage_type() != fb::Storage::AliasStorage) continue;
      const uint32_t root = root_of(t);
      if (root == num_tensors_) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' is part of an alias cycle", name_, t,
                 tensor_name(t));
        return invalid();
      }
      if (tensor(t).nbytes() > tensor(root).nbytes()) {
        KILN_LOG(ERROR, "method '%s': alias %u '%s' (%llu bytes) is larger than its base '%s' (%llu)",
                 name_, t, tensor_name(t), static_cast<unsigned long long>(tensor(t).nbytes()),
                 tensor_name(root), static_cast<unsigned long long>(tensor(root).nbytes()));
        return invalid();
      }
      if (device_or_cpu(tensor(t).device()) != device_or_cpu(tensor(root).device())) {
        KILN_LOG(ERROR, "method '%s': alias %u '%s' is on another device than its base '%s'", name_,
                 t, tensor_name(t), tensor_name(root));
        return invalid();
      }
    }
    return Error::kOk;
  }

  Error check_io_list(const flatbuffers::Vector<uint32_t>* list, const char* what) {
    if (list == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < list->size(); ++i) {
      const uint32_t t = list->Get(i);
      if (t >= num_tensors_) {
        KILN_LOG(ERROR, "method '%s': %s %u is tensor %u, which does not exist", name_, what, i, t);
        return invalid();
      }
      if (tensor(t).storage_type() != fb::Storage::UserStorage) {
        KILN_LOG(ERROR, "method '%s': %s %u ('%s') is not user-provided storage", name_, what, i,
                 tensor_name(t));
        return invalid();
      }
    }
    return Error::kOk;
  }

  Error check_io() {
    KILN_RETURN_IF_ERROR(check_io_list(method_.inputs(), "input"));
    KILN_RETURN_IF_ERROR(check_io_list(method_.outputs(), "output"));
    // User storage without fallback memory is only reachable by binding it:
    // it must be a method input or output.
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      const fb::Tensor& tensor = this->tensor(t);
      if (tensor.storage_type() != fb::Storage::UserStorage || tensor.storage_as_UserStorage()->fallback()) continue;
      if (!listed(method_.inputs(), t) && !listed(method_.outputs(), t)) {
        KILN_LOG(ERROR, "method '%s': tensor %u '%s' is user-provided but neither an input nor an output", name_, t,
                 tensor_name(t));
        return invalid();
      }
    }
    return Error::kOk;
  }

  static bool listed(const flatbuffers::Vector<uint32_t>* list, uint32_t t) {
    if (list == nullptr) return false;
    for (uint32_t i = 0; i < list->size(); ++i) {
      if (list->Get(i) == t) return true;
    }
    return false;
  }

  bool is_method_input(uint32_t t) const { return listed(method_.inputs(), t); }

  Error check_written(uint32_t instruction, uint32_t t) {
    const uint32_t root = root_of(t);
    const fb::Storage storage = tensor(root).storage_type();
    if (storage == fb::Storage::ConstantStorage || is_method_input(root)) {
      KILN_LOG(ERROR, "method '%s': instruction %u writes tensor '%s', which is read-only (%s)",
               name_, instruction, tensor_name(t),
               storage == fb::Storage::ConstantStorage ? "a constant" : "a method input");
      return invalid();
    }
    return Error::kOk;
  }

  Error check_operands(uint32_t instruction, const flatbuffers::Vector<int32_t>* list,
                       bool optional, bool written) {
    if (list == nullptr) return Error::kOk;
    if (list->size() > kMaxOperandsPerInstruction) {
      KILN_LOG(ERROR, "method '%s': instruction %u has %u operands in one list", name_, instruction,
               list->size());
      return invalid();
    }
    for (uint32_t i = 0; i < list->size(); ++i) {
      const int32_t t = list->Get(i);
      if (t == -1 && optional) continue;
      if (t < 0 || static_cast<uint32_t>(t) >= num_tensors_) {
        KILN_LOG(ERROR, "method '%s': instruction %u operand %u is tensor %d, which does not exist",
                 name_, instruction, i, t);
        return invalid();
      }
      if (written) KILN_RETURN_IF_ERROR(check_written(instruction, static_cast<uint32_t>(t)));
    }
    return Error::kOk;
  }

  Error check_delegates() {
    const auto* delegates = method_.delegates();
    if (delegates == nullptr) return Error::kOk;
    const uint32_t num_segments = program_.segments() != nullptr ? program_.segments()->size() : 0;
    for (uint32_t i = 0; i < delegates->size(); ++i) {
      const fb::Delegate& delegate = *delegates->Get(i);
      if (!valid_device(delegate.device())) {
        KILN_LOG(ERROR, "method '%s': delegate %u has an unknown device", name_, i);
        return invalid();
      }
      if (delegate.segment() < -1 ||
          (delegate.segment() >= 0 && static_cast<uint32_t>(delegate.segment()) >= num_segments)) {
        KILN_LOG(ERROR, "method '%s': delegate %u names segment %d, which does not exist", name_, i,
                 delegate.segment());
        return invalid();
      }
      if (delegate.state_bytes() > (uint64_t{1} << 40)) {
        KILN_LOG(ERROR, "method '%s': delegate %u asks for %llu state bytes", name_, i,
                 static_cast<unsigned long long>(delegate.state_bytes()));
        return invalid();
      }
    }
    return Error::kOk;
  }

  // Load-time instructions may only copy into planned memory (uploads of
  // constants to a device).
  Error check_init_instructions() {
    const auto* instructions = method_.init_instructions();
    if (instructions == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < instructions->size(); ++i) {
      const fb::Instruction& instruction = *instructions->Get(i);
      const fb::CopyCall* copy = instruction.kind_as_CopyCall();
      if (copy == nullptr || copy->src() >= num_tensors_ || copy->dst() >= num_tensors_) {
        KILN_LOG(ERROR, "method '%s': load-time instruction %u is not a valid copy", name_, i);
        return invalid();
      }
      if (tensor(copy->src()).nbytes() != tensor(copy->dst()).nbytes() ||
          tensor(root_of(copy->dst())).storage_type() != fb::Storage::PlannedStorage) {
        KILN_LOG(ERROR, "method '%s': load-time copy %u must fill planned memory of the same size", name_, i);
        return invalid();
      }
    }
    return Error::kOk;
  }

  Error check_instructions() {
    KILN_RETURN_IF_ERROR(check_init_instructions());
    const auto* instructions = method_.instructions();
    if (instructions == nullptr) return Error::kOk;
    const uint32_t num_operators = method_.operators() != nullptr ? method_.operators()->size() : 0;
    const uint32_t num_delegates = method_.delegates() != nullptr ? method_.delegates()->size() : 0;
    for (uint32_t i = 0; i < instructions->size(); ++i) {
      const fb::Instruction& instruction = *instructions->Get(i);
      switch (instruction.kind_type()) {
        case fb::InstructionKind::KernelCall: {
          const fb::KernelCall& call = *instruction.kind_as_KernelCall();
          if (call.op() >= num_operators) {
            KILN_LOG(ERROR, "method '%s': instruction %u calls operator %u, which does not exist",
                     name_, i, call.op());
            return invalid();
          }
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), true, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          KILN_RETURN_IF_ERROR(check_operands(i, call.scratch(), false, true));
          break;
        }
        case fb::InstructionKind::CopyCall: {
          const fb::CopyCall& copy = *instruction.kind_as_CopyCall();
          if (copy.src() >= num_tensors_ || copy.dst() >= num_tensors_) {
            KILN_LOG(ERROR, "method '%s': copy instruction %u names a tensor that does not exist",
                     name_, i);
            return invalid();
          }
          if (tensor(copy.src()).nbytes() != tensor(copy.dst()).nbytes()) {
            KILN_LOG(ERROR, "method '%s': copy instruction %u from '%s' to '%s' changes byte size",
                     name_, i, tensor_name(copy.src()), tensor_name(copy.dst()));
            return invalid();
          }
          KILN_RETURN_IF_ERROR(check_written(i, copy.dst()));
          break;
        }
        case fb::InstructionKind::DelegateCall: {
          const fb::DelegateCall& call = *instruction.kind_as_DelegateCall();
          if (call.delegate() >= num_delegates) {
            KILN_LOG(ERROR, "method '%s': instruction %u calls delegate %u, which does not exist",
                     name_, i, call.delegate());
            return invalid();
          }
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), false, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          break;
        }
        case fb::InstructionKind::CollectiveCall: {
          const fb::CollectiveCall& call = *instruction.kind_as_CollectiveCall();
          if (!has_communicator(call.group())) {
            KILN_LOG(ERROR, "method '%s': collective instruction %u names group %u, which has no "
                     "communicator", name_, i, call.group());
            return invalid();
          }
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), false, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          break;
        }
        default:
          KILN_LOG(ERROR, "method '%s': instruction %u has no kind", name_, i);
          return invalid();
      }
    }
    return Error::kOk;
  }

  Error check_bookkeeping() {
    const uint64_t required = abi::bookkeeping_bytes(internal::count_method(method_));
    if (method_.bookkeeping_bytes() < required) {
      KILN_LOG(ERROR, "method '%s': program states %llu bookkeeping bytes, the runtime needs %llu",
               name_, static_cast<unsigned long long>(method_.bookkeeping_bytes()),
               static_cast<unsigned long long>(required));
      return invalid();
    }
    return Error::kOk;
  }

  const fb::Program& program_;
  const fb::Method& method_;
  const char* name_ = "";
  uint32_t num_tensors_ = 0;
};

Error check_data_refs(const flatbuffers::Vector<const fb::DataRef*>* refs, uint64_t segment_size,
                      uint32_t alignment, const char* what) {
  if (refs == nullptr) return Error::kOk;
  if (!aligned8(refs)) {
    KILN_LOG(ERROR, "the %s table is misaligned", what);
    return Error::kInvalidProgram;
  }
  for (uint32_t i = 0; i < refs->size(); ++i) {
    const fb::DataRef& ref = *refs->Get(i);
    uint64_t end = 0;
    if (add_overflows(ref.offset(), ref.size(), &end) || end > segment_size) {
      KILN_LOG(ERROR, "%s %u (offset %llu, %llu bytes) lies outside the %llu-byte data segment",
               what, i, static_cast<unsigned long long>(ref.offset()),
               static_cast<unsigned long long>(ref.size()),
               static_cast<unsigned long long>(segment_size));
      return Error::kInvalidProgram;
    }
    if (ref.offset() % alignment != 0) {
      KILN_LOG(ERROR, "%s %u offset %llu is not aligned to %u", what, i,
               static_cast<unsigned long long>(ref.offset()), alignment);
      return Error::kInvalidProgram;
    }
  }
  return Error::kOk;
}

uint32_t count_list(const flatbuffers::Vector<int32_t>* list) {
  return list != nullptr ? list->size() : 0;
}

}  // namespace

namespace internal {

void count_instructions(const flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>* instructions,
                        abi::MethodCounts& counts) {
  const uint32_t n = instructions != nullptr ? instructions->size() : 0;
  counts.instructions += n;
  for (uint32_t i = 0; i < n; ++i) {
    const fb::Instruction& instruction = *instructions->Get(i);
    switch (instruction.kind_type()) {
      case fb::InstructionKind::KernelCall: {
        const auto* call = instruction.kind_as_KernelCall();
        counts.operands +=
            count_list(call->inputs()) + count_list(call->outputs()) + count_list(call->scratch());
        break;
      }
      case fb::InstructionKind::CopyCall:
        counts.operands += 2;
        break;
      case fb::InstructionKind::DelegateCall: {
        const auto* call = instruction.kind_as_DelegateCall();
        counts.operands += count_list(call->inputs()) + count_list(call->outputs());
        break;
      }
      case fb::InstructionKind::CollectiveCall: {
        const auto* call = instruction.kind_as_CollectiveCall();
        counts.operands += count_list(call->inputs()) + count_list(call->outputs());
        break;
      }
      default:
        break;
    }
  }
}

abi::MethodCounts count_method(const fb::Method& method) {
  abi::MethodCounts counts;
  counts.tensors = method.tensors() != nullptr ? method.tensors()->size() : 0;
  counts.arenas = method.arenas() != nullptr ? method.arenas()->size() : 0;
  counts.delegates = method.delegates() != nullptr ? method.delegates()->size() : 0;
  if (method.delegates() != nullptr) {
    for (const fb::Delegate* delegate : *method.delegates()) {
      // Each delegate's state starts 16-byte aligned.
      counts.delegate_state_bytes += abi::round_up_bookkeeping(delegate->state_bytes());
    }
  }
  count_instructions(method.init_instructions(), counts);
  count_instructions(method.instructions(), counts);
  return counts;
}

}  // namespace internal

Result<Program> Program::load(DataLoader& loader) {
  const uint64_t file_size = loader.size();
  if (file_size < 8) {
    KILN_LOG(ERROR, "program is %llu bytes, too short to hold a kiln program",
             static_cast<unsigned long long>(file_size));
    return Error::kInvalidProgram;
  }
  KILN_ASSIGN_OR_RETURN(Span<const uint8_t> head, loader.load(0, 8));
  if (reinterpret_cast<uintptr_t>(head.data()) % 16 != 0) {
    KILN_LOG(ERROR, "program data must start at a 16-byte aligned address");
    return Error::kInvalidArgument;
  }
  if (!fb::SizePrefixedProgramBufferHasIdentifier(head.data())) {
    KILN_LOG(ERROR, "not a kiln program (file identifier is not '%s')", fb::ProgramIdentifier());
    return Error::kInvalidProgram;
  }
  uint32_t prefix = 0;
  memcpy(&prefix, head.data(), sizeof(prefix));
  if (prefix > file_size - 4) {
    KILN_LOG(ERROR, "program says its flatbuffer is %u bytes, the file has %llu after the prefix",
             prefix, static_cast<unsigned long long>(file_size - 4));
    return Error::kInvalidProgram;
  }
  KILN_ASSIGN_OR_RETURN(Span<const uint8_t> buffer, loader.load(0, uint64_t{prefix} + 4));
  flatbuffers::Verifier verifier(buffer.data(), buffer.size(), /*max_depth=*/64,
                                 /*max_tables=*/4000000);
  if (!fb::VerifySizePrefixedProgramBuffer(verifier)) {
    KILN_LOG(ERROR, "program failed flatbuffer verification (truncated or corrupt)");
    return Error::kInvalidProgram;
  }
  const fb::Program* program = fb::GetSizePrefixedProgram(buffer.data());
  if (program->version() != static_cast<uint32_t>(fb::SchemaVersion::Current)) {
    KILN_LOG(ERROR, "program schema version %u, this runtime reads version %u", program->version(),
             static_cast<unsigned>(fb::SchemaVersion::Current));
    return Error::kVersionMismatch;
  }
  const uint32_t alignment = program->segment_alignment();
  if (!is_power_of_two(alignment) || alignment < 16 || alignment > 65536) {
    KILN_LOG(ERROR, "segment alignment %u is not a power of two in [16, 65536]", alignment);
    return Error::kInvalidProgram;
  }
  const uint64_t base = (uint64_t{prefix} + 4 + alignment - 1) / alignment * alignment;
  uint64_t segment_end = 0;
  if (program->segment_size() > 0 &&
      (add_overflows(base, program->segment_size(), &segment_end) || segment_end > file_size)) {
    KILN_LOG(ERROR, "data segment (%llu bytes at %llu) extends past the end of the %llu-byte file",
             static_cast<unsigned long long>(program->segment_size()),
             static_cast<unsigned long long>(base), static_cast<unsigned long long>(file_size));
    return Error::kInvalidProgram;
  }
  Span<const uint8_t> segment;
  if (program->segment_size() > 0) {
    KILN_ASSIGN_OR_RETURN(segment, loader.load(base, program->segment_size()));
  }
  KILN_RETURN_IF_ERROR(
      check_data_refs(program->constants(), program->segment_size(), alignment, "constant"));
  KILN_RETURN_IF_ERROR(
      check_data_refs(program->segments(), program->segment_size(), 16, "delegate segment"));
  const auto* methods = program->methods();
  if (methods == nullptr || methods->size() == 0) {
    KILN_LOG(ERROR, "program has no methods");
    return Error::kInvalidProgram;
  }
  for (uint32_t i = 0; i < methods->size(); ++i) {
    KILN_RETURN_IF_ERROR(
        MethodValidator(*program, *methods->Get(i)).run());
  }
  return Program(program, segment);
}

size_t Program::num_methods() const { return program_->methods()->size(); }

Result<const char*> Program::method_name(size_t index) const {
  if (index >= num_methods()) return Error::kInvalidArgument;
  return program_->methods()->Get(static_cast<uint32_t>(index))->name()->c_str();
}

Result<MethodMeta> Program::method_meta(const char* name) const {
  if (name == nullptr) return Error::kInvalidArgument;
  const auto* methods = program_->methods();
  for (uint32_t i = 0; i < methods->size(); ++i) {
    if (strcmp(methods->Get(i)->name()->c_str(), name) == 0) return MethodMeta(methods->Get(i));
  }
  KILN_LOG(ERROR, "program has no method named '%s'", name);
  return Error::kNotFound;
}

Span<const uint8_t> Program::constant(uint32_t index) const {
  const fb::DataRef& ref = *program_->constants()->Get(index);
  return segment_.subspan(static_cast<size_t>(ref.offset()), static_cast<size_t>(ref.size()));
}

}  // namespace kiln
