// Program::load and Method: valid programs load and run; truncated,
// corrupted and semantically wrong programs are refused with an Error; the
// memory an application hands in is checked before anything runs; every
// failure logs one line naming what is at fault.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kernels/cpu.h"
#include "kiln/runtime/log.h"
#include "kiln/runtime/program.h"
#include "kiln/schema/bookkeeping.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {

// The ERROR lines the runtime logged (this binary's kiln_pal_log, below).
std::vector<std::string>& logged_errors() {
  static std::vector<std::string> lines;
  return lines;
}

}  // namespace kiln::testing

// Replaces the platform's weak default for this test binary: records ERROR
// lines and still prints every line.
extern "C" void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length) {
  if (level == KILN_LOG_ERROR) kiln::testing::logged_errors().emplace_back(message, length);
  std::fprintf(stderr, "[kiln %s:%d] %.*s\n", file != nullptr ? file : "", line, static_cast<int>(length), message);
}

namespace kiln::testing {
namespace {

void register_kernels() {
  static const bool done = register_cpu_kernels() == Error::kOk;
  ASSERT_TRUE(done);
}

// relu(x + c) over 6 floats.
std::string add_relu_program(const planner::PlanOptions& options = {}) {
  GraphBuilder b;
  const int x = b.input("x", {2, 3});
  const int c = b.constant("c", HostTensor::from_floats({1, 1, 1, 1, 1, 1}, {2, 3}));
  const int sum = b.node("Add", {x, c});
  b.output(b.node("Relu", {sum}));
  return b.plan(options).bytes;
}

// A small CNN: conv -> relu -> maxpool -> flatten -> gemm -> softmax.
std::string cnn_program() {
  GraphBuilder b;
  const int x = b.input("image", {1, 2, 6, 6});
  const int w = b.ramp("w", {4, 2, 3, 3});
  const int bias = b.ramp("b", {4});
  const int conv = b.node("Conv", {x, w, bias}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int relu = b.node("Relu", {conv});
  const int pool = b.node("MaxPool", {relu}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  const int flat = b.node("Flatten", {pool});
  const int fc_w = b.ramp("fc_w", {36, 5}, 0.05f);
  const int fc = b.node("Gemm", {flat, fc_w});
  b.output(b.node("Softmax", {fc}, {{"axis", int_attr(1)}}));
  return b.plan().bytes;
}

TEST(ProgramTest, LoadsAndRuns) {
  register_kernels();
  LoadedProgram p(add_relu_program());
  ASSERT_TRUE(p.program.ok()) << error_name(p.program.error());
  ASSERT_EQ(p.program->num_methods(), 1u);
  Result<MethodMeta> meta = p.program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  MethodMemory memory(*meta);
  Result<Method> method = p.program->load_method("forward", memory.manager());
  ASSERT_TRUE(method.ok()) << error_name(method.error());
  float x[6] = {-2, -1, 0, 1, 2, 3};
  float y[6] = {};
  ASSERT_EQ(method->set_input(0, x, sizeof(x)), Error::kOk);
  ASSERT_EQ(method->set_output(0, y, sizeof(y)), Error::kOk);
  ASSERT_EQ(method->execute(), Error::kOk);
  const float expected[6] = {0, 0, 1, 2, 3, 4};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], expected[i]) << i;
  // Re-binding a new input and executing again uses the new data in place.
  float x2[6] = {5, -5, 5, -5, 5, -5};
  ASSERT_EQ(method->set_input(0, x2, sizeof(x2)), Error::kOk);
  ASSERT_EQ(method->execute(), Error::kOk);
  EXPECT_EQ(y[0], 6.f);
  EXPECT_EQ(y[1], 0.f);
}

TEST(ProgramTest, MethodMetaDescribesEverythingBeforeLoading) {
  LoadedProgram p(cnn_program());
  ASSERT_TRUE(p.program.ok());
  MethodMeta meta = p.program->method_meta("forward").get();
  EXPECT_STREQ(meta.name(), "forward");
  ASSERT_EQ(meta.num_inputs(), 1u);
  TensorInfo in = meta.input(0).get();
  EXPECT_STREQ(in.name, "image");
  EXPECT_EQ(in.dtype, DType::FLOAT32);
  ASSERT_EQ(in.rank, 4u);
  EXPECT_EQ(in.dims[1], 2);
  EXPECT_EQ(in.nbytes, 2u * 6 * 6 * 4);
  ASSERT_EQ(meta.num_outputs(), 1u);
  EXPECT_EQ(meta.output(0)->nbytes, 5u * 4);
  ASSERT_EQ(meta.num_arenas(), 1u);
  ArenaInfo arena = meta.arena(0).get();
  EXPECT_GT(arena.size, 0u);
  EXPECT_EQ(arena.alignment, 64u);
  EXPECT_EQ(arena.device.type(), DeviceType::CPU);
  EXPECT_EQ(meta.arena(1).error(), Error::kInvalidArgument);
  EXPECT_EQ(meta.input(1).error(), Error::kInvalidArgument);
  EXPECT_GT(meta.bookkeeping_bytes(), 0u);
  EXPECT_EQ(p.program->method_meta("missing").error(), Error::kNotFound);
}

TEST(ProgramTest, BookkeepingFigureIsExact) {
  register_kernels();
  const std::string bytes = cnn_program();
  LoadedProgram p(bytes);
  MethodMeta meta = p.program->method_meta("forward").get();
  const uint64_t needed = meta.bookkeeping_bytes();
  // Every size below the figure fails cleanly; the figure itself succeeds.
  for (uint64_t size = 0; size <= needed; ++size) {
    MethodMemory memory(meta);
    BumpAllocator bookkeeping(memory.bookkeeping_bytes->data(), static_cast<size_t>(size));
    MemoryManager manager = memory.manager();
    manager.bookkeeping = &bookkeeping;
    Result<Method> method = p.program->load_method("forward", manager);
    if (size < needed) {
      ASSERT_EQ(method.error(), Error::kOutOfMemory) << "size " << size;
    } else {
      ASSERT_TRUE(method.ok()) << error_name(method.error());
    }
  }
}

TEST(ProgramTest, ArenasAreCheckedAtLoad) {
  register_kernels();
  LoadedProgram p(cnn_program());
  MethodMeta meta = p.program->method_meta("forward").get();
  {
    MethodMemory memory(meta);
    memory.arena_spans[0] = Span<uint8_t>(memory.arena_spans[0].data(), memory.arena_spans[0].size() - 1);
    EXPECT_EQ(p.program->load_method("forward", memory.manager()).error(), Error::kArenaTooSmall);
  }
  {
    MethodMemory memory(meta);
    memory.arena_spans[0] = Span<uint8_t>(memory.arena_spans[0].data() + 4, memory.arena_spans[0].size() - 4);
    memory.arena_spans[0] = Span<uint8_t>(memory.arena_spans[0].data(), meta.arena(0)->size);
    EXPECT_EQ(p.program->load_method("forward", memory.manager()).error(), Error::kArenaMisaligned);
  }
  {
    MethodMemory memory(meta);
    MemoryManager manager = memory.manager();
    manager.arenas = Span<const Span<uint8_t>>();
    EXPECT_EQ(p.program->load_method("forward", manager).error(), Error::kArenaMissing);
  }
  {
    MethodMemory memory(meta);
    MemoryManager manager = memory.manager();
    manager.bookkeeping = nullptr;
    EXPECT_EQ(p.program->load_method("forward", manager).error(), Error::kInvalidArgument);
  }
}

TEST(ProgramTest, BindingIsChecked) {
  register_kernels();
  LoadedProgram p(add_relu_program());
  MethodMeta meta = p.program->method_meta("forward").get();
  MethodMemory memory(meta);
  Method method = std::move(p.program->load_method("forward", memory.manager()).get());
  alignas(16) float buffer[8] = {};
  EXPECT_EQ(method.execute(), Error::kNotBound);
  EXPECT_EQ(method.set_input(1, buffer, sizeof(buffer)), Error::kInvalidArgument);
  EXPECT_EQ(method.set_input(0, nullptr, 24), Error::kInvalidArgument);
  EXPECT_EQ(method.set_input(0, buffer, 23), Error::kBufferTooSmall);
  EXPECT_EQ(method.set_input(0, reinterpret_cast<uint8_t*>(buffer) + 1, 24), Error::kBufferMisaligned);
  EXPECT_EQ(method.set_input(0, buffer, 24), Error::kOk);
  EXPECT_EQ(method.execute(), Error::kNotBound);  // the output is still unbound
  EXPECT_EQ(method.set_output(0, buffer + 2, 24), Error::kOk);
  EXPECT_EQ(method.execute(), Error::kOk);
  EXPECT_EQ(method.input(5), nullptr);
  EXPECT_NE(method.output(0), nullptr);
}

// Each failure the application can cause logs exactly one ERROR line, and
// the line names the method, tensor, index or registry at fault.
TEST(ProgramTest, EveryFailureLogsOneLineNamingItsCause) {
#if !KILN_ENABLE_LOGGING
  GTEST_SKIP() << "built with KILN_ENABLE_LOGGING=0";
#endif
  register_kernels();
  LoadedProgram p(add_relu_program());
  MethodMeta meta = p.program->method_meta("forward").get();
  MethodMemory memory(meta);
  Method method = std::move(p.program->load_method("forward", memory.manager()).get());
  alignas(16) float buffer[8] = {};
  KernelRegistry kernels;
  BackendRegistry backends;
  struct Case {
    const char* what;
    std::function<Error()> call;
    Error expected;
    const char* named;  // a word the line must contain
  };
  const Case cases[] = {
      {"execute, input unbound", [&] { return method.execute(); }, Error::kNotBound, "input 0 ('x')"},
      {"input index", [&] { return method.set_input(1, buffer, sizeof(buffer)); }, Error::kInvalidArgument,
       "method 'forward' has no input 1"},
      {"output index", [&] { return method.set_output(2, buffer, sizeof(buffer)); }, Error::kInvalidArgument,
       "method 'forward' has no output 2"},
      {"null buffer", [&] { return method.set_input(0, nullptr, 24); }, Error::kInvalidArgument, "'x'"},
      {"small buffer", [&] { return method.set_input(0, buffer, 23); }, Error::kBufferTooSmall, "'x'"},
      {"misaligned buffer", [&] { return method.set_input(0, reinterpret_cast<uint8_t*>(buffer) + 1, 24); },
       Error::kBufferMisaligned, "'x'"},
      {"host tensor location", [&] { return method.input_location(0).error(); }, Error::kDeviceMismatch, "'x'"},
      {"arena index", [&] { return meta.arena(1).error(); }, Error::kInvalidArgument, "arena 1"},
      {"meta input index", [&] { return meta.input(1).error(); }, Error::kInvalidArgument, "input 1"},
      {"meta output index", [&] { return meta.output(1).error(); }, Error::kInvalidArgument, "output 1"},
      {"method index", [&] { return p.program->method_name(3).error(); }, Error::kInvalidArgument, "method 3"},
      {"method name", [&] { return p.program->method_meta("missing").error(); }, Error::kNotFound, "'missing'"},
      {"null method name", [&] { return p.program->method_meta(nullptr).error(); }, Error::kInvalidArgument, "null"},
      {"kernel without a name", [&] { return kernels.register_kernel(KernelEntry{}); }, Error::kInvalidArgument,
       "kernel"},
      {"null backend", [&] { return backends.register_backend(nullptr); }, Error::kInvalidArgument, "backend"},
  };
  for (const Case& c : cases) {
    logged_errors().clear();
    EXPECT_EQ(c.call(), c.expected) << c.what;
    ASSERT_EQ(logged_errors().size(), 1u) << c.what;
    EXPECT_NE(logged_errors()[0].find(c.named), std::string::npos) << c.what << ": " << logged_errors()[0];
  }
}

// A Result is never "Ok" without a value, and reading a failed one is a
// bug that debug builds stop at (release builds keep going: kInternal).
TEST(ResultTest, MisuseIsCaughtInDebugBuilds) {
#ifdef NDEBUG
  Result<int> from_ok(Error::kOk);
  EXPECT_FALSE(from_ok.ok());
  EXPECT_EQ(from_ok.error(), Error::kInternal);
#else
  EXPECT_DEATH(
      {
        Result<int> failed(Error::kNotFound);
        (void)failed.get();
      },
      "check failed");
  EXPECT_DEATH({ Result<int> from_ok(Error::kOk); }, "check failed");
#endif
}

// The planner's figure and the runtime's come from one definition
// (schema/bookkeeping.h): the program states exactly what the runtime counts.
TEST(ProgramTest, BookkeepingFigureIsTheRuntimesCount) {
  LoadedProgram p(cnn_program());
  ASSERT_TRUE(p.program.ok());
  MethodMeta meta = p.program->method_meta("forward").get();
  EXPECT_EQ(meta.bookkeeping_bytes(), abi::method_bookkeeping_bytes(*meta.flatbuffer()));
}

TEST(ProgramTest, DescribedTensorsAreCheckedBeforeBinding) {
  register_kernels();
  LoadedProgram p(add_relu_program());
  MethodMemory memory(p.program->method_meta("forward").get());
  Method method = std::move(p.program->load_method("forward", memory.manager()).get());
  alignas(16) float data[6] = {};
  alignas(16) int64_t ints[6] = {};
  const int64_t right[2] = {2, 3}, wrong[2] = {3, 2}, flat[1] = {6};
  EXPECT_EQ(method.set_input(0, Tensor(ints, DType::INT64, right, 2)), Error::kDTypeMismatch);
  EXPECT_EQ(method.set_input(0, Tensor(data, DType::FLOAT32, wrong, 2)), Error::kShapeMismatch);
  EXPECT_EQ(method.set_input(0, Tensor(data, DType::FLOAT32, flat, 1)), Error::kShapeMismatch);
  EXPECT_EQ(method.set_input(0, Tensor(data, DType::FLOAT32, right, 2, Device(DeviceType::VULKAN, 0))),
            Error::kDeviceMismatch);
  EXPECT_EQ(method.set_input(0, Tensor(data, DType::FLOAT32, right, 2)), Error::kOk);
  EXPECT_EQ(method.set_output(0, Tensor(data, DType::FLOAT32, right, 2)), Error::kOk);
  EXPECT_EQ(method.execute(), Error::kOk);
  EXPECT_EQ(method.set_output(3, Tensor(data, DType::FLOAT32, right, 2)), Error::kInvalidArgument);
}

TEST(ProgramTest, PlannedFallbackRunsWithoutBinding) {
  register_kernels();
  planner::PlanOptions options;
  options.plan_io = true;
  LoadedProgram p(add_relu_program(options));
  MethodMeta meta = p.program->method_meta("forward").get();
  MethodMemory memory(meta);
  Method method = std::move(p.program->load_method("forward", memory.manager()).get());
  EXPECT_EQ(method.execute(), Error::kOk);
  // Inputs and outputs live in the arena: write the input there, read the output.
  float* x = method.input(0)->data_as<float>();
  for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(i);
  ASSERT_EQ(method.execute(), Error::kOk);
  EXPECT_EQ(method.output(0)->data_as<float>()[5], 6.f);
}

TEST(ProgramTest, MissingKernelIsAnError) {
  LoadedProgram p(add_relu_program());
  MethodMemory memory(p.program->method_meta("forward").get());
  KernelRegistry empty;
  EXPECT_EQ(p.program->load_method("forward", memory.manager(), empty).error(), Error::kKernelNotFound);
}

// Lookups by name match whole names only: a prefix or an extension of a
// registered name is not it, and registering a name again replaces it.
TEST(ProgramTest, RegistriesMatchWholeNames) {
  auto run = [](const KernelArgs&) { return Error::kOk; };
  auto run_too = [](const KernelArgs&) { return Error::kNotSupported; };
  KernelRegistry kernels;
  ASSERT_EQ(kernels.register_kernel({"Relu", nullptr, run}), Error::kOk);
  ASSERT_EQ(kernels.register_kernel({"ReluInt8", nullptr, run}), Error::kOk);
  ASSERT_NE(kernels.find("Relu"), nullptr);
  EXPECT_STREQ(kernels.find("Relu")->name, "Relu");
  EXPECT_STREQ(kernels.find("ReluInt8")->name, "ReluInt8");
  EXPECT_EQ(kernels.find("Rel"), nullptr);
  EXPECT_EQ(kernels.find("ReluInt"), nullptr);
  EXPECT_EQ(kernels.find("Relu8"), nullptr);
  EXPECT_EQ(kernels.find(""), nullptr);
  ASSERT_EQ(kernels.register_kernel({"Relu", nullptr, run_too}), Error::kOk);
  EXPECT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels.find("Relu")->run, +run_too);

