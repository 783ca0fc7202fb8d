// Collectives in the planner: AllReduce lowering, the three symmetric
// placement paths and their counts, buffer reuse in symmetric and ordinary
// arenas across a chain of layers, the tensor-parallel pass (what it splits,
// what it refuses), per-rank constants in the program, and the runtime's
// refusal of collectives whose input is not symmetric.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "kiln/runtime/error.h"
#include "kiln/schema/program_generated.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

using planner::LArena;
using planner::LMethod;
using planner::LTensor;
using planner::PlanOptions;
using planner::PlanResult;

int all_reduce(GraphBuilder& b, int input) {
  const int out = b.node("AllReduce", {input});
  b.graph().nodes.back().domain = "com.microsoft";
  b.graph().nodes.back().opset = 1;
  return out;
}

const LArena* symmetric_arena(const LMethod& m) {
  for (const LArena& a : m.arenas) {
    if (a.kind == fb::ArenaKind::SYMMETRIC) return &a;
  }
  return nullptr;
}

// Where the input of every collective of `m` lives.
std::set<int> collective_input_arenas(const LMethod& m) {
  std::set<int> arenas;
  for (const auto& ins : m.instructions) {
    if (ins.kind == planner::LInstruction::Kind::kCollective) {
      arenas.insert(m.tensors[static_cast<size_t>(m.root(ins.inputs[0]))].arena);
    }
  }
  return arenas;
}

TEST(CollectivesTest, EachPlacementPathIsTakenAndCounted) {
  GraphBuilder b;
  const int x = b.input("x", {4, 32});
  const int mm = b.node("MatMul", {x, b.ramp("w", {32, 32})});
  const int s1 = all_reduce(b, mm);                    // (a) zero copy
  const int s2 = all_reduce(b, x);                     // (b) input: one buffer
  const int s3 = all_reduce(b, x);                     //     ... shared, no second copy
  const int s4 = all_reduce(b, b.ramp("c", {4, 32}));  // (c) constant
  const int relu = b.node("Relu", {x});
  const int s5 = all_reduce(b, relu);  // (c) a method output
  b.output(b.node("Add", {b.node("Add", {b.node("Add", {s1, s2}), b.node("Add", {s3, s4})}), s5}));
  b.output(relu);
  PlanOptions options;
  options.ranks = 4;
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.symmetric.collectives, 5);
  EXPECT_EQ(r.symmetric.zero_copy, 1);
  EXPECT_EQ(r.symmetric.zero_copy_bytes, 4u * 32 * 4);
  EXPECT_EQ(r.symmetric.input_buffers, 1);
  EXPECT_EQ(r.symmetric.input_copies, 1);
  EXPECT_EQ(r.symmetric.explicit_copies, 2);
  EXPECT_EQ(r.symmetric.copies(), 3);
  const LMethod& m = r.program.methods[0];
  // The method input's copy runs first, before anything reads the buffer.
  ASSERT_EQ(m.instructions[0].kind, planner::LInstruction::Kind::kCopy);
  EXPECT_TRUE(m.tensors[static_cast<size_t>(m.instructions[0].inputs[0])].is_input);
  const LArena* sym = symmetric_arena(m);
  ASSERT_NE(sym, nullptr);
  EXPECT_EQ(sym->group, 0u);
  const std::set<int> arenas = collective_input_arenas(m);
  ASSERT_EQ(arenas.size(), 1u);
  EXPECT_EQ(&m.arenas[static_cast<size_t>(*arenas.begin())], sym);
  ASSERT_EQ(m.communicators.size(), 1u);
  EXPECT_EQ(m.communicators[0].size, 4u);
  EXPECT_EQ(load_error(r.bytes), Error::kOk);
}

