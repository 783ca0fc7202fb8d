#include "vulkan_test_support.h"

#include <cmath>
#include <cstring>

#include "backends/vulkan/vulkan_abi.h"
#include "emit/emitter.h"
#include "exec/run.h"
#include "kiln/schema/delegate_generated.h"

namespace kiln::testing {

backends::vulkan::VulkanOptions TestBackend::default_options() {
  backends::vulkan::VulkanOptions options;
  options.validation = true;
  return options;
}

TestBackend::TestBackend(backends::vulkan::VulkanOptions options, size_t pool_bytes) {
  if (pool_bytes > 0) {
    pool.resize(pool_bytes);
    options.host_memory = Span<uint8_t>(pool.data(), pool.size());
  }
  backend = std::make_unique<backends::vulkan::VulkanBackend>(options);
  if (backends::vulkan::register_vulkan_backend(registry, backend.get()) != Error::kOk) std::abort();
}

TestBackend& shared_backend() {
  static TestBackend* backend = new TestBackend();
  return *backend;
}

std::string vulkan_unavailable() {
  Result<uint32_t> count = shared_backend().backend->device_count();
  if (!count.ok()) return "no Vulkan driver or loader (install mesa-vulkan-drivers and libvulkan1)";
  if (count.get() == 0) return "no Vulkan device (install mesa-vulkan-drivers for lavapipe)";
  return "";
}

LoadedMethod::LoadedMethod(const std::string& bytes, const BackendRegistry& registry) : program_(bytes) {
  if (!program_.program.ok()) {
    error_ = program_.program.error();
    return;
  }
  Result<MethodMeta> meta = program_.program->method_meta("forward");
  if (!meta.ok()) {
    error_ = meta.error();
    return;
  }
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    const ArenaInfo info = meta->arena(i).get();
    if (info.device.type() != DeviceType::CPU) {
      spans_.emplace_back();
      continue;
    }
    arenas_.push_back(std::make_unique<AlignedBytes>(std::string(info.size, '\0')));
    spans_.emplace_back(arenas_.back()->data(), arenas_.back()->size());
  }
  bookkeeping_bytes_ = std::make_unique<AlignedBytes>(std::string(meta->bookkeeping_bytes(), '\0'));
  bookkeeping_ = BumpAllocator(bookkeeping_bytes_->data(), bookkeeping_bytes_->size());
  MemoryManager memory;
  memory.bookkeeping = &bookkeeping_;
  memory.arenas = Span<const Span<uint8_t>>(spans_.data(), spans_.size());
  Result<Method> method = program_.program->load_method("forward", memory, planner::host_kernel_registry(), registry);
  if (!method.ok()) {
    error_ = method.error();
    return;
  }
  method_ = std::make_unique<Method>(std::move(method).get());
}

Error LoadedMethod::run(const std::vector<HostTensor>& inputs, std::vector<HostTensor>* outputs) {
  inputs_ = inputs;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    KILN_RETURN_IF_ERROR(method_->set_input(i, inputs_[i].bytes.data(), inputs_[i].bytes.size()));
  }
  outputs->clear();
  const MethodMeta meta = method_->meta();
  for (size_t i = 0; i < method_->num_outputs(); ++i) {
    const TensorInfo info = meta.output(i).get();
    outputs->emplace_back(info.dtype, std::vector<int64_t>(info.dims, info.dims + info.rank));
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    KILN_RETURN_IF_ERROR(method_->set_output(i, (*outputs)[i].bytes.data(), (*outputs)[i].bytes.size()));
  }
  return method_->execute();
}

double relative_error(const HostTensor& a, const HostTensor& b) {
  if (a.shape != b.shape || a.dtype != b.dtype) return INFINITY;
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.float_at(i), y = b.float_at(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x)) continue;
    diff = std::max(diff, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return diff / scale;
}

HostTensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale) {
  HostTensor t(planner::DType::FLOAT32, std::move(shape));
  uint32_t state = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.data<float>()[i] = (static_cast<float>(state >> 8) / 16777216.f * 2.f - 1.f) * scale;
  }
  return t;
}

namespace {

std::unique_ptr<fb::TensorT> tensor(const std::string& name, const std::vector<int64_t>& shape, bool device) {
  auto t = std::make_unique<fb::TensorT>();
  t->name = name;
  t->dtype = fb::DType::FLOAT32;
  t->shape = shape;
  t->nbytes = static_cast<uint64_t>(planner::shape_numel(shape)) * 4;
  t->device = std::make_unique<fb::Device>(device ? fb::DeviceType::VULKAN : fb::DeviceType::CPU, 0);
  return t;
}

std::unique_ptr<fb::InstructionT> copy(uint32_t src, uint32_t dst) {
  auto ins = std::make_unique<fb::InstructionT>();
  ins->name = "copy";
  fb::CopyCallT c;
  c.src = src;
  c.dst = dst;
  ins->kind.Set(std::move(c));
  return ins;
}

}  // namespace

