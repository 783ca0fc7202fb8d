// Semantic validation of a program: the runtime's trust boundary.
//
// Program::load (program.cc) runs the flatbuffers Verifier, which proves the
// buffer is a well-formed flatbuffer, then the checks here, which prove it is
// a program the runtime can run: every index in range, shapes, dtypes and
// byte sizes that agree (overflow-checked, on values read from the file),
// every planned tensor inside its arena and aligned, aliases without cycles
// that stay inside their base and device, constants inside the data segment,
// nothing written that must stay read-only, and at least the bookkeeping the
// runtime will take. Validate once at load; execute runs without checks:
// Method loading (method.cc) and the execute loop rely on every fact
// established here and check none of them again.
//
// Each failure logs one line naming the method and the tensor, arena,
// delegate or instruction at fault, and returns kInvalidProgram.

#include "program_validator.h"

#include "kiln/runtime/check.h"
#include "kiln/runtime/tensor.h"
#include "kiln/schema/arena_layout.h"
#include "kiln/schema/bookkeeping.h"
#include "kiln/schema/device.h"
#include "kiln/schema/dynamic_dims.h"

namespace kiln {
namespace internal {
namespace {

constexpr uint32_t kMaxOperandsPerInstruction = 0xFFFF;
constexpr Error kInvalid = Error::kInvalidProgram;

// The flatbuffers verifier checks the alignment of a vector's length, not
// of 8-byte elements; the runtime reads int64 shapes in place, so a hostile
// buffer must not place them at an address that is not a multiple of 8.
template <typename T>
bool aligned8(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0;
}

bool valid_device(const fb::Device* device) { return device == nullptr || device->type() <= fb::DeviceType::MAX; }

const char* name_or(const flatbuffers::String* name, const char* fallback) {
  return name != nullptr ? name->c_str() : fallback;
}

bool listed(const flatbuffers::Vector<uint32_t>* list, uint32_t t) {
  if (list == nullptr) return false;
  for (uint32_t i = 0; i < list->size(); ++i) {
    if (list->Get(i) == t) return true;
  }
  return false;
}

// Validates one method of a program whose flatbuffer passed verification.
// The checks run in order (arenas, tensors, aliases, inputs and outputs,
// delegates, instructions, bookkeeping): each relies on those before it.
class MethodValidator {
 public:
  MethodValidator(const fb::Program& program, const fb::Method& method) : program_(program), method_(method) {}

  Error run() {
    name_ = method_.name()->c_str();
    num_tensors_ = method_.tensors() != nullptr ? method_.tensors()->size() : 0;
    KILN_RETURN_IF_ERROR(check_communicators());
    KILN_RETURN_IF_ERROR(check_arenas());
    KILN_RETURN_IF_ERROR(check_tensors());
    KILN_RETURN_IF_ERROR(check_aliases());
    KILN_RETURN_IF_ERROR(check_io());
    KILN_RETURN_IF_ERROR(check_delegates());
    KILN_RETURN_IF_ERROR(check_instructions());
    KILN_RETURN_IF_ERROR(check_dynamic_dims());
    return check_bookkeeping();
  }

 private:
  const fb::Tensor& tensor(uint32_t i) const { return *method_.tensors()->Get(i); }
  const char* tensor_name(uint32_t i) const { return name_or(tensor(i).name(), "?"); }

  Error check_arenas() {
    const auto* arenas = method_.arenas();
    if (arenas == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < arenas->size(); ++i) {
      const fb::Arena& arena = *arenas->Get(i);
      KILN_CHECK_OR_RETURN(is_power_of_two(arena.alignment()) && arena.alignment() <= 4096, kInvalid,
                           "method '%s': arena %u alignment %u is not a power of two <= 4096", name_, i,
                           arena.alignment());
      KILN_CHECK_OR_RETURN(valid_device(arena.device()) && arena.kind() <= fb::ArenaKind::MAX, kInvalid,
                           "method '%s': arena %u has an unknown device or kind", name_, i);
      KILN_CHECK_OR_RETURN(arena.kind() != fb::ArenaKind::SYMMETRIC || has_communicator(arena.group()), kInvalid,
                           "method '%s': symmetric arena %u names group %u, which has no communicator", name_, i,
                           arena.group());
    }
    return Error::kOk;
  }

  // The size of `group`'s communicator, 0 when it has none.
  uint32_t group_size(uint32_t group) const {
    const auto* comms = method_.communicators();
    if (comms == nullptr) return 0;
    for (uint32_t i = 0; i < comms->size(); ++i) {
      if (comms->Get(i)->group() == group) return comms->Get(i)->size();
    }
    return 0;
  }

#if KILN_COLLECTIVES
  Error check_communicators() {
    const auto* comms = method_.communicators();
    if (comms == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < comms->size(); ++i) {
      const fb::Communicator& c = *comms->Get(i);
      KILN_CHECK_OR_RETURN(c.group() < abi::kMaxCommunicatorGroups && c.size() >= 1, kInvalid,
                           "method '%s': communicator %u has group %u and size %u (groups 0 to %u, size >= 1)", name_,
                           i, c.group(), c.size(), static_cast<unsigned>(abi::kMaxCommunicatorGroups - 1));
      for (uint32_t j = 0; j < i; ++j) {
        KILN_CHECK_OR_RETURN(comms->Get(j)->group() != c.group(), kInvalid,
                             "method '%s': communicator group %u is listed twice", name_, c.group());
      }
    }
    return Error::kOk;
  }

