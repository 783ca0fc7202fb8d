#include "kiln/backends/null/null_backend.h"

#include <string.h>

#include <new>

#include "backends/null/null_abi.h"
#include "kiln/backends/common/delegate_graph.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/check.h"

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

// The state a delegate of `graph` takes (the layout above).
uint64_t state_bytes_of(const fb::DelegateGraph& graph) {
  return kDelegateHeaderBytes + graph.kernels()->size() * kStepBytes + count_operands(graph) * kOperandBytes;
}

// Lays out the step of kernel call `k` at `step`, its operand pointers from
// `*operands` on (advanced past them), the call's checks passed first: the
// shared ones and the kernel's own.
Error init_step(const KernelView& k, const KernelEntry& entry, Step* step, const Tensor*** operands) {
  KILN_RETURN_IF_ERROR(check_operand_indices(k));
  KILN_RETURN_IF_ERROR(check_inplace(k, entry.inplace_inputs));
  KernelArgs& args = step->args;
  args.num_inputs = static_cast<uint16_t>(k.num_inputs());
  args.num_outputs = static_cast<uint16_t>(k.num_outputs());
  args.num_scratch = static_cast<uint16_t>(k.num_scratch());
  const Tensor** inputs = *operands;
  const Tensor** outputs = inputs + args.num_inputs;
  const Tensor** scratch = outputs + args.num_outputs;
  *operands = scratch + args.num_scratch;
  for (uint32_t i = 0; i < args.num_inputs; ++i) inputs[i] = k.input(i);
  for (uint32_t o = 0; o < args.num_outputs; ++o) outputs[o] = &k.output(o);
  for (uint32_t i = 0; i < args.num_scratch; ++i) scratch[i] = &k.method->tensor(k.call->scratch()->Get(i));
  args.inputs = inputs;
  args.outputs = outputs;
  args.scratch = scratch;
  args.call = k.call;
  args.node_name = k.node;
  if (entry.check != nullptr) {
    const Error checked = entry.check(args);
    KILN_CHECK_OR_RETURN(checked == Error::kOk, checked, "null: node '%s' (%s): the kernel's check failed", k.node,
                         k.op);
  }
  step->run = entry.run;
  return Error::kOk;
}

}  // namespace

Error NullBackend::allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) {
  KILN_CHECK_OR_RETURN(device.type() == DeviceType::NULL_DEVICE && out_buffer != nullptr && alignment != 0 &&
                           (alignment & (alignment - 1)) == 0,
                       Error::kInvalidArgument, "null: bad arena request (alignment %u)", alignment);
  const uintptr_t base = reinterpret_cast<uintptr_t>(options_.memory.data());
  const uint64_t start = (base + used_ + alignment - 1) / alignment * alignment - base;
  KILN_CHECK_OR_RETURN(
      options_.memory.data() != nullptr && start <= options_.memory.size() && size <= options_.memory.size() - start,
      Error::kDeviceAllocationFailed,
      "null: an arena of %llu bytes does not fit the backend's memory (%llu of %llu bytes in use)",
      static_cast<unsigned long long>(size), static_cast<unsigned long long>(used_),
      static_cast<unsigned long long>(options_.memory.size()));
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
  KILN_CHECK_OR_RETURN(buffer_holds(dst, dst_offset, bytes) && (bytes == 0 || src != nullptr), Error::kInvalidArgument,
                       "null: copy to null:%d outside its arena", device.index());
  if (bytes != 0) memcpy(base_of(dst) + dst_offset, src, bytes);
  return Error::kOk;
}

Error NullBackend::copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) {
  KILN_CHECK_OR_RETURN(buffer_holds(src, src_offset, bytes) && (bytes == 0 || dst != nullptr), Error::kInvalidArgument,
                       "null: copy from null:%d outside its arena", device.index());
  if (bytes != 0) memcpy(dst, base_of(src) + src_offset, bytes);
  return Error::kOk;
}

Error NullBackend::copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                                  uint64_t src_offset, uint64_t bytes) {
  KILN_CHECK_OR_RETURN(buffer_holds(dst, dst_offset, bytes) && buffer_holds(src, src_offset, bytes),
                       Error::kInvalidArgument, "null: copy on null:%d outside its arenas", device.index());
  if (bytes != 0) memmove(base_of(dst) + dst_offset, base_of(src) + src_offset, bytes);
  return Error::kOk;
}

void* NullBackend::address(DeviceBuffer buffer, uint64_t offset) {
  return buffer_holds(buffer, offset, 0) ? base_of(buffer) + offset : nullptr;
}

uint64_t NullBackend::state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const {
  const fb::DelegateGraph* graph = parse_delegate_graph(blob);
  return graph != nullptr ? state_bytes_of(*graph) : 0;  // init() refuses a bad blob, naming why
}

Result<void*> NullBackend::init(const DelegateContext& context) {
  KILN_ASSIGN_OR_RETURN(const fb::DelegateGraph* graph, delegate_graph_of("null", context));
  const KernelRegistry& registry = options_.kernels != nullptr ? *options_.kernels : global_kernel_registry();
  KILN_ASSIGN_OR_RETURN(uint8_t * memory, allocate_state("null", context, state_bytes_of(*graph), 16));
  const uint32_t count = graph->kernels()->size();
  Record* record = new (memory) Record();
  record->steps = reinterpret_cast<Step*>(memory + kDelegateHeaderBytes);
  record->count = count;
  const Tensor** operands = reinterpret_cast<const Tensor**>(memory + kDelegateHeaderBytes + count * kStepBytes);
  const Error error = for_each_kernel_call("null", *graph, *context.method, [&](uint32_t k, const KernelView& view) {
    const KernelEntry* entry = registry.find(view.op);
    KILN_CHECK_OR_RETURN(entry != nullptr, Error::kKernelNotFound, "null: node '%s': no kernel '%s' is registered",
                         view.node, view.op);
    return init_step(view, *entry, new (&record->steps[k]) Step(), &operands);
  });
  KILN_RETURN_IF_ERROR(error);
  return static_cast<void*>(record);
}

Error NullBackend::execute(void* delegate, const DelegateCallArgs& args) {
  const Record& record = *static_cast<const Record*>(delegate);
  for (uint32_t k = 0; k < record.count; ++k) {
    const Step& step = record.steps[k];
    const uint64_t start = args.tracer != nullptr ? kiln_pal_ticks() : 0;
    const Error error = step.run(step.args);
    KILN_CHECK_OR_RETURN(error == Error::kOk, error, "null: node '%s' failed: %s", step.args.node_name,
                         error_name(error));
    // One record per kernel inside the delegate call (detail: its index).
    if (args.tracer != nullptr) {
      args.tracer->record({start, kiln_pal_ticks(), args.instruction, TraceKind::kBackend, static_cast<uint16_t>(k)});
    }
  }
  return Error::kOk;
}

}  // namespace kiln::backends::null
