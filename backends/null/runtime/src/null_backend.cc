#include "kiln/backends/null/null_backend.h"

#include <string.h>

#include <new>

#include "backends/null/null_abi.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/log.h"
#include "kiln/schema/delegate_generated.h"

namespace kiln::backends::null {
namespace {

// One kernel call, resolved at init. Its operand arrays follow the steps
// in the delegate's state:
//
//   +--------+----------------------+------------------------------------+
//   | Record | steps[kernels]       | operands (const Tensor*), per step |
//   | 16 B   | kernels * kStepBytes | inputs, outputs, scratch           |
//   +--------+----------------------+------------------------------------+
struct Step {
  KernelArgs args;
  KernelRunFn run;
};

struct Record {
  Step* steps;
  uint32_t count;
};

static_assert(sizeof(Step) <= kStepBytes, "Step outgrew the bytes the planner half reserves (null_abi.h)");
static_assert(sizeof(Record) <= kDelegateHeaderBytes, "Record outgrew its header (null_abi.h)");
static_assert(sizeof(const Tensor*) <= kOperandBytes, "operand slot");

// Host pointers: a null "device buffer" is a range of the pool.
uint8_t* base_of(DeviceBuffer buffer) { return static_cast<uint8_t*>(buffer.handle); }

bool in_range(DeviceBuffer buffer, uint64_t offset, uint64_t bytes) {
  return buffer.handle != nullptr && offset <= buffer.size && bytes <= buffer.size - offset;
}

const fb::DelegateGraph* parse(Span<const uint8_t> blob) {
  if (blob.size() < 8 || !fb::DelegateGraphBufferHasIdentifier(blob.data())) return nullptr;
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  if (!fb::VerifyDelegateGraphBuffer(verifier)) return nullptr;
  const fb::DelegateGraph* graph = fb::GetDelegateGraph(blob.data());
  return graph->kernels() != nullptr && graph->operators() != nullptr ? graph : nullptr;
}

uint32_t size_of(const flatbuffers::Vector<int32_t>* v) { return v != nullptr ? v->size() : 0; }

// The state a delegate of `graph` takes (the layout above).
uint64_t state_bytes_of(const fb::DelegateGraph& graph) {
  uint64_t operands = 0;
  for (const fb::KernelCall* call : *graph.kernels()) {
    operands += size_of(call->inputs()) + size_of(call->outputs()) + size_of(call->scratch());
  }
  return kDelegateHeaderBytes + graph.kernels()->size() * kStepBytes + operands * kOperandBytes;
}

bool overlap(const Tensor& a, const Tensor& b) {
  const uint8_t* pa = static_cast<const uint8_t*>(a.data());
  const uint8_t* pb = static_cast<const uint8_t*>(b.data());
  return pa != nullptr && pb != nullptr && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// Resolves `list` (tensor indices; -1 only where `optional`) into `out`.
Error resolve(const flatbuffers::Vector<int32_t>* list, const MethodView& method, bool optional, const char* node,
              const char* what, const Tensor** out) {
  for (uint32_t i = 0; i < size_of(list); ++i) {
    const int32_t t = list->Get(i);
    if (t == -1 && optional) {
      out[i] = nullptr;
      continue;
    }
    if (t < 0 || static_cast<uint32_t>(t) >= method.num_tensors()) {
      KILN_LOG(ERROR, "null: node '%s': %s %u names tensor %d, which does not exist", node, what, i, t);
      return Error::kInvalidProgram;
    }
    out[i] = &method.tensor(static_cast<uint32_t>(t));
  }
  return Error::kOk;
}

}  // namespace

Error NullBackend::allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) {
  if (device.type() != DeviceType::NULL_DEVICE || out_buffer == nullptr || alignment == 0 ||
      (alignment & (alignment - 1)) != 0) {
    return Error::kInvalidArgument;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(options_.memory.data());
  const uint64_t start = (base + used_ + alignment - 1) / alignment * alignment - base;
  if (options_.memory.data() == nullptr || start > options_.memory.size() || size > options_.memory.size() - start) {
    KILN_LOG(ERROR, "null: an arena of %llu bytes does not fit the backend's memory (%llu of %llu bytes in use)",
             static_cast<unsigned long long>(size), static_cast<unsigned long long>(used_),
             static_cast<unsigned long long>(options_.memory.size()));
    return Error::kDeviceAllocationFailed;
  }
  used_ = start + size;
  ++live_;
  out_buffer->handle = options_.memory.data() + start;
  out_buffer->size = size;
  return Error::kOk;
}

void NullBackend::release(Device device, DeviceBuffer buffer) {
  if (buffer.handle == nullptr || live_ == 0) return;
  if (--live_ == 0) used_ = 0;
}

Error NullBackend::copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src,
                                  uint64_t bytes) {
  if (!in_range(dst, dst_offset, bytes) || (bytes != 0 && src == nullptr)) return Error::kInvalidArgument;
  if (bytes != 0) memcpy(base_of(dst) + dst_offset, src, bytes);
  return Error::kOk;
}

Error NullBackend::copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) {
  if (!in_range(src, src_offset, bytes) || (bytes != 0 && dst == nullptr)) return Error::kInvalidArgument;
  if (bytes != 0) memcpy(dst, base_of(src) + src_offset, bytes);
  return Error::kOk;
}

Error NullBackend::copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                                  uint64_t src_offset, uint64_t bytes) {
  if (!in_range(dst, dst_offset, bytes) || !in_range(src, src_offset, bytes)) return Error::kInvalidArgument;
  if (bytes != 0) memmove(base_of(dst) + dst_offset, base_of(src) + src_offset, bytes);
  return Error::kOk;
}