  // A per-rank constant has one shard per rank of its group, each at least
  // the tensor's size.
  Error check_rank_constants(uint32_t t, const fb::ConstantStorage& storage, uint64_t nbytes) {
    if (storage.ranks() == nullptr || storage.ranks()->size() == 0) return Error::kOk;
    const uint32_t size = group_size(storage.group());
    KILN_CHECK_OR_RETURN(size == storage.ranks()->size(), kInvalid,
                         "method '%s': tensor %u '%s' has %u per-rank constants; group %u has %u ranks", name_, t,
                         tensor_name(t), storage.ranks()->size(), storage.group(), size);
    const auto* constants = program_.constants();
    for (uint32_t r = 0; r < storage.ranks()->size(); ++r) {
      const uint32_t index = storage.ranks()->Get(r);
      KILN_CHECK_OR_RETURN(constants != nullptr && index < constants->size() && constants->Get(index)->size() >= nbytes,
                           kInvalid,
                           "method '%s': tensor %u '%s': rank %u's constant %u does not exist or is too "
                           "small",
                           name_, t, tensor_name(t), r, index);
    }
    return Error::kOk;
  }

  // One input in a symmetric arena of the call's group; one output of the
  // same dtype, size and device; a reduction the runtime knows; at most two
  // addends (float32 on the output's device, each of a size that divides
  // the output's).
  Error check_collective(uint32_t i, const fb::CollectiveCall& call) {
    const auto size = [](const flatbuffers::Vector<int32_t>* v) { return v != nullptr ? v->size() : 0u; };
    KILN_CHECK_OR_RETURN(
        size(call.inputs()) >= 1 && size(call.inputs()) <= 1 + kMaxCollectiveAddends && size(call.outputs()) == 1,
        kInvalid,
        "method '%s': collective instruction %u has %u inputs and %u outputs, not one of each (and at "
        "most %u addends)",
        name_, i, size(call.inputs()), size(call.outputs()), kMaxCollectiveAddends);
    KILN_CHECK_OR_RETURN(call.kind() <= fb::CollectiveKind::MAX && call.op() <= fb::ReduceOp::MAX &&
                             call.algorithm() <= fb::AllReduceAlgorithm::MAX,
                         kInvalid, "method '%s': collective instruction %u has an unknown kind, reduction or algorithm",
                         name_, i);
    const uint32_t in = static_cast<uint32_t>(call.inputs()->Get(0));
    const uint32_t out = static_cast<uint32_t>(call.outputs()->Get(0));
    KILN_CHECK_OR_RETURN(tensor(in).dtype() == tensor(out).dtype() && tensor(in).nbytes() == tensor(out).nbytes(),
                         kInvalid,
                         "method '%s': collective instruction %u reduces '%s' into '%s' of another dtype "
                         "or size",
                         name_, i, tensor_name(in), tensor_name(out));
    KILN_CHECK_OR_RETURN(same_device(device_or_cpu(tensor(in).device()), device_or_cpu(tensor(out).device())), kInvalid,
                         "method '%s': collective instruction %u reduces '%s' into '%s' on another device", name_, i,
                         tensor_name(in), tensor_name(out));
    for (uint32_t a = 1; a < size(call.inputs()); ++a) {
      const uint32_t addend = static_cast<uint32_t>(call.inputs()->Get(a));
      const uint64_t period = tensor(addend).nbytes();
      KILN_CHECK_OR_RETURN(tensor(addend).dtype() == DType::FLOAT32 && tensor(out).dtype() == DType::FLOAT32 &&
                               period > 0 && tensor(out).nbytes() % period == 0 &&
                               same_device(device_or_cpu(tensor(addend).device()), device_or_cpu(tensor(out).device())),
                           kInvalid,
                           "method '%s': collective instruction %u adds '%s' to '%s': addends are float32, on the "
                           "output's device, of a size that divides the output's",
                           name_, i, tensor_name(addend), tensor_name(out));
    }
    const uint32_t root = root_of(in);
    const fb::PlannedStorage* planned = root < num_tensors_ ? tensor(root).storage_as_PlannedStorage() : nullptr;
    const fb::Arena* arena =
        planned != nullptr && method_.arenas() != nullptr && planned->arena() < method_.arenas()->size()
            ? method_.arenas()->Get(planned->arena())
            : nullptr;
    KILN_CHECK_OR_RETURN(
        arena != nullptr && arena->kind() == fb::ArenaKind::SYMMETRIC && arena->group() == call.group(), kInvalid,
        "method '%s': collective instruction %u reads '%s', which is not planned in a "
        "symmetric arena of group %u",
        name_, i, tensor_name(in), call.group());
    // The device kernels' signal words (8 bytes per block) inside the arena.
    const uint64_t signals = uint64_t{call.blocks()} * 8;
    KILN_CHECK_OR_RETURN(call.algorithm() == fb::AllReduceAlgorithm::COMMUNICATOR ||
                             (call.blocks() > 0 && call.signal_offset() <= arena->size() &&
                              signals <= arena->size() - call.signal_offset()),
                         kInvalid,
                         "method '%s': collective instruction %u: its %u blocks' signal words at offset %llu leave "
                         "its symmetric arena (%llu bytes)",
                         name_, i, call.blocks(), static_cast<unsigned long long>(call.signal_offset()),
                         static_cast<unsigned long long>(arena->size()));
    return Error::kOk;
  }

#else
  // Built without collectives (KILN_WITH_COLLECTIVES off, as for firmware):
  // a program that needs them is refused at load.
  Error check_communicators() {
    KILN_CHECK_OR_RETURN(method_.communicators() == nullptr || method_.communicators()->size() == 0,
                         Error::kNotSupported,
                         "method '%s' has collectives; this runtime was built without them "
                         "(KILN_WITH_COLLECTIVES)",
                         name_);
    return Error::kOk;
  }
  Error check_rank_constants(uint32_t, const fb::ConstantStorage&, uint64_t) { return Error::kOk; }
  Error check_collective(uint32_t, const fb::CollectiveCall&) { return Error::kOk; }
#endif  // KILN_COLLECTIVES

