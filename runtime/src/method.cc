// Method loading (resolve every address and kernel once, against the
// memory and registries the application hands in) and execution (run the
// flat instruction list).
//
// Trust boundary: validate once at load; execute runs without checks. The
// program passed Program::load's validation (program_validator.cc), so
// indices and sizes read from it here are known to be in range; what is
// checked here is what the application provides (bookkeeping, arenas,
// kernels, backends, bound buffers). Method::execute checks only that every
// input and output is bound, then runs the resolved instructions.

#include "kiln/runtime/method.h"

#include <string.h>

#include "kiln/runtime/check.h"
#include "kiln/runtime/program.h"
#include "kiln/schema/device.h"
#include "kiln/schema/digest.h"
#include "kiln/schema/dynamic_dims.h"
#include "method_internal.h"

namespace kiln {
namespace {

TraceKind trace_kind(internal::InstructionKind kind) {
  switch (kind) {
    case internal::InstructionKind::kKernel: return TraceKind::kKernel;
    case internal::InstructionKind::kDelegate: return TraceKind::kDelegate;
    case internal::InstructionKind::kCollective:
    case internal::InstructionKind::kDeviceCollective: return TraceKind::kCollective;
    default: return TraceKind::kCopy;
  }
}

const char* instruction_name(const fb::Instruction& instruction) {
  return instruction.name() != nullptr ? instruction.name()->c_str() : "";
}

const char* tensor_name(const fb::Method& method, uint32_t t) {
  const flatbuffers::String* name = method.tensors()->Get(t)->name();
  return name != nullptr ? name->c_str() : "?";
}

bool is_output_tensor(const fb::Method& method, uint32_t t) {
  const flatbuffers::Vector<uint32_t>* outputs = method.outputs();
  for (uint32_t i = 0; i < internal::list_size(outputs); ++i) {
    if (outputs->Get(i) == t) return true;
  }
  return false;
}

// Tensor t's planned extent on axis d: its largest, for one that follows a
// bounded input.
int64_t planned_dim(const fb::Method& method, uint32_t t, uint32_t d) {
  return method.tensors()->Get(t)->shape()->Get(d);
}

// The tensor index of input (or output) `index` of `method`. kInvalidArgument
// when the Method holds no method (moved from) or has no such input.
Result<uint32_t> io_tensor(const fb::Method* method, bool output, size_t index) {
  KILN_CHECK_OR_RETURN(method != nullptr, Error::kInvalidArgument, "the Method was moved from");
  const flatbuffers::Vector<uint32_t>* list = output ? method->outputs() : method->inputs();
  KILN_CHECK_OR_RETURN(index < internal::list_size(list), Error::kInvalidArgument,
                       "method '%s' has no %s %u (it has %u)", method->name()->c_str(), output ? "output" : "input",
                       static_cast<unsigned>(index), static_cast<unsigned>(internal::list_size(list)));
  return list->Get(static_cast<uint32_t>(index));
}

}  // namespace

// ---------------------------------------------------------------------------
// Loading

// Builds a Method in the bookkeeping buffer. Every section is allocated with
// exactly the size schema/bookkeeping.h gives it, so the figure the planner
// wrote is the figure needed.
class MethodLoader final : public MethodView {
 public:
  MethodLoader(const Program& program, const fb::Method& method, const MemoryManager& memory,
               const KernelRegistry& kernels, const BackendRegistry& backends)
      : program_(program), method_(method), memory_(memory), kernels_(kernels), backends_(backends) {}

  Result<Method> load() {
    KILN_CHECK_OR_RETURN(memory_.bookkeeping != nullptr, Error::kInvalidArgument,
                         "method '%s': no bookkeeping allocator given", name());
    counts_ = abi::count_method(method_);
    Method result;
    result.method_ = &method_;
    KILN_RETURN_IF_ERROR(allocate_sections());
    // From here on `result` releases what is acquired (device arenas,
    // delegates) when a later step fails.
    result.arenas_ = arenas_;
    result.num_arenas_ = static_cast<uint32_t>(counts_.arenas);
    result.delegates_ = delegates_;
    result.num_delegates_ = static_cast<uint32_t>(counts_.delegates);
    KILN_RETURN_IF_ERROR(bind_communicators());
    KILN_RETURN_IF_ERROR(bind_arenas());
    KILN_RETURN_IF_ERROR(init_tensors());
    init_dynamic_shapes();
    result.tensors_ = tensors_;
    result.num_tensors_ = static_cast<uint32_t>(counts_.tensors);
    result.symbol_values_ = symbol_values_;
    result.num_symbols_ = static_cast<uint32_t>(counts_.symbols);
    result.refresh_aliases();
    KILN_RETURN_IF_ERROR(init_delegates());
    const uint32_t num_init = method_.init_instructions() != nullptr ? method_.init_instructions()->size() : 0;
    Error error = init_instructions(method_.init_instructions(), 0);
    if (error == Error::kOk) error = init_instructions(method_.instructions(), num_init);
    if (error != Error::kOk) {
      destroy_device_collectives();
      return error;
    }
    // From here on `result` also destroys the device collectives.
    result.instructions_ = instructions_ + num_init;
    result.num_instructions_ = static_cast<uint32_t>(counts_.instructions) - num_init;
    result.checks_ = checks_ != nullptr ? checks_ + num_init : nullptr;
    // Load-time instructions (constant uploads) run once, now.
    for (uint32_t i = 0; i < num_init; ++i) {
      error = internal::run_instruction(instructions_[i]);
      KILN_CHECK_OR_RETURN(error == Error::kOk, error, "method '%s': load-time copy %u failed: %s", name(), i,
                           error_name(error));
    }
    return Result<Method>(static_cast<Method&&>(result));
  }

 private:
  const char* name() const { return method_.name()->c_str(); }

  // Takes a section of `count * slot` bytes (rounded to 16) from bookkeeping.
  // After the first failure (logged) takes nothing more.
  void* take(uint64_t count, uint64_t slot, const char* what) {
    const uint64_t bytes = abi::round_up_bookkeeping(count * slot);
    if (bytes == 0 || failed_) return nullptr;
    void* p = memory_.bookkeeping->allocate(static_cast<size_t>(bytes), abi::kBookkeepingAlignment);
    if (p == nullptr) {
      KILN_LOG(ERROR, "method '%s': bookkeeping allocator has %llu of %llu bytes free, %s need %llu", name(),
               static_cast<unsigned long long>(memory_.bookkeeping->capacity() - memory_.bookkeeping->used()),
               static_cast<unsigned long long>(memory_.bookkeeping->capacity()), what,
               static_cast<unsigned long long>(bytes));
      failed_ = true;
    }
    return p;
  }

  Error allocate_sections() {
    tensors_ = static_cast<Tensor*>(take(counts_.tensors, abi::kTensorSlotBytes, "tensors"));
    instructions_ = static_cast<internal::InstructionState*>(
        take(counts_.instructions, abi::kInstructionSlotBytes, "instructions"));
    operands_ = static_cast<const Tensor**>(take(counts_.operands, abi::kOperandSlotBytes, "operand lists"));
    arenas_ = static_cast<internal::ArenaState*>(take(counts_.arenas, abi::kArenaSlotBytes, "arenas"));
    delegates_ = static_cast<internal::DelegateState*>(take(counts_.delegates, abi::kDelegateSlotBytes, "delegates"));
    delegate_state_ = static_cast<uint8_t*>(take(counts_.delegate_state_bytes, 1, "delegate state"));
    symbol_values_ = static_cast<int64_t*>(take(counts_.symbols, abi::kSymbolSlotBytes, "symbols"));
    dynamic_shapes_ =
        static_cast<int64_t*>(take(counts_.dynamic_tensors, abi::kDynamicTensorSlotBytes, "dynamic dimensions"));
    checks_ = static_cast<KernelCheckFn*>(
        take(counts_.symbols > 0 ? counts_.instructions : 0, abi::kCheckSlotBytes, "kernel checks"));
    for (uint32_t a = 0; a < counts_.arenas && !failed_; ++a) new (&arenas_[a]) internal::ArenaState();
    for (uint32_t d = 0; d < counts_.delegates && !failed_; ++d) new (&delegates_[d]) internal::DelegateState();
    return failed_ ? Error::kOutOfMemory : Error::kOk;
  }

