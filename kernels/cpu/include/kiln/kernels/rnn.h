// The recurrent kernels' contract shared by the planner and the kernels
// (kernels/cpu/src/rnn.cc): the numbers the planner writes into their
// GenericParams, and the size of the working memory the planner plans for
// them. Both sides must agree: the kernel's check() refuses scratch smaller
// than rnn_work_floats() says. Header-only, no state.
//
// The working memory of one call, in floats (H hidden size, G gates: 1 for
// RNN, 3 for GRU, 4 for LSTM; one direction at a time reuses it):
//
//   +----------------------------+------------------+------+------+------+
//   | x_proj: seq*batch rows of  | rec: batch rows  | h    | aux  | aux2 |
//   | G*H, X W^T of every step   | of G*H, h R^T    | b*H  | b*H  | b*H  |
//   +----------------------------+------------------+------+------+------+
//
// h is the hidden state; aux is the LSTM's cell state or the GRU's r * h;
// aux2 is the GRU's (r * h) R_h^T (linear_before_reset 0).

#ifndef KILN_KERNELS_RNN_H_
#define KILN_KERNELS_RNN_H_

#include <stdint.h>

#include "kiln/kernels/gemm_blocking.h"

namespace kiln {
namespace kernels {

// Which recurrence: the kernel's name (RNN, GRU, LSTM) says it; the
// planner and the kernels size everything from it.
enum RnnKind : int64_t { kRnnSimple = 0, kRnnGru = 1, kRnnLstm = 2 };

// The gate activation functions (ONNX's names), one per ints entry from
// kRnnIntActivations on. Append only.
enum RnnActivation : int64_t {
  // clang-format off
  kRnnSigmoid = 0, kRnnTanh, kRnnRelu, kRnnAffine, kRnnLeakyRelu, kRnnThresholdedRelu, kRnnScaledTanh,
  kRnnHardSigmoid, kRnnElu, kRnnSoftsign, kRnnSoftplus,
  // clang-format on
  kRnnNumActivations,
};

// Positions in GenericParams.ints.
constexpr uint32_t kRnnIntHidden = 0;
constexpr uint32_t kRnnIntDirection = 1;          // 0 forward, 1 reverse, 2 bidirectional
constexpr uint32_t kRnnIntLayout = 2;             // ONNX's layout: 0 [seq, batch, ...], 1 [batch, seq, ...]
constexpr uint32_t kRnnIntLinearBeforeReset = 3;  // GRU
constexpr uint32_t kRnnIntInputForget = 4;        // LSTM
constexpr uint32_t kRnnIntActivations = 5;        // directions * rnn_activations_per_direction(kind) entries
// Positions in GenericParams.floats: the clip threshold (0: none), then
// alpha and beta of each activation in the order of ints.
constexpr uint32_t kRnnFloatClip = 0;
constexpr uint32_t kRnnFloatActivations = 1;

constexpr int64_t rnn_gates(int64_t kind) { return kind == kRnnLstm ? 4 : (kind == kRnnGru ? 3 : 1); }
constexpr int64_t rnn_activations_per_direction(int64_t kind) {
  return kind == kRnnLstm ? 3 : (kind == kRnnGru ? 2 : 1);
}

// Floats of the working memory (the picture above). The planner checks
// that the products fit before it calls this.
constexpr int64_t rnn_work_floats(int64_t kind, int64_t seq, int64_t batch, int64_t hidden) {
  return (seq + 1) * batch * rnn_gates(kind) * hidden + 3 * batch * hidden;
}

// Floats of the packing scratch of the two products when the kernel runs
// the packed GEMM: X W^T (seq*batch x input by input x G*H) and h R^T
// (batch x H by H x G*H).
constexpr int64_t rnn_pack_a_floats(int64_t seq, int64_t batch, int64_t input, int64_t hidden) {
  return gemm_max(gemm_pack_a_floats(seq * batch, input), gemm_pack_a_floats(batch, hidden));
}
constexpr int64_t rnn_pack_b_floats(int64_t kind, int64_t input, int64_t hidden) {
  return gemm_max(gemm_pack_b_floats(input, rnn_gates(kind) * hidden),
                  gemm_pack_b_floats(hidden, rnn_gates(kind) * hidden));
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_RNN_H_
