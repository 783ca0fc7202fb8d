// The CUDA delegate's own contract, under the host execution model (its
// hostexec build), where the GPU alone would show a fault:
//   - a launch (or cuBLASLt call) that fails while a delegate is captured
//     fails that call, and the next calls run every kernel again (no graph
//     missing the failed work is replayed as if complete);
//   - another Method's copies and launches on the device's stream, arriving
//     while a delegate is being captured, run (they do not fall into its
//     graph);
//   - a device arena the application gives at a misaligned address is
//     refused when the method loads;
//   - cuBLASLt's operand layouts: a leading dimension never smaller than the
//     stored rows, also for a transposed operand with one column;
//   - the all-reduce kernels, two ranks as two threads of one process: each
//     rank's sum is the same and right on every call, and the kernel's
//     launch is captured as a CUDA graph and replayed like a delegate's;
//     a peer that never arrives fails the execute with kPeerFailed and
//     messages naming it, within about the communicator's timeout, instead
//     of hanging (one-shot and two-shot);
//   - a communicator that hands out no device peers but enqueues its own
//     all-reduce (Communicator::enqueue_all_reduce, as NCCL's does without
//     load/store-accessible windows): its call is enqueued on the device's
//     stream where the kernel would run, captured and replayed with the
//     delegate's work, never called again from the host once replayed; one
//     that does neither gets all_reduce() from the runtime on every call;
//   - --precision fp16/bf16: the delegate's tensors in 16 bits, its output
//     within the rounding the storage allows; a kernel mixing storage
//     types refused at load.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <memory>
#include <vector>

#include "backends/cuda/cuda_abi.h"
#include "backends/cuda/hostexec/hostexec.h"
#include "core/error.h"
#include "gemm_layout.h"
#include "kiln/backends/cuda/cuda_backend.h"
#include "kiln/runtime/communicator.h"
#include "kiln/schema/delegate_generated.h"
#include "ops/host_kernels.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

namespace cuda = backends::cuda;
namespace hx = backends::cuda::hostexec;

constexpr int64_t kWidth = 64;

// y = Relu(x * w + b) on `targets` (w, b constant ramps).
planner::PlanResult plan(const std::string& targets, const std::string& precision = "fp32") {
  GraphBuilder b;
  const int x = b.input("x", {1, kWidth});
  const int w = b.ramp("w", {1, kWidth}, 0.5f);
  const int bias = b.ramp("b", {1, kWidth}, 0.25f);
  b.output(b.node("Relu", {b.node("Add", {b.node("Mul", {x, w}), bias})}));
  planner::PlanOptions options;
  options.targets = targets;
  options.precision = precision;
  return b.plan(options);
}

const std::string& program_bytes() {
  static const std::string bytes = plan("cuda:0,cpu").bytes;
  return bytes;
}

std::vector<float> expected(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float w = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f;
    const float b = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
    const float v = x[i] * w + b;
    y[i] = v > 0.f ? v : 0.f;
  }
  return y;
}

std::vector<float> input(float scale) {
  std::vector<float> x(kWidth);
  for (int64_t i = 0; i < kWidth; ++i) x[static_cast<size_t>(i)] = scale * static_cast<float>(i % 5 - 2);
  return x;
}

// The program loaded through `backend`: host arenas from the heap, device
// arenas from `device_arenas` where given (else from the backend).
class Loaded {
 public:
  Loaded(cuda::hostexec::CudaBackend& backend, std::vector<DeviceBuffer> device_arenas = {},
         const std::string& bytes = program_bytes())
      : program_(bytes), device_arenas_(std::move(device_arenas)) {
    if (registry_.register_backend(&backend) != Error::kOk) error_ = Error::kInternal;
    const MethodMeta meta = program_.program->method_meta("forward").get();
    for (size_t i = 0; i < meta.num_arenas(); ++i) {
      const ArenaInfo info = meta.arena(i).get();
      if (info.device.type() != DeviceType::CPU) {
        spans_.emplace_back();
        continue;
      }
      arenas_.push_back(std::make_unique<AlignedBytes>(std::string(info.size, '\0')));
      spans_.emplace_back(arenas_.back()->data(), arenas_.back()->size());
    }
    bookkeeping_bytes_ = std::make_unique<AlignedBytes>(std::string(meta.bookkeeping_bytes(), '\0'));
    bookkeeping_ = BumpAllocator(bookkeeping_bytes_->data(), bookkeeping_bytes_->size());
    MemoryManager memory;
    memory.bookkeeping = &bookkeeping_;
    memory.arenas = Span<const Span<uint8_t>>(spans_.data(), spans_.size());
    memory.device_arenas = Span<const DeviceBuffer>(device_arenas_.data(), device_arenas_.size());
    Result<Method> method =
        program_.program->load_method("forward", memory, planner::host_kernel_registry(), registry_);
    if (method.ok()) {
      method_ = std::make_unique<Method>(std::move(method).get());
    } else {
      error_ = method.error();
    }
  }
  Error error() const { return error_; }
  size_t num_arenas() const { return spans_.size(); }