  // Device arenas: the application's buffer, or one allocation by the backend.
  Error bind_device_arena(uint32_t i, const fb::Arena& arena, fb::Device device) {
    internal::ArenaState& state = arenas_[i];
    state.where = device;
    state.size = arena.size();
    state.backend = backends_.for_device(device.type());
    KILN_CHECK_OR_RETURN(state.backend != nullptr, Error::kBackendNotFound,
                         "method '%s': arena %u is on %s:%u; no backend for that device is registered", name(), i,
                         device_type_name(device.type()), device.index());
    if (i < memory_.device_arenas.size() && memory_.device_arenas[i].handle != nullptr) {
      KILN_CHECK_OR_RETURN(memory_.device_arenas[i].size >= arena.size(), Error::kArenaTooSmall,
                           "method '%s': device arena %u needs %llu bytes, %llu were given", name(), i,
                           static_cast<unsigned long long>(arena.size()),
                           static_cast<unsigned long long>(memory_.device_arenas[i].size));
      state.device = memory_.device_arenas[i];
      return Error::kOk;
    }
    KILN_CHECK_OR_RETURN(i >= memory_.arenas.size() || memory_.arenas[i].data() == nullptr, Error::kDeviceMismatch,
                         "method '%s': arena %u is on %s:%u, a host buffer was given for it", name(), i,
                         device_type_name(device.type()), device.index());
    const Error error = state.backend->allocate(device, arena.size(), arena.alignment(), &state.device);
    KILN_CHECK_OR_RETURN(error == Error::kOk, Error::kDeviceAllocationFailed,
                         "method '%s': backend '%s' failed to allocate device arena %u (%llu bytes): %s", name(),
                         state.backend->id(), i, static_cast<unsigned long long>(arena.size()), error_name(error));
    state.owned = true;
    return Error::kOk;
  }

  Error bind_arenas() {
    for (uint32_t i = 0; i < counts_.arenas; ++i) {
      const fb::Arena& arena = *method_.arenas()->Get(i);
      const fb::Device device = device_or_cpu(arena.device());
      if (arena.kind() == fb::ArenaKind::SYMMETRIC && groups_[arena.group()].communicator != nullptr) {
        KILN_RETURN_IF_ERROR(map_symmetric_arena(i, arena, device));
        continue;
      }
      if (!is_host(device)) {
        KILN_RETURN_IF_ERROR(bind_device_arena(i, arena, device));
        continue;
      }
      arenas_[i].where = device;
      if (i >= memory_.arenas.size() || memory_.arenas[i].data() == nullptr) {
        KILN_CHECK_OR_RETURN(arena.size() == 0, Error::kArenaMissing,
                             "method '%s': arena %u (%llu bytes) was not given", name(), i,
                             static_cast<unsigned long long>(arena.size()));
        continue;
      }
      const Span<uint8_t> given = memory_.arenas[i];
      KILN_CHECK_OR_RETURN(given.size() >= arena.size(), Error::kArenaTooSmall,
                           "method '%s': arena %u needs %llu bytes, %llu were given", name(), i,
                           static_cast<unsigned long long>(arena.size()),
                           static_cast<unsigned long long>(given.size()));
      KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(given.data()) % arena.alignment() == 0, Error::kArenaMisaligned,
                           "method '%s': arena %u must be aligned to %u bytes", name(), i, arena.alignment());
      arenas_[i].base = given.data();
      arenas_[i].size = given.size();
    }
    return Error::kOk;
  }

#if KILN_COLLECTIVES
  // The communicator of each group the method names, and this rank in it.
  // A group of one rank may have none (its collectives are copies); a
  // larger group must have one of its size.
  Error bind_communicators() {
    const auto* list = method_.communicators();
    const uint32_t count = list != nullptr ? list->size() : 0;
    for (uint32_t c = 0; c < count; ++c) {
      const fb::Communicator& group = *list->Get(c);
      KILN_CHECK_OR_RETURN(group.group() < abi::kMaxCommunicatorGroups, Error::kNotSupported,
                           "method '%s': communicator group %u; the runtime supports groups 0 to %u", name(),
                           group.group(), static_cast<unsigned>(abi::kMaxCommunicatorGroups - 1));
      Communicator* communicator =
          group.group() < memory_.communicators.size() ? memory_.communicators[group.group()] : nullptr;
      if (communicator == nullptr) {
        KILN_CHECK_OR_RETURN(group.size() == 1, Error::kCommunicatorMismatch,
                             "method '%s' was planned for %u ranks (communicator group %u) and no communicator "
                             "was given for them (run it with one process per rank, e.g. mpirun -n %u)",
                             name(), group.size(), group.group(), group.size());
        continue;
      }
      KILN_CHECK_OR_RETURN(communicator->size() == group.size(), Error::kCommunicatorMismatch,
                           "method '%s' was planned for %u ranks (communicator group %u); communicator '%s' has "
                           "%u",
                           name(), group.size(), group.group(), communicator->name(), communicator->size());
      groups_[group.group()].communicator = communicator;
      groups_[group.group()].rank = communicator->rank();
    }
    return Error::kOk;
  }

  // A digest of where arena `index`'s tensors lie (FNV-1a over the arena's
  // size and every tensor's index, offset and byte size): equal on every
  // rank exactly when all ranks planned the same layout.
  uint64_t layout_digest(uint32_t index, const fb::Arena& arena) const {
    uint64_t h = abi::kFnv1a64Start;
    auto mix = [&h](uint64_t v) {
      uint8_t bytes[8];
      for (int b = 0; b < 8; ++b) bytes[b] = static_cast<uint8_t>(v >> (8 * b));
      h = abi::fnv1a64(h, bytes, sizeof(bytes));
    };
    mix(arena.size());
    mix(arena.alignment());
    for (uint32_t t = 0; t < counts_.tensors; ++t) {
      const fb::Tensor& tensor = *method_.tensors()->Get(t);
      const fb::PlannedStorage* planned = tensor.storage_as_PlannedStorage();
      if (planned == nullptr && tensor.storage_as_UserStorage() != nullptr) {
        planned = tensor.storage_as_UserStorage()->fallback();
      }
      if (planned == nullptr || planned->arena() != index) continue;
      mix(t);
      mix(planned->offset());
      mix(tensor.nbytes());
    }
    return h;
  }

  // A symmetric arena of a group with a communicator: every rank's copy is
  // mapped by it (host memory for host communicators, device memory
  // otherwise), after the ranks agree on its layout.
  Error map_symmetric_arena(uint32_t i, const fb::Arena& arena, fb::Device device) {
    internal::ArenaState& state = arenas_[i];
    Communicator* communicator = groups_[arena.group()].communicator;
    KILN_CHECK_OR_RETURN(communicator->device_type() == device.type(), Error::kDeviceMismatch,
                         "method '%s': symmetric arena %u is on %s:%u, communicator '%s' maps %s memory", name(), i,
                         device_type_name(device.type()), device.index(), communicator->name(),
                         device_type_name(communicator->device_type()));
    state.where = device;
    state.size = arena.size();
    if (!is_host(device)) {
      state.backend = backends_.for_device(device.type());
      KILN_CHECK_OR_RETURN(state.backend != nullptr, Error::kBackendNotFound,
                           "method '%s': symmetric arena %u is on %s:%u; no backend for that device is registered",
                           name(), i, device_type_name(device.type()), device.index());
    }
    const Error error =
        communicator->map_symmetric(arena.size(), arena.alignment(), layout_digest(i, arena), &state.symmetric);
    KILN_CHECK_OR_RETURN(error == Error::kOk, error,
                         "method '%s': communicator '%s' could not map symmetric arena %u "
                         "(%llu bytes): %s",
                         name(), communicator->name(), i, static_cast<unsigned long long>(arena.size()),
                         error_name(error));
    state.communicator = communicator;
    if (is_host(device)) {
      state.base = static_cast<uint8_t*>(state.symmetric.local.handle);
    } else {
      state.device = state.symmetric.local;
    }
    return Error::kOk;
  }

#else
  // Built without collectives: the validator refused programs with any.
  Error bind_communicators() { return Error::kOk; }
  Error map_symmetric_arena(uint32_t, const fb::Arena&, fb::Device) { return Error::kNotSupported; }
#endif  // KILN_COLLECTIVES