  bool has_communicator(uint32_t group) const {
    const auto* comms = method_.communicators();
    if (comms == nullptr) return false;
    for (uint32_t i = 0; i < comms->size(); ++i) {
      if (comms->Get(i)->group() == group) return true;
    }
    return false;
  }

  Error check_planned(uint32_t t, const fb::PlannedStorage& planned, uint64_t nbytes, fb::Device device) {
    const auto* arenas = method_.arenas();
    KILN_CHECK_OR_RETURN(arenas != nullptr && planned.arena() < arenas->size(), kInvalid,
                         "method '%s': tensor %u '%s' names arena %u, which does not exist", name_, t, tensor_name(t),
                         planned.arena());
    const fb::Arena& arena = *arenas->Get(planned.arena());
    uint64_t end = 0;
    KILN_CHECK_OR_RETURN(!add_overflows(planned.offset(), nbytes, &end) && end <= arena.size(), kInvalid,
                         "method '%s': tensor %u '%s' at offset %llu + %llu bytes lies outside arena %u "
                         "(%llu bytes)",
                         name_, t, tensor_name(t), static_cast<unsigned long long>(planned.offset()),
                         static_cast<unsigned long long>(nbytes), planned.arena(),
                         static_cast<unsigned long long>(arena.size()));
    KILN_CHECK_OR_RETURN(planned.offset() % arena.alignment() == 0, kInvalid,
                         "method '%s': tensor %u '%s' offset %llu is not aligned to arena %u's %u", name_, t,
                         tensor_name(t), static_cast<unsigned long long>(planned.offset()), planned.arena(),
                         arena.alignment());
    const fb::Device arena_device = device_or_cpu(arena.device());
    KILN_CHECK_OR_RETURN(same_device(arena_device, device), kInvalid,
                         "method '%s': tensor %u '%s' is on %s:%u but arena %u is on %s:%u", name_, t, tensor_name(t),
                         device_type_name(device.type()), device.index(), planned.arena(),
                         device_type_name(arena_device.type()), arena_device.index());
    return Error::kOk;
  }

  // Rank, shape and byte size of tensor `t`; on success its byte count in
  // `out_nbytes`.
  Error check_shape(uint32_t t, uint64_t* out_nbytes) {
    const fb::Tensor& tensor = this->tensor(t);
    const size_t element = dtype_size(tensor.dtype());
    KILN_CHECK_OR_RETURN(element != 0, kInvalid, "method '%s': tensor %u '%s' has unknown dtype %u", name_, t,
                         tensor_name(t), static_cast<unsigned>(tensor.dtype()));
    const auto* shape = tensor.shape();
    const uint32_t rank = shape != nullptr ? shape->size() : 0;
    KILN_CHECK_OR_RETURN(aligned8(shape), kInvalid, "method '%s': tensor %u '%s' has a misaligned shape", name_, t,
                         tensor_name(t));
    KILN_CHECK_OR_RETURN(rank <= kMaxRank, kInvalid, "method '%s': tensor %u '%s' has rank %u (at most %u)", name_, t,
                         tensor_name(t), rank, kMaxRank);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      const int64_t dim = shape->Get(d);
      KILN_CHECK_OR_RETURN(
          dim >= 0 && !mul_overflows(numel, static_cast<uint64_t>(dim), &numel) && numel <= (uint64_t{1} << 62),
          kInvalid, "method '%s': tensor %u '%s' has an invalid or too large shape", name_, t, tensor_name(t));
    }
    uint64_t nbytes = 0;
    KILN_CHECK_OR_RETURN(!mul_overflows(numel, element, &nbytes) && nbytes == tensor.nbytes(), kInvalid,
                         "method '%s': tensor %u '%s' says %llu bytes, its shape and dtype make %llu", name_, t,
                         tensor_name(t), static_cast<unsigned long long>(tensor.nbytes()),
                         static_cast<unsigned long long>(nbytes));
    *out_nbytes = nbytes;
    return Error::kOk;
  }

