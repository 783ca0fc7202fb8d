#include "exec/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/error.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/program.h"

namespace kiln::planner {
namespace {

// Heap buffer on 64-byte boundaries; one of 2 MiB or more on 2 MiB
// boundaries, advised as transparent huge pages on Linux (where the
// system's setting is "madvise", nothing else gives them; elsewhere, or
// when the advice is refused, it keeps small pages). A planned arena and
// the program's constants are each one block read all over on every run:
// a 1x1 convolution reads 16 columns of its input in place, each row of a
// panel on its own 4 KiB page on a 55x55 plane, more pages than the
// first-level TLB holds.
struct AlignedBuffer {
  static constexpr size_t kHugePage = size_t{2} << 20;
  explicit AlignedBuffer(size_t size)
      : alignment(size >= kHugePage ? kHugePage : 64),
        storage(new uint64_t[(round_up(size) + alignment) / 8 + 1]),
        data(align(storage.get(), alignment)),
        size(size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (alignment == kHugePage) static_cast<void>(madvise(data, round_up(size), MADV_HUGEPAGE));
#endif
  }
  size_t round_up(size_t n) const { return (n + alignment - 1) / alignment * alignment; }
  static uint8_t* align(uint64_t* p, size_t alignment) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(p);
    return reinterpret_cast<uint8_t*>((v + alignment - 1) & ~uintptr_t{alignment - 1});
  }
  size_t alignment;
  std::unique_ptr<uint64_t[]> storage;
  uint8_t* data;
  size_t size;
};

void check(Error error, const std::string& what) {
  if (error != Error::kOk) fail(what, ": ", error_name(error));
}

}  // namespace

double RunResult::median_ms() const {
  if (latencies_ms.empty()) return 0.0;
  std::vector<double> sorted = latencies_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  return sorted.size() % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
}

RunResult run_program(const std::string& program_bytes, const std::vector<HostTensor>& inputs,
                      const RunOptions& options) {
  AlignedBuffer file(program_bytes.size());
  std::memcpy(file.data, program_bytes.data(), program_bytes.size());
  BufferDataLoader loader(file.data, file.size);
  Result<Program> program = Program::load(loader);
  check(program.error(), "program load failed");
  Result<MethodMeta> meta = program->method_meta(options.method.c_str());
  check(meta.error(), "method '" + options.method + "'");

  AlignedBuffer bookkeeping_memory(static_cast<size_t>(meta->bookkeeping_bytes()));
  BumpAllocator bookkeeping(bookkeeping_memory.data, bookkeeping_memory.size);
  std::vector<std::unique_ptr<AlignedBuffer>> arenas;
  std::vector<Span<uint8_t>> arena_spans;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    const ArenaInfo info = meta->arena(i).get();
    const bool mapped = info.kind == fb::ArenaKind::SYMMETRIC && info.group < options.communicators.size() &&
                        options.communicators[info.group] != nullptr;
    if (info.device.type() != DeviceType::CPU || mapped) {
      // Device arenas are allocated by their backend, symmetric ones mapped
      // by their communicator.
      arena_spans.emplace_back();
      continue;
    }
    arenas.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(info.size)));
    arena_spans.emplace_back(arenas.back()->data, static_cast<size_t>(info.size));
  }
  MemoryManager memory;
  memory.bookkeeping = &bookkeeping;
  memory.arenas = Span<const Span<uint8_t>>(arena_spans.data(), arena_spans.size());
  memory.communicators = Span<Communicator* const>(options.communicators.data(), options.communicators.size());
  const BackendRegistry& backends = options.backends != nullptr ? *options.backends : global_backend_registry();
  Result<Method> method = program->load_method(options.method.c_str(), memory, host_kernel_registry(), backends);
  check(method.error(), "method load failed");
  if (options.self_test != nullptr) {
    if (!inputs.empty()) fail("a self-test brings its own inputs; none may be given");
    AlignedBuffer test(options.self_test->size());
    std::memcpy(test.data, options.self_test->data(), test.size);
    const Span<const uint8_t> test_bytes(test.data, test.size);
    Result<uint64_t> scratch_bytes = self_test_scratch_bytes(test_bytes);
    check(scratch_bytes.error(), "self-test");
    AlignedBuffer scratch(static_cast<size_t>(scratch_bytes.get()));
    RunResult result;
    check(run_self_test(*program, *method, test_bytes, Span<uint8_t>(scratch.data, scratch.size), &result.self_test),
          "self-test");
    return result;
  }

  if (inputs.size() != method->num_inputs()) {
    fail("the method takes ", method->num_inputs(), " inputs, ", inputs.size(), " were given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo info = meta->input(i).get();
    std::vector<int64_t> expected(info.dims, info.dims + info.rank);
    if (inputs[i].dtype != info.dtype) {
      fail("input ", i, " ('", info.name, "') is ", dtype_str(inputs[i].dtype), ", the method expects ",
           dtype_str(info.dtype));
    }
    if (inputs[i].shape != expected) {
      fail("input ", i, " ('", info.name, "') has shape ", shape_str(inputs[i].shape), ", the method expects ",
           shape_str(expected));
    }
    check(method->set_input(i, inputs[i].bytes.data(), inputs[i].bytes.size()), str("input ", i));
  }
  RunResult result;
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    const TensorInfo info = meta->output(i).get();
    result.outputs.emplace_back(info.dtype, std::vector<int64_t>(info.dims, info.dims + info.rank));
    // Zero-size outputs still need a valid, aligned pointer to bind.
    if (result.outputs.back().bytes.empty()) result.outputs.back().bytes.reserve(16);
    check(method->set_output(i, result.outputs.back().bytes.data(), result.outputs.back().bytes.size()),
          str("output ", i));
  }
  const int runs = std::max(1, options.runs);
  struct Profile {
    std::vector<std::vector<double>>* ms;
    double ms_per_tick;
  } profile{&result.instruction_ms, 1e3 / static_cast<double>(kiln_pal_ticks_per_second())};
  if (options.profile) {
    method->set_observer(
        [](void* context, size_t instruction, uint64_t ticks) {
          auto* p = static_cast<Profile*>(context);
          if (instruction >= p->ms->size()) p->ms->resize(instruction + 1);
          (*p->ms)[instruction].push_back(static_cast<double>(ticks) * p->ms_per_tick);
        },
        &profile);
  }
  method->set_tracer(options.tracer);
  method->set_thread_pool(options.thread_pool);
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    check(method->execute(), "execute failed");
    const auto stop = std::chrono::steady_clock::now();
    result.latencies_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  return result;
}

MethodIoQuantization io_quantization(const std::string& program_bytes, const std::string& method) {
  AlignedBuffer file(program_bytes.size());
  std::memcpy(file.data, program_bytes.data(), program_bytes.size());
  BufferDataLoader loader(file.data, file.size);
  Result<Program> program = Program::load(loader);
  check(program.error(), "program load failed");
  Result<MethodMeta> meta = program->method_meta(method.c_str());
  check(meta.error(), "method '" + method + "'");
  const auto of = [](const TensorInfo& info) {
    return IoQuantization{info.quantized, info.dtype, info.scale, info.zero_point};
  };
  MethodIoQuantization out;
  for (size_t i = 0; i < meta->num_inputs(); ++i) out.inputs.push_back(of(meta->input(i).get()));
  for (size_t i = 0; i < meta->num_outputs(); ++i) out.outputs.push_back(of(meta->output(i).get()));
  return out;
}

HostTensor quantize_for(const HostTensor& x, const IoQuantization& q) {
  if (x.dtype != DType::FLOAT32) fail("quantize: ", dtype_str(x.dtype), " data, float32 expected");
  HostTensor y(q.dtype, x.shape);
  const float lo = q.dtype == DType::INT8 ? -128.f : 0.f, hi = lo + 255.f;
  const float z = static_cast<float>(q.zero_point);
  const float* in = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = std::nearbyintf(in[i] / q.scale) + z;
    const float c = v >= hi ? hi : v <= lo ? lo : v == v ? v : z;
    if (q.dtype == DType::INT8) {
      y.data<int8_t>()[i] = static_cast<int8_t>(c);
    } else {
      y.data<uint8_t>()[i] = static_cast<uint8_t>(c);
    }
  }
  return y;
}

HostTensor dequantize_from(const HostTensor& q, const IoQuantization& quantization) {
  HostTensor y(DType::FLOAT32, q.shape);
  for (int64_t i = 0; i < q.numel(); ++i) {
    y.data<float>()[i] = static_cast<float>(q.int_at(i) - quantization.zero_point) * quantization.scale;
  }
  return y;
}

}  // namespace kiln::planner
