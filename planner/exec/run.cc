#include "exec/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

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
// With huge_pages false (kiln run --huge-pages off) every buffer keeps
// small pages, as another runtime's heap would under the same setting.
struct AlignedBuffer {
  static constexpr size_t kHugePage = size_t{2} << 20;
  explicit AlignedBuffer(size_t size, bool huge_pages = true)
      : alignment(huge_pages && size >= kHugePage ? kHugePage : 64),
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

struct MethodRunner::State {
  std::unique_ptr<AlignedBuffer> file;
  std::unique_ptr<BufferDataLoader> loader;
  std::optional<Program> program;
  std::optional<MethodMeta> meta;
  std::unique_ptr<AlignedBuffer> bookkeeping_memory;
  std::unique_ptr<BumpAllocator> bookkeeping;
  std::vector<std::unique_ptr<AlignedBuffer>> arenas;
  std::vector<Span<uint8_t>> arena_spans;
  std::vector<uint64_t> host_arena_bytes;
  std::vector<Communicator*> communicators;
  std::optional<Method> method;
  std::vector<IoInfo> inputs, outputs;
  std::vector<HostTensor> output_values;
};

namespace {

IoInfo io_info(const TensorInfo& info) {
  return IoInfo{info.name != nullptr ? info.name : "", info.dtype,
                std::vector<int64_t>(info.dims, info.dims + info.rank)};
}

// Host arenas from the heap; device arenas are allocated by their backend,
// symmetric ones mapped by their communicator.
void allocate_arenas(MethodRunner::State& s, bool huge_pages) {
  for (size_t i = 0; i < s.meta->num_arenas(); ++i) {
    const ArenaInfo info = s.meta->arena(i).get();
    const bool mapped = info.kind == fb::ArenaKind::SYMMETRIC && info.group < s.communicators.size() &&
                        s.communicators[info.group] != nullptr;
    if (info.device.type() != DeviceType::CPU || mapped) {
      s.arena_spans.emplace_back();
      continue;
    }
    s.arenas.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(info.size), huge_pages));
    s.arena_spans.emplace_back(s.arenas.back()->data, static_cast<size_t>(info.size));
    s.host_arena_bytes.push_back(info.size);
  }
}

}  // namespace

MethodRunner::MethodRunner(const std::string& program_bytes, const RunOptions& options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.file = std::make_unique<AlignedBuffer>(program_bytes.size(), options.huge_pages);
  std::memcpy(s.file->data, program_bytes.data(), program_bytes.size());
  s.loader = std::make_unique<BufferDataLoader>(s.file->data, s.file->size);
  Result<Program> program = Program::load(*s.loader);
  check(program.error(), "program load failed");
  s.program.emplace(program.get());
  Result<MethodMeta> meta = s.program->method_meta(options.method.c_str());
  check(meta.error(), "method '" + options.method + "'");
  s.meta.emplace(meta.get());

  s.bookkeeping_memory = std::make_unique<AlignedBuffer>(static_cast<size_t>(s.meta->bookkeeping_bytes()));
  s.bookkeeping = std::make_unique<BumpAllocator>(s.bookkeeping_memory->data, s.bookkeeping_memory->size);
  s.communicators = options.communicators;
  allocate_arenas(s, options.huge_pages);
  MemoryManager memory;
  memory.bookkeeping = s.bookkeeping.get();
  memory.arenas = Span<const Span<uint8_t>>(s.arena_spans.data(), s.arena_spans.size());
  memory.communicators = Span<Communicator* const>(s.communicators.data(), s.communicators.size());
  const BackendRegistry& backends = options.backends != nullptr ? *options.backends : global_backend_registry();
  Result<Method> method = s.program->load_method(options.method.c_str(), memory, host_kernel_registry(), backends);
  check(method.error(), "method load failed");
  s.method.emplace(std::move(method.get()));
  s.method->set_tracer(options.tracer);
  s.method->set_thread_pool(options.thread_pool);
  for (size_t i = 0; i < s.meta->num_inputs(); ++i) s.inputs.push_back(io_info(s.meta->input(i).get()));
  for (size_t i = 0; i < s.meta->num_outputs(); ++i) {
    s.outputs.push_back(io_info(s.meta->output(i).get()));
    s.output_values.emplace_back(s.outputs.back().dtype, s.outputs.back().shape);
    // Zero-size outputs still need a valid, aligned pointer to bind.
    if (s.output_values.back().bytes.empty()) s.output_values.back().bytes.reserve(16);
  }
}

MethodRunner::~MethodRunner() = default;

const std::vector<IoInfo>& MethodRunner::inputs() const { return state_->inputs; }
const std::vector<IoInfo>& MethodRunner::outputs() const { return state_->outputs; }
const std::vector<HostTensor>& MethodRunner::output_values() const { return state_->output_values; }
std::vector<HostTensor>& MethodRunner::output_values() { return state_->output_values; }
void MethodRunner::set_tracer(EventTracer* tracer) { state_->method->set_tracer(tracer); }
Method& MethodRunner::method() { return *state_->method; }
std::vector<uint64_t> MethodRunner::arena_bytes() const { return state_->host_arena_bytes; }
uint64_t MethodRunner::bookkeeping_bytes() const { return state_->meta->bookkeeping_bytes(); }
uint64_t MethodRunner::constant_bytes() const { return state_->program->segment().size(); }

size_t MethodRunner::num_instructions() const {
  const fb::Program* program = state_->program->flatbuffer();
  for (const fb::Method* m : *program->methods()) {
    if (m->name() != nullptr && m->name()->str() == state_->meta->name() && m->instructions() != nullptr) {
      return m->instructions()->size();
    }
  }
  return 0;
}

