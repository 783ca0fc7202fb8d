// Linear algebra: Det. The kernel, and the scratch planned here (one
// matrix of doubles, reused for every matrix of the batch), are in
// kernels/cpu/src/linalg.cc. float32 only.

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

void infer_det(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  const std::vector<int64_t>& shape = ctx.shape(0);
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2]) {
    ctx.error("input must be square matrices [..., M, M], is ", shape_str(shape));
  }
  // The scratch holds one matrix of doubles, even when the batch is empty.
  const uint64_t m = static_cast<uint64_t>(shape.back());
  if (m > 0 && m > kMaxTensorBytes / 8 / m) ctx.error("matrices of ", m, " x ", m, " are too large");
  ctx.set_output(0, DType::FLOAT32, std::vector<int64_t>(shape.begin(), shape.end() - 2));
}

void lower_det(OpContext& ctx, LoweringContext& l) {
  const int64_t m = ctx.shape(0).back();
  const int matrix = l.temp(ctx.node().name + "/lu", DType::FLOAT64, {m * m});
  l.kernel("Det", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))}, {}, {matrix});
}

}  // namespace

void add_linalg_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Det", .infer = infer_det, .lower = lower_det});
}

}  // namespace kiln::planner
