// A delegate's blob as the backends that run kernel calls read it: a
// DelegateGraph (schema/delegate.fbs, file identifier KDLG) of kernel calls
// whose operands are the method's tensors. What every such backend does at
// init before its own checks:
//
//   KILN_ASSIGN_OR_RETURN(const fb::DelegateGraph* graph, delegate_graph_of("null", context));
//   KILN_RETURN_IF_ERROR(for_each_kernel_call("null", *graph, method, [&](uint32_t k, const KernelView& view) {
//     KILN_RETURN_IF_ERROR(check_operand_indices(view));
//     ... the backend's own operand checks ...
//     return check_inplace(view, inplace_inputs_of(view.op));
//   }));
//
// Nothing here allocates; messages name the backend, node and op.

#ifndef KILN_BACKENDS_COMMON_DELEGATE_GRAPH_H_
#define KILN_BACKENDS_COMMON_DELEGATE_GRAPH_H_

#include <stdint.h>

#include "kiln/backends/common/kernel_view.h"
#include "kiln/runtime/backend.h"
#include "kiln/schema/delegate_generated.h"

namespace kiln::backends {

// The graph in `blob` when it verifies and has kernels and operators, else
// nullptr.
const fb::DelegateGraph* parse_delegate_graph(Span<const uint8_t> blob);

// What every init() checks first: a delegate, a method and an allocator
// (kInvalidArgument), and a blob that parses (kInvalidProgram); logged,
// naming `backend`.
Result<const fb::DelegateGraph*> delegate_graph_of(const char* backend, const DelegateContext& context);

// `bytes` of the delegate's host state from its allocator, which the
// planner sized: kOutOfMemory (logged) when the program reserved fewer.
Result<uint8_t*> allocate_state(const char* backend, const DelegateContext& context, uint64_t bytes, size_t alignment);

// Tensor operands over all of the graph's calls (inputs, outputs, scratch).
uint64_t count_operands(const fb::DelegateGraph& graph);

// Whether bytes [offset, offset + bytes) lie inside `buffer`.
bool buffer_holds(DeviceBuffer buffer, uint64_t offset, uint64_t bytes);

// Whether two tensors share bytes, and whether they are the very same
// bytes: compared by arena and offset where both lie in arenas (device
// tensors have no host address), else by address.
bool tensors_overlap(const Tensor& a, const Tensor& b);
bool same_bytes(const Tensor& a, const Tensor& b);

// The name of kernel call `k` for messages ("?" when the graph has none).
const char* kernel_call_name(const fb::DelegateGraph& graph, uint32_t k);

// Calls f(k, view) for each kernel call k of `graph`, its operands
// resolving through `method`, after checking that it names an operator of
// the graph; stops at the first error.
template <typename F>
Error for_each_kernel_call(const char* backend, const fb::DelegateGraph& graph, const MethodView& method, F&& f) {
  const uint32_t count = graph.kernels()->size();
  for (uint32_t k = 0; k < count; ++k) {
    KernelView view;
    view.backend = backend;
    view.node = kernel_call_name(graph, k);
    view.call = graph.kernels()->Get(k);
    view.method = &method;
    KILN_CHECK_OR_RETURN(view.call->op() < graph.operators()->size(), Error::kInvalidProgram,
                         "%s: node '%s' names operator %u, which does not exist", backend, view.node, view.call->op());
    view.op = graph.operators()->Get(view.call->op())->name()->c_str();
    KILN_RETURN_IF_ERROR(f(k, view));
  }
  return Error::kOk;
}

// Every operand of the call names a tensor of the method; -1 (absent) only
// an input.
Error check_operand_indices(const KernelView& k);

// An output shares bytes with an input only where the kernel may write
// output 0 over that input (bit i of `inplace_inputs`) and they are the same
// bytes; no two outputs share bytes.
Error check_inplace(const KernelView& k, uint32_t inplace_inputs);

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_DELEGATE_GRAPH_H_