  // Places `tensor` at `planned`: a host address, or (device arenas) the
  // backend's address if it has one.
  void place(Tensor* tensor, const fb::PlannedStorage& planned) const {
    const internal::ArenaState& arena = arenas_[planned.arena()];
    tensor->arena_ = static_cast<uint16_t>(planned.arena());
    tensor->offset_ = planned.offset();
    if (arena.backend != nullptr) {
      tensor->data_ = arena.backend->address(arena.device, planned.offset());
    } else {
      tensor->data_ = arena.base != nullptr ? arena.base + planned.offset() : nullptr;
    }
  }

  Error init_tensors() {
    for (uint32_t t = 0; t < counts_.tensors; ++t) {
      const fb::Tensor& source = *method_.tensors()->Get(t);
      Tensor* tensor = new (&tensors_[t]) Tensor();
      tensor->dims_ = source.shape() != nullptr ? source.shape()->data() : nullptr;
      tensor->rank_ = static_cast<uint8_t>(source.shape() != nullptr ? source.shape()->size() : 0);
      tensor->dtype_ = source.dtype();
      tensor->nbytes_ = source.nbytes();
      tensor->numel_ = static_cast<int64_t>(source.nbytes() / dtype_size(source.dtype()));
      tensor->device_ = device_or_cpu(source.device());
      switch (source.storage_type()) {
        case fb::Storage::ConstantStorage: {
          const fb::ConstantStorage& constant = *source.storage_as_ConstantStorage();
          uint32_t index = constant.index();
          if (constant.ranks() != nullptr && constant.ranks()->size() > 0) {
            index = constant.ranks()->Get(groups_[constant.group()].rank);
          }
          tensor->data_ = const_cast<uint8_t*>(program_.constant(index).data());
          tensor->flags_ = internal::kTensorConstant;
          break;
        }
        case fb::Storage::PlannedStorage: place(tensor, *source.storage_as_PlannedStorage()); break;
        case fb::Storage::UserStorage: {
          const fb::PlannedStorage* fallback = source.storage_as_UserStorage()->fallback();
          if (fallback != nullptr) place(tensor, *fallback);
          tensor->flags_ = internal::kTensorUser;
          KILN_CHECK_OR_RETURN(is_host(tensor->device_) || fallback != nullptr, Error::kInvalidProgram,
                               "method '%s': device tensor %u '%s' has no planned device memory", name(), t,
                               source.name() != nullptr ? source.name()->c_str() : "?");
          if (fallback != nullptr || tensor->nbytes_ == 0) tensor->flags_ |= internal::kTensorBound;
          break;
        }
        case fb::Storage::AliasStorage: {
          // offset_ holds the root's offset plus the offsets down the chain
          // (set below, once every root is placed).
          uint32_t root = source.storage_as_AliasStorage()->base();
          uint64_t offset = source.storage_as_AliasStorage()->offset();
          while (method_.tensors()->Get(root)->storage_type() == fb::Storage::AliasStorage) {
            offset += method_.tensors()->Get(root)->storage_as_AliasStorage()->offset();
            root = method_.tensors()->Get(root)->storage_as_AliasStorage()->base();
          }
          tensor->alias_root_ = root;
          tensor->offset_ = offset;
          tensor->flags_ = internal::kTensorAlias;
          break;
        }
        default:  // Program::load refused it
          KILN_RETURN_ERROR(Error::kInternal, "method '%s': tensor %u has no storage", name(), t);
      }
    }
    for (uint32_t t = 0; t < counts_.tensors; ++t) {
      Tensor& tensor = tensors_[t];
      if (!(tensor.flags_ & internal::kTensorAlias)) continue;
      tensor.arena_ = tensors_[tensor.alias_root_].arena_;
      tensor.offset_ += tensors_[tensor.alias_root_].offset_;
    }
    return Error::kOk;
  }

  // Tensors whose extents follow bounded inputs read their dimensions from
  // a slot of the bookkeeping (at first the planned ones, the bounds' max)
  // instead of the program.
  void init_dynamic_shapes() {
#if KILN_BOUNDED_INPUTS
    const auto* dims = method_.dynamic_dims();
    for (uint32_t k = 0; k < counts_.symbols; ++k) symbol_values_[k] = method_.symbols()->Get(k)->max();
    if (dims == nullptr) return;
    int64_t* slot = dynamic_shapes_;
    uint32_t last = ~0u;
    for (const fb::DynamicDim* d : *dims) {
      if (d->axis() == abi::kAliasOffset || d->tensor() == last) continue;
      last = d->tensor();
      Tensor& tensor = tensors_[d->tensor()];
      for (uint32_t a = 0; a < tensor.rank_; ++a) slot[a] = tensor.dims_[a];
      tensor.dims_ = slot;
      slot += abi::kDynamicTensorSlotBytes / sizeof(int64_t);
    }
#endif  // KILN_BOUNDED_INPUTS
  }

  const internal::ArenaState* arena_of(const Tensor& t) const {
    return t.arena_ == Tensor::kNoArena ? nullptr : &arenas_[t.arena_];
  }

  // A collective call: its operands, and what runs it.
  Error setup_collective(uint32_t i, const fb::Instruction& instruction, internal::InstructionState* state) {
#if !KILN_COLLECTIVES
    // The validator refused programs with collectives.
    return Error::kNotSupported;
#endif
    // The validator checked the operands: one input in a symmetric
    // arena of the call's group, one output of its dtype and size.
    const fb::CollectiveCall& call = *instruction.kind_as_CollectiveCall();
    state->kind = internal::InstructionKind::kCollective;
    state->arenas = arenas_;
    state->reduce_op = call.op();
    state->args.inputs = resolve(call.inputs(), &state->args.num_inputs);
    state->args.outputs = resolve(call.outputs(), &state->args.num_outputs);
    // A one-rank group on a device copies on it (the validator
    // checked that input and output share the device).
    const Tensor& input = *state->args.inputs[0];
    const internal::ArenaState& arena = arenas_[input.arena_];
    KILN_CHECK_OR_RETURN(
        arena.communicator != nullptr || is_host(input.device()) || arena.backend != nullptr, Error::kNotSupported,
        "method '%s': collective %u ('%s') of a one-rank group on %s:%u needs a communicator", name(), i,
        instruction_name(instruction), device_type_name(input.device().type()), input.device().index());
    // The call's backend state (taken whether or not it is used, so every
    // call's stays where the planner counted it).
    const uint64_t reserved = abi::round_up_bookkeeping(call.state_bytes());
    uint8_t* memory = next_state_;
    next_state_ += reserved;
    if (arena.communicator == nullptr || is_host(input.device())) return check_addends_runnable(i, instruction, *state);
    if (call.algorithm() == fb::AllReduceAlgorithm::COMMUNICATOR) {
      // Planned for the communicator (a dtype or rank count the kernels do
      // not take): its library call enqueued on the backend's stream where
      // it allows that and the planner reserved the record's bytes
      // (programs planned before it did not), else its all_reduce().
      bool enqueued = false;
      if (call.state_bytes() > 0) {
        KILN_RETURN_IF_ERROR(setup_enqueued_collective(i, instruction, memory, reserved, state, &enqueued));
      }
      return enqueued ? Error::kOk : check_addends_runnable(i, instruction, *state);
    }
    return setup_device_collective(i, instruction, memory, reserved, state);
  }