  // A quantized method input or output (schema: Quantization): INT8 or
  // UINT8 data the application passes or reads, a finite positive scale
  // (NaN fails both comparisons) and a zero point the dtype holds.
  Error check_quantization(uint32_t t) {
    const fb::Tensor& tensor = this->tensor(t);
    const fb::Quantization* q = tensor.quantization();
    if (q == nullptr) return Error::kOk;
    const bool int8 = tensor.dtype() == fb::DType::INT8;
    KILN_CHECK_OR_RETURN(int8 || tensor.dtype() == fb::DType::UINT8, kInvalid,
                         "method '%s': tensor %u '%s' carries a quantization but is not int8 or uint8", name_, t,
                         tensor_name(t));
    KILN_CHECK_OR_RETURN(tensor.storage_type() == fb::Storage::UserStorage, kInvalid,
                         "method '%s': tensor %u '%s' carries a quantization but is no method input or output", name_,
                         t, tensor_name(t));
    KILN_CHECK_OR_RETURN(q->scale() > 0.f && q->scale() <= 3.40282347e38f, kInvalid,
                         "method '%s': tensor %u '%s' has quantization scale %f (finite and positive expected)", name_,
                         t, tensor_name(t), static_cast<double>(q->scale()));
    const int32_t low = int8 ? -128 : 0;
    KILN_CHECK_OR_RETURN(q->zero_point() >= low && q->zero_point() <= low + 255, kInvalid,
                         "method '%s': tensor %u '%s' has zero point %ld, outside its dtype's %ld..%ld", name_, t,
                         tensor_name(t), static_cast<long>(q->zero_point()), static_cast<long>(low),
                         static_cast<long>(low + 255));
    return Error::kOk;
  }