std::string single_kernel_program(const std::string& op, fb::ParamsUnion params,
                                  const std::vector<std::vector<int64_t>>& inputs,
                                  const std::vector<std::vector<int64_t>>& outputs, int alias_output0_to) {
  fb::MethodT m;
  m.name = "forward";
  uint64_t arena_size = 0;
  auto place = [&](fb::TensorT& t) {
    fb::PlannedStorageT p;
    p.arena = 0;
    p.offset = arena_size;
    arena_size += (t.nbytes + backends::vulkan::kArenaAlignment - 1) / backends::vulkan::kArenaAlignment *
                  backends::vulkan::kArenaAlignment;
    t.storage.Set(std::move(p));
  };
  std::vector<int32_t> device_inputs, device_outputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto host = tensor("in" + std::to_string(i), inputs[i], false);
    host->storage.Set(fb::UserStorageT());
    m.inputs.push_back(static_cast<uint32_t>(m.tensors.size()));
    m.tensors.push_back(std::move(host));
    auto dev = tensor("in" + std::to_string(i) + "@vulkan", inputs[i], true);
    place(*dev);
    device_inputs.push_back(static_cast<int32_t>(m.tensors.size()));
    m.instructions.push_back(
        copy(static_cast<uint32_t>(m.tensors.size() - 1), static_cast<uint32_t>(m.tensors.size())));
    m.tensors.push_back(std::move(dev));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto dev = tensor("out" + std::to_string(o) + "@vulkan", outputs[o], true);
    if (o == 0 && alias_output0_to >= 0) {
      fb::AliasStorageT a;
      a.base = static_cast<uint32_t>(device_inputs[static_cast<size_t>(alias_output0_to)]);
      dev->storage.Set(std::move(a));
    } else {
      place(*dev);
    }
    device_outputs.push_back(static_cast<int32_t>(m.tensors.size()));
    m.tensors.push_back(std::move(dev));
  }
  fb::DelegateGraphT graph;
  auto operator_entry = std::make_unique<fb::OperatorT>();
  operator_entry->name = op;
  graph.operators.push_back(std::move(operator_entry));
  auto call = std::make_unique<fb::KernelCallT>();
  call->op = 0;
  call->inputs.assign(device_inputs.begin(), device_inputs.end());
  call->outputs.assign(device_outputs.begin(), device_outputs.end());
  call->params = std::move(params);
  graph.kernels.push_back(std::move(call));
  graph.names.push_back("test_" + op);
  flatbuffers::FlatBufferBuilder blob;
  blob.Finish(fb::DelegateGraph::Pack(blob, &graph), fb::DelegateGraphIdentifier());
  auto delegate = std::make_unique<fb::DelegateT>();
  delegate->backend = "vulkan";
  delegate->device = std::make_unique<fb::Device>(fb::DeviceType::VULKAN, 0);
  delegate->inline_blob.assign(blob.GetBufferPointer(), blob.GetBufferPointer() + blob.GetSize());
  delegate->state_bytes = backends::vulkan::kDelegateStateBytes;
  m.delegates.push_back(std::move(delegate));
  auto delegate_call = std::make_unique<fb::InstructionT>();
  delegate_call->name = "test_" + op;
  fb::DelegateCallT dc;
  dc.delegate = 0;
  dc.inputs = device_inputs;
  dc.outputs = device_outputs;
  delegate_call->kind.Set(std::move(dc));
  m.instructions.push_back(std::move(delegate_call));
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto host = tensor("out" + std::to_string(o), outputs[o], false);
    host->storage.Set(fb::UserStorageT());
    m.outputs.push_back(static_cast<uint32_t>(m.tensors.size()));
    m.instructions.push_back(copy(static_cast<uint32_t>(device_outputs[o]), static_cast<uint32_t>(m.tensors.size())));
    m.tensors.push_back(std::move(host));
  }
  auto arena = std::make_unique<fb::ArenaT>();
  arena->size = arena_size;
  arena->alignment = backends::vulkan::kArenaAlignment;
  arena->device = std::make_unique<fb::Device>(fb::DeviceType::VULKAN, 0);
  m.arenas.push_back(std::move(arena));
  m.bookkeeping_bytes = planner::method_bookkeeping_bytes(m);
  fb::ProgramT program;
  program.version = static_cast<uint32_t>(fb::SchemaVersion::Current);
  program.producer = "vulkan test";
  program.methods.push_back(std::make_unique<fb::MethodT>(std::move(m)));
  flatbuffers::FlatBufferBuilder builder;
  builder.FinishSizePrefixed(fb::Program::Pack(builder, &program), fb::ProgramIdentifier());
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
}

}  // namespace kiln::testing