  // One call with `x`; the output in `out_y`.
  Error run(const std::vector<float>& x, std::vector<float>* out_y) {
    x_ = x;
    out_y->assign(x.size(), -1.f);
    KILN_RETURN_IF_ERROR(method_->set_input(0, x_.data(), x_.size() * sizeof(float)));
    KILN_RETURN_IF_ERROR(method_->set_output(0, out_y->data(), out_y->size() * sizeof(float)));
    return method_->execute();
  }

 private:
  LoadedProgram program_;
  std::vector<DeviceBuffer> device_arenas_;
  BackendRegistry registry_;
  std::vector<std::unique_ptr<AlignedBytes>> arenas_;
  std::vector<Span<uint8_t>> spans_;
  std::unique_ptr<AlignedBytes> bookkeeping_bytes_;
  BumpAllocator bookkeeping_;
  std::unique_ptr<Method> method_;
  Error error_ = Error::kOk;
  std::vector<float> x_;
};

TEST(CudaBackendTest, AFailureDuringCaptureFailsTheCallAndIsNeverReplayed) {
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  {
    Loaded method(backend);
    ASSERT_EQ(method.error(), Error::kOk);
    std::vector<float> y;
    ASSERT_EQ(method.run(input(1.f), &y), Error::kOk);  // warm-up, direct
    EXPECT_EQ(y, expected(input(1.f)));
    hx::fail_next_launches(1);  // the capture's first launch fails
    EXPECT_EQ(method.run(input(2.f), &y), Error::kDeviceError);
    EXPECT_EQ(backend.stats().captures, 0u);
    // The calls after it run every kernel: their outputs follow new inputs.
    for (float scale : {3.f, -1.5f, 0.75f}) {
      ASSERT_EQ(method.run(input(scale), &y), Error::kOk);
      EXPECT_EQ(y, expected(input(scale))) << "input scale " << scale;
    }
    EXPECT_EQ(backend.stats().captures, 1u);  // captured again, and replayed from then on
    EXPECT_EQ(backend.stats().graph_replays, 3u);
  }
  hx::fail_next_launches(0);
  backend.shutdown();
}

struct Interloper {
  Loaded* method = nullptr;
  Error error = Error::kInternal;
  std::vector<float> y;
};

TEST(CudaBackendTest, AnotherMethodsWorkDuringACaptureRunsAndStaysOutOfTheGraph) {
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  {
    Loaded a(backend), b(backend);
    ASSERT_EQ(a.error(), Error::kOk);
    ASSERT_EQ(b.error(), Error::kOk);
    std::vector<float> y;
    ASSERT_EQ(a.run(input(1.f), &y), Error::kOk);
    Interloper other;
    other.method = &b;
    hx::set_capture_hook(
        [](void* arg) {
          auto* o = static_cast<Interloper*>(arg);
          hx::set_capture_hook(nullptr, nullptr);
          o->error = o->method->run(input(-2.f), &o->y);  // b's copies, launches and wait, mid-capture
        },
        &other);
    ASSERT_EQ(a.run(input(2.f), &y), Error::kOk);  // a's capture, then its first replay
    hx::set_capture_hook(nullptr, nullptr);
    EXPECT_EQ(y, expected(input(2.f)));
    EXPECT_EQ(other.error, Error::kOk);
    EXPECT_EQ(other.y, expected(input(-2.f)));
    ASSERT_EQ(a.run(input(0.5f), &y), Error::kOk);  // the graph holds a's work only
    EXPECT_EQ(y, expected(input(0.5f)));
    ASSERT_EQ(b.run(input(1.25f), &other.y), Error::kOk);
    EXPECT_EQ(other.y, expected(input(1.25f)));
  }
  backend.shutdown();
}

