// Collective ops: AllReduce (domain com.microsoft, the contrib op ONNX
// Runtime's distributed inference uses): a sum of each input across the
// ranks that run the graph (Graph::ranks), every rank receiving it. The op is
// variadic: input i reduces into output i, one collective instruction each.
// Never folded: its value depends on the other ranks.

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

void infer_all_reduce(OpContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.error("has no inputs");
  if (ctx.num_outputs() != ctx.num_inputs()) {
    ctx.error("has ", ctx.num_inputs(), " inputs and ", ctx.num_outputs(),
              " outputs; AllReduce maps each input to "
              "one output");
  }
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) ctx.error("input ", i, " is missing");
    ctx.expect_dtype(i, {DType::FLOAT32, DType::FLOAT16});
    ctx.set_output(i, ctx.dtype(i), ctx.shape(i));
  }
}

void lower_all_reduce(OpContext& ctx, LoweringContext& l) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    l.collective(fb::CollectiveKind::ALL_REDUCE, fb::ReduceOp::SUM, l.tensor(ctx.input_id(i)),
                 l.tensor(ctx.output_id(i)));
  }
}

}  // namespace

void add_collective_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "AllReduce",
                 .domain = "com.microsoft",
                 .infer = infer_all_reduce,
                 .lower = lower_all_reduce,
                 .foldable = false});
}

}  // namespace kiln::planner