  LoadedProgram p(add_relu_program());
  EXPECT_TRUE(p.program->method_meta("forward").ok());
  EXPECT_FALSE(p.program->method_meta("forwar").ok());
  EXPECT_FALSE(p.program->method_meta("forward2").ok());
}

TEST(ProgramTest, MisalignedProgramDataIsRefused) {
  const std::string bytes = add_relu_program();
  std::string shifted = " " + bytes;
  AlignedBytes aligned(shifted);
  BufferDataLoader loader(aligned.data() + 1, bytes.size());
  EXPECT_EQ(Program::load(loader).error(), Error::kInvalidArgument);
}

TEST(ProgramTest, EveryTruncationIsRefused) {
  const std::string bytes = cnn_program();
  for (size_t length = 0; length < bytes.size(); ++length) {
    ASSERT_NE(load_error(bytes.substr(0, length)), Error::kOk) << "length " << length;
  }
  EXPECT_EQ(load_error(bytes), Error::kOk);
}

// Flipping any byte of the flatbuffer must never crash: the program is
// refused, or (when the flip hits a value that is still valid, such as a
// name character) it loads, and then loads and runs as a method safely.
TEST(ProgramTest, CorruptedBytesNeverCrash) {
  register_kernels();
  const std::string bytes = cnn_program();
  uint32_t prefix = 0;
  std::memcpy(&prefix, bytes.data(), 4);
  int refused = 0;
  for (size_t i = 0; i < prefix + 4u; ++i) {
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5A);
    LoadedProgram p(corrupt);
    if (!p.program.ok()) {
      ++refused;
      continue;
    }
    for (size_t m = 0; m < p.program->num_methods(); ++m) {
      const char* name = p.program->method_name(m).get();
      MethodMeta meta = p.program->method_meta(name).get();
      if (meta.bookkeeping_bytes() > (1u << 20)) continue;
      bool sane = true;
      for (size_t a = 0; a < meta.num_arenas(); ++a) sane = sane && meta.arena(a)->size < (1u << 24);
      if (!sane) continue;
      MethodMemory memory(meta);
      Result<Method> method = p.program->load_method(name, memory.manager());
      if (!method.ok()) continue;
      std::vector<std::vector<uint8_t>> io;
      for (size_t k = 0; k < meta.num_inputs(); ++k) {
        io.emplace_back(meta.input(k)->nbytes + 16);
        (void)method->set_input(k, io.back().data(), io.back().size());
      }
      for (size_t k = 0; k < meta.num_outputs(); ++k) {
        io.emplace_back(meta.output(k)->nbytes + 16);
        (void)method->set_output(k, io.back().data(), io.back().size());
      }
      (void)method->execute();
    }
  }
  EXPECT_GT(refused, 0);
}

