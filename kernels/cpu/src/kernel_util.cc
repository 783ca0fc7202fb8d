#include "kernel_util.h"

#include "kiln/kernels/isa.h"

namespace kiln {
namespace kernels {

// Weights the planner packed in BF16 (kiln plan --precision bf16): input 1
// is BFLOAT16, in gemm_blocking.h's BF16 pair layout.
bool bf16_weights(const KernelArgs& args) {
  return args.num_inputs > 1 && args.inputs[1] != nullptr && args.inputs[1]->dtype() == DType::BFLOAT16;
}

// The dtypes of a linear kernel: float32 throughout, except packed
// weights (`packed`: input 1 prepacked by the planner), which may be BF16
// where this processor multiplies BF16; otherwise such a program is
// refused here, at load, in one line.
Error check_linear_dtypes(const KernelArgs& args, bool packed) {
  if (!packed || !bf16_weights(args)) return check_all_dtype(args, DType::FLOAT32);
  if (!bf16_available()) {
    KILN_LOG(
        ERROR,
        "node '%s': its weights are BF16 (planned with --precision bf16), which needs the avx512 path on a "
        "processor with AVX512-BF16; here the %s path is active%s: plan without --precision bf16",
        args.node_name, isa_name(active_isa()),
        processor_isa() == Isa::kAvx512 && active_isa() == Isa::kAvx512 ? " and the processor lacks AVX512-BF16" : "");
    return Error::kNotSupported;
  }
  for (uint32_t i = 0; i < args.num_inputs; ++i) {
    if (args.inputs[i] == nullptr || i == 1) continue;
    KILN_KERNEL_CHECK(args, args.inputs[i]->dtype() == DType::FLOAT32, "input %u is %s, expected float32", i,
                      dtype_name(args.inputs[i]->dtype()));
  }
  KILN_KERNEL_CHECK(args, args.out(0).dtype() == DType::FLOAT32, "output 0 is %s, expected float32",
                    dtype_name(args.out(0).dtype()));
  return Error::kOk;
}

Error check_arity(const KernelArgs& args, uint32_t min_in, uint32_t max_in, uint32_t n_out, uint32_t n_scratch) {
  KILN_KERNEL_CHECK(args, args.num_inputs >= min_in && args.num_inputs <= max_in, "expects %u to %u inputs, has %u",
                    min_in, max_in, args.num_inputs);
  for (uint32_t i = 0; i < min_in; ++i) {
    KILN_KERNEL_CHECK(args, args.inputs[i] != nullptr, "input %u is required", i);
  }
  KILN_KERNEL_CHECK(args, args.num_outputs == n_out, "expects %u outputs, has %u", n_out, args.num_outputs);
  KILN_KERNEL_CHECK(args, args.num_scratch >= n_scratch, "expects %u scratch buffers, has %u", n_scratch,
                    args.num_scratch);
  return Error::kOk;
}

Error check_all_dtype(const KernelArgs& args, DType dtype) {
  for (uint32_t i = 0; i < args.num_inputs; ++i) {
    if (args.inputs[i] == nullptr) continue;
    KILN_KERNEL_CHECK(args, args.inputs[i]->dtype() == dtype, "input %u is %s, expected %s", i,
                      dtype_name(args.inputs[i]->dtype()), dtype_name(dtype));
  }
  for (uint32_t i = 0; i < args.num_outputs; ++i) {
    KILN_KERNEL_CHECK(args, args.outputs[i]->dtype() == dtype, "output %u is %s, expected %s", i,
                      dtype_name(args.outputs[i]->dtype()), dtype_name(dtype));
  }
  return Error::kOk;
}

Error check_same_shape(const KernelArgs& args, const Tensor& a, const Tensor& b, const char* what) {
  KILN_KERNEL_CHECK(args, same_shape(a, b), "%s: shapes differ", what);
  return Error::kOk;
}

Error check_broadcast_output(const KernelArgs& args, uint32_t first, uint32_t count) {
  const Tensor& out = args.out(0);
  int64_t strides[kMaxRank];
  KILN_KERNEL_CHECK(args, out.rank() <= kMaxRank, "rank above %u", kMaxRank);
  for (uint32_t i = first; i < first + count; ++i) {
    KILN_KERNEL_CHECK(args, broadcast_strides(args.in(i), out.dims(), out.rank(), strides),
                      "input %u does not broadcast to the output shape", i);
  }
  for (uint32_t d = 0; d < out.rank(); ++d) {
    int64_t expected = 1;
    for (uint32_t i = first; i < first + count; ++i) {
      const Tensor& t = args.in(i);
      const int32_t k = static_cast<int32_t>(d) - static_cast<int32_t>(out.rank() - t.rank());
      if (k >= 0 && t.dim(static_cast<uint32_t>(k)) != 1) expected = t.dim(static_cast<uint32_t>(k));
    }
    KILN_KERNEL_CHECK(args, out.dim(d) == expected, "output dim %u is %lld, broadcast gives %lld", d,
                      static_cast<long long>(out.dim(d)), static_cast<long long>(expected));
  }
  return Error::kOk;
}

int64_t param_int(const KernelArgs& args, uint32_t i) {
  const auto* p = args.params<fb::GenericParams>();
  return p->ints()->Get(i);
}

float param_float(const KernelArgs& args, uint32_t i) {
  const auto* p = args.params<fb::GenericParams>();
  return p->floats()->Get(i);
}

Error check_params(const KernelArgs& args, uint32_t ints, uint32_t floats) {
  const auto* p = args.params<fb::GenericParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "expects GenericParams");
  KILN_KERNEL_CHECK(args, ints == 0 || (p->ints() != nullptr && p->ints()->size() >= ints && aligned8(p->ints())),
                    "expects %u integer parameters", ints);
  KILN_KERNEL_CHECK(args, floats == 0 || (p->floats() != nullptr && p->floats()->size() >= floats),
                    "expects %u float parameters", floats);
  return Error::kOk;
}

}  // namespace kernels
}  // namespace kiln
