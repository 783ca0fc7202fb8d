#include "kiln/backends/cuda/cuda_backend.h"

#include <string.h>

#include <new>

#include "backends/cuda/cuda_abi.h"
#include "backends/cuda/cuda_kernels.h"
#include "cuda_status.h"
#include "gemm_layout.h"
#include "kiln/backends/common/delegate_graph.h"
#include "kiln/runtime/communicator.h"
#include "launch.h"
#include "lower.h"

static_assert(kiln::backends::cuda::kAllReduceMaxAddends == kiln::kMaxCollectiveAddends,
              "the all-reduce kernels take the addends a CollectiveCall may carry");

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

#if !KILN_CUDA_HOSTEXEC
// A Gemm/MatMul on cuBLASLt: its descriptors, initialised in place (no
// cuBLASLt allocation), and the algorithm picked at init. Row-major
// Y = op(A) op(B) runs as the column-major Y^T = op(B)^T op(A)^T.
struct GemmPlan {
  cublasLtMatmulDescOpaque_t desc;
  cublasLtMatrixLayoutOpaque_t a, b, d;
  cublasLtMatmulAlgo_t algo;
  const float* first;   // op(B)^T's data
  const float* second;  // op(A)^T's data
  const float* c;       // C (D's layout) or nullptr
  float* y;
  float alpha, beta;
  void* workspace;  // planned scratch, else the device's
  uint64_t workspace_bytes;
};
static_assert(sizeof(GemmPlan) <= kGemmPlanBytes, "GemmPlan outgrew the bytes the planner half reserves");
#else
struct GemmPlan {};
#endif

namespace {

// A delegate's state: this record, then its launches, then its GEMM plans
// (cuda_abi.h draws the layout).
struct Record {
  Launch* launches = nullptr;
  GemmPlan* plans = nullptr;
  uint32_t count = 0;
  uint32_t capacity = 0;
  int device = 0;
  cudaStream_t stream = nullptr;          // the device's: copies, direct launches, graph launches
  cudaStream_t capture_stream = nullptr;  // the delegate's own, only to capture on
  const CudaBackend::DeviceState* state = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  enum Phase : uint8_t { kWarmUp, kCapture, kReplay, kDirect } phase = kWarmUp;
  bool tf32 = false;  // kiln plan --precision tf32: cuBLASLt computes in TF32 (float32 storage)
  // An all-reduce (init_collective): one launch of all_reduce_kernel.
  bool collective = false;
  uint32_t timeout_ms = 0;
  Communicator* communicator = nullptr;            // told when a peer does not arrive
  const volatile uint32_t* peer_exited = nullptr;  // DevicePeers::peer_exited
  // An all-reduce the communicator enqueues (Communicator::
  // enqueue_all_reduce) before the record's launches (its addend's).
  bool enqueued = false;
  AllReduceArgs all_reduce;
};
static_assert(sizeof(Record) <= kDelegateHeaderBytes, "Record outgrew its header (cuda_abi.h)");

uint64_t state_bytes_of(const fb::DelegateGraph& graph) {
  return delegate_state_bytes(graph.kernels()->size(), count_operands(graph));
}

uint8_t* base_of(DeviceBuffer buffer) { return static_cast<uint8_t*>(buffer.handle); }

cudaStream_t stream_of(const CudaBackend::DeviceState& d) { return static_cast<cudaStream_t>(d.stream); }

#if !KILN_CUDA_HOSTEXEC
// Folds the batch of `m` into one (count, stride) per operand, or fails.
bool one_batch(const MatMulArgs& m, uint64_t* count, int64_t* a_stride, int64_t* b_stride) {
  *count = 1;
  *a_stride = *b_stride = 0;
  int64_t expect_a = -1, expect_b = -1;
  for (int i = 3; i >= 0; --i) {
    const uint32_t d = m.batch_dims[i];
    if (d == 1) continue;
    for (int side = 0; side < 2; ++side) {
      const int64_t s = side == 0 ? m.a_batch[i] : m.b_batch[i];
      int64_t& expect = side == 0 ? expect_a : expect_b;
      int64_t& stride = side == 0 ? *a_stride : *b_stride;
      if (expect == -1) {
        stride = s;
        expect = s * d;
      } else if (s == 0 && stride == 0) {
      } else if (s == expect && stride != 0) {
        expect = s * d;
      } else {
        return false;
      }
    }
    *count *= d;
  }
  return true;
}

// cuBLASLt's type for a launch's storage: A, B, C and D share it; the
// products accumulate in FP32 whatever it is (CUBLAS_COMPUTE_32F, FP32
// alpha and beta; the bias of an epilogue takes D's type).
cudaDataType_t data_type_of(Storage storage) {
  return storage == kFloat16 ? CUDA_R_16F : storage == kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// Sets up `launch` (a kMatMul) on cuBLASLt, with `activation` set when its
// activation must run as a separate launch. False when cuBLASLt cannot take
// it (the reference kernel runs it then).
bool plan_gemm(cublasLtHandle_t handle, const CudaBackend::DeviceState& device, bool tf32, Launch& launch,
               GemmPlan* plan, Launch* activation, bool* needs_activation) {
  const MatMulArgs& m = launch.matmul;
  uint64_t batch = 1;
  int64_t a_stride = 0, b_stride = 0;
  if (!one_batch(m, &batch, &a_stride, &b_stride)) return false;
  const bool bias = m.c != nullptr && m.c_row == 0 && m.c_col == 1 && m.beta == 1.f && batch == 1;
  const bool full_c = m.c != nullptr && m.c_row == static_cast<int64_t>(m.n) && m.c_col == 1 && batch == 1;
  if (m.c != nullptr && !bias && !full_c) return false;
  if ((m.a_col != 1 && m.a_row != 1) || (m.b_col != 1 && m.b_row != 1)) return false;
  cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  *needs_activation = false;
  if (m.act.kind == 1) {
    epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  } else if (m.act.kind != 0) {
    *needs_activation = true;
  }
  const uint64_t n = m.n, rows = m.m;
  const cudaDataType_t type = data_type_of(launch.storage);
  const cublasComputeType_t compute =
      tf32 && launch.storage == kFloat32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (cublasLtMatmulDescInit(&plan->desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
  const GemmOperand first = gemm_first(m), second = gemm_second(m);
  const cublasOperation_t op_first = first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDesc_t desc = &plan->desc;
  bool ok = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)) ==
                CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)) ==
                CUBLAS_STATUS_SUCCESS &&
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)) ==
                CUBLAS_STATUS_SUCCESS;
  if (bias) {
    const void* bias_ptr = m.c;
    ok = ok && cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)) ==
                   CUBLAS_STATUS_SUCCESS;
  }
  // Stored (not op'd) shapes, column-major (gemm_layout.h).
  ok = ok && cublasLtMatrixLayoutInit(&plan->a, type, first.rows, first.cols, first.ld) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutInit(&plan->b, type, second.rows, second.cols, second.ld) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatrixLayoutInit(&plan->d, type, n, rows, n) == CUBLAS_STATUS_SUCCESS;
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const int64_t d_stride = static_cast<int64_t>(n * rows);
    for (auto [layout, stride] :
         {std::pair{&plan->a, b_stride}, std::pair{&plan->b, a_stride}, std::pair{&plan->d, d_stride}}) {
      ok = ok && cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)) ==
                     CUBLAS_STATUS_SUCCESS;
      ok = ok && cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof(stride)) == CUBLAS_STATUS_SUCCESS;
    }
  }
  if (!ok) return false;
  cublasLtMatmulPreferenceOpaque_t preference;
  ok = cublasLtMatmulPreferenceInit(&preference) == CUBLAS_STATUS_SUCCESS;
  const bool planned = m.workspace != nullptr;
  plan->workspace = planned ? m.workspace : device.workspace;
  plan->workspace_bytes = planned ? m.workspace_bytes : device.workspace_bytes;
  const uint64_t workspace = plan->workspace_bytes;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(&preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof(workspace)) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  ok = ok &&
       cublasLtMatmulAlgoGetHeuristic(handle, desc, &plan->a, &plan->b, &plan->d, &plan->d, &preference, 1, &result,
                                      &found) == CUBLAS_STATUS_SUCCESS &&
       found > 0;
  if (!ok) return false;
  plan->algo = result.algo;
  plan->first = m.b;
  plan->second = m.a;
  plan->c = full_c ? m.c : nullptr;
  plan->y = m.y;
  plan->alpha = m.alpha;
  plan->beta = full_c ? m.beta : 0.f;
  if (*needs_activation) {
    Launch& a = *activation;
    a = Launch();
    a.kind = LaunchKind::kUnary;
    a.storage = launch.storage;
    a.node = launch.node;
    a.unary.x = m.y;
    a.unary.y = m.y;
    a.unary.n = uint64_t{rows} * n * batch;
    a.unary.op = kActivation;
    a.unary.act = m.act;
    const uint64_t blocks = (a.unary.n / 4 + 256) / 256;
    a.grid[0] = static_cast<uint32_t>(blocks < 4096 ? blocks : 4096);
  }
  launch.kind = LaunchKind::kGemmLt;
  launch.gemm = plan;
  return true;
}

