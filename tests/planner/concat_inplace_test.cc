// Concat in place: inputs written by their producers into their block of
// the output (aliases at a byte offset), Concats made views of a later
// Concat's bytes (DenseNet's chain), the inputs that must keep a copy, and
// that every program gives the same bytes as the one planned with copies.

#include <gtest/gtest.h>

#include <algorithm>

#include "exec/run.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "verify/verifier.h"

namespace kiln::testing {
namespace {

using planner::HostTensor;
using planner::LMethod;
using planner::LTensor;
using planner::PlanOptions;
using planner::PlanResult;
using planner::Storage;

std::string name(GraphBuilder& b, int value) { return b.graph().values[static_cast<size_t>(value)].name; }

int index_of(const PlanResult& r, const std::string& name) {
  const LMethod& m = r.program.methods[0];
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    if (m.tensors[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

const LTensor& tensor(const PlanResult& r, const std::string& name) {
  return r.program.methods[0].tensors[static_cast<size_t>(index_of(r, name))];
}

std::string root_of(const PlanResult& r, const std::string& name) {
  const LMethod& m = r.program.methods[0];
  return m.tensors[static_cast<size_t>(m.root(index_of(r, name)))].name;
}

uint64_t root_offset(const PlanResult& r, const std::string& name) {
  return r.program.methods[0].root_offset(index_of(r, name));
}

int count_op(const PlanResult& r, const std::string& op) {
  const auto& list = r.program.methods[0].instructions;
  return static_cast<int>(std::count_if(list.begin(), list.end(), [&](const auto& ins) { return ins.op == op; }));
}

HostTensor ramp_input(std::vector<int64_t> shape) {
  HostTensor input(DType::FLOAT32, std::move(shape));
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i % 37) * 0.07f - 1.2f;
  return input;
}

// The program's outputs, bit for bit those of the program planned without
// any reuse (Concats copy), on one thread and on three.
void expect_same_as_copies(GraphBuilder& b, const PlanResult& in_place, const std::vector<HostTensor>& inputs) {
  PlanOptions off;
  off.inplace.enabled = false;
  const PlanResult copies = b.plan(off);
  ASSERT_TRUE(planner::verify_program(in_place.bytes).empty());
  const auto expected = planner::run_program(copies.bytes, inputs, {});
  const auto got = planner::run_program(in_place.bytes, inputs, {});
  ASSERT_EQ(got.outputs.size(), expected.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i) EXPECT_EQ(got.outputs[i].bytes, expected.outputs[i].bytes);
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  planner::RunOptions threads;
  threads.thread_pool = &pool;
  const auto threaded = planner::run_program(in_place.bytes, inputs, threads);
  for (size_t i = 0; i < got.outputs.size(); ++i) EXPECT_EQ(threaded.outputs[i].bytes, expected.outputs[i].bytes);
}

// SqueezeNet's fire module: two branches concatenated on the channels.
TEST(ConcatInplaceTest, FireModuleBranchesWriteTheirBlocks) {
  GraphBuilder b;
  const int x = b.input("x", {1, 4, 5, 5});
  const int s = b.node("Relu", {b.node("Conv", {x, b.ramp("ws", {3, 4, 1, 1})})});
  const int e1 = b.node("Conv", {s, b.ramp("w1", {6, 3, 1, 1})});
  const int e3 = b.node("Conv", {s, b.ramp("w3", {5, 3, 3, 3})}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int c = b.node("Concat", {e1, e3}, {{"axis", int_attr(1)}});
  b.output(b.node("Neg", {c}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 0);
  EXPECT_EQ(p.inplace.concats_removed, 1);
  EXPECT_EQ(p.inplace.concat_pieces, 2);
  EXPECT_EQ(p.inplace.concat_bytes, 11u * 25 * 4);
  EXPECT_EQ(root_of(p, name(b, e1)), name(b, c));
  EXPECT_EQ(root_of(p, name(b, e3)), name(b, c));
  EXPECT_EQ(tensor(p, name(b, e1)).alias_offset, 0u);
  EXPECT_EQ(tensor(p, name(b, e3)).alias_offset, 6u * 25 * 4);
  expect_same_as_copies(b, p, {ramp_input({1, 4, 5, 5})});
}

// DenseNet's block: each layer reads the concatenation of every feature
// before it, and the block ends with all of them concatenated. Every
// feature is written once into the last Concat's bytes; the earlier Concats
// are prefixes of it (views, no instruction); nothing is copied.
TEST(ConcatInplaceTest, DenseNetChainIsOneBufferWithNoCopies) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 4, 4});
  std::vector<int> features = {b.node("Relu", {x})};
  std::vector<int> concats;
  for (int layer = 0; layer < 4; ++layer) {
    const int cat = b.node("Concat", features, {{"axis", int_attr(1)}});
    concats.push_back(cat);
    if (layer == 3) break;
    const int64_t channels = 2 * static_cast<int64_t>(features.size());
    const int w = b.ramp("w" + std::to_string(layer), {2, channels, 3, 3}, 0.05f);
    features.push_back(b.node("Relu", {b.node("Conv", {cat, w}, {{"pads", ints_attr({1, 1, 1, 1})}})}));
  }
  b.output(b.node("GlobalAveragePool", {concats.back()}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 0);
  EXPECT_EQ(count_op(p, "Copy"), 0);
  EXPECT_EQ(p.inplace.concats_removed, 4);
  EXPECT_EQ(p.inplace.concat_pieces, 4);
  const std::string block = name(b, concats.back());
  for (size_t i = 0; i < features.size(); ++i) {
    EXPECT_EQ(root_of(p, name(b, features[i])), block);
    EXPECT_EQ(root_offset(p, name(b, features[i])), i * 2 * 16 * 4);
  }
  for (size_t i = 0; i + 1 < concats.size(); ++i) {
    EXPECT_EQ(root_of(p, name(b, concats[i])), block);
    EXPECT_EQ(root_offset(p, name(b, concats[i])), 0u);
  }
  // One buffer of the block's 8 channels holds every feature and Concat.
  const LTensor& root = tensor(p, block);
  EXPECT_EQ(root.storage, Storage::kPlanned);
  EXPECT_EQ(root.nbytes(), 8u * 16 * 4);
  expect_same_as_copies(b, p, {ramp_input({1, 2, 4, 4})});
}

// A Concat's output a block of a later Concat: its inputs land in that
// block, at the offsets added down the chain.
TEST(ConcatInplaceTest, NestedConcatsAddTheirOffsets) {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 2, 2});
  const int a = b.node("Exp", {x});
  const int c = b.node("Tanh", {x});
  const int d = b.node("Sigmoid", {x});
  const int inner = b.node("Concat", {c, d}, {{"axis", int_attr(1)}});
  const int outer = b.node("Concat", {a, inner}, {{"axis", int_attr(1)}});
  b.output(b.node("Neg", {outer}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 0);
  EXPECT_EQ(p.inplace.concats_removed, 2);
  EXPECT_EQ(root_of(p, name(b, d)), name(b, outer));
  EXPECT_EQ(root_offset(p, name(b, c)), 12u * 4);
  EXPECT_EQ(root_offset(p, name(b, d)), 24u * 4);
  expect_same_as_copies(b, p, {ramp_input({1, 3, 2, 2})});
}

// A method input and a constant are never written in place: each is copied
// to its block, and the Concat goes.
TEST(ConcatInplaceTest, MethodInputsAndConstantsAreCopiedToTheirBlocks) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 3});
  const int k = b.ramp("k", {1, 1, 3});
  const int a = b.node("Exp", {x});
  const int c = b.node("Concat", {x, a, k}, {{"axis", int_attr(1)}});
  b.output(b.node("Neg", {c}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 0);
  EXPECT_EQ(count_op(p, "Copy"), 2);
  EXPECT_EQ(tensor(p, name(b, x)).storage, Storage::kUser);
  EXPECT_EQ(tensor(p, name(b, k)).storage, Storage::kConstant);
  EXPECT_EQ(root_of(p, name(b, a)), name(b, c));
  EXPECT_EQ(root_offset(p, name(b, a)), 6u * 4);
  EXPECT_EQ(p.inplace.concats_removed, 0);  // copies remain
  EXPECT_EQ(p.inplace.concat_pieces, 1);
  expect_same_as_copies(b, p, {ramp_input({1, 2, 3})});
}

// An input used twice takes its first block; the second is a copy of it.
TEST(ConcatInplaceTest, AnInputUsedTwiceIsCopiedTheSecondTime) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 3});
  const int a = b.node("Exp", {x});
  const int t = b.node("Tanh", {x});
  const int c = b.node("Concat", {a, t, a}, {{"axis", int_attr(1)}});
  b.output(b.node("Neg", {c}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 0);
  EXPECT_EQ(count_op(p, "Copy"), 1);
  EXPECT_EQ(root_offset(p, name(b, a)), 0u);
  EXPECT_EQ(root_offset(p, name(b, t)), 6u * 4);
  expect_same_as_copies(b, p, {ramp_input({1, 2, 3})});
}