class SemanticValidation : public ::testing::Test {
 protected:
  void SetUp() override { bytes_ = cnn_program(); }
  Error load_mutated(const std::function<void(fb::ProgramT&)>& mutate) {
    return load_error(mutate_program(bytes_, mutate));
  }
  static fb::MethodT& method(fb::ProgramT& p) { return *p.methods[0]; }
  static int first_planned(fb::ProgramT& p) {
    auto& tensors = method(p).tensors;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i]->storage.type == fb::Storage::PlannedStorage) return static_cast<int>(i);
    }
    return -1;
  }
  static int first_of(fb::ProgramT& p, fb::Storage storage) {
    auto& tensors = method(p).tensors;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i]->storage.type == storage) return static_cast<int>(i);
    }
    return -1;
  }
  std::string bytes_;
};

TEST_F(SemanticValidation, UnmodifiedProgramLoads) {
  EXPECT_EQ(load_mutated([](fb::ProgramT&) {}), Error::kOk);
}

TEST_F(SemanticValidation, OffsetOutsideArena) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              auto& t = *method(p).tensors[first_planned(p)];
              t.storage.AsPlannedStorage()->offset = method(p).arenas[0]->size;
            }),
            Error::kInvalidProgram);
  // An offset so large that offset + size wraps around.
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              method(p).tensors[first_planned(p)]->storage.AsPlannedStorage()->offset = ~uint64_t{0} - 63;
            }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, MisalignedOffset) {
  EXPECT_EQ(load_mutated(
                [](fb::ProgramT& p) { method(p).tensors[first_planned(p)]->storage.AsPlannedStorage()->offset += 4; }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, ArenaIndexOutOfRange) {
  EXPECT_EQ(
      load_mutated([](fb::ProgramT& p) { method(p).tensors[first_planned(p)]->storage.AsPlannedStorage()->arena = 7; }),
      Error::kInvalidProgram);
}

TEST_F(SemanticValidation, ConstantIndexOutOfRange) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              method(p).tensors[first_of(p, fb::Storage::ConstantStorage)]->storage.AsConstantStorage()->index = 99;
            }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, ConstantOutsideSegment) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { p.constants[0] = fb::DataRef(p.segment_size, 64); }),
            Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { p.segment_size += 1u << 20; }), Error::kInvalidProgram);
}