// The plan's descriptors are only read; cuBLASLt's signature takes them
// non-const. A call that fails enqueues nothing: its output is unwritten.
Error run_gemm(GemmPlan& p, const CudaBackend::DeviceState& device, cudaStream_t stream, const char* node) {
  KILN_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(device.blas), &p.desc, &p.alpha, p.first, &p.a,
                                   p.second, &p.b, &p.beta, p.c != nullptr ? p.c : p.y, &p.d, p.y, &p.d, &p.algo,
                                   p.workspace, p.workspace_bytes, stream),
                    Error::kDeviceError, "cuda: node '%s': the GEMM failed", node);
  return Error::kOk;
}
#endif

// Collects a delegate's launches into its record; on the GPU, moves each
// Gemm/MatMul onto cuBLASLt where it can.
class RecordSink final : public LaunchSink {
 public:
  RecordSink(Record& record, CudaStats& stats, CudaBackend::DeviceState& device, uint64_t fallback_bytes)
      : record_(record), stats_(stats), device_(device), fallback_bytes_(fallback_bytes) {}
  uint32_t kernel = 0;

  Error emit(const Launch& launch) override {
    KILN_CHECK_OR_RETURN(record_.count < record_.capacity, Error::kOutOfMemory,
                         "cuda: node '%s': more launches than the delegate's state holds", launch.node);
    Launch& l = record_.launches[record_.count++];
    l = launch;
    if (l.kind != LaunchKind::kMatMul) return Error::kOk;
#if !KILN_CUDA_HOSTEXEC
    KILN_RETURN_IF_ERROR(fallback_workspace(l));
    Launch activation;
    bool needs_activation = false;
    if (plan_gemm(static_cast<cublasLtHandle_t>(record_.state->blas), *record_.state, record_.tf32, l,
                  &record_.plans[kernel], &activation, &needs_activation)) {
      ++stats_.gemm_library;
      if (needs_activation) return emit(activation);
      return Error::kOk;
    }
#endif
    ++stats_.gemm_reference;
    return Error::kOk;
  }