  // Path 2 below: the communicator's library call enqueued by the backend
  // (enqueue_all_reduce), recorded into its graph. `*enqueued` false (and
  // kOk) where the communicator or the backend does not do that.
  Error setup_enqueued_collective(uint32_t i, const fb::Instruction& instruction, uint8_t* memory, uint64_t bytes,
                                  internal::InstructionState* state, bool* enqueued) {
    *enqueued = false;
    const internal::ArenaState& arena = arenas_[state->args.inputs[0]->arena_];
    if (arena.communicator->enqueue_all_reduce(internal::all_reduce_args(*state), nullptr) != Error::kOk) {
      return Error::kOk;
    }
    Result<void*> handle = init_device_collective(instruction, nullptr, memory, bytes, *state);
    if (handle.ok()) {
      *enqueued = true;
      return device_collective(handle.get(), arena.backend, state);
    }
    KILN_CHECK_OR_RETURN(handle.error() == Error::kNotSupported, handle.error(),
                         "method '%s': backend '%s' cannot enqueue collective %u ('%s'): %s", name(),
                         arena.backend->id(), i, instruction_name(instruction), error_name(handle.error()));
    return Error::kOk;
  }

  // A collective with addends that the runtime runs itself (through the
  // communicator's all_reduce, or a one-rank copy) adds them after it: on
  // the host, or through the device's backend (Backend::accumulate).
  Error check_addends_runnable(uint32_t i, const fb::Instruction& instruction,
                               const internal::InstructionState& state) {
    const Tensor& output = *state.args.outputs[0];
    if (state.args.num_inputs < 2 || is_host(output.device())) return Error::kOk;
    const internal::ArenaState& arena = arenas_[output.arena_];
    const Error can = arena.backend != nullptr
                          ? arena.backend->accumulate(output.device(), arena.device, 0, arena.device, 0, 0, 1)
                          : Error::kNotSupported;
    KILN_CHECK_OR_RETURN(can == Error::kOk, Error::kNotSupported,
                         "method '%s': collective %u ('%s') has addends fused into its write, which its "
                         "communicator does not run and backend '%s' cannot add (Backend::accumulate); plan "
                         "with --no-fuse",
                         name(), i, instruction_name(instruction),
                         arena.backend != nullptr ? arena.backend->id() : "?");
    return Error::kOk;
  }

  // A collective planned for the device's all-reduce kernels, run by one
  // of three paths, the first the communicator allows:
  //   1. the backend's kernels over every rank's copy of the symmetric
  //      arena, where the communicator hands them out (device_peers);
  //   2. the communicator's own library call (NCCL's), enqueued by the
  //      backend on its stream where the kernel would run
  //      (enqueue_all_reduce), recorded into its graph like a launch;
  //   3. the communicator's all_reduce(), called by the runtime.
  Error setup_device_collective(uint32_t i, const fb::Instruction& instruction, uint8_t* memory, uint64_t bytes,
                                internal::InstructionState* state) {
    const Tensor& input = *state->args.inputs[0];
    const internal::ArenaState& arena = arenas_[input.arena_];
    DevicePeers peers;
    const Error have_peers = arena.communicator->device_peers(arena.symmetric, &peers);
    if (have_peers == Error::kNotSupported) {
      bool enqueued = false;
      KILN_RETURN_IF_ERROR(setup_enqueued_collective(i, instruction, memory, bytes, state, &enqueued));
      if (enqueued) return Error::kOk;
      KILN_LOG(INFO,
               "method '%s': collective %u ('%s'): communicator '%s' hands out no device peers, so it "
               "runs through the communicator's all_reduce()%s",
               name(), i, instruction_name(instruction), arena.communicator->name(),
               state->args.num_inputs > 1 ? ", then its addends" : "");
      return check_addends_runnable(i, instruction, *state);
    }
    KILN_CHECK_OR_RETURN(have_peers == Error::kOk && peers.count == arena.communicator->size(), Error::kInternal,
                         "method '%s': collective %u ('%s'): communicator '%s' gave %u device peers of %u: %s", name(),
                         i, instruction_name(instruction), arena.communicator->name(), peers.count,
                         arena.communicator->size(), error_name(have_peers));
    Result<void*> handle = init_device_collective(instruction, &peers, memory, bytes, *state);
    KILN_CHECK_OR_RETURN(handle.ok(), handle.error(),
                         "method '%s': backend '%s' cannot run collective %u ('%s') with its all-reduce kernels: %s",
                         name(), arena.backend->id(), i, instruction_name(instruction), error_name(handle.error()));
    return device_collective(handle.get(), arena.backend, state);
  }

  Error device_collective(void* handle, Backend* backend, internal::InstructionState* state) {
    state->kind = internal::InstructionKind::kDeviceCollective;
    state->backend = backend;
    state->delegate = handle;
    return Error::kOk;
  }

  // The backend's handle for a device collective: with `peers` its
  // kernels', without the communicator's call enqueued.
  Result<void*> init_device_collective(const fb::Instruction& instruction, const DevicePeers* peers, uint8_t* memory,
                                       uint64_t bytes, const internal::InstructionState& state) {
    const Tensor& input = *state.args.inputs[0];
    const Tensor& output = *state.args.outputs[0];
    const internal::ArenaState& arena = arenas_[input.arena_];
    BumpAllocator allocator(memory, static_cast<size_t>(bytes));
    CollectiveContext context;
    context.call = instruction.kind_as_CollectiveCall();
    context.name = instruction_name(instruction);
    context.device = input.device();
    context.input = &input;
    context.output = &output;
    context.input_arena = arena.device;
    context.output_arena = arenas_[output.arena_].device;
    for (uint32_t a = 1; a < state.args.num_inputs && a <= kMaxCollectiveAddends; ++a) {
      const Tensor& addend = *state.args.inputs[a];
      context.addends[context.num_addends] = &addend;
      context.addend_arenas[context.num_addends] = arenas_[addend.arena_].device;
      ++context.num_addends;
    }
    context.peers = peers;
    context.communicator = arena.communicator;
    const AllReduceArgs all_reduce = internal::all_reduce_args(state);
    if (peers == nullptr) context.all_reduce = &all_reduce;
    context.rank = arena.communicator->rank();
    context.allocator = &allocator;
    return arena.backend->init_collective(context);
  }

  // Picks how a copy from `src` to `dst` runs, and with which backend.
  Error setup_copy(uint32_t index, const Tensor& src, const Tensor& dst, internal::InstructionState* state) {
    const bool src_host = is_host(src.device());
    const bool dst_host = is_host(dst.device());
    if (src_host && dst_host) {
      state->kind = internal::InstructionKind::kCopyHost;
      state->run = nullptr;
      return Error::kOk;
    }
    KILN_CHECK_OR_RETURN(src_host || dst_host || same_device(src.device(), dst.device()), Error::kNotSupported,
                         "method '%s': copy %u goes from %s:%u to %s:%u; copies between two devices go through "
                         "the host",
                         name(), index, device_type_name(src.device().type()), src.device().index(),
                         device_type_name(dst.device().type()), dst.device().index());
    const Tensor& device_side = src_host ? dst : src;
    const internal::ArenaState* arena = arena_of(device_side);
    KILN_CHECK_OR_RETURN(arena != nullptr && arena->backend != nullptr, Error::kInvalidProgram,
                         "method '%s': copy %u touches a device tensor outside any device arena", name(), index);
    state->backend = arena->backend;
    state->arenas = arenas_;
    state->kind = src_host
                      ? internal::InstructionKind::kCopyToDevice
                      : (dst_host ? internal::InstructionKind::kCopyToHost : internal::InstructionKind::kCopyOnDevice);
    return Error::kOk;
  }

  // The root tensor whose storage `t` uses.
  uint32_t root_of(uint32_t t) const {
    return (tensors_[t].flags_ & internal::kTensorAlias) ? tensors_[t].alias_root_ : t;
  }

