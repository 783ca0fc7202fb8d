// The QDQ model the quantizer writes, laid out as ONNX Runtime's
// quantize_static (QuantFormat.QDQ) lays it out, so that ONNX Runtime runs
// the same file and kiln's QDQ pass (passes/qdq.h) folds it into int8 kernels.
//
// Two steps. plan_qdq() walks the float model's nodes in order and marks
// the tensors to quantize, op by op, as ONNX Runtime's QDQ op quantizers do:
//
//   Conv, ConvTranspose  input and output; weight int8 per channel (axis 0,
//                        ConvTranspose 1) or per tensor; bias int32
//   Gemm                 the same, weight axis 0 with transB else 1; beta
//                        goes into the bias, which then has beta 1
//   MatMul               every input and the output; a constant 2-D input is
//                        a weight (per channel along axis 1)
//   Relu, Clip           after a quantized tensor with asymmetric
//                        activations: removed, the producer writing the
//                        activation's output, whose range (from 0, or the
//                        clip's bounds) the quantization itself applies;
//                        otherwise input and output
//   Reshape, Transpose, Squeeze, Unsqueeze, MaxPool, AveragePool, Slice,
//   Resize, Pad (padding with 0)
//                        after a quantized input, the output shares the
//                        input's scale and zero point (they only move data)
//   Split, Gather, GatherElements
//                        the outputs share the input's quantization (a
//                        constant input, an embedding table, is quantized)
//   Softmax              input and output, the output's range fixed to [0, 1]
//   Add, Mul, Concat, GlobalAveragePool, Sigmoid, LeakyRelu, Where, ArgMax,
//   Pad (another value)  every float input and output
//
// Other ops, and the nodes the user names, stay float: they read the
// dequantized values of their quantized neighbours. write_qdq() then writes
// the marks given each activation's quantization parameters:
//
//   activation t    t -> QuantizeLinear "t_QuantizeLinear" -> t_QuantizeLinear_Output
//                     -> DequantizeLinear "t_DequantizeLinear" -> t_DequantizeLinear_Output
//                   with initializers t_scale, t_zero_point; every reader of t
//                   reads the DQ output. A graph output t keeps its name on the
//                   DQ's output; its producer writes t_QuantizeLinear_Input.
//   shared          the same pair with the provider's t_scale and t_zero_point
//   weight w        w_quantized (int8), w_scale, w_zero_point -> DequantizeLinear
//                   "w_DequantizeLinear" (axis for per channel) -> w_DequantizeLinear_Output
//   bias b          b_quantized (int32, round(b / (input scale x weight scale))),
//                   b_quantized_scale, b_quantized_zero_point (0) ->
//                   DequantizeLinear "b_DequantizeLinear" -> b
//
// Constant inputs marked as activations (an Add's constant operand) are
// quantized as per-tensor constants of the activation type. The float
// initializers no node reads any more are removed, the nodes sorted, and
// value_info dropped (it named tensors that changed).

#ifndef KILN_PLANNER_QUANTIZE_QDQ_WRITER_H_
#define KILN_PLANNER_QUANTIZE_QDQ_WRITER_H_

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "quantize/calibration.h"

namespace kiln::planner::quantize {

// What the planner's inference says of a float model's tensor.
struct ValueFacts {
  DType dtype = DType::FLOAT32;
  std::vector<int64_t> shape;
  std::shared_ptr<const HostTensor> constant;  // its value, when folding made it a constant
};
using ValueTable = std::map<std::string, ValueFacts>;

struct QdqOptions {
  DType activation_type = DType::UINT8;  // or INT8
  bool activation_symmetric = false;
  bool per_channel = true;
  bool weight_symmetric = true;  // per-channel weights are always symmetric
  bool reduce_range = false;     // weights on [-64, 64] (QuantizeOptions)
  // Nodes that stay float, by node name (or, for unnamed nodes, the name of
  // their first output).
  std::set<std::string> exclude;
};

struct QdqPlan {
  struct Tensor {
    std::string name;
    bool weight = false;      // a weight (int8) rather than an activation
    int axis = -1;            // a weight's per-channel axis
    std::string shared_from;  // quantized with this tensor's parameters
  };
  std::vector<Tensor> tensors;  // in the order marked
  struct Bias {
    std::string name, input, weight;
    float beta = 1.f;
  };
  std::vector<Bias> biases;
  // Activations whose range is another's: the input of a Relu or Clip (its
  // only reader) takes the output's.
  std::map<std::string, std::string> range_from;
  // Fixed ranges: Softmax outputs [0, 1].
  std::map<std::string, Range> fixed_ranges;
  std::vector<std::string> removed_nodes;                 // Relu and Clip folded into their producer
  std::vector<std::string> quantized_nodes, float_nodes;  // by name (or first output)

  // The activations whose values calibration must observe.
  std::vector<std::string> to_calibrate(const onnx::GraphProto& graph) const;
};

// Marks `model`'s tensors (and removes the Relu and Clip it folds, whose
// producers then write their outputs). `values` must know every tensor.
QdqPlan plan_qdq(onnx::ModelProto& model, const ValueTable& values, const QdqOptions& options);

// What write_qdq() wrote, per tensor: its quantization.
struct WrittenTensor {
  std::string name;
  QuantParams params;
  std::string shared_from;
};

// Writes the QuantizeLinear / DequantizeLinear nodes and quantized
// initializers. `activations` holds each calibrated activation's parameters
// (plan.to_calibrate(), after range_from and fixed_ranges).
std::vector<WrittenTensor> write_qdq(onnx::ModelProto& model, const QdqPlan& plan,
                                     const std::map<std::string, QuantParams>& activations, const QdqOptions& options);

// A node's name for --exclude and reports: its name, or its first output's.
std::string node_label(const onnx::NodeProto& node);

}  // namespace kiln::planner::quantize

#endif  // KILN_PLANNER_QUANTIZE_QDQ_WRITER_H_