 private:
  // A GEMM without planned scratch (a program planned before the planner
  // gave cuBLASLt its workspace) uses the device's, allocated once, the
  // first time one needs it (CudaOptions::gemm_workspace_bytes).
  Error fallback_workspace(const Launch& l) {
    if (l.matmul.workspace != nullptr || device_.workspace != nullptr || fallback_bytes_ == 0) return Error::kOk;
    KILN_CUDA_CHECK(cudaMalloc(&device_.workspace, fallback_bytes_), Error::kDeviceAllocationFailed,
                    "cuda: node '%s': no room for the %llu-byte cuBLASLt workspace", l.node,
                    static_cast<unsigned long long>(fallback_bytes_));
    device_.workspace_bytes = fallback_bytes_;
    return Error::kOk;
  }

  Record& record_;
  CudaStats& stats_;
  CudaBackend::DeviceState& device_;
  uint64_t fallback_bytes_;
};

// Enqueues every launch of `r` on `stream`; the first library call or
// launch that failed is the error (a launch's, through cudaGetLastError()).
Error enqueue_all(const Record& r, cudaStream_t stream) {
  if (r.enqueued) KILN_RETURN_IF_ERROR(r.communicator->enqueue_all_reduce(r.all_reduce, static_cast<void*>(stream)));
  for (uint32_t i = 0; i < r.count; ++i) {
    const Launch& l = r.launches[i];
#if !KILN_CUDA_HOSTEXEC
    if (l.kind == LaunchKind::kGemmLt) {
      KILN_RETURN_IF_ERROR(run_gemm(*l.gemm, *r.state, stream, l.node));
      continue;
    }
#endif
    enqueue_kernel(l, stream);
  }
  KILN_CUDA_CHECK(cudaGetLastError(), Error::kDeviceError,
                  "cuda: a kernel of the delegate (first node '%s') failed on cuda:%d",
                  r.count > 0 ? r.launches[0].node : "?", r.device);
  return Error::kOk;
}

// Records the delegate's launches as a CUDA graph (kReplay) on the
// delegate's own stream, so no other Method's copies or launches on the
// device's stream can fall into it; the graph then runs on the device's
// stream like any launch. A library call or launch that fails during the
// capture fails this call, and no graph is kept (a graph without the failed
// work would be replayed as if complete); the next call tries again. Where
// the capture itself fails, says so once and leaves the delegate launching
// directly (kDirect).
Error capture(Record& r, CudaStats& stats) {
  // Thread-local mode: other threads' CUDA calls cannot break the capture.
  cudaError_t e = cudaStreamBeginCapture(r.capture_stream, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    const Error enqueued = enqueue_all(r, r.capture_stream);
    e = cudaStreamEndCapture(r.capture_stream, &r.graph);
    if (enqueued != Error::kOk) {
      if (r.graph != nullptr) cudaGraphDestroy(r.graph);
      r.graph = nullptr;
      cudaGetLastError();
      KILN_LOG(ERROR, "cuda: delegate (first node '%s'): a call failed while its CUDA graph was captured",
               r.count > 0 ? r.launches[0].node : "?");
      return enqueued;
    }
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&r.exec, r.graph, 0);
  if (e == cudaSuccess) {
    ++stats.captures;
    r.phase = Record::kReplay;
    return Error::kOk;
  }
  cudaGetLastError();  // capture failures are sticky only to the capture
  KILN_LOG(WARNING,
           "cuda: delegate (first node '%s') could not be captured as a CUDA graph (%s); it runs by direct launches",
           r.count > 0 ? r.launches[0].node : "?", cudaGetErrorString(e));
  ++stats.capture_failures;
  r.phase = Record::kDirect;
  return Error::kOk;
}

// The delegate's compile spec "precision" (kiln plan --precision): fp32
// (also where absent); tf32, which cuBLASLt computes with TF32 tensor
// cores on FP32 storage (the host execution model's reference GEMM stays
// FP32); fp16 or bf16, whose 16-bit tensors the planner gave the delegate
// (their kernels read them as such, check_operands). Any other is refused,
// naming it.
Error read_precision(const fb::Delegate& delegate, bool* out_tf32) {
  *out_tf32 = false;
  if (delegate.compile_specs() == nullptr) return Error::kOk;
  for (const fb::CompileSpec* spec : *delegate.compile_specs()) {
    if (spec->key() == nullptr || strcmp(spec->key()->c_str(), "precision") != 0) continue;
    const uint32_t n = spec->value() != nullptr ? spec->value()->size() : 0;
    const char* value = n > 0 ? reinterpret_cast<const char*>(spec->value()->data()) : "";
    bool known = false;
    for (const char* p : {"fp32", "tf32", "fp16", "bf16"}) known = known || (n == 4 && memcmp(value, p, 4) == 0);
    *out_tf32 = n == 4 && memcmp(value, "tf32", 4) == 0;
    KILN_CHECK_OR_RETURN(known, Error::kNotSupported,
                         "cuda: the delegate was planned for precision '%.*s'; this runtime runs fp32, tf32, fp16 "
                         "and bf16",
                         static_cast<int>(n < 16 ? n : 16), value);
  }
  return Error::kOk;
}