  // Whether two tensors' bytes overlap: the same root, and byte ranges
  // (offset_ counts from the same origin for both) that intersect. Pieces of
  // one Concat written in place share a root but not bytes.
  bool overlap(const Tensor* a, const Tensor* b) const {
    if (root_of(static_cast<uint32_t>(a - tensors_)) != root_of(static_cast<uint32_t>(b - tensors_))) return false;
    if (a->nbytes_ == 0 || b->nbytes_ == 0) return false;
    return a->offset_ < b->offset_ + b->nbytes_ && b->offset_ < a->offset_ + a->nbytes_;
  }

  // An output that shares its storage with an input is only allowed where
  // the kernel declared it may write over that input.
  Error check_inplace(uint32_t index, const fb::Instruction& instruction, const KernelEntry& entry,
                      const KernelArgs& args) const {
    for (uint32_t o = 0; o < args.num_outputs; ++o) {
      for (uint32_t i = 0; i < args.num_inputs; ++i) {
        if (args.inputs[i] == nullptr) continue;
        if (!overlap(args.inputs[i], args.outputs[o])) continue;
        const bool declared = o == 0 && i < 32 && (entry.inplace_inputs & (1u << i)) != 0 &&
                              args.inputs[i]->nbytes() == args.outputs[o]->nbytes();
        KILN_CHECK_OR_RETURN(declared, Error::kInvalidProgram,
                             "method '%s': instruction %u ('%s', kernel '%s') writes output %u over input %u, "
                             "which the kernel does not allow",
                             name(), index, instruction_name(instruction), entry.name, o, i);
      }
    }
    return Error::kOk;
  }

  // Fills `count` operand slots from `list` and returns where they start.
  const Tensor* const* resolve(const flatbuffers::Vector<int32_t>* list, uint16_t* out_count) {
    const uint32_t count = list != nullptr ? list->size() : 0;
    *out_count = static_cast<uint16_t>(count);
    const Tensor** start = operands_ + next_operand_;
    for (uint32_t i = 0; i < count; ++i) {
      const int32_t t = list->Get(i);
      start[i] = t < 0 ? nullptr : &tensors_[t];
    }
    next_operand_ += count;
    return start;
  }

  // The device collectives set up before a later instruction failed.
  void destroy_device_collectives() {
    for (uint32_t i = 0; i < initialized_; ++i) {
      internal::InstructionState& state = instructions_[i];
      if (state.kind == internal::InstructionKind::kDeviceCollective) state.backend->destroy(state.delegate);
    }
  }

  // Resolves the instructions of `list` into states starting at `first`.
  Error init_instructions(const flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>* list, uint32_t first) {
    const uint32_t count = list != nullptr ? list->size() : 0;
    for (uint32_t i = 0; i < count; ++i) {
      const fb::Instruction& instruction = *list->Get(i);
      internal::InstructionState* state = new (&instructions_[first + i]) internal::InstructionState();
      initialized_ = first + i + 1;
      state->args.node_name = instruction_name(instruction);
      switch (instruction.kind_type()) {
        case fb::InstructionKind::KernelCall: {
          const fb::KernelCall& call = *instruction.kind_as_KernelCall();
          const char* op = method_.operators()->Get(call.op())->name()->c_str();
          const KernelEntry* entry = kernels_.find(op);
          KILN_CHECK_OR_RETURN(entry != nullptr, Error::kKernelNotFound,
                               "method '%s': instruction %u ('%s') needs kernel '%s', which is not registered", name(),
                               i, instruction_name(instruction), op);
          state->kind = internal::InstructionKind::kKernel;
          state->run = entry->run;
          state->args.call = &call;
          state->args.inputs = resolve(call.inputs(), &state->args.num_inputs);
          state->args.outputs = resolve(call.outputs(), &state->args.num_outputs);
          state->args.scratch = resolve(call.scratch(), &state->args.num_scratch);
          KILN_RETURN_IF_ERROR(check_inplace(i, instruction, *entry, state->args));
          if (checks_ != nullptr) checks_[first + i] = entry->check;
          if (entry->check != nullptr) {
            const Error error = entry->check(state->args);
            KILN_CHECK_OR_RETURN(error == Error::kOk, error,
                                 "method '%s': instruction %u ('%s', kernel '%s') rejected its operands: %s", name(), i,
                                 instruction_name(instruction), op, error_name(error));
          }
          break;
        }
        case fb::InstructionKind::CopyCall: {
          const fb::CopyCall& copy = *instruction.kind_as_CopyCall();
          const Tensor** slots = operands_ + next_operand_;
          slots[0] = &tensors_[copy.src()];
          slots[1] = &tensors_[copy.dst()];
          next_operand_ += 2;
          state->args.inputs = slots;
          state->args.outputs = slots + 1;
          state->args.num_inputs = 1;
          state->args.num_outputs = 1;
          KILN_RETURN_IF_ERROR(setup_copy(i, *slots[0], *slots[1], state));
          break;
        }
        case fb::InstructionKind::DelegateCall: {
          const fb::DelegateCall& call = *instruction.kind_as_DelegateCall();
          const internal::DelegateState& delegate = delegates_[call.delegate()];
          state->kind = internal::InstructionKind::kDelegate;
          state->backend = delegate.backend;
          state->delegate = delegate.handle;
          state->args.inputs = resolve(call.inputs(), &state->args.num_inputs);
          state->args.outputs = resolve(call.outputs(), &state->args.num_outputs);
          break;
        }
        case fb::InstructionKind::CollectiveCall: KILN_RETURN_IF_ERROR(setup_collective(i, instruction, state)); break;
        default:  // Program::load refused it
          KILN_RETURN_ERROR(Error::kInternal, "method '%s': instruction %u has no kind", name(), i);
      }
    }
    return Error::kOk;
  }

  Error init_delegates() {
    uint8_t*& state = next_state_;
    state = delegate_state_;
    for (uint32_t d = 0; d < counts_.delegates; ++d) {
      const fb::Delegate& delegate = *method_.delegates()->Get(d);
      Backend* backend = backends_.find(delegate.backend()->c_str());
      KILN_CHECK_OR_RETURN(backend != nullptr, Error::kBackendNotFound,
                           "method '%s': delegate %u needs backend '%s', which is not registered", name(), d,
                           delegate.backend()->c_str());
      const fb::Device device = device_or_cpu(delegate.device());
      KILN_CHECK_OR_RETURN(device.type() == backend->device_type(), Error::kInvalidProgram,
                           "method '%s': delegate %u is on %s:%u but backend '%s' serves %s", name(), d,
                           device_type_name(device.type()), device.index(), backend->id(),
                           device_type_name(backend->device_type()));
      Span<const uint8_t> blob;
      if (delegate.segment() >= 0) {
        const fb::DataRef& ref = *program_.flatbuffer()->segments()->Get(static_cast<uint32_t>(delegate.segment()));
        blob = program_.segment().subspan(static_cast<size_t>(ref.offset()), static_cast<size_t>(ref.size()));
      } else if (delegate.inline_blob() != nullptr) {
        blob = Span<const uint8_t>(delegate.inline_blob()->data(), delegate.inline_blob()->size());
      }
      const uint64_t needed = backend->state_bytes(delegate, blob);
      KILN_CHECK_OR_RETURN(needed <= delegate.state_bytes(), Error::kOutOfMemory,
                           "method '%s': backend '%s' needs %llu state bytes for delegate %u, the program reserved "
                           "%llu",
                           name(), backend->id(), static_cast<unsigned long long>(needed), d,
                           static_cast<unsigned long long>(delegate.state_bytes()));
      const size_t reserved = static_cast<size_t>(abi::round_up_bookkeeping(delegate.state_bytes()));
      BumpAllocator allocator(state, reserved);
      state += reserved;
      DelegateContext context;
      context.delegate = &delegate;
      context.blob = blob;
      context.method = this;
      context.allocator = &allocator;
      Result<void*> handle = backend->init(context);
      KILN_CHECK_OR_RETURN(handle.ok(), Error::kDelegateInitFailed,
                           "method '%s': backend '%s' failed to initialise delegate %u: %s", name(), backend->id(), d,
                           error_name(handle.error()));
      delegates_[d].backend = backend;
      delegates_[d].handle = handle.get();
    }
    return Error::kOk;
  }