TEST(CudaBackendTest, AMisalignedDeviceArenaFromTheApplicationIsRefused) {
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  const size_t arenas = Loaded(backend).num_arenas();
  void* memory = nullptr;
  ASSERT_EQ(hx::cudaMalloc(&memory, 1 << 20), hx::cudaSuccess);
  for (uint64_t offset : {uint64_t{0}, uint64_t{16}, uint64_t{cuda::kArenaAlignment}}) {
    std::vector<DeviceBuffer> given(arenas);
    for (DeviceBuffer& d : given) d = DeviceBuffer{static_cast<uint8_t*>(memory) + offset, (1 << 20) - offset};
    Loaded method(backend, given);
    if (offset % cuda::kArenaAlignment == 0) {
      EXPECT_EQ(method.error(), Error::kOk) << "offset " << offset;
    } else {
      EXPECT_NE(method.error(), Error::kOk) << "offset " << offset;  // the delegate's init: kArenaMisaligned
    }
  }
  EXPECT_EQ(hx::cudaFree(memory), hx::cudaSuccess);
  backend.shutdown();
}

// The delegate's compile spec "precision", or "" where there is none.
std::string precision_of(const std::string& bytes) {
  std::string found;
  mutate_program(bytes, [&](fb::ProgramT& program) {
    for (const auto& d : program.methods[0]->delegates) {
      for (const auto& spec : d->compile_specs) {
        if (spec->key == "precision") found = std::string(spec->value.begin(), spec->value.end());
      }
    }
  });
  return found;
}

TEST(CudaBackendTest, PrecisionTf32IsPlannedForCudaRefusedByFp32BackendsAndIgnoredByTheCpu) {
  const std::string tf32 = plan("cuda:0,cpu", "tf32").bytes;
  EXPECT_EQ(precision_of(tf32), "tf32");
  EXPECT_EQ(precision_of(program_bytes()), "");  // fp32: no spec, as before
  EXPECT_THROW(plan("null:0,cpu", "tf32"), planner::PlanError);
  EXPECT_THROW(plan("null:0,cpu", "fp16"), planner::PlanError);
  EXPECT_THROW(plan("cuda:0,cpu", "fp64"), planner::PlanError);
  EXPECT_NO_THROW(plan("cpu", "bf16"));
  // The host execution model runs the TF32 program (its reference GEMM stays FP32).
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  {
    Loaded method(backend, {}, tf32);
    ASSERT_EQ(method.error(), Error::kOk);
    std::vector<float> y;
    ASSERT_EQ(method.run(input(1.f), &y), Error::kOk);
    EXPECT_EQ(y, expected(input(1.f)));
    // A precision this runtime does not run is refused when the method loads.
    const std::string fp16 = mutate_program(tf32, [](fb::ProgramT& program) {
      for (auto& d : program.methods[0]->delegates) {
        for (auto& spec : d->compile_specs) {
          if (spec->key == "precision") spec->value = {'i', 'n', 't', '4'};
        }
      }
    });
    EXPECT_NE(Loaded(backend, {}, fp16).error(), Error::kOk);
  }
  backend.shutdown();
}

// How many tensors of `bytes` on a CUDA device have `dtype`.
int device_tensors_of(const std::string& bytes, fb::DType dtype) {
  int found = 0;
  mutate_program(bytes, [&](fb::ProgramT& program) {
    for (const auto& t : program.methods[0]->tensors) {
      found += t->dtype == dtype && t->device && t->device->type() == fb::DeviceType::CUDA;
    }
  });
  return found;
}