bool is_float_storage(DType t) { return t == DType::FLOAT32 || t == DType::FLOAT16 || t == DType::BFLOAT16; }

// The inputs and outputs of `k` float32, float16 or bfloat16, and all of
// one of them (the kernel's storage type), but a Cast's.
Error check_storage(const KernelView& k) {
  const bool cast = strcmp(k.op, "Cast") == 0;
  const DType storage = k.output(0).dtype();
  for (uint32_t list = 0; list < 2; ++list) {
    const uint32_t n = list == 0 ? k.num_inputs() : k.num_outputs();
    for (uint32_t i = 0; i < n; ++i) {
      const Tensor* t = list == 0 ? k.input(i) : &k.output(i);
      if (t == nullptr) continue;
      KILN_CHECK_OR_RETURN(is_float_storage(t->dtype()) && (cast || t->dtype() == storage), Error::kDTypeMismatch,
                           "cuda: node '%s': %s %u is %s, the output %s (float32, float16 or bfloat16, all alike)",
                           k.node, list == 0 ? "input" : "output", i, dtype_name(t->dtype()), dtype_name(storage));
    }
  }
  return Error::kOk;
}

// Every operand of `k` inside an arena of `device` (scratch, such as
// cuBLASLt's planned workspace, of any type; check_storage checks the
// others' types).
Error check_operands(const KernelView& k, Device device) {
  KILN_RETURN_IF_ERROR(check_storage(k));
  for (uint32_t list = 0; list < 3; ++list) {
    const uint32_t n = list == 0 ? k.num_inputs() : list == 1 ? k.num_outputs() : k.num_scratch();
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t t = (list == 0 ? k.call->inputs() : list == 1 ? k.call->outputs() : k.call->scratch())->Get(i);
      if (t == -1 && list == 0) continue;
      const Tensor& tensor = k.method->tensor(static_cast<uint32_t>(t));
      const int32_t arena = tensor.arena();
      KILN_CHECK_OR_RETURN(
          arena >= 0 && static_cast<uint32_t>(arena) < k.method->num_arenas() &&
              tensor.device().type() == DeviceType::CUDA && tensor.device().index() == device.index() &&
              buffer_holds(k.method->arena(static_cast<uint32_t>(arena)), tensor.offset(), tensor.nbytes()),
          Error::kDeviceMismatch, "cuda: node '%s': tensor %d is not in an arena of cuda:%d", k.node, t,
          device.index());
      // Arenas the application gives are checked here (the runtime cannot
      // read a device address out of another backend's buffer handle).
      const uintptr_t base = reinterpret_cast<uintptr_t>(k.method->arena(static_cast<uint32_t>(arena)).handle);
      KILN_CHECK_OR_RETURN(base % kArenaAlignment == 0, Error::kArenaMisaligned,
                           "cuda: node '%s': device arena %d of cuda:%d must be aligned to %u bytes", k.node, arena,
                           device.index(), kArenaAlignment);
    }
  }
  return Error::kOk;
}

}  // namespace

Error CudaBackend::open_device(int index) {
  KILN_CHECK_OR_RETURN(index >= 0 && index < kMaxDevices, Error::kDeviceError,
                       "cuda: device cuda:%d is out of range (cuda:0 .. cuda:%d)", index, kMaxDevices - 1);
  DeviceState& d = devices_[index];
  if (d.open) return Error::kOk;
  KILN_CHECK_OR_RETURN(options_.unavailable == nullptr, Error::kDeviceError,
                       "cuda: device cuda:%d is not available (%s)", index, options_.unavailable);
  int count = 0;
  KILN_CUDA_CHECK(cudaGetDeviceCount(&count), Error::kDeviceError, "cuda: device cuda:%d is not available", index);
  KILN_CHECK_OR_RETURN(index < count, Error::kDeviceError, "cuda: device cuda:%d is not available (%d CUDA devices)",
                       index, count);
  d.physical = options_.node_rank < 0 ? index : (rank_local_device(options_.node_rank, count) + index) % count;
  KILN_CUDA_CHECK(cudaSetDevice(d.physical), Error::kDeviceError, "cuda: cannot select cuda:%d (GPU %d)", index,
                  d.physical);
  cudaStream_t stream = nullptr;
  KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), Error::kDeviceError,
                  "cuda: cannot create a stream on cuda:%d", index);
  d.stream = stream;
#if !KILN_CUDA_HOSTEXEC
  cublasLtHandle_t handle = nullptr;
  KILN_CUBLAS_CHECK(cublasLtCreate(&handle), Error::kDeviceError, "cuda: cuBLASLt cannot start on cuda:%d", index);
  d.blas = handle;
#endif
  d.open = true;
  return Error::kOk;
}

void CudaBackend::shutdown() {
  for (int i = 0; i < kMaxDevices; ++i) {
    DeviceState& d = devices_[i];
    if (!d.open) continue;
    cudaSetDevice(d.physical);
    cudaStreamSynchronize(stream_of(d));
    if (d.workspace != nullptr) cudaFree(d.workspace);
#if !KILN_CUDA_HOSTEXEC
    if (d.blas != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(d.blas));
#endif
    cudaStreamDestroy(stream_of(d));
    d = DeviceState();
  }
}