  // MethodView: what a delegate reads of the method at init.
  uint32_t num_tensors() const override { return static_cast<uint32_t>(counts_.tensors); }
  const Tensor& tensor(uint32_t index) const override { return tensors_[index]; }
  uint32_t num_arenas() const override { return static_cast<uint32_t>(counts_.arenas); }
  DeviceBuffer arena(uint32_t index) const override { return arenas_[index].device; }

  const Program& program_;
  const fb::Method& method_;
  const MemoryManager& memory_;
  const KernelRegistry& kernels_;
  const BackendRegistry& backends_;
  internal::DelegateState* delegates_ = nullptr;
  uint8_t* delegate_state_ = nullptr;
  int64_t* symbol_values_ = nullptr;
  int64_t* dynamic_shapes_ = nullptr;
  KernelCheckFn* checks_ = nullptr;
  uint8_t* next_state_ = nullptr;  // the next delegate's or collective's state
  uint32_t initialized_ = 0;       // instruction states constructed

  abi::MethodCounts counts_;
  bool failed_ = false;
  Tensor* tensors_ = nullptr;
  internal::InstructionState* instructions_ = nullptr;
  const Tensor** operands_ = nullptr;
  uint64_t next_operand_ = 0;
  internal::ArenaState* arenas_ = nullptr;
  struct Group {
    Communicator* communicator = nullptr;
    uint32_t rank = 0;
  };
  Group groups_[abi::kMaxCommunicatorGroups];
};

Result<Method> Program::load_method(const char* name, const MemoryManager& memory, const KernelRegistry& kernels,
                                    const BackendRegistry& backends) const {
  KILN_ASSIGN_OR_RETURN(MethodMeta meta, method_meta(name));
  return MethodLoader(*this, *meta.flatbuffer(), memory, kernels, backends).load();
}

// ---------------------------------------------------------------------------
// Method

Method::Method(Method&& other) noexcept
    : method_(other.method_),
      tensors_(other.tensors_),
      num_tensors_(other.num_tensors_),
      instructions_(other.instructions_),
      num_instructions_(other.num_instructions_),
      arenas_(other.arenas_),
      num_arenas_(other.num_arenas_),
      delegates_(other.delegates_),
      num_delegates_(other.num_delegates_),
      symbol_values_(other.symbol_values_),
      num_symbols_(other.num_symbols_),
      checks_(other.checks_),
      aliases_stale_(other.aliases_stale_),
      shapes_stale_(other.shapes_stale_),
      observer_(other.observer_),
      observer_context_(other.observer_context_),
      tracer_(other.tracer_) {
  other.moved_from_ = true;
  other.tensors_ = nullptr;
  other.instructions_ = nullptr;
  other.arenas_ = nullptr;
  other.delegates_ = nullptr;
  other.num_tensors_ = other.num_instructions_ = other.num_arenas_ = other.num_delegates_ = 0;
}

Method::~Method() { release(); }

// Destroys delegates and device collectives, then releases the device
// arenas the backends allocated.
void Method::release() {
  for (uint32_t i = 0; i < num_instructions_; ++i) {
    internal::InstructionState& state = instructions_[i];
    if (state.kind != internal::InstructionKind::kDeviceCollective || state.delegate == nullptr) continue;
    state.backend->destroy(state.delegate);
    state.delegate = nullptr;
  }
  for (uint32_t d = 0; d < num_delegates_; ++d) {
    internal::DelegateState& delegate = delegates_[d];
    if (delegate.backend != nullptr && delegate.handle != nullptr) delegate.backend->destroy(delegate.handle);
    delegate.handle = nullptr;
  }
  for (uint32_t a = 0; a < num_arenas_; ++a) {
    internal::ArenaState& arena = arenas_[a];
    if (arena.owned && arena.backend != nullptr) arena.backend->release(arena.where, arena.device);
    arena.owned = false;
    if (arena.communicator != nullptr) arena.communicator->unmap_symmetric(arena.symmetric);
    arena.communicator = nullptr;
  }
}

size_t Method::num_inputs() const { return internal::list_size(method_->inputs()); }
size_t Method::num_outputs() const { return internal::list_size(method_->outputs()); }

const Tensor* Method::input(size_t index) const {
  if (method_ == nullptr || index >= num_inputs()) return nullptr;
  return &tensors_[method_->inputs()->Get(static_cast<uint32_t>(index))];
}

const Tensor* Method::output(size_t index) const {
  if (method_ == nullptr || index >= num_outputs()) return nullptr;
  return &tensors_[method_->outputs()->Get(static_cast<uint32_t>(index))];
}

Result<Method::Location> Method::location(uint32_t tensor_index) const {
  const Tensor& tensor = tensors_[tensor_index];
  KILN_CHECK_OR_RETURN(!is_host(tensor.device()), Error::kDeviceMismatch,
                       "method '%s': '%s' lives on the host, it has no device location", method_->name()->c_str(),
                       tensor_name(*method_, tensor_index));
  Location where;
  where.device = tensor.device();
  where.offset = tensor.offset_;
  where.nbytes = tensor.nbytes();
  if (tensor.arena_ != Tensor::kNoArena) where.buffer = arenas_[tensor.arena_].device;
  return where;
}

Result<Method::Location> Method::input_location(size_t index) const {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, false, index));
  return location(t);
}

Result<Method::Location> Method::output_location(size_t index) const {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, true, index));
  return location(t);
}

Error Method::bind(uint32_t tensor_index, void* data, size_t size) {
  Tensor& tensor = tensors_[tensor_index];
  [[maybe_unused]] const char* name = tensor_name(*method_, tensor_index);  // messages only
  KILN_CHECK_OR_RETURN(is_host(tensor.device()), Error::kDeviceMismatch,
                       "'%s' lives on %s:%u; a host buffer cannot be bound to it (write into its device memory, "
                       "see Method::input_location)",
                       name, device_type_name(tensor.device().type()), tensor.device().index());
  // Zero-byte tensors may be bound to any pointer, null included.
  KILN_CHECK_OR_RETURN(data != nullptr || tensor.nbytes() == 0, Error::kInvalidArgument,
                       "'%s' needs %llu bytes, a null buffer was bound", name,
                       static_cast<unsigned long long>(tensor.nbytes()));
  // An output that follows a bounded input needs room for the largest.
  const uint64_t needed = dynamic_axes(tensor_index) != 0 && is_output_tensor(*method_, tensor_index)
                              ? method_->tensors()->Get(tensor_index)->nbytes()
                              : tensor.nbytes();
  KILN_CHECK_OR_RETURN(size >= needed, Error::kBufferTooSmall, "'%s' needs %llu bytes, the buffer bound has %llu", name,
                       static_cast<unsigned long long>(needed), static_cast<unsigned long long>(size));
  const size_t element = dtype_size(tensor.dtype());
  KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(data) % element == 0, Error::kBufferMisaligned,
                       "'%s' is %s, the buffer bound is not aligned to %u bytes", name, dtype_name(tensor.dtype()),
                       static_cast<unsigned>(element));
  tensor.data_ = data;
  tensor.flags_ |= internal::kTensorBound;
  aliases_stale_ = true;
  return Error::kOk;
}

Error Method::set_input(size_t index, const void* data, size_t size) {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, false, index));
  return bind(t, const_cast<void*>(data), size);
}

Error Method::set_output(size_t index, void* data, size_t size) {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, true, index));
  return bind(t, data, size);
}