// Inputs already aliases of another Concat's bytes (in another order) stay
// where they are; this Concat copies them as before.
TEST(ConcatInplaceTest, InputsAlreadyInAnotherConcatKeepTheConcat) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 3});
  const int a = b.node("Exp", {x});
  const int t = b.node("Tanh", {x});
  const int first = b.node("Concat", {a, t}, {{"axis", int_attr(1)}});
  const int second = b.node("Concat", {t, a}, {{"axis", int_attr(1)}});
  b.output(b.node("Add", {first, second}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 1);
  EXPECT_EQ(root_of(p, name(b, a)), name(b, second));
  EXPECT_EQ(root_of(p, name(b, first)), name(b, first));
  expect_same_as_copies(b, p, {ramp_input({1, 2, 3})});
}

// A leading dim above 1 leaves each input in several strips of the output:
// no block, the Concat copies. Axis 0 is always one block per input.
TEST(ConcatInplaceTest, OnlyWhereEachInputIsOneBlock) {
  GraphBuilder b;
  const int x = b.input("x", {2, 3, 4});
  const int a = b.node("Exp", {x});
  const int t = b.node("Tanh", {x});
  const int strips = b.node("Concat", {a, t}, {{"axis", int_attr(1)}});
  const int s = b.node("Sigmoid", {x});
  const int r = b.node("Relu", {x});
  const int rows = b.node("Concat", {s, r}, {{"axis", int_attr(0)}});
  b.output(b.node("Neg", {strips}));
  b.output(b.node("Neg", {rows}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 1);
  EXPECT_EQ(tensor(p, name(b, a)).storage, Storage::kPlanned);
  EXPECT_EQ(root_of(p, name(b, r)), name(b, rows));
  EXPECT_EQ(root_offset(p, name(b, r)), 24u * 4);
  expect_same_as_copies(b, p, {ramp_input({2, 3, 4})});
}

// A Concat that is the method output writes the application's memory:
// nothing aliases it. The policy governs it like any in-place op.
TEST(ConcatInplaceTest, MethodOutputsAndThePolicy) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 3});
  const int a = b.node("Exp", {x});
  const int t = b.node("Tanh", {x});
  b.output(b.node("Concat", {a, t}, {{"axis", int_attr(1)}}));
  const PlanResult p = b.plan();
  EXPECT_EQ(count_op(p, "Concat"), 1);
  EXPECT_EQ(tensor(p, name(b, a)).storage, Storage::kPlanned);

  GraphBuilder g;
  const int y = g.input("y", {1, 2, 3});
  const int e = g.node("Exp", {y});
  const int h = g.node("Tanh", {y});
  g.output(g.node("Neg", {g.node("Concat", {e, h}, {{"axis", int_attr(1)}})}));
  PlanOptions only_neg;
  only_neg.inplace.ops = std::set<std::string>{"Neg"};
  EXPECT_EQ(count_op(g.plan(only_neg), "Concat"), 1);
  PlanOptions off;
  off.inplace.enabled = false;
  EXPECT_EQ(count_op(g.plan(off), "Concat"), 1);
  PlanOptions only_concat;
  only_concat.inplace.ops = std::set<std::string>{"Concat"};
  EXPECT_EQ(count_op(g.plan(only_concat), "Concat"), 0);
}

// The verifier refuses an alias whose offset leaves its base, or that
// starts inside an element.
TEST(ConcatInplaceTest, VerifierChecksAliasOffsets) {
  GraphBuilder b;
  const int x = b.input("x", {1, 2, 3});
  const int a = b.node("Exp", {x});
  const int t = b.node("Tanh", {x});
  b.output(b.node("Neg", {b.node("Concat", {a, t}, {{"axis", int_attr(1)}})}));
  const PlanResult p = b.plan();
  ASSERT_TRUE(planner::verify_program(p.bytes).empty());
  const std::string tn = name(b, t);
  auto with_offset = [&](uint64_t offset) {
    return mutate_program(p.bytes, [&](fb::ProgramT& prog) {
      for (auto& tensor : prog.methods[0]->tensors) {
        if (tensor->name == tn) tensor->storage.AsAliasStorage()->offset = offset;
      }
    });
  };
  EXPECT_TRUE(planner::verify_program(with_offset(0)).empty());
  EXPECT_FALSE(planner::verify_program(with_offset(6 * 4 + 4)).empty());  // past the end
  EXPECT_FALSE(planner::verify_program(with_offset(6 * 4 - 2)).empty());  // inside an element
}

}  // namespace
}  // namespace kiln::testing