  Error check_tensors() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      const fb::Tensor& tensor = this->tensor(t);
      uint64_t nbytes = 0;
      KILN_RETURN_IF_ERROR(check_shape(t, &nbytes));
      KILN_CHECK_OR_RETURN(valid_device(tensor.device()), kInvalid, "method '%s': tensor %u '%s' has an unknown device",
                           name_, t, tensor_name(t));
      const fb::Device device = device_or_cpu(tensor.device());
      KILN_RETURN_IF_ERROR(check_quantization(t));
      switch (tensor.storage_type()) {
        case fb::Storage::ConstantStorage: {
          const auto* constants = program_.constants();
          const uint32_t index = tensor.storage_as_ConstantStorage()->index();
          KILN_RETURN_IF_ERROR(check_rank_constants(t, *tensor.storage_as_ConstantStorage(), nbytes));
          KILN_CHECK_OR_RETURN(constants != nullptr && index < constants->size(), kInvalid,
                               "method '%s': tensor %u '%s' names constant %u, which does not exist", name_, t,
                               tensor_name(t), index);
          KILN_CHECK_OR_RETURN(constants->Get(index)->size() >= nbytes, kInvalid,
                               "method '%s': tensor %u '%s' needs %llu bytes, constant %u has %llu", name_, t,
                               tensor_name(t), static_cast<unsigned long long>(nbytes), index,
                               static_cast<unsigned long long>(constants->Get(index)->size()));
          // Device constants are uploaded by their backend (delegate blobs).
          KILN_CHECK_OR_RETURN(is_host(device), kInvalid, "method '%s': constant tensor %u '%s' is not on the host",
                               name_, t, tensor_name(t));
          break;
        }
        case fb::Storage::PlannedStorage:
          KILN_RETURN_IF_ERROR(check_planned(t, *tensor.storage_as_PlannedStorage(), nbytes, device));
          break;
        case fb::Storage::AliasStorage:
          KILN_CHECK_OR_RETURN(tensor.storage_as_AliasStorage()->base() < num_tensors_, kInvalid,
                               "method '%s': tensor %u '%s' aliases tensor %u, which does not exist", name_, t,
                               tensor_name(t), tensor.storage_as_AliasStorage()->base());
          break;
        case fb::Storage::UserStorage: {
          const fb::PlannedStorage* fallback = tensor.storage_as_UserStorage()->fallback();
          if (fallback != nullptr) KILN_RETURN_IF_ERROR(check_planned(t, *fallback, nbytes, device));
          break;
        }
        default: KILN_RETURN_ERROR(kInvalid, "method '%s': tensor %u '%s' has no storage", name_, t, tensor_name(t));
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

  // An alias lies inside its base, from its byte offset (a piece of a Concat
  // written in place) on; every link of a chain checked so, the chain lies
  // inside its root. A non-zero offset is a multiple of the tensor's element
  // size (kernels address elements through typed pointers) and only host
  // tensors take one (a device tensor is located by its arena offset alone).
  Error check_alias_offset(uint32_t t) {
    const fb::AliasStorage& alias = *tensor(t).storage_as_AliasStorage();
    const uint64_t offset = alias.offset();
    const fb::Tensor& base = tensor(alias.base());
    if (offset != 0) {
      const size_t element = dtype_size(tensor(t).dtype());
      KILN_CHECK_OR_RETURN(element != 0 && offset % element == 0, kInvalid,
                           "method '%s': alias %u '%s' starts %llu bytes into '%s', not a multiple of its %u-byte "
                           "elements",
                           name_, t, tensor_name(t), static_cast<unsigned long long>(offset), tensor_name(alias.base()),
                           static_cast<unsigned>(element));
      KILN_CHECK_OR_RETURN(is_host(device_or_cpu(tensor(t).device())), kInvalid,
                           "method '%s': alias %u '%s' on a device has a byte offset", name_, t, tensor_name(t));
    }
    KILN_CHECK_OR_RETURN(offset <= base.nbytes() && tensor(t).nbytes() <= base.nbytes() - offset, kInvalid,
                         "method '%s': alias %u '%s' (%llu bytes at offset %llu) leaves its base '%s' (%llu bytes)",
                         name_, t, tensor_name(t), static_cast<unsigned long long>(tensor(t).nbytes()),
                         static_cast<unsigned long long>(offset), tensor_name(alias.base()),
                         static_cast<unsigned long long>(base.nbytes()));
    return Error::kOk;
  }

  Error check_aliases() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      if (tensor(t).storage_type() != fb::Storage::AliasStorage) continue;
      const uint32_t root = root_of(t);
      KILN_CHECK_OR_RETURN(root != num_tensors_, kInvalid, "method '%s': tensor %u '%s' is part of an alias cycle",
                           name_, t, tensor_name(t));
      KILN_CHECK_OR_RETURN(tensor(t).nbytes() <= tensor(root).nbytes(), kInvalid,
                           "method '%s': alias %u '%s' (%llu bytes) is larger than its base '%s' (%llu)", name_, t,
                           tensor_name(t), static_cast<unsigned long long>(tensor(t).nbytes()), tensor_name(root),
                           static_cast<unsigned long long>(tensor(root).nbytes()));
      KILN_RETURN_IF_ERROR(check_alias_offset(t));
      KILN_CHECK_OR_RETURN(same_device(device_or_cpu(tensor(t).device()), device_or_cpu(tensor(root).device())),
                           kInvalid, "method '%s': alias %u '%s' is on another device than its base '%s'", name_, t,
                           tensor_name(t), tensor_name(root));
    }
    return Error::kOk;
  }

  Error check_io_list(const flatbuffers::Vector<uint32_t>* list, const char* what) {
    if (list == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < list->size(); ++i) {
      const uint32_t t = list->Get(i);
      KILN_CHECK_OR_RETURN(t < num_tensors_, kInvalid, "method '%s': %s %u is tensor %u, which does not exist", name_,
                           what, i, t);
      KILN_CHECK_OR_RETURN(tensor(t).storage_type() == fb::Storage::UserStorage, kInvalid,
                           "method '%s': %s %u ('%s') is not user-provided storage", name_, what, i, tensor_name(t));
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
      KILN_CHECK_OR_RETURN(listed(method_.inputs(), t) || listed(method_.outputs(), t), kInvalid,
                           "method '%s': tensor %u '%s' is user-provided but neither an input nor an output", name_, t,
                           tensor_name(t));
    }
    return Error::kOk;
  }

  Error check_written(uint32_t instruction, uint32_t t) {
    const uint32_t root = root_of(t);
    const bool constant = tensor(root).storage_type() == fb::Storage::ConstantStorage;
    KILN_CHECK_OR_RETURN(!constant && !listed(method_.inputs(), root), kInvalid,
                         "method '%s': instruction %u writes tensor '%s', which is read-only (%s)", name_, instruction,
                         tensor_name(t), constant ? "a constant" : "a method input");
    return Error::kOk;
  }