void MethodRunner::bind_inputs(const std::vector<HostTensor>& inputs) {
  State& s = *state_;
  if (inputs.size() != s.inputs.size()) {
    fail("the method takes ", s.inputs.size(), " inputs, ", inputs.size(), " were given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& info = s.inputs[i];
    if (inputs[i].dtype != info.dtype) {
      fail("input ", i, " ('", info.name, "') is ", dtype_str(inputs[i].dtype), ", the method expects ",
           dtype_str(info.dtype));
    }
    if (inputs[i].shape != info.shape && s.meta->num_symbols() > 0) {
      // Bounded inputs: the method checks the shape against its bounds.
      const Tensor given(const_cast<uint8_t*>(inputs[i].bytes.data()), inputs[i].dtype, inputs[i].shape.data(),
                         static_cast<uint32_t>(inputs[i].shape.size()));
      check(s.method->set_input(i, given),
            str("input ", i, " ('", info.name, "') of shape ", shape_str(inputs[i].shape)));
      continue;
    }
    if (inputs[i].shape != info.shape) {
      fail("input ", i, " ('", info.name, "') has shape ", shape_str(inputs[i].shape), ", the method expects ",
           shape_str(info.shape));
    }
    check(s.method->set_input(i, inputs[i].bytes.data(), inputs[i].bytes.size()), str("input ", i));
  }
  for (size_t i = 0; i < s.output_values.size(); ++i) {
    HostTensor& out = s.output_values[i];
    check(s.method->set_output(i, out.bytes.data(), out.bytes.size()), str("output ", i));
  }
}

double MethodRunner::execute() {
  const auto start = std::chrono::steady_clock::now();
  check(state_->method->execute(), "execute failed");
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

SelfTestReport MethodRunner::run_self_test(const std::string& test_bytes) {
  AlignedBuffer test(test_bytes.size());
  std::memcpy(test.data, test_bytes.data(), test.size);
  const Span<const uint8_t> bytes(test.data, test.size);
  Result<uint64_t> scratch_bytes = self_test_scratch_bytes(bytes);
  check(scratch_bytes.error(), "self-test");
  AlignedBuffer scratch(static_cast<size_t>(scratch_bytes.get()));
  SelfTestReport report;
  check(::kiln::run_self_test(*state_->program, *state_->method, bytes, Span<uint8_t>(scratch.data, scratch.size),
                              &report),
        "self-test");
  return report;
}

RunResult run_program(const std::string& program_bytes, const std::vector<HostTensor>& inputs,
                      const RunOptions& options) {
  MethodRunner runner(program_bytes, options);
  RunResult result;
  if (options.self_test != nullptr) {
    if (!inputs.empty()) fail("a self-test brings its own inputs; none may be given");
    result.self_test = runner.run_self_test(*options.self_test);
    return result;
  }
  runner.bind_inputs(inputs);
  struct Profile {
    std::vector<std::vector<double>>* ms;
    double ms_per_tick;
  } profile{&result.instruction_ms, 1e3 / static_cast<double>(kiln_pal_ticks_per_second())};
  if (options.profile) {
    runner.method().set_observer(
        [](void* context, size_t instruction, uint64_t ticks) {
          auto* p = static_cast<Profile*>(context);
          if (instruction >= p->ms->size()) p->ms->resize(instruction + 1);
          (*p->ms)[instruction].push_back(static_cast<double>(ticks) * p->ms_per_tick);
        },
        &profile);
  }
  const int runs = std::max(1, options.runs);
  for (int r = 0; r < runs; ++r) result.latencies_ms.push_back(runner.execute());
  result.outputs = std::move(runner.output_values());
  // Outputs that follow bounded inputs: their extents at the sizes bound.
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const Tensor& out = *runner.method().output(i);
    result.outputs[i].shape.assign(out.dims(), out.dims() + out.rank());
    result.outputs[i].bytes.resize(static_cast<size_t>(out.nbytes()));
  }
  return result;
}

// A program loaded only to read one method's metadata.
struct InspectedMethod {
  InspectedMethod(const std::string& program_bytes, const std::string& method)
      : file(program_bytes.size()), loader(file.data, file.size) {
    std::memcpy(file.data, program_bytes.data(), program_bytes.size());
    Result<Program> loaded = Program::load(loader);
    check(loaded.error(), "program load failed");
    program.emplace(loaded.get());
    Result<MethodMeta> m = program->method_meta(method.c_str());
    check(m.error(), "method '" + method + "'");
    meta.emplace(m.get());
  }
  AlignedBuffer file;
  BufferDataLoader loader;
  std::optional<Program> program;
  std::optional<MethodMeta> meta;
};

MethodIoQuantization io_quantization(const std::string& program_bytes, const std::string& method) {
  const InspectedMethod inspected(program_bytes, method);
  const MethodMeta* meta = &*inspected.meta;
  const auto of = [](const TensorInfo& info) {
    return IoQuantization{info.quantized, info.dtype, info.scale, info.zero_point};
  };
  MethodIoQuantization out;
  for (size_t i = 0; i < meta->num_inputs(); ++i) out.inputs.push_back(of(meta->input(i).get()));
  for (size_t i = 0; i < meta->num_outputs(); ++i) out.outputs.push_back(of(meta->output(i).get()));
  return out;
}

DeviceType symmetric_device_type(const std::string& program_bytes, const std::string& method) {
  const InspectedMethod inspected(program_bytes, method);
  const MethodMeta* meta = &*inspected.meta;
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    const ArenaInfo arena = meta->arena(i).get();
    if (arena.kind == fb::ArenaKind::SYMMETRIC) return arena.device.type();
  }
  return DeviceType::CPU;
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