Error Method::bind_checked(uint32_t tensor_index, const Tensor& given) {
  Tensor& expected = tensors_[tensor_index];
  [[maybe_unused]] const char* name = tensor_name(*method_, tensor_index);  // messages only
  KILN_CHECK_OR_RETURN(given.dtype() == expected.dtype(), Error::kDTypeMismatch, "'%s' is %s, a %s tensor was given",
                       name, dtype_name(expected.dtype()), dtype_name(given.dtype()));
  // Axes that follow a bounded input: an input takes any extent within its
  // bound (checked against the other inputs at execute); an output is
  // whatever the inputs make it, so only its rank is compared here.
  const uint32_t dynamic = dynamic_axes(tensor_index);
  const bool output = (expected.flags_ & internal::kTensorUser) != 0 && is_output_tensor(*method_, tensor_index);
  // The first axis that differs (a bounded one: that exceeds its bound).
  uint32_t bad = given.rank() == expected.rank() ? expected.rank() : 0;
  for (uint32_t d = 0; d < expected.rank() && bad == expected.rank(); ++d) {
    const bool bounded = (dynamic & (1u << d)) != 0;
    const int64_t limit = bounded ? planned_dim(*method_, tensor_index, d) : expected.dim(d);
    if (bounded ? !output && (given.dim(d) < 0 || given.dim(d) > limit) : given.dim(d) != limit) bad = d;
  }
  KILN_CHECK_OR_RETURN(bad == expected.rank(), Error::kShapeMismatch,
                       "'%s' (rank %u) differs from the tensor given (rank %u) in dimension %u%s", name,
                       expected.rank(), given.rank(), bad,
                       (dynamic & (1u << bad)) != 0 ? ", beyond its bound (kiln plan --input-shape)" : "");
  KILN_CHECK_OR_RETURN(same_device(given.device(), expected.device()), Error::kDeviceMismatch,
                       "'%s' lives on %s:%u, a tensor on %s:%u was given", name,
                       device_type_name(expected.device().type()), expected.device().index(),
                       device_type_name(given.device().type()), given.device().index());
  if (dynamic != 0 && !output) {
    // The slot init_dynamic_shapes gave it: the shape is the application's.
    int64_t* dims = const_cast<int64_t*>(expected.dims_);
    int64_t numel = 1;
    for (uint32_t d = 0; d < expected.rank(); ++d) {
      shapes_stale_ = shapes_stale_ || dims[d] != given.dim(d);
      numel *= (dims[d] = given.dim(d));
    }
    expected.numel_ = numel;
    expected.nbytes_ = static_cast<uint64_t>(numel) * dtype_size(expected.dtype());
  }
  return bind(tensor_index, given.data(), static_cast<size_t>(given.nbytes()));
}

Error Method::set_input(size_t index, const Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, false, index));
  return bind_checked(t, tensor);
}

Error Method::set_output(size_t index, const Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(const uint32_t t, io_tensor(method_, true, index));
  return bind_checked(t, tensor);
}

#if KILN_BOUNDED_INPUTS
uint32_t Method::dynamic_axes(uint32_t t) const {
  const auto* dims = method_->dynamic_dims();
  if (dims == nullptr) return 0;
  uint32_t lo = abi::first_dynamic_dim(*dims, t);
  uint32_t axes = 0;
  for (; lo < dims->size() && dims->Get(lo)->tensor() == t; ++lo) {
    if (dims->Get(lo)->axis() != abi::kAliasOffset) axes |= 1u << dims->Get(lo)->axis();
  }
  return axes;
}

Error Method::refresh_shapes() {
  const auto* symbols = method_->symbols();
  const auto* dims = method_->dynamic_dims();
  // Each symbol's value: its own input's bound extent.
  for (uint32_t k = 0; k < num_symbols_; ++k) {
    const fb::Symbol& symbol = *symbols->Get(k);
    const uint32_t input = method_->inputs()->Get(symbol.input());
    const int64_t value = tensors_[input].dims_[symbol.axis()];
    KILN_CHECK_OR_RETURN(value >= symbol.min() && value <= symbol.max(), Error::kShapeMismatch,
                         "input '%s' dimension %u ('%s') is %lld, outside its bound %lld:%lld",
                         tensor_name(*method_, input), symbol.axis(),
                         symbol.name() != nullptr ? symbol.name()->c_str() : "?", static_cast<long long>(value),
                         static_cast<long long>(symbol.min()), static_cast<long long>(symbol.max()));
    symbol_values_[k] = value;
  }
  for (const fb::DynamicDim* d : *dims) {
    int64_t value = 0;
    const bool ok = abi::evaluate_dynamic_dim(*d, symbol_values_, num_symbols_, &value);
    const uint32_t t = d->tensor();
    Tensor& tensor = tensors_[t];
    int64_t* slot = const_cast<int64_t*>(tensor.dims_);
    KILN_CHECK_OR_RETURN(ok && value >= 0 && value <= method_->tensors()->Get(t)->shape()->Get(d->axis()),
                         Error::kShapeMismatch,
                         "'%s' dimension %u would be %lld at these input sizes, outside 0..%lld (the planned extent)",
                         tensor_name(*method_, t), d->axis(), static_cast<long long>(value),
                         static_cast<long long>(method_->tensors()->Get(t)->shape()->Get(d->axis())));
    if ((tensor.flags_ & internal::kTensorUser) != 0 && !is_output_tensor(*method_, t)) {
      // An input's extent is the application's: it must agree.
      KILN_CHECK_OR_RETURN(slot[d->axis()] == value, Error::kShapeMismatch,
                           "input '%s' dimension %u is %lld, but the other inputs' bounded dimensions make it %lld",
                           tensor_name(*method_, t), d->axis(), static_cast<long long>(slot[d->axis()]),
                           static_cast<long long>(value));
      continue;
    }
    slot[d->axis()] = value;
  }
  uint32_t last = ~0u;
  for (const fb::DynamicDim* d : *dims) {
    if (d->tensor() == last) continue;
    last = d->tensor();
    Tensor& tensor = tensors_[last];
    int64_t numel = 1;
    for (uint32_t a = 0; a < tensor.rank_; ++a) numel *= tensor.dims_[a];
    tensor.numel_ = numel;
    tensor.nbytes_ = static_cast<uint64_t>(numel) * dtype_size(tensor.dtype());
    if (tensor.flags_ & internal::kTensorAlias) {
      // Within its base's bytes at these sizes too.
      const Tensor& root = tensors_[tensor.alias_root_];
      KILN_CHECK_OR_RETURN(tensor.offset_ - root.offset_ + tensor.nbytes_ <= root.nbytes_, Error::kShapeMismatch,
                           "'%s' would outgrow the bytes of '%s' at these input sizes", tensor_name(*method_, last),
                           tensor_name(*method_, tensor.alias_root_));
    }
  }
  // The trust boundary again: every kernel sees the changed extents before it runs.
  for (uint32_t i = 0; i < num_instructions_; ++i) {
    const internal::InstructionState& state = instructions_[i];
    if (state.kind != internal::InstructionKind::kKernel || checks_[i] == nullptr) continue;
    const Error error = checks_[i](state.args);
    KILN_CHECK_OR_RETURN(error == Error::kOk, Error::kShapeMismatch,
                         "instruction %u ('%s') rejected its operands at these input sizes: %s", i,
                         state.args.node_name, error_name(error));
  }
  shapes_stale_ = false;
  return Error::kOk;
}
#else
// Built without bounded inputs: the validator refused programs with any.
uint32_t Method::dynamic_axes(uint32_t) const { return 0; }
Error Method::refresh_shapes() { return Error::kOk; }
#endif  // KILN_BOUNDED_INPUTS

void Method::refresh_aliases() {
  for (uint32_t t = 0; t < num_tensors_; ++t) {
    Tensor& tensor = tensors_[t];
    if (!(tensor.flags_ & internal::kTensorAlias)) continue;
    const Tensor& root = tensors_[tensor.alias_root_];
    tensor.data_ =
        root.data_ != nullptr ? static_cast<uint8_t*>(root.data_) + (tensor.offset_ - root.offset_) : nullptr;
  }
  aliases_stale_ = false;
}