void* NullBackend::address(DeviceBuffer buffer, uint64_t offset) {
  return in_range(buffer, offset, 0) ? base_of(buffer) + offset : nullptr;
}

uint64_t NullBackend::state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const {
  const fb::DelegateGraph* graph = parse(blob);
  return graph != nullptr ? state_bytes_of(*graph) : 0;  // init() refuses a bad blob, naming why
}

Result<void*> NullBackend::init(const DelegateContext& context) {
  if (context.delegate == nullptr || context.method == nullptr || context.allocator == nullptr) {
    return Error::kInvalidArgument;
  }
  const fb::DelegateGraph* graph = parse(context.blob);
  if (graph == nullptr) {
    KILN_LOG(ERROR, "null: the delegate blob is not a valid DelegateGraph (KDLG) flatbuffer with kernels");
    return Error::kInvalidProgram;
  }
  const KernelRegistry& registry = options_.kernels != nullptr ? *options_.kernels : global_kernel_registry();
  const MethodView& method = *context.method;
  const uint64_t bytes = state_bytes_of(*graph);
  uint8_t* memory = static_cast<uint8_t*>(context.allocator->allocate(static_cast<size_t>(bytes), 16));
  if (memory == nullptr) {
    KILN_LOG(ERROR, "null: the delegate's state needs %llu bytes; the program reserved fewer",
             static_cast<unsigned long long>(bytes));
    return Error::kOutOfMemory;
  }
  const uint32_t count = graph->kernels()->size();
  Record* record = new (memory) Record();
  record->steps = reinterpret_cast<Step*>(memory + kDelegateHeaderBytes);
  record->count = count;
  const Tensor** operands = reinterpret_cast<const Tensor**>(memory + kDelegateHeaderBytes + count * kStepBytes);
  for (uint32_t k = 0; k < count; ++k) {
    const fb::KernelCall& call = *graph->kernels()->Get(k);
    const auto* names = graph->names();
    const char* node = names != nullptr && k < names->size() ? names->Get(k)->c_str() : "?";
    if (call.op() >= graph->operators()->size()) {
      KILN_LOG(ERROR, "null: node '%s' names operator %u, which does not exist", node, call.op());
      return Error::kInvalidProgram;
    }
    const char* op = graph->operators()->Get(call.op())->name()->c_str();
    const KernelEntry* entry = registry.find(op);
    if (entry == nullptr) {
      KILN_LOG(ERROR, "null: node '%s': no kernel '%s' is registered", node, op);
      return Error::kKernelNotFound;
    }
    Step* step = new (&record->steps[k]) Step();
    KernelArgs& args = step->args;
    args.num_inputs = static_cast<uint16_t>(size_of(call.inputs()));
    args.num_outputs = static_cast<uint16_t>(size_of(call.outputs()));
    args.num_scratch = static_cast<uint16_t>(size_of(call.scratch()));
    const Tensor** inputs = operands;
    const Tensor** outputs = inputs + args.num_inputs;
    const Tensor** scratch = outputs + args.num_outputs;
    operands = scratch + args.num_scratch;
    args.inputs = inputs;
    args.outputs = outputs;
    args.scratch = scratch;
    args.call = &call;
    args.node_name = node;
    Error error = resolve(call.inputs(), method, true, node, "input", inputs);
    if (error == Error::kOk) error = resolve(call.outputs(), method, false, node, "output", outputs);
    if (error == Error::kOk) error = resolve(call.scratch(), method, false, node, "scratch", scratch);
    if (error != Error::kOk) return error;
    for (uint32_t o = 0; o < args.num_outputs; ++o) {
      for (uint32_t i = 0; i < args.num_inputs; ++i) {
        if (!args.has_input(i) || !overlap(args.in(i), args.out(o))) continue;
        const bool same = args.in(i).data() == args.out(o).data() && args.in(i).nbytes() == args.out(o).nbytes();
        if (!(o == 0 && same && i < 32 && (entry->inplace_inputs >> i & 1u) != 0)) {
          KILN_LOG(ERROR,
                   "null: node '%s' (%s): output %u shares bytes with input %u, which the kernel does not "
                   "allow",
                   node, op, o, i);
          return Error::kInvalidProgram;
        }
      }
    }
    if (entry->check != nullptr) {
      error = entry->check(args);
      if (error != Error::kOk) {
        KILN_LOG(ERROR, "null: node '%s' (%s): the kernel's check failed", node, op);
        return error;
      }
    }
    step->run = entry->run;
  }
  return static_cast<void*>(record);
}

Error NullBackend::execute(void* delegate, const DelegateCallArgs& args) {
  const Record& record = *static_cast<const Record*>(delegate);
  for (uint32_t k = 0; k < record.count; ++k) {
    const Step& step = record.steps[k];
    const uint64_t start = args.tracer != nullptr ? kiln_pal_ticks() : 0;
    const Error error = step.run(step.args);
    if (error != Error::kOk) {
      KILN_LOG(ERROR, "null: node '%s' failed: %s", step.args.node_name, error_name(error));
      return error;
    }
    // One record per kernel inside the delegate call (detail: its index).
    if (args.tracer != nullptr) {
      args.tracer->record({start, kiln_pal_ticks(), args.instruction, TraceKind::kBackend, static_cast<uint16_t>(k)});
    }
  }
  return Error::kOk;
}

}  // namespace kiln::backends::null