// --precision fp16 / bf16: the delegate's tensors are stored in 16 bits
// (the input's device copy stays float32: a Cast in the delegate converts
// it), the output comes back float32. x * w + b with x = scale * (-2 .. 2),
// w and b multiples of 0.5 and 0.25: with scale 1 and 0.75 every value is
// exact in both formats, so the output is exact; with scale 1/3, x is
// rounded once (the Cast) and the product and the sum once each as they
// are stored, each by at most u (2^-11 for float16, 2^-8 for bfloat16:
// rounding to nearest), so |error| <= 3u (|x w| + |b|) to first order.
TEST(CudaBackendTest, Fp16AndBf16StoreTheDelegatesTensorsIn16BitsWithinTheirRounding) {
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  for (const char* precision : {"fp16", "bf16"}) {
    SCOPED_TRACE(precision);
    const bool half = std::string(precision) == "fp16";
    const std::string bytes = plan("cuda:0,cpu", precision).bytes;
    EXPECT_EQ(precision_of(bytes), precision);
    EXPECT_GE(device_tensors_of(bytes, half ? fb::DType::FLOAT16 : fb::DType::BFLOAT16), 4);  // w, b, x*w, +b
    EXPECT_EQ(device_tensors_of(bytes, fb::DType::FLOAT32), 2);  // the input's device copy, the output's
    Loaded method(backend, {}, bytes);
    ASSERT_EQ(method.error(), Error::kOk);
    std::vector<float> y;
    for (float scale : {1.f, 0.75f}) {
      ASSERT_EQ(method.run(input(scale), &y), Error::kOk);
      EXPECT_EQ(y, expected(input(scale))) << "scale " << scale;
    }
    const float u = half ? 1.f / 2048 : 1.f / 256;
    const std::vector<float> x = input(1.f / 3);
    ASSERT_EQ(method.run(x, &y), Error::kOk);
    const std::vector<float> want = expected(x);
    int inexact = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float w = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f;
      const float b = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
      EXPECT_LE(std::fabs(y[i] - want[i]), 3.f * u * (std::fabs(x[i] * w) + std::fabs(b)) * 1.001f) << "element " << i;
      inexact += y[i] != want[i];
    }
    EXPECT_GT(inexact, 0);  // the 16-bit storage shows
  }
  backend.shutdown();
}

// A kernel whose float operands do not share one storage type is refused
// at load, naming the node (here the product written as bfloat16 in a
// float16 delegate).
TEST(CudaBackendTest, AKernelMixingStorageTypesIsRefusedAtLoad) {
  const std::string mixed = mutate_program(plan("cuda:0,cpu", "fp16").bytes, [](fb::ProgramT& program) {
    for (auto& t : program.methods[0]->tensors) {
      if (t->name.find("Mul") != std::string::npos && t->dtype == fb::DType::FLOAT16) t->dtype = fb::DType::BFLOAT16;
    }
  });
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  EXPECT_EQ(Loaded(backend, {}, mixed).error(), Error::kDelegateInitFailed);  // the delegate: kDTypeMismatch
  backend.shutdown();
}

// The bytes of every uint8 scratch tensor of the program's delegate kernel calls on `device`.
std::vector<uint64_t> workspaces(const std::string& bytes) {
  std::vector<uint64_t> found;
  mutate_program(bytes, [&](fb::ProgramT& program) {
    const fb::MethodT& m = *program.methods[0];
    for (const auto& d : m.delegates) {
      auto graph = fb::UnPackDelegateGraph(d->inline_blob.data());
      for (const auto& call : graph->kernels) {
        for (int32_t t : call->scratch) {
          const fb::TensorT& tensor = *m.tensors[static_cast<size_t>(t)];
          if (tensor.dtype == fb::DType::UINT8 && tensor.device && tensor.device->type() != fb::DeviceType::CPU) {
            found.push_back(tensor.nbytes);
          }
        }
      }
    }
  });
  return found;
}

TEST(CudaBackendTest, CublasLtWorkspaceIsPlannedScratchOfEachGemm) {
  GraphBuilder b;
  const int x = b.input("x", {300, 64});
  const int w = b.ramp("w", {64, 2000}, 0.01f);
  b.output(b.node("MatMul", {x, w}));
  planner::PlanOptions options;
  options.targets = "cuda:0,cpu";
  const std::string bytes = b.plan(options).bytes;
  // 16 bytes per output element, within 1 to 32 MiB (cuda_abi.h).
  EXPECT_EQ(workspaces(bytes), std::vector<uint64_t>{cuda::gemm_workspace_bytes(300 * 2000)});
  EXPECT_EQ(cuda::gemm_workspace_bytes(300 * 2000), uint64_t{300} * 2000 * 16);
  EXPECT_EQ(cuda::gemm_workspace_bytes(4), uint64_t{1} << 20);
  EXPECT_EQ(cuda::gemm_workspace_bytes(int64_t{1} << 30), uint64_t{32} << 20);
  // Element-wise kernels get none.
  EXPECT_TRUE(workspaces(program_bytes()).empty());
  // The program loads and runs with it (the host execution model does not use it).
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  EXPECT_EQ(Loaded(backend, {}, bytes).error(), Error::kOk);
  backend.shutdown();
}