  Error check_operands(uint32_t instruction, const flatbuffers::Vector<int32_t>* list, bool optional, bool written) {
    if (list == nullptr) return Error::kOk;
    KILN_CHECK_OR_RETURN(list->size() <= kMaxOperandsPerInstruction, kInvalid,
                         "method '%s': instruction %u has %u operands in one list", name_, instruction, list->size());
    for (uint32_t i = 0; i < list->size(); ++i) {
      const int32_t t = list->Get(i);
      if (t == -1 && optional) continue;
      KILN_CHECK_OR_RETURN(t >= 0 && static_cast<uint32_t>(t) < num_tensors_, kInvalid,
                           "method '%s': instruction %u operand %u is tensor %d, which does not exist", name_,
                           instruction, i, t);
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
      KILN_CHECK_OR_RETURN(valid_device(delegate.device()), kInvalid, "method '%s': delegate %u has an unknown device",
                           name_, i);
      KILN_CHECK_OR_RETURN(delegate.segment() == -1 ||
                               (delegate.segment() >= 0 && static_cast<uint32_t>(delegate.segment()) < num_segments),
                           kInvalid, "method '%s': delegate %u names segment %d, which does not exist", name_, i,
                           delegate.segment());
      KILN_CHECK_OR_RETURN(delegate.state_bytes() <= (uint64_t{1} << 40), kInvalid,
                           "method '%s': delegate %u asks for %llu state bytes", name_, i,
                           static_cast<unsigned long long>(delegate.state_bytes()));
    }
    return Error::kOk;
  }

  // Load-time instructions may only copy into planned memory (uploads of
  // constants to a device).
  Error check_init_instructions() {
    const auto* instructions = method_.init_instructions();
    if (instructions == nullptr) return Error::kOk;
    for (uint32_t i = 0; i < instructions->size(); ++i) {
      const fb::CopyCall* copy = instructions->Get(i)->kind_as_CopyCall();
      KILN_CHECK_OR_RETURN(copy != nullptr && copy->src() < num_tensors_ && copy->dst() < num_tensors_, kInvalid,
                           "method '%s': load-time instruction %u is not a valid copy", name_, i);
      KILN_CHECK_OR_RETURN(tensor(copy->src()).nbytes() == tensor(copy->dst()).nbytes() &&
                               tensor(root_of(copy->dst())).storage_type() == fb::Storage::PlannedStorage,
                           kInvalid, "method '%s': load-time copy %u must fill planned memory of the same size", name_,
                           i);
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
          KILN_CHECK_OR_RETURN(call.op() < num_operators, kInvalid,
                               "method '%s': instruction %u calls operator %u, which does not exist", name_, i,
                               call.op());
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), true, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          KILN_RETURN_IF_ERROR(check_operands(i, call.scratch(), false, true));
          break;
        }
        case fb::InstructionKind::CopyCall: {
          const fb::CopyCall& copy = *instruction.kind_as_CopyCall();
          KILN_CHECK_OR_RETURN(copy.src() < num_tensors_ && copy.dst() < num_tensors_, kInvalid,
                               "method '%s': copy instruction %u names a tensor that does not exist", name_, i);
          KILN_CHECK_OR_RETURN(tensor(copy.src()).nbytes() == tensor(copy.dst()).nbytes(), kInvalid,
                               "method '%s': copy instruction %u from '%s' to '%s' changes byte size", name_, i,
                               tensor_name(copy.src()), tensor_name(copy.dst()));
          KILN_RETURN_IF_ERROR(check_written(i, copy.dst()));
          break;
        }
        case fb::InstructionKind::DelegateCall: {
          const fb::DelegateCall& call = *instruction.kind_as_DelegateCall();
          KILN_CHECK_OR_RETURN(call.delegate() < num_delegates, kInvalid,
                               "method '%s': instruction %u calls delegate %u, which does not exist", name_, i,
                               call.delegate());
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), false, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          break;
        }
        case fb::InstructionKind::CollectiveCall: {
          const fb::CollectiveCall& call = *instruction.kind_as_CollectiveCall();
          KILN_CHECK_OR_RETURN(has_communicator(call.group()), kInvalid,
                               "method '%s': collective instruction %u names group %u, which has no communicator",
                               name_, i, call.group());
          KILN_RETURN_IF_ERROR(check_operands(i, call.inputs(), false, false));
          KILN_RETURN_IF_ERROR(check_operands(i, call.outputs(), false, true));
          KILN_RETURN_IF_ERROR(check_collective(i, call));
          break;
        }
        default: KILN_RETURN_ERROR(kInvalid, "method '%s': instruction %u has no kind", name_, i);
      }
    }
    return Error::kOk;
  }

