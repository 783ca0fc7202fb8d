#include "kiln/backends/common/delegate_graph.h"

namespace kiln::backends {

const fb::DelegateGraph* parse_delegate_graph(Span<const uint8_t> blob) {
  if (blob.size() < 8 || !fb::DelegateGraphBufferHasIdentifier(blob.data())) return nullptr;
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  if (!fb::VerifyDelegateGraphBuffer(verifier)) return nullptr;
  const fb::DelegateGraph* graph = fb::GetDelegateGraph(blob.data());
  return graph->kernels() != nullptr && graph->operators() != nullptr ? graph : nullptr;
}

Result<const fb::DelegateGraph*> delegate_graph_of(const char* backend, const DelegateContext& context) {
  KILN_CHECK_OR_RETURN(context.delegate != nullptr && context.method != nullptr && context.allocator != nullptr,
                       Error::kInvalidArgument, "%s: init without a delegate, method or allocator", backend);
  const fb::DelegateGraph* graph = parse_delegate_graph(context.blob);
  KILN_CHECK_OR_RETURN(graph != nullptr, Error::kInvalidProgram,
                       "%s: the delegate blob is not a valid DelegateGraph (KDLG) flatbuffer with kernels", backend);
  return graph;
}

Result<uint8_t*> allocate_state(const char* backend, const DelegateContext& context, uint64_t bytes, size_t alignment) {
  void* memory = context.allocator->allocate(static_cast<size_t>(bytes), alignment);
  KILN_CHECK_OR_RETURN(memory != nullptr, Error::kOutOfMemory,
                       "%s: the delegate's state needs %llu bytes; the program reserved fewer", backend,
                       static_cast<unsigned long long>(bytes));
  return static_cast<uint8_t*>(memory);
}

uint64_t count_operands(const fb::DelegateGraph& graph) {
  uint64_t operands = 0;
  for (const fb::KernelCall* call : *graph.kernels()) {
    operands += KernelView::size_of(call->inputs()) + KernelView::size_of(call->outputs()) +
                KernelView::size_of(call->scratch());
  }
  return operands;
}

bool buffer_holds(DeviceBuffer buffer, uint64_t offset, uint64_t bytes) {
  return buffer.handle != nullptr && offset <= buffer.size && bytes <= buffer.size - offset;
}

bool tensors_overlap(const Tensor& a, const Tensor& b) {
  if (a.arena() >= 0 && b.arena() >= 0) {
    return a.arena() == b.arena() && a.offset() < b.offset() + b.nbytes() && b.offset() < a.offset() + a.nbytes();
  }
  const uint8_t* pa = static_cast<const uint8_t*>(a.data());
  const uint8_t* pb = static_cast<const uint8_t*>(b.data());
  return pa != nullptr && pb != nullptr && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.nbytes() != b.nbytes()) return false;
  if (a.arena() >= 0 && b.arena() >= 0) return a.arena() == b.arena() && a.offset() == b.offset();
  return a.data() == b.data();
}

const char* kernel_call_name(const fb::DelegateGraph& graph, uint32_t k) {
  const auto* names = graph.names();
  if (names == nullptr || k >= names->size() || names->Get(k) == nullptr) return "?";
  return names->Get(k)->c_str();
}

Error check_operand_indices(const KernelView& k) {
  const uint32_t tensors = k.method->num_tensors();
  const flatbuffers::Vector<int32_t>* lists[] = {k.call->inputs(), k.call->outputs(), k.call->scratch()};
  const char* what[] = {"input", "output", "scratch"};
  for (uint32_t l = 0; l < 3; ++l) {
    for (uint32_t i = 0; i < KernelView::size_of(lists[l]); ++i) {
      const int32_t t = lists[l]->Get(i);
      if (t == -1 && l == 0) continue;
      KILN_VIEW_CHECK(k, t >= 0 && static_cast<uint32_t>(t) < tensors, "%s %u names tensor %d, which does not exist",
                      what[l], i, t);
    }
  }
  return Error::kOk;
}

Error check_inplace(const KernelView& k, uint32_t inplace_inputs) {
  for (uint32_t o = 0; o < k.num_outputs(); ++o) {
    const Tensor& out = k.output(o);
    for (uint32_t i = 0; i < k.num_inputs(); ++i) {
      const Tensor* in = k.input(i);
      if (in == nullptr || !tensors_overlap(*in, out)) continue;
      KILN_VIEW_CHECK(k, o == 0 && same_bytes(*in, out) && i < 32 && (inplace_inputs >> i & 1u) != 0,
                      "output %u shares bytes with input %u, which the kernel does not allow", o, i);
    }
    for (uint32_t p = 0; p < o; ++p) {
      KILN_VIEW_CHECK(k, !tensors_overlap(k.output(p), out), "output %u shares bytes with output %u", o, p);
    }
  }
  return Error::kOk;
}

}  // namespace kiln::backends
