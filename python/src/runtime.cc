#include "runtime.h"

#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kiln/runtime/backend.h"
#include "kiln/schema/device.h"
#include "targets/runtime_backends.h"

namespace kiln::python {
namespace {

std::string device_name(kiln_device_type type, uint32_t index) {
  return std::string(device_type_name(static_cast<fb::DeviceType>(type))) + ":" + std::to_string(index);
}

TensorDescription describe_tensor(const kiln_tensor_info& info, const kiln_quantization& quantization) {
  TensorDescription t;
  t.name = info.name != nullptr ? info.name : "";
  t.dtype = info.dtype;
  t.shape.assign(info.dims, info.dims + info.rank);
  t.nbytes = info.nbytes;
  t.device = device_name(info.device_type, info.device_index);
  t.quantization = quantization;
  return t;
}

// The backends the program's devices name, made once and put in the
// registry the C API's kiln_method_load reads.
void register_backends(const std::string& bytes) {
  BackendRegistry& made = planner::runtime_backends_for(bytes);
  for (const std::string& name : planner::backends_named_by(bytes)) {
    Backend* backend = made.find(name.c_str());
    if (backend != nullptr) (void)global_backend_registry().register_backend(backend);
  }
}

void pool_parallel_for(void* pool, int64_t count, kiln_task_fn task, void* context) {
  static_cast<PosixThreadPool*>(pool)->parallel_for(count, task, context);
}

}  // namespace

void check_status(kiln_status status, const std::string& what, const LogCapture& log) {
  if (status == KILN_OK) return;
  const std::string name = kiln_status_name(status);
  const std::string logged = log.text();
  throw RunFailure{name, what + ": " + name + (logged.empty() ? "" : " (" + logged + ")")};
}

AlignedBlock::AlignedBlock(size_t size, size_t alignment) : size_(size) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (size >= kHugePage && alignment < kHugePage) alignment = kHugePage;
  if (alignment < 64) alignment = 64;
  const size_t rounded = (size + alignment - 1) / alignment * alignment;
  storage_.reset(new uint8_t[rounded + alignment]);
  const uintptr_t base = reinterpret_cast<uintptr_t>(storage_.get());
  data_ = reinterpret_cast<uint8_t*>((base + alignment - 1) & ~uintptr_t{alignment - 1});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == kHugePage) static_cast<void>(madvise(data_, rounded, MADV_HUGEPAGE));
#endif
}

ProgramHandle::ProgramHandle(const std::string& bytes) : size_(bytes.size()), bytes_(bytes.size(), 64) {
  std::memcpy(bytes_.data(), bytes.data(), bytes.size());
  LogCapture log;
  check_status(kiln_register_cpu_kernels(), "registering the CPU kernels", log);
  check_status(kiln_program_load(&program_, bytes_.data(), size_), "loading the program", log);
  register_backends(bytes);
}

std::vector<std::string> ProgramHandle::method_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < kiln_program_num_methods(&program_); ++i) {
    names.emplace_back(kiln_program_method_name(&program_, i));
  }
  return names;
}

MethodDescription ProgramHandle::describe(const std::string& method) const {
  LogCapture log;
  const char* name = method.c_str();
  kiln_method_info info;
  check_status(kiln_program_method_info(&program_, name, &info), "method '" + method + "'", log);
  MethodDescription d;
  d.name = method;
  d.bookkeeping_bytes = info.bookkeeping_bytes;
  for (size_t i = 0; i < info.num_symbols; ++i) {
    kiln_symbol_info s;
    check_status(kiln_program_symbol_info(&program_, name, i, &s), "method '" + method + "'", log);
    d.symbols.push_back({s.name, s.input, s.axis, s.min, s.max});
  }
  for (size_t i = 0; i < info.num_inputs + info.num_outputs; ++i) {
    const bool output = i >= info.num_inputs;
    const size_t index = output ? i - info.num_inputs : i;
    kiln_tensor_info t;
    kiln_quantization q;
    check_status(output ? kiln_program_output_info(&program_, name, index, &t)
                        : kiln_program_input_info(&program_, name, index, &t),
                 "method '" + method + "'", log);
    check_status(output ? kiln_program_output_quantization(&program_, name, index, &q)
                        : kiln_program_input_quantization(&program_, name, index, &q),
                 "method '" + method + "'", log);
    (output ? d.outputs : d.inputs).push_back(describe_tensor(t, q));
  }
  for (size_t i = 0; i < info.num_arenas; ++i) {
    kiln_arena_info a;
    check_status(kiln_program_arena_info(&program_, name, i, &a), "method '" + method + "'", log);
    d.arenas.push_back({a.size, a.alignment, device_name(a.device_type, a.device_index),
                        a.region != nullptr ? a.region : "", a.symmetric != 0, a.group});
  }
  return d;
}