namespace internal {

#if KILN_COLLECTIVES
// The addends of a collective the runtime reduced (CollectiveCall.inputs
// after the first), added to its output in order: element i adds element
// i mod numel of each.
Error add_addends(const InstructionState& state) {
  const Tensor& output = *state.args.outputs[0];
  const uint64_t count = static_cast<uint64_t>(output.numel());
  for (uint16_t a = 1; a < state.args.num_inputs; ++a) {
    const Tensor& addend = *state.args.inputs[a];
    const uint64_t period = static_cast<uint64_t>(addend.numel());
    if (is_host(output.device())) {
      float* y = static_cast<float*>(output.data());
      const float* b = static_cast<const float*>(addend.data());
      for (uint64_t i = 0; i < count; i += period) {
        for (uint64_t j = 0; j < period; ++j) y[i + j] += b[j];
      }
      continue;
    }
    const ArenaState& out_arena = state.arenas[output.arena()];
    KILN_RETURN_IF_ERROR(out_arena.backend->accumulate(output.device(), out_arena.device, output.offset(),
                                                       state.arenas[addend.arena()].device, addend.offset(), count,
                                                       period));
  }
  return Error::kOk;
}
#endif  // KILN_COLLECTIVES

// The communicator's view of a collective's sum (Communicator::all_reduce).
AllReduceArgs all_reduce_args(const InstructionState& state) {
  const Tensor& input = *state.args.inputs[0];
  const Tensor& output = *state.args.outputs[0];
  AllReduceArgs args;
  args.memory = state.arenas[input.arena()].symmetric;
  args.input_offset = input.offset();
  // On a device: the address in its memory space (a device buffer's
  // handle is its base address, as for CUDA).
  args.output = is_host(output.device())
                    ? output.data()
                    : static_cast<uint8_t*>(state.arenas[output.arena()].device.handle) + output.offset();
  args.count = static_cast<uint64_t>(input.numel());
  args.dtype = input.dtype();
  args.op = state.reduce_op;
  return args;
}

// A collective: through its group's communicator, or a copy for a group
// of one rank. Built without collectives, the validator refused every
// program with one, and none of this is linked.
Error run_collective(const InstructionState& state) {
#if !KILN_COLLECTIVES
  (void)state;
  return Error::kNotSupported;
#else
  const Tensor& input = *state.args.inputs[0];
  const Tensor& output = *state.args.outputs[0];
  const ArenaState& arena = state.arenas[input.arena()];
  if (arena.communicator == nullptr) {
    // A group of one rank: the sum of one tensor is itself.
    if (!is_host(input.device())) {
      if (input.arena() != output.arena() || input.offset() != output.offset()) {
        KILN_RETURN_IF_ERROR(arena.backend->copy_on_device(output.device(), state.arenas[output.arena()].device,
                                                           output.offset(), arena.device, input.offset(),
                                                           input.nbytes()));
      }
      return add_addends(state);
    }
    if (input.data() != output.data() && input.nbytes() > 0) {
      memcpy(output.data(), input.data(), static_cast<size_t>(input.nbytes()));
    }
    return add_addends(state);
  }
  KILN_RETURN_IF_ERROR(arena.communicator->all_reduce(all_reduce_args(state)));
  return add_addends(state);
#endif
}

// Runs one resolved instruction. Copies to and from devices go through the
// backend of the device side, with the arena buffer and offset of each tensor.
Error run_instruction(const InstructionState& state, EventTracer* tracer, uint32_t index) {
  switch (state.kind) {
    case InstructionKind::kKernel: return state.run(state.args);
    case InstructionKind::kCopyHost: {
      const Tensor& src = *state.args.inputs[0];
      const Tensor& dst = *state.args.outputs[0];
      // An empty tensor may have no address; memcpy must not see it.
      if (src.data() != dst.data() && src.nbytes() > 0) {
        memcpy(dst.data(), src.data(), static_cast<size_t>(src.nbytes()));
      }
      return Error::kOk;
    }
    case InstructionKind::kCopyToDevice: {
      const Tensor& src = *state.args.inputs[0];
      const Tensor& dst = *state.args.outputs[0];
      return state.backend->copy_to_device(dst.device(), state.arenas[dst.arena()].device, dst.offset(), src.data(),
                                           src.nbytes());
    }
    case InstructionKind::kCopyToHost: {
      const Tensor& src = *state.args.inputs[0];
      const Tensor& dst = *state.args.outputs[0];
      return state.backend->copy_to_host(src.device(), dst.data(), state.arenas[src.arena()].device, src.offset(),
                                         src.nbytes());
    }
    case InstructionKind::kCopyOnDevice: {
      const Tensor& src = *state.args.inputs[0];
      const Tensor& dst = *state.args.outputs[0];
      if (src.arena() == dst.arena() && src.offset() == dst.offset()) return Error::kOk;
      return state.backend->copy_on_device(dst.device(), state.arenas[dst.arena()].device, dst.offset(),
                                           state.arenas[src.arena()].device, src.offset(), src.nbytes());
    }
    case InstructionKind::kDelegate:
    case InstructionKind::kDeviceCollective: {
      // A device collective is launched by its backend like a delegate call.
      DelegateCallArgs args;
      args.inputs = state.args.inputs;
      args.outputs = state.args.outputs;
      args.num_inputs = state.args.num_inputs;
      args.num_outputs = state.args.num_outputs;
      args.tracer = tracer;
      args.instruction = index;
      return state.backend->execute(state.delegate, args);
    }
    case InstructionKind::kCollective: return run_collective(state);
    default: return Error::kInternal;
  }
}

}  // namespace internal

void Method::set_thread_pool(ThreadPool* pool) {
  for (uint32_t i = 0; i < num_instructions_; ++i) {
    if (instructions_[i].kind == internal::InstructionKind::kKernel) instructions_[i].args.pool = pool;
  }
}

// The only checks left at execute: what the application had to bind.
// Everything about the program itself was settled at load.
Error Method::execute() {
  KILN_CHECK_OR_RETURN(method_ != nullptr, Error::kInvalidArgument, "the Method was moved from");
  for (size_t i = 0; i < num_inputs(); ++i) {
    KILN_CHECK_OR_RETURN(input(i)->flags_ & internal::kTensorBound, Error::kNotBound, "input %u ('%s') is not bound",
                         static_cast<unsigned>(i),
                         tensor_name(*method_, method_->inputs()->Get(static_cast<uint32_t>(i))));
  }
  for (size_t i = 0; i < num_outputs(); ++i) {
    KILN_CHECK_OR_RETURN(output(i)->flags_ & internal::kTensorBound, Error::kNotBound, "output %u ('%s') is not bound",
                         static_cast<unsigned>(i),
                         tensor_name(*method_, method_->outputs()->Get(static_cast<uint32_t>(i))));
  }
  if (shapes_stale_) KILN_RETURN_IF_ERROR(refresh_shapes());
  if (aliases_stale_) refresh_aliases();
  const bool timed = observer_ != nullptr || tracer_ != nullptr;
  const uint64_t begin = tracer_ != nullptr ? kiln_pal_ticks() : 0;
  for (uint32_t i = 0; i < num_instructions_; ++i) {
    const internal::InstructionState& state = instructions_[i];
    const uint64_t start = timed ? kiln_pal_ticks() : 0;
    const Error error = internal::run_instruction(state, tracer_, i);
    KILN_CHECK_OR_RETURN(error == Error::kOk, error, "instruction %u ('%s') failed: %s", i, state.args.node_name,
                         error_name(error));
    if (timed) {
      const uint64_t end = kiln_pal_ticks();
      if (observer_ != nullptr) observer_(observer_context_, i, end - start);
      if (tracer_ != nullptr) tracer_->record({start, end, i, trace_kind(state.kind), 0});
    }
  }
  if (tracer_ != nullptr) tracer_->record({begin, kiln_pal_ticks(), 0, TraceKind::kExecute, 0});
  return Error::kOk;
}

}  // namespace kiln