TEST_F(SemanticValidation, ByteSizeDisagreesWithShape) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).tensors[0]->nbytes += 4; }), Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).tensors[0]->shape[0] = -1; }), Error::kInvalidProgram);
  // Dimensions whose product overflows 64 bits.
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              method(p).tensors[0]->shape = {1ll << 40, 1ll << 40};
            }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, AliasCycleAndOversizedAlias) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              const int a = first_planned(p);
              fb::AliasStorageT self;
              self.base = static_cast<uint32_t>(a);
              method(p).tensors[a]->storage.Set(self);
            }),
            Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              // Make the (small) output's... a planned tensor alias the smallest constant.
              auto& tensors = method(p).tensors;
              int small = -1;
              for (size_t i = 0; i < tensors.size(); ++i) {
                if (tensors[i]->storage.type == fb::Storage::ConstantStorage &&
                    (small < 0 || tensors[i]->nbytes < tensors[small]->nbytes)) {
                  small = static_cast<int>(i);
                }
              }
              fb::AliasStorageT alias;
              alias.base = static_cast<uint32_t>(small);
              tensors[first_planned(p)]->storage.Set(alias);
            }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, InstructionOperandsAndOperators) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).instructions[0]->kind.AsKernelCall()->inputs[0] = 1000; }),
            Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).instructions[0]->kind.AsKernelCall()->op = 77; }),
            Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).instructions[0]->kind.AsKernelCall()->outputs[0] = -1; }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, WritesToReadOnlyTensors) {
  // A kernel writing a constant (weights may be in flash).
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              method(p).instructions[0]->kind.AsKernelCall()->outputs[0] = first_of(p, fb::Storage::ConstantStorage);
            }),
            Error::kInvalidProgram);
  // A kernel writing the method's input (the application's buffer).
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) {
              method(p).instructions[0]->kind.AsKernelCall()->outputs[0] = static_cast<int>(method(p).inputs[0]);
            }),
            Error::kInvalidProgram);
}