// A Gemm's strides as backends/common's check_gemm writes them (A m x k,
// or k x m with transA; B k x n, or n x k with transB).
cuda::hostexec::MatMulArgs gemm(uint32_t m, uint32_t n, uint32_t k, bool trans_a, bool trans_b) {
  cuda::hostexec::MatMulArgs a = {};
  a.m = m;
  a.n = n;
  a.k = k;
  a.a_row = trans_a ? 1 : k;
  a.a_col = trans_a ? m : 1;
  a.b_row = trans_b ? 1 : n;
  a.b_col = trans_b ? k : 1;
  return a;
}

TEST(CudaBackendTest, GemmLayoutsKeepTheLeadingDimensionAtLeastTheRows) {
  for (uint32_t m : {1u, 3u}) {
    for (uint32_t n : {1u, 5u}) {
      for (uint32_t k : {1u, 8u}) {
        for (int t = 0; t < 4; ++t) {
          const auto args = gemm(m, n, k, t & 1, t & 2);
          const auto first = cuda::hostexec::gemm_first(args), second = cuda::hostexec::gemm_second(args);
          EXPECT_GE(first.ld, static_cast<int64_t>(first.rows)) << "m " << m << " n " << n << " k " << k << " t " << t;
          EXPECT_GE(second.ld, static_cast<int64_t>(second.rows))
              << "m " << m << " n " << n << " k " << k << " t " << t;
          EXPECT_EQ(first.rows * first.cols, uint64_t{n} * k);
          EXPECT_EQ(second.rows * second.cols, uint64_t{m} * k);
        }
      }
    }
  }
  // Transposed A with one column (stored k x 1): read as k x 1, ld k.
  const auto second = cuda::hostexec::gemm_second(gemm(1, 5, 8, true, false));
  EXPECT_EQ(second.rows, 8u);
  EXPECT_EQ(second.cols, 1u);
  EXPECT_EQ(second.ld, 8);
  // Transposed B with k = 1 (stored n x 1): read as n x 1, ld n.
  const auto first = cuda::hostexec::gemm_first(gemm(3, 5, 1, false, true));
  EXPECT_EQ(first.rows, 5u);
  EXPECT_EQ(first.cols, 1u);
  EXPECT_EQ(first.ld, 5);
  // The common case keeps its strides: A row-major m x k is k x m, ld k.
  const auto plain = cuda::hostexec::gemm_second(gemm(3, 5, 8, false, false));
  EXPECT_FALSE(plain.transposed);
  EXPECT_EQ(plain.rows, 8u);
  EXPECT_EQ(plain.cols, 3u);
  EXPECT_EQ(plain.ld, 8);
}

// Relu (on cuda:0) -> AllReduce over 2 ranks, with the kernel `mode` forces.
std::string relu_all_reduce(planner::AllReduceMode mode, uint32_t ranks = 2) {
  GraphBuilder b;
  const int r = b.node("Relu", {b.input("x", {1, kWidth})});
  b.output(b.node("AllReduce", {r}));
  b.graph().nodes.back().domain = "com.microsoft";
  b.graph().nodes.back().opset = 1;
  planner::PlanOptions options;
  options.targets = "cuda:0,cpu";
  options.ranks = ranks;
  options.all_reduce = mode;
  const planner::PlanResult plan = b.plan(options);
  const bool two_shot = mode == planner::AllReduceMode::kTwoShot;
  EXPECT_EQ(plan.all_reduce.at(0).algorithm,
            ranks > 8 ? fb::AllReduceAlgorithm::COMMUNICATOR
                      : (two_shot ? fb::AllReduceAlgorithm::TWO_SHOT : fb::AllReduceAlgorithm::ONE_SHOT));
  return plan.bytes;
}

// Two ranks in one process: both copies of each symmetric arena are host
// memory (device memory under the host execution model), zeroed and
// 256-byte aligned, shared by the communicators of both ranks.
struct SharedArenas {
  std::mutex mutex;
  uint64_t size = 0;
  std::vector<uint8_t> storage[2];
  uint8_t* bases[2] = {};
};