#if KILN_BOUNDED_INPUTS
  // True when tensor t has a DynamicDim (the list is sorted by tensor).
  bool is_dynamic(uint32_t t) const {
    const auto* dims = method_.dynamic_dims();
    if (dims == nullptr) return false;
    const uint32_t i = abi::first_dynamic_dim(*dims, t);
    return i < dims->size() && dims->Get(i)->tensor() == t;
  }

  // No operand of a delegate or collective changes size.
  Error check_fixed_operands(const flatbuffers::Vector<int32_t>* operands, uint32_t i) const {
    if (operands == nullptr) return Error::kOk;
    for (int32_t t : *operands) {
      KILN_CHECK_OR_RETURN(t < 0 || !is_dynamic(static_cast<uint32_t>(t)), kInvalid,
                           "method '%s': instruction %u runs on a device or across ranks but its operand '%s' changes "
                           "size with a bounded input",
                           name_, i, tensor_name(static_cast<uint32_t>(t)));
    }
    return Error::kOk;
  }

  // Method.symbols: each bounds a dimension of an input, planned at its max,
  // and that dimension has a DynamicDim (the slot its extent goes into).
  Error check_symbols(int64_t* out_max) {
    const auto* symbols = method_.symbols();
    const auto* dims = method_.dynamic_dims();
    const uint32_t num_inputs = method_.inputs() != nullptr ? method_.inputs()->size() : 0;
    for (uint32_t k = 0; k < symbols->size(); ++k) {
      const fb::Symbol& symbol = *symbols->Get(k);
      KILN_CHECK_OR_RETURN(symbol.input() < num_inputs, kInvalid, "method '%s': symbol %u names input %u of %u", name_,
                           k, symbol.input(), num_inputs);
      const uint32_t input = method_.inputs()->Get(symbol.input());
      const fb::Tensor& t = tensor(input);
      const uint32_t rank = t.shape() != nullptr ? t.shape()->size() : 0;
      KILN_CHECK_OR_RETURN(symbol.axis() < rank && symbol.min() >= 1 && symbol.min() <= symbol.max() &&
                               t.shape()->Get(symbol.axis()) == symbol.max(),
                           kInvalid, "method '%s': symbol %u (%s) does not bound a dimension of its input", name_, k,
                           name_or(symbol.name(), "?"));
      bool found = false;
      for (uint32_t i = 0; dims != nullptr && i < dims->size() && !found; ++i) {
        found = dims->Get(i)->tensor() == input && dims->Get(i)->axis() == symbol.axis();
      }
      KILN_CHECK_OR_RETURN(found, kInvalid, "method '%s': symbol %u's dimension has no dynamic dimension", name_, k);
      out_max[k] = symbol.max();
    }
    return Error::kOk;
  }

  // Inputs bounded above (Method.symbols, Method.dynamic_dims): every index
  // in range, every formula giving the planned extent at the symbols' max,
  // sorted, on the host, and nothing a delegate or collective reads or writes.
  Error check_dynamic_dims() {
    const auto* dims = method_.dynamic_dims();
    const uint32_t num_symbols = method_.symbols() != nullptr ? method_.symbols()->size() : 0;
    const uint32_t num_dims = dims != nullptr ? dims->size() : 0;
    KILN_CHECK_OR_RETURN(num_dims == 0 || num_symbols > 0, kInvalid, "method '%s': dynamic dimensions without symbols",
                         name_);
    if (num_symbols == 0) return Error::kOk;
    KILN_CHECK_OR_RETURN(num_symbols <= abi::kMaxSymbols && aligned8(dims), kInvalid,
                         "method '%s': %u symbols (at most %u), or misaligned dynamic dimensions", name_, num_symbols,
                         abi::kMaxSymbols);
    int64_t top[abi::kMaxSymbols] = {};
    KILN_RETURN_IF_ERROR(check_symbols(top));
    for (uint32_t i = 0; i < num_dims; ++i) {
      const fb::DynamicDim& d = *dims->Get(i);
      KILN_CHECK_OR_RETURN(d.tensor() < num_tensors_, kInvalid, "method '%s': dynamic dimension %u names tensor %u",
                           name_, i, d.tensor());
      KILN_CHECK_OR_RETURN(d.axis() != abi::kAliasOffset, Error::kNotSupported,
                           "method '%s': tensor '%s' has an alias offset that follows a bounded input; this runtime "
                           "does not move aliases",
                           name_, tensor_name(d.tensor()));
      const fb::Tensor& t = tensor(d.tensor());
      const uint32_t rank = t.shape() != nullptr ? t.shape()->size() : 0;
      const fb::DynamicDim* prev = i > 0 ? dims->Get(i - 1) : nullptr;
      KILN_CHECK_OR_RETURN(d.axis() < rank && (prev == nullptr || prev->tensor() < d.tensor() ||
                                               (prev->tensor() == d.tensor() && prev->axis() < d.axis())),
                           kInvalid,
                           "method '%s': dynamic dimension %u (tensor '%s' of rank %u) is out of range or order", name_,
                           i, tensor_name(d.tensor()), rank);
      KILN_CHECK_OR_RETURN(d.symbols() != 0 && (d.symbols() >> num_symbols) == 0, kInvalid,
                           "method '%s': dynamic dimension %u names symbols 0x%x of %u", name_, i, d.symbols(),
                           num_symbols);
      int64_t at_max = 0;
      KILN_CHECK_OR_RETURN(
          abi::evaluate_dynamic_dim(d, top, num_symbols, &at_max) && at_max == t.shape()->Get(d.axis()), kInvalid,
          "method '%s': tensor '%s' dimension %u is not its planned extent at the bounds' maximum", name_,
          tensor_name(d.tensor()), d.axis());
      KILN_CHECK_OR_RETURN(is_host(device_or_cpu(t.device())), kInvalid,
                           "method '%s': device tensor '%s' changes size with a bounded input", name_,
                           tensor_name(d.tensor()));
    }
    const auto* instructions = method_.instructions();
    for (uint32_t i = 0; instructions != nullptr && i < instructions->size(); ++i) {
      const fb::Instruction& instruction = *instructions->Get(i);
      if (const fb::DelegateCall* call = instruction.kind_as_DelegateCall()) {
        KILN_RETURN_IF_ERROR(check_fixed_operands(call->inputs(), i));
        KILN_RETURN_IF_ERROR(check_fixed_operands(call->outputs(), i));
      } else if (const fb::CollectiveCall* collective = instruction.kind_as_CollectiveCall()) {
        KILN_RETURN_IF_ERROR(check_fixed_operands(collective->inputs(), i));
        KILN_RETURN_IF_ERROR(check_fixed_operands(collective->outputs(), i));
      }
    }
    return Error::kOk;
  }