TEST_F(SemanticValidation, BookkeepingBelowWhatTheRuntimeNeeds) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).bookkeeping_bytes -= 16; }), Error::kInvalidProgram);
}

TEST_F(SemanticValidation, VersionAndIdentifier) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { p.version = 99; }), Error::kVersionMismatch);
  std::string wrong = bytes_;
  wrong[4] = 'X';
  EXPECT_EQ(load_error(wrong), Error::kInvalidProgram);
}

TEST_F(SemanticValidation, IoMustBeUserStorage) {
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).inputs[0] = first_planned(p); }), Error::kInvalidProgram);
  EXPECT_EQ(load_mutated([](fb::ProgramT& p) { method(p).outputs[0] = 5000; }), Error::kInvalidProgram);
}

// An alias at a byte offset (a Concat's input written in place) lies inside
// its base and starts on a whole element; an offset past the end, inside an
// element, or large enough to wrap around is refused at load.
TEST_F(SemanticValidation, AliasOffsetsStayInsideTheBaseOnWholeElements) {
  // The first alias, made one float at `offset` into its base; with `chain`,
  // a second tensor an alias of that one at `chain` bytes.
  // from_end >= 0: the offset is that many bytes before the base's end.
  auto one_float_at = [](uint64_t offset, int64_t from_end = -1, int64_t chain = -1) {
    return [=](fb::ProgramT& p) {
      const int t = first_of(p, fb::Storage::AliasStorage);
      auto& tensors = method(p).tensors;
      auto* alias = tensors[t]->storage.AsAliasStorage();
      const uint64_t base_bytes = tensors[alias->base]->nbytes;
      tensors[t]->shape = {1};
      tensors[t]->nbytes = 4;
      alias->offset = from_end >= 0 ? base_bytes - static_cast<uint64_t>(from_end) : offset;
      if (chain < 0) return;
      const int other = first_planned(p);
      tensors[other]->shape = {1};
      tensors[other]->nbytes = 4;
      fb::AliasStorageT second;
      second.base = static_cast<uint32_t>(t);
      second.offset = static_cast<uint64_t>(chain);
      tensors[other]->storage.Set(second);
    };
  };
  EXPECT_EQ(load_mutated(one_float_at(8)), Error::kOk);
  EXPECT_EQ(load_mutated(one_float_at(0, 4)), Error::kOk);                    // the last float
  EXPECT_EQ(load_mutated(one_float_at(0, 0)), Error::kInvalidProgram);        // just past the end
  EXPECT_EQ(load_mutated(one_float_at(6)), Error::kInvalidProgram);           // inside an element
  EXPECT_EQ(load_mutated(one_float_at(UINT64_MAX)), Error::kInvalidProgram);  // wraps around
  EXPECT_EQ(load_mutated(one_float_at(8, -1, 0)), Error::kOk);
  EXPECT_EQ(load_mutated(one_float_at(8, -1, 4)), Error::kInvalidProgram);  // past a 4-byte base
}