Error CudaBackend::allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) {
  KILN_CHECK_OR_RETURN(device.type() == DeviceType::CUDA && out_buffer != nullptr && alignment != 0 &&
                           alignment <= kArenaAlignment && (alignment & (alignment - 1)) == 0,
                       Error::kInvalidArgument, "cuda: bad arena request (alignment %u)", alignment);
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  cudaSetDevice(devices_[device.index()].physical);
  void* p = nullptr;
  KILN_CUDA_CHECK(cudaMalloc(&p, size > 0 ? size : 1), Error::kDeviceAllocationFailed,
                  "cuda: cuda:%d cannot allocate an arena of %llu bytes", device.index(),
                  static_cast<unsigned long long>(size));
  ++live_;
  out_buffer->handle = p;
  out_buffer->size = size;
  return Error::kOk;
}

void CudaBackend::release(Device device, DeviceBuffer buffer) {
  if (buffer.handle == nullptr) return;
  cudaSetDevice(devices_[device.index()].physical);
  if (devices_[device.index()].open) cudaStreamSynchronize(stream_of(devices_[device.index()]));
  cudaFree(buffer.handle);
  if (live_ > 0) --live_;
}

Error CudaBackend::copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src,
                                  uint64_t bytes) {
  KILN_CHECK_OR_RETURN(buffer_holds(dst, dst_offset, bytes) && (bytes == 0 || src != nullptr), Error::kInvalidArgument,
                       "cuda: copy to cuda:%d outside its arena", device.index());
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  if (bytes == 0) return Error::kOk;
  const cudaStream_t stream = stream_of(devices_[device.index()]);
  KILN_CUDA_CHECK(cudaMemcpyAsync(base_of(dst) + dst_offset, src, bytes, cudaMemcpyHostToDevice, stream),
                  Error::kDeviceError, "cuda: copy of %llu bytes to cuda:%d failed",
                  static_cast<unsigned long long>(bytes), device.index());
  return Error::kOk;
}

Error CudaBackend::copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) {
  KILN_CHECK_OR_RETURN(buffer_holds(src, src_offset, bytes) && (bytes == 0 || dst != nullptr), Error::kInvalidArgument,
                       "cuda: copy from cuda:%d outside its arena", device.index());
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  const cudaStream_t stream = stream_of(devices_[device.index()]);
  if (bytes != 0) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst, base_of(src) + src_offset, bytes, cudaMemcpyDeviceToHost, stream),
                    Error::kDeviceError, "cuda: copy of %llu bytes from cuda:%d failed",
                    static_cast<unsigned long long>(bytes), device.index());
  }
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream), Error::kDeviceError, "cuda: cuda:%d failed", device.index());
  return Error::kOk;
}

Error CudaBackend::copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                                  uint64_t src_offset, uint64_t bytes) {
  KILN_CHECK_OR_RETURN(buffer_holds(dst, dst_offset, bytes) && buffer_holds(src, src_offset, bytes),
                       Error::kInvalidArgument, "cuda: copy on cuda:%d outside its arenas", device.index());
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  if (bytes == 0) return Error::kOk;
  const cudaStream_t stream = stream_of(devices_[device.index()]);
  KILN_CUDA_CHECK(
      cudaMemcpyAsync(base_of(dst) + dst_offset, base_of(src) + src_offset, bytes, cudaMemcpyDeviceToDevice, stream),
      Error::kDeviceError, "cuda: copy of %llu bytes on cuda:%d failed", static_cast<unsigned long long>(bytes),
      device.index());
  return Error::kOk;
}

Error CudaBackend::accumulate(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                              uint64_t src_offset, uint64_t count, uint64_t period) {
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  if (count == 0) return Error::kOk;
  KILN_CHECK_OR_RETURN(period > 0 && count % period == 0 && count < (uint64_t{1} << 32) &&
                           buffer_holds(dst, dst_offset, count * 4) && buffer_holds(src, src_offset, period * 4) &&
                           dst_offset % 4 == 0 && src_offset % 4 == 0,
                       Error::kInvalidArgument,
                       "cuda: adding %llu float32 elements into %llu on cuda:%d: outside its arenas, or not a "
                       "multiple below 2^32",
                       static_cast<unsigned long long>(period), static_cast<unsigned long long>(count), device.index());
  cudaSetDevice(devices_[device.index()].physical);
  const Launch l = accumulate_launch(reinterpret_cast<float*>(base_of(dst) + dst_offset),
                                     reinterpret_cast<const float*>(base_of(src) + src_offset), count, period);
  enqueue_kernel(l, stream_of(devices_[device.index()]));
  KILN_CUDA_CHECK(cudaGetLastError(), Error::kDeviceError, "cuda: adding a collective's addend on cuda:%d failed",
                  device.index());
  return Error::kOk;
}

uint64_t CudaBackend::state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const {
  const fb::DelegateGraph* graph = parse_delegate_graph(blob);
  return graph != nullptr ? state_bytes_of(*graph) : 0;  // init() refuses a bad blob, naming why
}