class TwoRanks final : public Communicator {
 public:
  TwoRanks(SharedArenas& shared, uint32_t rank, uint32_t timeout_ms)
      : shared_(shared), rank_(rank), timeout_ms_(timeout_ms) {}
  const char* name() const override { return "two-ranks"; }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return 2; }
  DeviceType device_type() const override { return DeviceType::CUDA; }
  Error map_symmetric(uint64_t size, uint32_t, uint64_t, SymmetricMemory* out_memory) override {
    std::lock_guard<std::mutex> lock(shared_.mutex);
    if (shared_.size == 0) {
      shared_.size = size;
      for (int r = 0; r < 2; ++r) {
        shared_.storage[r].assign(size + cuda::kArenaAlignment, 0);
        const uintptr_t at = reinterpret_cast<uintptr_t>(shared_.storage[r].data());
        shared_.bases[r] =
            shared_.storage[r].data() + (cuda::kArenaAlignment - at % cuda::kArenaAlignment) % cuda::kArenaAlignment;
      }
    }
    out_memory->local.handle = shared_.bases[rank_];
    out_memory->local.size = size;
    return shared_.size == size ? Error::kOk : Error::kCommunicatorMismatch;
  }
  void unmap_symmetric(SymmetricMemory) override {}
  Error all_reduce(const AllReduceArgs&) override { return Error::kNotSupported; }
  Error device_peers(const SymmetricMemory&, DevicePeers* out_peers) override {
    out_peers->bases[0] = shared_.bases[0];
    out_peers->bases[1] = shared_.bases[1];
    out_peers->count = 2;
    out_peers->timeout_ms = timeout_ms_;
    return Error::kOk;
  }

 private:
  SharedArenas& shared_;
  uint32_t rank_;
  uint32_t timeout_ms_;
};

// A program of collectives loaded as one rank: host arenas from the heap,
// the symmetric arena from `communicator`, delegates and collectives on
// `backend`.
class RankMethod {
 public:
  RankMethod(const std::string& bytes, cuda::hostexec::CudaBackend& backend, Communicator& communicator)
      : program_(bytes) {
    if (!program_.program.ok() || registry_.register_backend(&backend) != Error::kOk) return;
    const MethodMeta meta = program_.program->method_meta("forward").get();
    for (size_t i = 0; i < meta.num_arenas(); ++i) {
      const ArenaInfo info = meta.arena(i).get();
      arenas_.push_back(std::make_unique<AlignedBytes>(std::string(info.size, '\0')));
      spans_.push_back(info.device.type() == DeviceType::CPU ? Span<uint8_t>(arenas_.back()->data(), info.size)
                                                             : Span<uint8_t>());
    }
    bookkeeping_bytes_ = std::make_unique<AlignedBytes>(std::string(meta.bookkeeping_bytes(), '\0'));
    bookkeeping_ = BumpAllocator(bookkeeping_bytes_->data(), bookkeeping_bytes_->size());
    communicators_[0] = &communicator;
    MemoryManager memory;
    memory.bookkeeping = &bookkeeping_;
    memory.arenas = Span<const Span<uint8_t>>(spans_.data(), spans_.size());
    memory.communicators = Span<Communicator* const>(communicators_, 1);
    Result<Method> method =
        program_.program->load_method("forward", memory, planner::host_kernel_registry(), registry_);
    error_ = method.error();
    if (method.ok()) method_ = std::make_unique<Method>(std::move(method).get());
  }
  Error error() const { return error_; }

  Error run(const std::vector<float>& x, std::vector<float>* out_y) {
    x_ = x;
    out_y->assign(x.size(), -1.f);
    KILN_RETURN_IF_ERROR(method_->set_input(0, x_.data(), x_.size() * sizeof(float)));
    KILN_RETURN_IF_ERROR(method_->set_output(0, out_y->data(), out_y->size() * sizeof(float)));
    return method_->execute();
  }

 private:
  LoadedProgram program_;
  BackendRegistry registry_;
  std::vector<std::unique_ptr<AlignedBytes>> arenas_;
  std::vector<Span<uint8_t>> spans_;
  std::unique_ptr<AlignedBytes> bookkeeping_bytes_;
  BumpAllocator bookkeeping_;
  Communicator* communicators_[1] = {};
  std::unique_ptr<Method> method_;
  Error error_ = Error::kInternal;
  std::vector<float> x_;
};