// Aliasing an output onto an input is allowed only where the kernel declared it.
TEST_F(SemanticValidation, InplaceOnlyWhereTheKernelDeclaresIt) {
  register_kernels();
  auto alias_output_of = [](const std::string& op) {
    return [op](fb::ProgramT& p) {
      auto& m = method(p);
      for (auto& ins : m.instructions) {
        auto* call = ins->kind.AsKernelCall();
        if (call == nullptr || m.operators[call->op]->name != op) continue;
        fb::AliasStorageT alias;
        alias.base = static_cast<uint32_t>(call->inputs[0]);
        m.tensors[call->outputs[0]]->storage.Set(alias);
      }
    };
  };
  auto load_method_error = [](const std::string& bytes) {
    LoadedProgram p(bytes);
    if (!p.program.ok()) return p.program.error();
    MethodMemory memory(p.program->method_meta("forward").get());
    return p.program->load_method("forward", memory.manager()).error();
  };
  // Relu reads each element before writing it: declared in place.
  EXPECT_EQ(load_method_error(mutate_program(bytes_, alias_output_of("Relu"))), Error::kOk);
  // Pooling reads a window around each output element: never in place.
  EXPECT_EQ(load_method_error(mutate_program(bytes_, alias_output_of("Pool"))), Error::kInvalidProgram);
}

TEST_F(SemanticValidation, KernelChecksShapesAtLoad) {
  register_kernels();
  // Swap the Conv weight's shape for another of the same byte size: the
  // program is structurally valid, the Conv kernel's check refuses it. (The
  // planner packs constant weights into a 1-D tensor of its own name.)
  const std::string bad = mutate_program(bytes_, [](fb::ProgramT& p) {
    for (auto& t : method(p).tensors) {
      if (t->name == "w") t->shape = {4, 2, 1, 9};
      if (t->name.find("/packed_weight") != std::string::npos) t->shape = {2, t->shape.at(0) / 2};
    }
  });
  LoadedProgram p(bad);
  ASSERT_TRUE(p.program.ok());
  MethodMemory memory(p.program->method_meta("forward").get());
  EXPECT_EQ(p.program->load_method("forward", memory.manager()).error(), Error::kInvalidProgram);
}

}  // namespace
}  // namespace kiln::testing