MethodHandle::MethodHandle(std::shared_ptr<const ProgramHandle> program, const std::string& name)
    : program_(std::move(program)), name_(name) {
  const MethodDescription d = program_->describe(name);
  memory_.emplace_back(static_cast<size_t>(d.bookkeeping_bytes), 16);
  std::vector<void*> arenas;
  std::vector<size_t> sizes;
  for (const ArenaDescription& a : d.arenas) {
    const bool host = a.device.rfind("cpu:", 0) == 0;
    if (host) memory_.emplace_back(static_cast<size_t>(a.size), a.alignment);
    arenas.push_back(host ? memory_.back().data() : nullptr);
    sizes.push_back(host ? static_cast<size_t>(a.size) : 0);
  }
  LogCapture log;
  check_status(kiln_method_load(&method_, program_->get(), name.c_str(), memory_[0].data(), memory_[0].size(),
                                arenas.data(), sizes.data(), arenas.size()),
               "loading method '" + name + "'", log);
}

MethodHandle::~MethodHandle() { kiln_method_destroy(&method_); }

std::vector<std::vector<int64_t>> MethodHandle::run(const std::vector<Buffer>& inputs,
                                                    const std::vector<Buffer>& outputs) {
  const std::lock_guard<std::mutex> lock(mutex_);
  LogCapture log;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Buffer& in = inputs[i];
    check_status(in.dims.empty() ? kiln_method_set_input(&method_, i, in.data, in.size)
                                 : kiln_method_set_input_shaped(&method_, i, in.data, in.size, in.dims.data(),
                                                                static_cast<uint32_t>(in.dims.size())),
                 "method '" + name_ + "' input " + std::to_string(i), log);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_status(kiln_method_set_output(&method_, i, const_cast<void*>(outputs[i].data), outputs[i].size),
                 "method '" + name_ + "' output " + std::to_string(i), log);
  }
  check_status(kiln_method_execute(&method_), "method '" + name_ + "'", log);
  std::vector<std::vector<int64_t>> extents;
  for (size_t i = 0; i < outputs.size(); ++i) {
    uint32_t rank = 0;
    const int64_t* dims = kiln_method_output_dims(&method_, i, &rank);
    extents.emplace_back(dims, dims + rank);
  }
  return extents;
}

void MethodHandle::set_threads(int threads) {
  const std::lock_guard<std::mutex> lock(mutex_);
  LogCapture log;
  if (threads < 1 || threads > PosixThreadPool::kMaxThreads) {
    throw RunFailure{"InvalidArgument", "threads must be from 1 to " + std::to_string(PosixThreadPool::kMaxThreads)};
  }
  check_status(kiln_method_set_thread_pool(&method_, nullptr), "method '" + name_ + "'", log);
  pool_.reset();
  threads_ = 1;
  if (threads == 1) return;
  auto pool = std::make_unique<PosixThreadPool>();
  if (pool->start(threads) != Error::kOk) {
    throw RunFailure{"Internal", "cannot start " + std::to_string(threads) + " threads"};
  }
  pool_ = std::move(pool);
  c_pool_ = kiln_thread_pool{};
  c_pool_.concurrency = pool_->concurrency();
  c_pool_.parallel_for = pool_parallel_for;
  c_pool_.pool_context = pool_.get();
  check_status(kiln_method_set_thread_pool(&method_, &c_pool_), "method '" + name_ + "'", log);
  threads_ = threads;
}

}  // namespace kiln::python