Result<void*> CudaBackend::init(const DelegateContext& context) {
  KILN_ASSIGN_OR_RETURN(const fb::DelegateGraph* graph, delegate_graph_of("cuda", context));
  const Device device = context.delegate->device() != nullptr ? *context.delegate->device() : Device();
  KILN_CHECK_OR_RETURN(device.type() == DeviceType::CUDA, Error::kInvalidProgram,
                       "cuda: a delegate for another device type");
  KILN_RETURN_IF_ERROR(open_device(device.index()));
  cudaSetDevice(devices_[device.index()].physical);
  const uint64_t bytes = state_bytes_of(*graph);
  KILN_ASSIGN_OR_RETURN(uint8_t * memory, allocate_state("cuda", context, bytes, 16));
  const uint32_t kernels = graph->kernels()->size();
  const uint64_t launches = (bytes - kDelegateHeaderBytes - kernels * kGemmPlanBytes) / kLaunchBytes;
  Record* record = new (memory) Record();
  record->launches = reinterpret_cast<Launch*>(memory + kDelegateHeaderBytes);
  record->plans = reinterpret_cast<GemmPlan*>(memory + kDelegateHeaderBytes + launches * kLaunchBytes);
  record->capacity = static_cast<uint32_t>(launches);
  record->device = device.index();
  record->state = &devices_[device.index()];
  record->stream = stream_of(devices_[device.index()]);
  KILN_RETURN_IF_ERROR(read_precision(*context.delegate, &record->tf32));
  if (options_.graphs) {
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&record->capture_stream, cudaStreamNonBlocking), Error::kDeviceError,
                    "cuda: cannot create a stream on cuda:%d", device.index());
  }
  RecordSink sink(*record, stats_, devices_[device.index()], options_.gemm_workspace_bytes);
  const Error error =
      for_each_kernel_call("cuda", *graph, *context.method, [&](uint32_t k, const KernelView& view) -> Error {
        const KernelInfo* info = kKernels.find(view.op);
        KILN_CHECK_OR_RETURN(info != nullptr, Error::kKernelNotFound, "cuda: node '%s': no CUDA kernel runs '%s'",
                             view.node, view.op);
        KILN_RETURN_IF_ERROR(check_operand_indices(view));
        KILN_RETURN_IF_ERROR(check_operands(view, device));
        KILN_RETURN_IF_ERROR(check_inplace(view, info->inplace_inputs));
        sink.kernel = k;
        return lower_kernel(view, sink);
      });
  if (error != Error::kOk) {
    // The runtime destroys only delegates that initialised: release the
    // capture stream made above.
    destroy(record);
    return error;
  }
  record->phase = Record::kWarmUp;
  return static_cast<void*>(record);
}