#else
  // Built without bounded inputs (KILN_WITH_BOUNDED_INPUTS=OFF).
  Error check_dynamic_dims() {
    const bool bounded = (method_.symbols() != nullptr && method_.symbols()->size() > 0) ||
                         (method_.dynamic_dims() != nullptr && method_.dynamic_dims()->size() > 0);
    KILN_CHECK_OR_RETURN(!bounded, Error::kNotSupported,
                         "method '%s' has inputs bounded above; this runtime was built without them "
                         "(KILN_WITH_BOUNDED_INPUTS=OFF)",
                         name_);
    return Error::kOk;
  }
#endif  // KILN_BOUNDED_INPUTS

  // The planner wrote the figure with the same definition
  // (schema/bookkeeping.h); a smaller one would let Method loading run out.
  Error check_bookkeeping() {
    const uint64_t required = abi::method_bookkeeping_bytes(method_);
    KILN_CHECK_OR_RETURN(method_.bookkeeping_bytes() >= required, kInvalid,
                         "method '%s': program states %llu bookkeeping bytes, the runtime needs %llu", name_,
                         static_cast<unsigned long long>(method_.bookkeeping_bytes()),
                         static_cast<unsigned long long>(required));
    return Error::kOk;
  }

  const fb::Program& program_;
  const fb::Method& method_;
  const char* name_ = "";
  uint32_t num_tensors_ = 0;
};

}  // namespace

Error validate_data_refs(const flatbuffers::Vector<const fb::DataRef*>* refs, uint64_t segment_size, uint32_t alignment,
                         const char* what) {
  if (refs == nullptr) return Error::kOk;
  KILN_CHECK_OR_RETURN(aligned8(refs), kInvalid, "the %s table is misaligned", what);
  for (uint32_t i = 0; i < refs->size(); ++i) {
    const fb::DataRef& ref = *refs->Get(i);
    uint64_t end = 0;
    KILN_CHECK_OR_RETURN(!add_overflows(ref.offset(), ref.size(), &end) && end <= segment_size, kInvalid,
                         "%s %u (offset %llu, %llu bytes) lies outside the %llu-byte data segment", what, i,
                         static_cast<unsigned long long>(ref.offset()), static_cast<unsigned long long>(ref.size()),
                         static_cast<unsigned long long>(segment_size));
    KILN_CHECK_OR_RETURN(ref.offset() % alignment == 0, kInvalid, "%s %u offset %llu is not aligned to %u", what, i,
                         static_cast<unsigned long long>(ref.offset()), alignment);
  }
  return Error::kOk;
}

Error validate_method(const fb::Program& program, const fb::Method& method) {
  return MethodValidator(program, method).run();
}

Error validate_arena_groups(const fb::Program& program) {
  const auto* groups = program.arena_groups();
  const uint32_t num_methods = program.methods()->size();
  for (uint32_t g = 0; groups != nullptr && g < groups->size(); ++g) {
    const fb::ArenaGroup& group = *groups->Get(g);
    const auto* members = group.methods();
    for (uint32_t k = 0; members != nullptr && k < members->size(); ++k) {
      const uint32_t m = members->Get(k);
      KILN_CHECK_OR_RETURN(m < num_methods, kInvalid, "arena group %u names method %u; the program has %u", g, m,
                           num_methods);
      // Each method once, in one group: compare with every member before it.
      for (uint32_t h = 0; h <= g; ++h) {
        const auto* earlier = groups->Get(h)->methods();
        const uint32_t end = h == g ? k : (earlier != nullptr ? earlier->size() : 0);
        for (uint32_t j = 0; j < end; ++j) {
          KILN_CHECK_OR_RETURN(earlier->Get(j) != m, kInvalid, "method %u is named twice in arena groups", m);
        }
      }
      const uint64_t needs = abi::host_arena_bytes(*program.methods()->Get(m));
      KILN_CHECK_OR_RETURN(
          needs != UINT64_MAX && needs <= group.host_bytes(), kInvalid,
          "arena group %u's buffer of %llu bytes cannot hold the host arenas of method '%s' (%llu bytes)", g,
          static_cast<unsigned long long>(group.host_bytes()), program.methods()->Get(m)->name()->c_str(),
          static_cast<unsigned long long>(needs));
    }
  }
  return Error::kOk;
}

}  // namespace internal
}  // namespace kiln