TEST(CudaBackendTest, AnAllReduceKernelIsCapturedAndReplayedWithEveryRanksSum) {
  for (planner::AllReduceMode mode : {planner::AllReduceMode::kOneShot, planner::AllReduceMode::kTwoShot}) {
    const std::string bytes = relu_all_reduce(mode);
    SharedArenas shared;
    std::vector<float> ys[2][5];
    cuda::CudaStats stats[2];
    Error errors[2] = {Error::kInternal, Error::kInternal};
    auto rank_main = [&](uint32_t rank) {
      cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
      TwoRanks communicator(shared, rank, 20000);
      {
        RankMethod method(bytes, backend, communicator);
        errors[rank] = method.error();
        for (int call = 0; call < 5 && errors[rank] == Error::kOk; ++call) {
          errors[rank] =
              method.run(input(static_cast<float>(rank + 1) * (call % 2 == 0 ? 1.f : -0.5f)), &ys[rank][call]);
        }
      }
      stats[rank] = backend.stats();
      backend.shutdown();
    };
    std::thread other(rank_main, 1u);
    rank_main(0);
    other.join();
    for (uint32_t rank = 0; rank < 2; ++rank) {
      ASSERT_EQ(errors[rank], Error::kOk) << "rank " << rank;
      // Two records (the Relu delegate and the all-reduce): each launched
      // directly once, then captured once and replayed on the 4 calls after.
      EXPECT_EQ(stats[rank].direct_calls, 2u);
      EXPECT_EQ(stats[rank].captures, 2u);
      EXPECT_EQ(stats[rank].graph_replays, 8u);
      for (int call = 0; call < 5; ++call) {
        const float scale = call % 2 == 0 ? 1.f : -0.5f;
        const std::vector<float> a = input(scale), b = input(2.f * scale);
        for (size_t i = 0; i < a.size(); ++i) {
          const float want = (a[i] > 0.f ? a[i] : 0.f) + (b[i] > 0.f ? b[i] : 0.f);
          ASSERT_EQ(ys[rank][call][i], want) << "rank " << rank << " call " << call << " element " << i;
        }
      }
    }
  }
}

TEST(CudaBackendTest, AnAllReduceWhosePeerNeverArrivesFailsWithinTheTimeout) {
  for (planner::AllReduceMode mode : {planner::AllReduceMode::kOneShot, planner::AllReduceMode::kTwoShot}) {
    const std::string bytes = relu_all_reduce(mode);
    cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
    SharedArenas shared;
    TwoRanks communicator(shared, 0, 300);  // rank 1 never runs: its copy stays zero
    {
      RankMethod method(bytes, backend, communicator);
      ASSERT_EQ(method.error(), Error::kOk);
      std::vector<float> y;
      ::testing::internal::CaptureStdout();
      ::testing::internal::CaptureStderr();
      const auto start = std::chrono::steady_clock::now();
      const Error error = method.run(input(1.f), &y);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string kernel_says = ::testing::internal::GetCapturedStdout();
      const std::string runtime_says = ::testing::internal::GetCapturedStderr();
      EXPECT_EQ(error, Error::kPeerFailed);
      EXPECT_GE(seconds, 0.25);
      EXPECT_LT(seconds, 10.0);
      EXPECT_NE(kernel_says.find("rank 0 of 2, block 0: peer rank 1 did not reach step 1 within 300 ms"),
                std::string::npos)
          << kernel_says;
      EXPECT_NE(runtime_says.find("(rank 0 of 2) failed: a peer did not arrive within 300 ms"), std::string::npos)
          << runtime_says;
    }
    backend.shutdown();
  }
}