namespace {

// The all-reduce kernel of `r` failed: a peer did not arrive in time (the
// kernel printed which and trapped).
Error collective_failed(const Record& r, Error error) {
  if (r.enqueued) {
    // The communicator logged its own failure; a graph or launch that
    // failed around its call fails it too.
    r.communicator->mark_failed();
    return error;
  }
  if (!r.collective) return error;
  if (r.communicator != nullptr) r.communicator->mark_failed();
  const uint32_t exited = r.peer_exited != nullptr ? *r.peer_exited : 0;
  KILN_CHECK_OR_RETURN(exited == 0, Error::kPeerFailed,
                       "cuda: all-reduce '%s' on cuda:%d (rank %u of %u) failed: peer rank %u exited (the kernel's "
                       "message says where it waited)",
                       r.launches[0].node, r.device, r.launches[0].all_reduce.rank, r.launches[0].all_reduce.ranks,
                       exited - 1);
  KILN_RETURN_ERROR(Error::kPeerFailed,
                    "cuda: all-reduce '%s' on cuda:%d (rank %u of %u) failed: a peer did not arrive within %u ms "
                    "(the kernel's message names it; KILN_COLLECTIVE_TIMEOUT_MS)",
                    r.launches[0].node, r.device, r.launches[0].all_reduce.rank, r.launches[0].all_reduce.ranks,
                    r.timeout_ms);
}

// The checks the all-reduce kernel relies on (the backend's trust boundary
// for collectives): float32 operands inside their arenas, at most
// kAllReduceMaxRanks peers, the signal words inside the symmetric arena and
// apart from both operands, and one-shot never in place.
Error check_collective(const CollectiveContext& c, const fb::CollectiveCall& call) {
  const Tensor& in = *c.input;
  const Tensor& out = *c.output;
  const uint64_t signals = uint64_t{call.blocks()} * 8;
  KILN_CHECK_OR_RETURN(in.dtype() == DType::FLOAT32 && out.dtype() == DType::FLOAT32 && in.nbytes() == out.nbytes(),
                       Error::kDTypeMismatch, "cuda: all-reduce '%s': float32 operands of one size only", c.name);
  KILN_CHECK_OR_RETURN(c.peers->count >= 2 && c.peers->count <= kAllReduceMaxRanks && c.rank < c.peers->count,
                       Error::kNotSupported, "cuda: all-reduce '%s': %u ranks (the kernels address 2 to %u)", c.name,
                       c.peers->count, kAllReduceMaxRanks);
  KILN_CHECK_OR_RETURN(buffer_holds(c.input_arena, in.offset(), in.nbytes()) &&
                           buffer_holds(c.output_arena, out.offset(), out.nbytes()) && in.offset() % 4 == 0 &&
                           out.offset() % 4 == 0,
                       Error::kInvalidProgram, "cuda: all-reduce '%s': an operand outside its arena", c.name);
  KILN_CHECK_OR_RETURN(
      call.blocks() >= 1 && call.blocks() <= kAllReduceMaxBlocks &&
          buffer_holds(c.input_arena, call.signal_offset(), signals) &&
          (call.signal_offset() >= in.offset() + in.nbytes() || call.signal_offset() + signals <= in.offset()),
      Error::kInvalidProgram,
      "cuda: all-reduce '%s': %u blocks' signal words at offset %llu are not free bytes of its "
      "symmetric arena",
      c.name, call.blocks(), static_cast<unsigned long long>(call.signal_offset()));
  const bool in_place = c.input_arena.handle == c.output_arena.handle && in.offset() == out.offset();
  KILN_CHECK_OR_RETURN(call.algorithm() == fb::AllReduceAlgorithm::TWO_SHOT || !in_place, Error::kInvalidProgram,
                       "cuda: all-reduce '%s': one-shot cannot run in place", c.name);
  KILN_CHECK_OR_RETURN(c.input_arena.handle != c.output_arena.handle ||
                           call.signal_offset() >= out.offset() + out.nbytes() ||
                           call.signal_offset() + signals <= out.offset(),
                       Error::kInvalidProgram, "cuda: all-reduce '%s': its output overlaps its signal words", c.name);
  KILN_CHECK_OR_RETURN(c.num_addends <= kAllReduceMaxAddends, Error::kInvalidProgram,
                       "cuda: all-reduce '%s': %u addends (at most %u)", c.name, c.num_addends, kAllReduceMaxAddends);
  for (uint32_t a = 0; a < c.num_addends; ++a) {
    const Tensor& addend = *c.addends[a];
    KILN_CHECK_OR_RETURN(addend.dtype() == DType::FLOAT32 && addend.numel() > 0 && out.numel() % addend.numel() == 0 &&
                             buffer_holds(c.addend_arenas[a], addend.offset(), addend.nbytes()) &&
                             addend.offset() % 4 == 0,
                         Error::kInvalidProgram,
                         "cuda: all-reduce '%s': addend %u is not float32 inside its arena, of a size that divides "
                         "the output's",
                         c.name, a);
  }
  return Error::kOk;
}

// The checks of an all-reduce the communicator enqueues (the backend's
// trust boundary for it): operands of one dtype and size inside their
// arenas; at most one addend (the call's state holds one launch), float32
// inside its arena, of a size that divides the output's. kNotSupported
// for more addends: the runtime then runs the call another way.
Error check_enqueued(const CollectiveContext& c) {
  const Tensor& in = *c.input;
  const Tensor& out = *c.output;
  KILN_CHECK_OR_RETURN(
      c.all_reduce != nullptr && c.communicator != nullptr && in.dtype() == out.dtype() &&
          in.nbytes() == out.nbytes() && buffer_holds(c.input_arena, in.offset(), in.nbytes()) &&
          buffer_holds(c.output_arena, out.offset(), out.nbytes()),
      Error::kInvalidProgram,
      "cuda: all-reduce '%s': operands of one dtype and size inside their arenas, and the communicator's call", c.name);
  if (c.num_addends > 1) return Error::kNotSupported;
  for (uint32_t a = 0; a < c.num_addends; ++a) {
    const Tensor& addend = *c.addends[a];
    KILN_CHECK_OR_RETURN(out.dtype() == DType::FLOAT32 && addend.dtype() == DType::FLOAT32 && addend.numel() > 0 &&
                             out.numel() % addend.numel() == 0 && out.offset() % 4 == 0 && addend.offset() % 4 == 0 &&
                             out.numel() < (int64_t{1} << 32) &&
                             buffer_holds(c.addend_arenas[a], addend.offset(), addend.nbytes()),
                         Error::kInvalidProgram,
                         "cuda: all-reduce '%s': addend %u is not float32 inside its arena, of a size that divides "
                         "the float32 output's",
                         c.name, a);
  }
  return Error::kOk;
}

}  // namespace

// A collective's record in the state bytes the program reserved for it, on
// its device's stream, one launch of room; the device opened and current.
Result<void*> CudaBackend::collective_record(const CollectiveContext& context) {
  const int index = context.device.index();
  KILN_RETURN_IF_ERROR(open_device(index));
  cudaSetDevice(devices_[index].physical);
  void* memory = context.allocator->allocate(kAllReduceStateBytes, 16);
  KILN_CHECK_OR_RETURN(memory != nullptr, Error::kOutOfMemory,
                       "cuda: all-reduce '%s': the program reserved less than its %llu state bytes", context.name,
                       static_cast<unsigned long long>(kAllReduceStateBytes));
  Record* record = new (memory) Record();
  record->launches = reinterpret_cast<Launch*>(static_cast<uint8_t*>(memory) + kDelegateHeaderBytes);
  record->capacity = 1;
  record->device = index;
  record->state = &devices_[index];
  record->stream = stream_of(devices_[index]);
  record->communicator = context.communicator;
  return static_cast<void*>(record);
}

// An all-reduce the communicator enqueues on the device's stream (it hands
// out no device peers): one record whose work is the communicator's call,
// then its addend's launch, directly once, then captured into a CUDA
// graph and replayed like any delegate's.
Result<void*> CudaBackend::init_enqueued_collective(const CollectiveContext& context) {
  KILN_RETURN_IF_ERROR(check_enqueued(context));
  const int index = context.device.index();
  Result<void*> made = collective_record(context);
  KILN_RETURN_IF_ERROR(made.error());
  Record* record = static_cast<Record*>(made.get());
  record->enqueued = true;
  record->all_reduce = *context.all_reduce;
  const AllReduceArgs& a = record->all_reduce;
  if (context.num_addends == 1) {
    Launch& l = *new (record->launches) Launch();
    l = accumulate_launch(
        static_cast<float*>(a.output),
        reinterpret_cast<const float*>(base_of(context.addend_arenas[0]) + context.addends[0]->offset()), a.count,
        static_cast<uint64_t>(context.addends[0]->numel()));
    l.node = context.name;
    record->count = 1;
  }
  if (options_.graphs) {
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&record->capture_stream, cudaStreamNonBlocking), Error::kDeviceError,
                    "cuda: cannot create a stream on cuda:%d", index);
  }
  KILN_LOG(INFO, "cuda: all-reduce '%s' on cuda:%d: communicator '%s' enqueues it on the device's stream, %u addend%s",
           context.name, index, context.communicator->name(), context.num_addends, context.num_addends == 1 ? "" : "s");
  return static_cast<void*>(record);
}