// PyTorch Inductor's example: 8 x (matmul -> all_reduce) went from 9
// buffers to 2 once collective outputs were visible to its planner. Here:
// one symmetric buffer (every MatMul output) and one ordinary buffer (every
// AllReduce output).
TEST(CollectivesTest, ChainOfLayersReusesOneSymmetricAndOneOrdinaryBuffer) {
  GraphBuilder b;
  int v = b.input("x", {4, 64});
  for (int i = 0; i < 8; ++i) v = all_reduce(b, b.node("MatMul", {v, b.ramp("w" + std::to_string(i), {64, 64})}));
  b.output(v);
  PlanOptions options;
  options.ranks = 2;
  options.lower.packing_scratch = false;
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.symmetric.zero_copy, 8);
  EXPECT_EQ(r.symmetric.copies(), 0);
  const LMethod& m = r.program.methods[0];
  const uint64_t layer = 4 * 64 * 4;
  ASSERT_EQ(m.arenas.size(), 2u);
  std::set<uint64_t> symmetric_offsets, ordinary_offsets;
  for (const LTensor& t : m.tensors) {
    if (t.storage != planner::Storage::kPlanned) continue;
    (m.arenas[static_cast<size_t>(t.arena)].kind == fb::ArenaKind::SYMMETRIC ? symmetric_offsets : ordinary_offsets)
        .insert(t.offset);
  }
  EXPECT_EQ(symmetric_offsets.size(), 1u);
  EXPECT_EQ(ordinary_offsets.size(), 1u);
  for (const LArena& a : m.arenas) EXPECT_EQ(a.size, layer);
}

TEST(CollectivesTest, OneRankProgramHasAGroupOfOne) {
  GraphBuilder b;
  b.output(all_reduce(b, b.node("Relu", {b.input("x", {2, 8})})));
  const PlanResult r = b.plan();
  ASSERT_EQ(r.program.methods[0].communicators.size(), 1u);
  EXPECT_EQ(r.program.methods[0].communicators[0].size, 1u);
}

int linear(GraphBuilder& b, int x, int64_t in, int64_t out, const std::string& name) {
  return b.node("Add", {b.node("MatMul", {x, b.ramp(name + ".w", {in, out}, 0.05f)}), b.ramp(name + ".b", {out})});
}

TEST(CollectivesTest, TensorParallelSplitsAnMlpPair) {
  GraphBuilder b;
  const int x = b.input("x", {2, 8, 16});
  const int h = b.node("Relu", {linear(b, x, 16, 64, "fc1")});
  b.output(b.node("Add", {x, linear(b, h, 64, 16, "fc2")}));
  PlanOptions options;
  options.tensor_parallel = 4;
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.ranks, 4u);
  EXPECT_EQ(r.tensor_parallel.column_splits, 1);
  EXPECT_EQ(r.tensor_parallel.row_splits, 1);
  EXPECT_EQ(r.symmetric.collectives, 1);
  EXPECT_EQ(r.symmetric.zero_copy, 1);
  // fc1's weight and bias and fc2's weight are split 4 ways; fc2's bias is
  // added once, after the AllReduce.
  const uint64_t split = (16 * 64 + 64 + 64 * 16) * 4;
  EXPECT_EQ(r.tensor_parallel.weight_bytes_total - r.tensor_parallel.weight_bytes_per_rank, split - split / 4);
  size_t per_rank = 0;
  for (const auto& shards : r.program.rank_constants) {
    if (shards.empty()) continue;
    ++per_rank;
    EXPECT_EQ(shards.size(), 4u);
  }
  EXPECT_EQ(per_rank, 3u);
  // The program: those constants carry one shard per rank.
  LoadedProgram loaded(r.bytes);
  ASSERT_TRUE(loaded.program.ok());
  const fb::Method& m = *loaded.program.get().flatbuffer()->methods()->Get(0);
  size_t sharded = 0;
  for (const fb::Tensor* t : *m.tensors()) {
    const fb::ConstantStorage* c = t->storage_as_ConstantStorage();
    if (c != nullptr && c->ranks() != nullptr && c->ranks()->size() > 0) {
      ++sharded;
      EXPECT_EQ(c->ranks()->size(), 4u);
      EXPECT_EQ(c->index(), c->ranks()->Get(0));
    }
  }
  EXPECT_EQ(sharded, 3u);
}

// Planned for a GPU, the collective runs where its operand is produced: on
// cuda:0, its symmetric arena in device memory, with no copy for it.
TEST(CollectivesTest, TensorParallelOnCudaKeepsTheCollectiveOnTheDevice) {
  GraphBuilder b;
  const int x = b.input("x", {2, 8, 16});
  const int h = b.node("Relu", {linear(b, x, 16, 64, "fc1")});
  b.output(b.node("Add", {x, linear(b, h, 64, 16, "fc2")}));
  PlanOptions options;
  options.tensor_parallel = 2;
  options.targets = "cuda:0,cpu";
  const PlanResult r = b.plan(options);
  const LMethod& m = r.program.methods[0];
  ASSERT_EQ(r.symmetric.collectives, 1);
  EXPECT_EQ(r.symmetric.zero_copy, 1);
  EXPECT_EQ(r.symmetric.devices, std::vector<std::string>{"cuda:0"});
  int copies = 0;
  for (const auto& ins : m.instructions) {
    if (ins.kind == planner::LInstruction::Kind::kCollective) EXPECT_EQ(ins.device.type(), fb::DeviceType::CUDA);
    copies += ins.kind == planner::LInstruction::Kind::kCopy ? 1 : 0;
  }
  EXPECT_EQ(copies, 2);  // x to the device, the output back
  const LArena* arena = symmetric_arena(m);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->device.type(), fb::DeviceType::CUDA);
}

// A collective fed by the CPU stays there, even with a GPU listed first.
TEST(CollectivesTest, CollectiveOfACpuProducerStaysOnTheCpu) {
  GraphBuilder b;
  const int x = b.input("x", {2, 8});
  b.output(all_reduce(b, b.node("Relu", {x})));
  PlanOptions options;
  options.ranks = 2;
  options.targets = "cuda:0,cpu";
  options.placements[b.graph().nodes[0].name] = "cpu";
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.symmetric.devices, std::vector<std::string>{"cpu:0"});
  EXPECT_EQ(symmetric_arena(r.program.methods[0])->device.type(), fb::DeviceType::CPU);
}

TEST(CollectivesTest, TensorParallelSplitsAttentionHeads) {
  GraphBuilder b;
  const int64_t seq = 4, dim = 16, heads = 4;
  const int x = b.input("x", {1, seq, dim});
  auto heads_of = [&](int t) {
    const int shaped = b.node("Reshape", {t, b.constant("shape" + std::to_string(t),
                                                        HostTensor::from_int64s({1, seq, heads, dim / heads}, {4}))});
    return b.node("Transpose", {shaped}, {{"perm", ints_attr({0, 2, 1, 3})}});
  };
  const int q = heads_of(linear(b, x, dim, dim, "q"));
  const int k = heads_of(linear(b, x, dim, dim, "k"));
  const int v = heads_of(linear(b, x, dim, dim, "v"));
  const int kt = b.node("Transpose", {k}, {{"perm", ints_attr({0, 1, 3, 2})}});
  const int p = b.node("Softmax", {b.node("MatMul", {q, kt})}, {{"axis", int_attr(-1)}});
  const int y = b.node("Transpose", {b.node("MatMul", {p, v})}, {{"perm", ints_attr({0, 2, 1, 3})}});
  const int merged = b.node("Reshape", {y, b.constant("merge", HostTensor::from_int64s({1, seq, dim}, {3}))});
  b.output(linear(b, merged, dim, dim, "out"));
  PlanOptions options;
  options.tensor_parallel = 2;
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.tensor_parallel.column_splits, 3);
  EXPECT_EQ(r.tensor_parallel.row_splits, 1);
  EXPECT_EQ(r.tensor_parallel.reshapes, 4);
  EXPECT_EQ(r.symmetric.collectives, 1);
}

TEST(CollectivesTest, TensorParallelLeavesWhatItCannotSplit) {
  // The hidden activation is also a graph output: splitting would hand
  // each rank a different output, so nothing is split.
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  const int h = b.node("Relu", {linear(b, x, 16, 32, "fc1")});
  b.output(linear(b, h, 32, 16, "fc2"));
  b.output(h);
  PlanOptions options;
  options.tensor_parallel = 2;
  try {
    b.plan(options);
    FAIL() << "planned a split it should refuse";
  } catch (const planner::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("found no MatMul/Gemm pair to split"), std::string::npos) << e.what();
  }
}

TEST(CollectivesTest, TensorParallelNeedsWidthsTheRanksDivide) {
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  b.output(linear(b, b.node("Relu", {linear(b, x, 16, 30, "fc1")}), 30, 16, "fc2"));
  PlanOptions options;
  options.tensor_parallel = 4;  // 30 columns do not split 4 ways
  EXPECT_THROW(b.plan(options), planner::PlanError);
  options.tensor_parallel = 3;
  EXPECT_EQ(b.plan(options).tensor_parallel.row_splits, 1);
}

TEST(CollectivesTest, RuntimeRefusesACollectiveOutsideASymmetricArena) {
  GraphBuilder b;
  b.output(all_reduce(b, b.node("Relu", {b.input("x", {2, 8})})));
  const std::string bytes = b.plan().bytes;
  ASSERT_EQ(load_error(bytes), Error::kOk);
  const std::string ordinary = mutate_program(bytes, [](fb::ProgramT& p) {
    for (auto& arena : p.methods[0]->arenas) arena->kind = fb::ArenaKind::ORDINARY;
  });
  EXPECT_EQ(load_error(ordinary), Error::kInvalidProgram);
  const std::string no_group = mutate_program(bytes, [](fb::ProgramT& p) { p.methods[0]->communicators.clear(); });
  EXPECT_EQ(load_error(no_group), Error::kInvalidProgram);
}

TEST(CollectivesTest, RuntimeRefusesPerRankConstantsThatDoNotMatchTheGroup) {
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  b.output(linear(b, b.node("Relu", {linear(b, x, 16, 32, "fc1")}), 32, 16, "fc2"));
  PlanOptions options;
  options.tensor_parallel = 2;
  const std::string bytes = b.plan(options).bytes;
  ASSERT_EQ(load_error(bytes), Error::kOk);
  const std::string three = mutate_program(bytes, [](fb::ProgramT& p) {
    for (auto& t : p.methods[0]->tensors) {
      if (auto* c = t->storage.AsConstantStorage(); c != nullptr && !c->ranks.empty()) c->ranks.push_back(0);
    }
  });
  EXPECT_EQ(load_error(three), Error::kInvalidProgram);
}

// Relu (on the device) -> AllReduce of `elements` floats over `ranks`,
// planned for cuda:0,cpu; with `reuse`, the Relu's output is also added to
// the sum afterwards (it lives past the collective).
PlanResult device_all_reduce(int64_t elements, uint32_t ranks, planner::AllReduceMode mode, bool reuse = false) {
  GraphBuilder b;
  const int r = b.node("Relu", {b.input("x", {1, elements})});
  const int sum = all_reduce(b, r);
  b.output(reuse ? b.node("Add", {sum, r}) : sum);
  PlanOptions options;
  options.targets = "cuda:0,cpu";
  options.ranks = ranks;
  options.all_reduce = mode;
  return b.plan(options);
}

const fb::CollectiveCall* collective_call(const PlanResult& plan) {
  const fb::Program* program = fb::GetSizePrefixedProgram(plan.bytes.data());
  for (const fb::Instruction* i : *program->methods()->Get(0)->instructions()) {
    if (i->kind_as_CollectiveCall() != nullptr) return i->kind_as_CollectiveCall();
  }
  return nullptr;
}

TEST(CollectivesTest, DeviceAllReduceIsOneShotBelowTheThresholdAndTwoShotFromIt) {
  using planner::AllReduceMode;
  // 2 ranks: two-shot from 256 KiB; 4 ranks: from 128 KiB.
  for (auto [elements, ranks, two_shot] :
       {std::tuple{int64_t{1024}, 2u, false}, std::tuple{int64_t{65536}, 2u, true},
        std::tuple{int64_t{32768}, 4u, true}, std::tuple{int64_t{16384}, 4u, false}}) {
    const PlanResult plan = device_all_reduce(elements, ranks, AllReduceMode::kAuto);
    ASSERT_EQ(plan.all_reduce.size(), 1u);
    const planner::AllReduceChoice& c = plan.all_reduce[0];
    EXPECT_EQ(c.algorithm, two_shot ? fb::AllReduceAlgorithm::TWO_SHOT : fb::AllReduceAlgorithm::ONE_SHOT)
        << elements << " floats over " << ranks << " ranks: " << c.why;
    EXPECT_NE(c.why.find(two_shot ? ">=" : "<"), std::string::npos) << c.why;
    EXPECT_EQ(c.bytes, static_cast<uint64_t>(elements) * 4);
    // The signal words: after the planned tensors, inside the arena, in the program.
    const fb::CollectiveCall* call = collective_call(plan);
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call->algorithm(), c.algorithm);
    EXPECT_EQ(call->blocks(), c.blocks);
    EXPECT_EQ(call->blocks(), std::min<uint64_t>(32, (c.bytes + 65535) / 65536));
    EXPECT_GT(call->state_bytes(), 0u);
    const LArena* arena = symmetric_arena(plan.program.methods[0]);
    ASSERT_NE(arena, nullptr);
    EXPECT_GE(call->signal_offset(), c.bytes);
    EXPECT_LE(call->signal_offset() + uint64_t{call->blocks()} * 8, arena->size);
    EXPECT_EQ(load_error(plan.bytes), Error::kOk);
  }
}

TEST(CollectivesTest, ForcedAllReduceAlgorithmsAndWhereTheyCannotRun) {
  using planner::AllReduceMode;
  EXPECT_EQ(device_all_reduce(64, 2, AllReduceMode::kTwoShot).all_reduce[0].algorithm,
            fb::AllReduceAlgorithm::TWO_SHOT);
  EXPECT_EQ(device_all_reduce(1 << 17, 2, AllReduceMode::kOneShot).all_reduce[0].algorithm,
            fb::AllReduceAlgorithm::ONE_SHOT);
  // Two-shot writes its slice over the operand: not where the operand is read later.
  const planner::AllReduceChoice lives = device_all_reduce(64, 2, AllReduceMode::kTwoShot, true).all_reduce[0];
  EXPECT_EQ(lives.algorithm, fb::AllReduceAlgorithm::ONE_SHOT);
  EXPECT_NE(lives.why.find("read after the call"), std::string::npos) << lives.why;
  // On the host, and with more ranks than the kernels address: the communicator's.
  GraphBuilder b;
  b.output(all_reduce(b, b.node("Relu", {b.input("x", {1, 64})})));
  PlanOptions options;
  options.ranks = 2;
  const PlanResult host = b.plan(options);
  EXPECT_EQ(host.all_reduce[0].algorithm, fb::AllReduceAlgorithm::COMMUNICATOR);
  EXPECT_EQ(collective_call(host)->signal_offset(), 0u);
  const planner::AllReduceChoice many = device_all_reduce(64, 16, AllReduceMode::kOneShot).all_reduce[0];
  EXPECT_EQ(many.algorithm, fb::AllReduceAlgorithm::COMMUNICATOR);
  EXPECT_NE(many.why.find("more ranks"), std::string::npos) << many.why;
}

// Megatron's pattern: the bias and residual Adds after a device all-reduce
// go into its write (the CollectiveCall's addends), and only where they may.
PlanResult all_reduce_then_adds(const std::vector<int64_t>& bias_shape, bool read_twice, bool three_adds,
                                const std::string& targets = "cuda:0,cpu", bool fuse = true) {
  GraphBuilder b;
  const int x = b.input("x", {4, 32});
  const int sum = all_reduce(b, b.node("Relu", {x}));
  const int biased = b.node("Add", {sum, b.ramp("bias", bias_shape)});
  int y = b.node("Add", {x, biased});
  if (three_adds) y = b.node("Add", {y, x});
  b.output(y);
  if (read_twice) b.output(b.node("Sigmoid", {sum}));
  PlanOptions options;
  options.targets = targets;
  options.ranks = 2;
  options.fuse = fuse;
  return b.plan(options);
}

TEST(CollectivesTest, BiasAndResidualAddsFuseIntoADeviceAllReducesWrite) {
  for (const std::vector<int64_t>& bias :
       {std::vector<int64_t>{32}, std::vector<int64_t>{1, 32}, std::vector<int64_t>{4, 32}}) {
    const PlanResult plan = all_reduce_then_adds(bias, false, false);
    EXPECT_EQ(plan.fuse.all_reduce_addends, 2);
    ASSERT_EQ(plan.all_reduce.size(), 1u);
    EXPECT_EQ(plan.all_reduce[0].fused_adds.size(), 2u);
    const fb::CollectiveCall* call = collective_call(plan);
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call->inputs()->size(), 3u);
    // No Add kernel is left: the collective writes what the last Add wrote.
    for (const auto& ins : plan.program.methods[0].instructions) EXPECT_NE(ins.op, "Add");
    EXPECT_EQ(load_error(plan.bytes), Error::kOk);
  }
  // At most two addends: a third Add stays a kernel.
  EXPECT_EQ(all_reduce_then_adds({32}, false, true).fuse.all_reduce_addends, 2);
}

TEST(CollectivesTest, AddsStayKernelsWhereTheAllReduceCannotTakeThem) {
  // A bias that does not broadcast along the leading axes ([4, 1] over [4, 32]).
  EXPECT_EQ(all_reduce_then_adds({4, 1}, false, false).fuse.all_reduce_addends, 0);
  // The sum is read by another node too.
  EXPECT_EQ(all_reduce_then_adds({32}, true, false).fuse.all_reduce_addends, 0);
  // On the host (the communicator reduces), and with --no-fuse.
  EXPECT_EQ(all_reduce_then_adds({32}, false, false, "cpu").fuse.all_reduce_addends, 0);
  EXPECT_EQ(all_reduce_then_adds({32}, false, false, "cuda:0,cpu", false).fuse.all_reduce_addends, 0);
  // An addend that is the operand itself: two-shot would have written its
  // slice over it, so one-shot runs.
  const planner::AllReduceChoice own = device_all_reduce(64, 2, planner::AllReduceMode::kTwoShot, true).all_reduce[0];
  EXPECT_EQ(own.fused_adds.size(), 1u);
  EXPECT_EQ(own.algorithm, fb::AllReduceAlgorithm::ONE_SHOT) << own.why;
}

TEST(CollectivesTest, RuntimeRefusesAnAddendThatIsNotFloat32) {
  const PlanResult plan = all_reduce_then_adds({32}, false, false);
  ASSERT_EQ(load_error(plan.bytes), Error::kOk);
  const std::string ints = mutate_program(plan.bytes, [](fb::ProgramT& p) {
    auto& m = *p.methods[0];
    for (auto& i : m.instructions) {
      if (auto* c = i->kind.AsCollectiveCall()) m.tensors[static_cast<size_t>(c->inputs[1])]->dtype = DType::INT32;
    }
  });
  ::testing::internal::CaptureStderr();
  const Error error = load_error(ints);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(error, Error::kInvalidProgram);
  EXPECT_NE(log.find("addends are float32"), std::string::npos) << log;
}

TEST(CollectivesTest, RuntimeRefusesSignalWordsOutsideTheArena) {
  const std::string bytes = device_all_reduce(64, 2, planner::AllReduceMode::kOneShot).bytes;
  ASSERT_EQ(load_error(bytes), Error::kOk);
  const std::string outside = mutate_program(bytes, [](fb::ProgramT& p) {
    for (auto& i : p.methods[0]->instructions) {
      if (auto* c = i->kind.AsCollectiveCall(); c != nullptr) c->signal_offset = uint64_t{1} << 40;
    }
  });
  EXPECT_EQ(load_error(outside), Error::kInvalidProgram);
}

}  // namespace
}  // namespace kiln::testing