// Rank 0 of two, without device peers: a stand-in for NCCL's path on GPUs
// without load/store-accessible windows, whose peer contributes zeros (its
// "sum" is a copy of its own operand, enqueued as an async copy on the
// stream it is given, or made by all_reduce() where it does not enqueue).
class EnqueuingRank final : public Communicator {
 public:
  explicit EnqueuingRank(bool enqueues, uint32_t ranks = 2) : enqueues_(enqueues), ranks_(ranks) {}
  const char* name() const override { return "enqueuing"; }
  uint32_t rank() const override { return 0; }
  uint32_t size() const override { return ranks_; }
  DeviceType device_type() const override { return DeviceType::CUDA; }
  Error map_symmetric(uint64_t size, uint32_t, uint64_t, SymmetricMemory* out_memory) override {
    storage_.assign(size + cuda::kArenaAlignment, 0);
    const uintptr_t at = reinterpret_cast<uintptr_t>(storage_.data());
    base_ = storage_.data() + (cuda::kArenaAlignment - at % cuda::kArenaAlignment) % cuda::kArenaAlignment;
    out_memory->local.handle = base_;
    out_memory->local.size = size;
    return Error::kOk;
  }
  void unmap_symmetric(SymmetricMemory) override {}
  Error all_reduce(const AllReduceArgs& args) override {
    ++host_calls;
    memcpy(args.output, base_ + args.input_offset, args.count * sizeof(float));
    return Error::kOk;
  }
  Error enqueue_all_reduce(const AllReduceArgs& args, void* stream) override {
    if (!enqueues_) return Error::kNotSupported;
    if (args.memory.local.handle != base_ || args.dtype != DType::FLOAT32) return Error::kInvalidArgument;
    if (stream == nullptr) return Error::kOk;
    ++enqueued;
    return hx::cudaMemcpyAsync(args.output, base_ + args.input_offset, args.count * sizeof(float),
                               hx::cudaMemcpyDeviceToDevice, static_cast<hx::cudaStream_t>(stream)) == hx::cudaSuccess
               ? Error::kOk
               : Error::kDeviceError;
  }
  int host_calls = 0;
  int enqueued = 0;

 private:
  bool enqueues_;
  uint32_t ranks_;
  std::vector<uint8_t> storage_;
  uint8_t* base_ = nullptr;
};

// Also a call planned for the communicator (16 ranks: more than the
// kernels address), which takes the same enqueued path where the
// communicator enqueues.
TEST(CudaBackendTest, AnEnqueuedAllReduceIsCapturedAndReplayedWithoutTheHost) {
  for (uint32_t ranks : {2u, 16u}) {
    for (bool enqueues : {true, false}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks");
      const std::string bytes = relu_all_reduce(planner::AllReduceMode::kOneShot, ranks);
      cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
      EnqueuingRank communicator(enqueues, ranks);
      {
        RankMethod method(bytes, backend, communicator);
        ASSERT_EQ(method.error(), Error::kOk) << (enqueues ? "enqueued" : "all_reduce()");
        for (int call = 0; call < 5; ++call) {
          const float scale = call % 2 == 0 ? 1.f + call : -0.5f * call;
          std::vector<float> y;
          ASSERT_EQ(method.run(input(scale), &y), Error::kOk) << "call " << call;
          const std::vector<float> x = input(scale);
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(y[i], x[i] > 0.f ? x[i] : 0.f) << "call " << call << " element " << i;
          }
        }
      }
      const cuda::CudaStats stats = backend.stats();
      backend.shutdown();
      if (enqueues) {
        // Called on a stream twice (the direct launch, then the capture); the
        // four calls after replay its graph.
        EXPECT_EQ(communicator.enqueued, 2);
        EXPECT_EQ(communicator.host_calls, 0);
        EXPECT_EQ(stats.direct_calls, 2u);
        EXPECT_EQ(stats.captures, 2u);
        EXPECT_EQ(stats.graph_replays, 8u);
      } else {
        EXPECT_EQ(communicator.enqueued, 0);
        EXPECT_EQ(communicator.host_calls, 5);
        EXPECT_EQ(stats.captures, 1u);  // the Relu delegate's only
      }
    }
  }
}

// A program planned before collectives for the communicator reserved
// state bytes (state_bytes 0) loads as it did: through all_reduce(), even
// with a communicator that enqueues.
TEST(CudaBackendTest, ACommunicatorCallWithoutStateBytesKeepsAllReduce) {
  const std::string bytes = mutate_program(relu_all_reduce(planner::AllReduceMode::kOneShot, 16), [](fb::ProgramT& p) {
    for (auto& ins : p.methods[0]->instructions) {
      if (ins->kind.AsCollectiveCall() != nullptr) ins->kind.AsCollectiveCall()->state_bytes = 0;
    }
  });
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  EnqueuingRank communicator(true, 16);
  {
    RankMethod method(bytes, backend, communicator);
    ASSERT_EQ(method.error(), Error::kOk);
    for (int call = 0; call < 2; ++call) {
      std::vector<float> y;
      ASSERT_EQ(method.run(input(1.f + call), &y), Error::kOk) << "call " << call;
    }
  }
  backend.shutdown();
  EXPECT_EQ(communicator.enqueued, 0);
  EXPECT_EQ(communicator.host_calls, 2);
}

}  // namespace
}  // namespace kiln::testing