Result<void*> CudaBackend::init_collective(const CollectiveContext& context) {
  const fb::CollectiveCall& call = *context.call;
  if (context.device.type() == DeviceType::CUDA && context.peers == nullptr) return init_enqueued_collective(context);
  KILN_CHECK_OR_RETURN(context.device.type() == DeviceType::CUDA && context.peers != nullptr &&
                           call.algorithm() != fb::AllReduceAlgorithm::COMMUNICATOR,
                       Error::kInvalidArgument, "cuda: all-reduce '%s' is not a device collective", context.name);
  KILN_RETURN_IF_ERROR(check_collective(context, call));
  const int index = context.device.index();
  Result<void*> made = collective_record(context);
  KILN_RETURN_IF_ERROR(made.error());
  Record* record = static_cast<Record*>(made.get());
  record->count = 1;
  record->collective = true;
  record->timeout_ms = context.peers->timeout_ms;
  record->peer_exited = context.peers->peer_exited;
  Launch& l = *new (record->launches) Launch();
  l.kind = LaunchKind::kAllReduce;
  l.node = context.name;
  l.block = kAllReduceThreads;
  l.grid[0] = call.blocks();
  PeerReduceArgs& a = l.all_reduce;
  a = PeerReduceArgs();
  for (uint32_t r = 0; r < context.peers->count; ++r) a.peers[r] = static_cast<uint8_t*>(context.peers->bases[r]);
  a.output = reinterpret_cast<float*>(base_of(context.output_arena) + context.output->offset());
  a.input_offset = context.input->offset();
  a.signal_offset = call.signal_offset();
  a.count = static_cast<uint64_t>(context.input->numel());
  a.timeout_ns = uint64_t{context.peers->timeout_ms} * 1000000;
  a.rank = context.rank;
  a.ranks = context.peers->count;
  a.two_shot = call.algorithm() == fb::AllReduceAlgorithm::TWO_SHOT;
  a.op = static_cast<uint32_t>(call.op());
  for (uint32_t i = 0; i < context.num_addends; ++i) {
    a.addends[i] = reinterpret_cast<const float*>(base_of(context.addend_arenas[i]) + context.addends[i]->offset());
    a.periods[i] = static_cast<uint64_t>(context.addends[i]->numel());
  }
  a.num_addends = context.num_addends;
  a.peer_exited = context.peers->peer_exited;
  if (options_.graphs) {
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&record->capture_stream, cudaStreamNonBlocking), Error::kDeviceError,
                    "cuda: cannot create a stream on cuda:%d", index);
  }
  KILN_LOG(INFO, "cuda: all-reduce '%s' on cuda:%d: %s kernel, rank %u of %u, %u block%s, %u addend%s fused",
           context.name, index, a.two_shot ? "two-shot" : "one-shot", a.rank, a.ranks, call.blocks(),
           call.blocks() == 1 ? "" : "s", a.num_addends, a.num_addends == 1 ? "" : "s");
  return static_cast<void*>(record);
}

Error CudaBackend::execute(void* delegate, const DelegateCallArgs& args) {
  const Error error = execute_record(delegate);
  return error == Error::kOk ? error : collective_failed(*static_cast<Record*>(delegate), error);
}

Error CudaBackend::execute_record(void* delegate) {
  Record& r = *static_cast<Record*>(delegate);
  cudaSetDevice(r.state->physical);
  if (r.phase == Record::kCapture) KILN_RETURN_IF_ERROR(capture(r, stats_));
  if (r.phase == Record::kReplay) {
    KILN_CUDA_CHECK(cudaGraphLaunch(r.exec, r.stream), Error::kDeviceError, "cuda: graph launch on cuda:%d failed",
                    r.device);
    ++stats_.graph_replays;
    KILN_CUDA_CHECK(cudaGetLastError(), Error::kDeviceError,
                    "cuda: a kernel of the delegate (first node '%s') failed on cuda:%d",
                    r.count > 0 ? r.launches[0].node : "?", r.device);
    return Error::kOk;
  }
  ++stats_.direct_calls;
  KILN_RETURN_IF_ERROR(enqueue_all(r, r.stream));
  if (r.phase == Record::kWarmUp) r.phase = options_.graphs ? Record::kCapture : Record::kDirect;
  return Error::kOk;
}

void CudaBackend::destroy(void* delegate) {
  if (delegate == nullptr) return;
  Record& r = *static_cast<Record*>(delegate);
  cudaSetDevice(r.state->physical);
  cudaStreamSynchronize(r.stream);
  if (r.exec != nullptr) cudaGraphExecDestroy(r.exec);
  if (r.graph != nullptr) cudaGraphDestroy(r.graph);
  if (r.capture_stream != nullptr) cudaStreamDestroy(r.capture_stream);
  r.exec = nullptr;
  r.graph = nullptr;
  r.capture_stream = nullptr;
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR
