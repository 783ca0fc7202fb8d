#include "report/plan_report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/device.h"
#include "core/error.h"
#include "core/file_util.h"
#include "emit/emitter.h"
#include "kiln/schema/arena_layout.h"
#include "memory/method_plan.h"
#include "report/json.h"

namespace kiln::planner {
namespace {

// What the report says about one tensor with bytes in an arena.
struct TensorView {
  int index = -1;
  int root = -1;
  int arena = -1;
  uint64_t offset = 0;
  uint64_t size = 0;
  int first = -1, last = -1;  // instructions, inclusive
  const char* category = "intermediate";
};

std::vector<TensorView> tensor_views(const LMethod& m) {
  const memory::Lifetimes merged = memory::compute_lifetimes(m);
  // Each tensor's own uses (an alias's differ from its base's).
  const size_t n = m.tensors.size();
  std::vector<int> first(n, -1), last(n, -1);
  std::vector<bool> scratch(n, false);
  auto touch = [&](int t, int i) {
    if (t < 0) return;
    const size_t k = static_cast<size_t>(t);
    if (first[k] < 0) first[k] = i;
    last[k] = std::max(last[k], i);
  };
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    const LInstruction& ins = m.instructions[i];
    for (int t : ins.inputs) touch(t, static_cast<int>(i));
    for (int t : ins.outputs) touch(t, static_cast<int>(i));
    for (int t : ins.scratch) {
      touch(t, static_cast<int>(i));
      if (t >= 0) scratch[static_cast<size_t>(t)] = true;
    }
  }
  std::vector<TensorView> views;
  for (size_t t = 0; t < n; ++t) {
    const LTensor& tensor = m.tensors[t];
    const int root = m.root(static_cast<int>(t));
    const LTensor& base = m.tensors[static_cast<size_t>(root)];
    if (!base.has_memory() || base.arena < 0) continue;
    TensorView v;
    v.index = static_cast<int>(t);
    v.root = root;
    v.arena = base.arena;
    v.offset = base.offset + m.root_offset(static_cast<int>(t));
    v.size = tensor.nbytes();
    if (root == static_cast<int>(t)) {
      v.first = merged.first[t];
      v.last = merged.last[t];
    } else {
      v.first = first[t];
      v.last = last[t];
    }
    if (tensor.is_input) {
      v.category = "input";
    } else if (tensor.is_output) {
      v.category = "output";
    } else if (scratch[t]) {
      v.category = "scratch";
    }
    views.push_back(v);
  }
  return views;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string with_commas(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// 1234567 -> "1.18 MiB"
std::string human_bytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == std::floor(v) ? "%.0f %s" : "%.3g %s", v, units[u]);
  return buf;
}

// The smallest 1, 2 or 5 times a power of ten that is at least `raw`.
double nice_step(double raw) {
  if (raw <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * p >= raw) return f * p;
  }
  return 10 * p;
}

// The same in bytes, counted in B, KiB, MiB ... so labels stay round.
double nice_byte_step(double raw) {
  double unit = 1;
  while (unit * 1024 <= raw) unit *= 1024;
  return nice_step(raw / unit) * unit;
}

// A tensor name cut to `fits` characters, keeping its end (the part that
// tells layers apart), without the exporter's "_output_0" suffix.
std::string short_name(std::string name, size_t fits) {
  const std::string suffix = "_output_0";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
  }
  if (name.size() <= fits) return name;
  if (fits < 2) return "";
  return "~" + name.substr(name.size() - (fits - 1));
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

constexpr const char* kPalette[] = {"#7fb3d5", "#76d7c4", "#bb8fce", "#85c1e9", "#82e0aa", "#d2b4de",
                                    "#73c6b6", "#a9cce3", "#a2d9ce", "#c39bd3", "#5dade2", "#48c9b0"};
constexpr const char* kInputColor = "#f0b27a";
constexpr const char* kOutputColor = "#f7dc6f";
constexpr const char* kScratchColor = "#bfc9ca";

const char* color_of(const TensorView& v) {
  if (std::strcmp(v.category, "input") == 0) return kInputColor;
  if (std::strcmp(v.category, "output") == 0) return kOutputColor;
  if (std::strcmp(v.category, "scratch") == 0) return kScratchColor;
  return kPalette[static_cast<size_t>(v.index) % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string op_at(const LMethod& m, int i) {
  if (i < 0 || static_cast<size_t>(i) >= m.instructions.size()) return "?";
  const LInstruction& ins = m.instructions[static_cast<size_t>(i)];
  const std::string op = ins.what();
  return ins.name.empty() ? op : op + " '" + ins.name + "'";
}

// "inplace" and "aliases": what in-place reuse did.
void write_reuse(JsonWriter& j, const LMethod& m, const PlanResult& result) {
  const InplaceSaving& saving = result.inplace_saving;
  j.key("inplace").begin_object();
  j.field("outputs_in_place", result.inplace.outputs_in_place);
  j.field("views", result.inplace.views);
  j.field("concats_removed", result.inplace.concats_removed);
  j.field("concat_inputs_in_place", result.inplace.concat_pieces);
  j.field("concat_bytes_not_copied", result.inplace.concat_bytes);
  j.field("arena_bytes", total_arena_bytes(m));
  // "planned": arena_bytes_without_inplace is a full plan without reuse and
  // bytes_saved its difference to arena_bytes. "first_fit_estimate": both
  // sides by greedy first fit (arena_bytes_first_fit is the plan's).
  j.field("bytes_saved_measure", saving.estimated() ? "first_fit_estimate" : "planned");
  j.field("arena_bytes_without_inplace", saving.without);
  if (saving.estimated()) j.field("arena_bytes_first_fit", saving.with);
  j.field("bytes_saved", saving.bytes_saved());
  j.end_object();
  // The instruction that writes each tensor: an alias written by a kernel
  // is an in-place output; one nobody writes is a view of its base.
  std::vector<int> writer(m.tensors.size(), -1);
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    for (int t : m.instructions[i].outputs) {
      if (t >= 0) writer[static_cast<size_t>(t)] = static_cast<int>(i);
    }
  }
  j.key("aliases").begin_array();
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const LTensor& tensor = m.tensors[t];
    if (tensor.storage != Storage::kAlias) continue;
    j.begin_object();
    j.field("name", tensor.name);
    j.field("base", m.tensors[static_cast<size_t>(tensor.alias_of)].name);
    j.field("root", m.tensors[static_cast<size_t>(m.root(static_cast<int>(t)))].name);
    // A block of its base (a Concat's input or a Concat made a view) starts
    // at `offset` bytes into it.
    j.field("offset", tensor.alias_offset);
    const int w = writer[t];
    const bool block =
        tensor.alias_offset != 0 || tensor.nbytes() != m.tensors[static_cast<size_t>(tensor.alias_of)].nbytes();
    j.field("kind", w >= 0 ? (block ? "concat_input" : "in_place") : (block ? "concat_view" : "view"));
    j.key("instruction");
    if (w >= 0) {
      j.value(w);
    } else {
      j.null();
    }
    j.field("op", w >= 0 ? m.instructions[static_cast<size_t>(w)].op : std::string());
    j.field("bytes", tensor.nbytes());
    j.end_object();
  }
  j.end_array();
}

void write_copy(JsonWriter& j, const LMethod& m, const LInstruction& ins, int index, const char* when) {
  const LTensor& src = m.tensors[static_cast<size_t>(ins.inputs[0])];
  const LTensor& dst = m.tensors[static_cast<size_t>(ins.outputs[0])];
  j.begin_object();
  j.field("when", when);
  j.field("instruction", index);
  j.field("source", src.name);
  j.field("destination", dst.name);
  j.field("from", device_str(src.device));
  j.field("to", device_str(dst.device));
  j.field("bytes", src.nbytes());
  j.end_object();
}

// "devices", "delegates" and "copies": where the method runs.
void write_devices(JsonWriter& j, const LMethod& m) {
  std::vector<std::string> devices;
  auto note = [&](const fb::Device& d) {
    const std::string name = device_str(d);
    if (std::find(devices.begin(), devices.end(), name) == devices.end()) devices.push_back(name);
  };
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind == LInstruction::Kind::kKernel) note(ins.device);
  }
  for (const LArena& a : m.arenas) note(a.device);
  j.key("devices").begin_array();
  for (const std::string& d : devices) j.value(d);
  j.end_array();
  j.key("delegates").begin_array();
  for (size_t k = 0; k < m.instructions.size();) {
    const size_t end = delegate_run_end(m.instructions, k);
    if (end == k) {
      ++k;
      continue;
    }
    j.begin_object();
    j.field("device", device_str(m.instructions[k].device));
    j.field("first", static_cast<uint64_t>(k));
    j.field("last", static_cast<uint64_t>(end - 1));
    j.key("kernels").begin_array();
    for (size_t i = k; i < end; ++i) j.value(m.instructions[i].op);
    j.end_array();
    j.end_object();
    k = end;
  }
  j.end_array();
  j.key("copies").begin_array();
  for (size_t i = 0; i < m.init_instructions.size(); ++i) {
    if (m.init_instructions[i].kind == LInstruction::Kind::kCopy) {
      write_copy(j, m, m.init_instructions[i], static_cast<int>(i), "load");
    }
  }
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    const LInstruction& ins = m.instructions[i];
    if (ins.kind != LInstruction::Kind::kCopy) continue;
    if (same_device(m.tensors[static_cast<size_t>(ins.inputs[0])].device,
                    m.tensors[static_cast<size_t>(ins.outputs[0])].device)) {
      continue;  // a same-device copy (a reshape that could not be a view)
    }
    write_copy(j, m, ins, static_cast<int>(i), "run");
  }
  j.end_array();
}

}  // namespace

// "collectives": the communicator groups, how each collective input reached
// its symmetric arena (passes/symmetric.h) and what the tensor-parallel pass
// split.
void write_collectives(JsonWriter& j, const LMethod& m, const PlanResult& result) {
  j.field("ranks", result.ranks);
  j.key("communicators").begin_array();
  for (const LCommunicator& c : m.communicators) {
    j.begin_object().field("group", c.group).field("size", c.size).end_object();
  }
  j.end_array();
  const SymmetricStats& s = result.symmetric;
  j.key("symmetric").begin_object();
  j.field("collectives", s.collectives);
  j.key("devices").begin_array();
  for (const std::string& d : s.devices) j.value(d);
  j.end_array();
  j.key("zero_copy").begin_object().field("operands", s.zero_copy).field("bytes", s.zero_copy_bytes).field("copies", 0);
  j.end_object();
  j.key("input_buffers").begin_object().field("operands", s.input_buffers).field("bytes", s.input_buffer_bytes);
  j.field("copies", s.input_copies).end_object();
  j.key("explicit_copies").begin_object().field("operands", s.explicit_copies).field("bytes", s.explicit_copy_bytes);
  j.field("copies", s.explicit_copies).end_object();
  // How each collective runs (passes/all_reduce.h).
  j.key("all_reduce").begin_array();
  for (const AllReduceChoice& c : result.all_reduce) {
    j.begin_object().field("name", c.name).field("device", c.device).field("bytes", c.bytes).field("ranks", c.ranks);
    j.field("algorithm", std::string(all_reduce_algorithm_name(c.algorithm))).field("blocks", c.blocks);
    j.field("why", c.why);
    j.key("fused_adds").begin_array();
    for (const std::string& add : c.fused_adds) j.value(add);
    j.end_array().end_object();
  }
  j.end_array();
  j.end_object();
  const FuseStats& fuse = result.fuse;
  j.key("fusion").begin_object();
  j.field("batch_norms_folded", fuse.batch_norms_folded).field("biases_fused", fuse.biases_fused);
  j.field("activations_fused", fuse.activations_fused);
  j.key("activations_by_kind").begin_object();
  for (const auto& [kind, count] : fuse.activations_by_kind) j.field(kind, count);
  j.end_object();
  j.field("gated_into_producer", fuse.gated_into_producer).field("gated_standalone", fuse.gated_standalone);
  j.field("input_affines_fused", fuse.input_affines_fused).field("all_reduce_addends", fuse.all_reduce_addends);
  j.end_object();
  const TensorParallelStats& tp = result.tensor_parallel;
  j.key("tensor_parallel").begin_object();
  j.field("column_splits", tp.column_splits).field("row_splits", tp.row_splits).field("reshapes", tp.reshapes);
  j.field("weight_bytes_total", tp.weight_bytes_total).field("weight_bytes_per_rank", tp.weight_bytes_per_rank);
  j.end_object();
}

namespace {

// "kernel_choices": how each device kernel whose backend had a choice runs
// (BackendPlanner::plan_kernel: a CUDA Conv direct or through a GEMM), why,
// and the scratch the choice planned.
void write_kernel_choices(JsonWriter& j, const LMethod& m) {
  j.key("kernel_choices").begin_array();
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind != LInstruction::Kind::kKernel || ins.choice.empty()) continue;
    uint64_t scratch = 0;
    for (int t : ins.scratch) scratch += m.tensors[static_cast<size_t>(t)].nbytes();
    j.begin_object().field("name", ins.name).field("kernel", ins.op).field("device", device_str(ins.device));
    j.field("choice", ins.choice).field("why", ins.choice_why).field("scratch_bytes", scratch).end_object();
  }
  j.end_array();
}

}  // namespace

// With memory regions: each region's capacity, speed, planned bytes, lower
// bound and traffic (bytes read and written a run), and the traffic of
// every region's tensors, which is what the slowest region would see with
// all of them in it.
void json_regions(JsonWriter& j, const LMethod& m) {
  if (std::none_of(m.arenas.begin(), m.arenas.end(), [](const LArena& a) { return !a.region.empty(); })) return;
  uint64_t total = 0;
  for (const LArena& arena : m.arenas) total += arena.region.empty() ? 0 : arena.traffic;
  j.key("regions").begin_object();
  j.field("traffic_all_in_one", total);
  j.key("list").begin_array();
  for (size_t a = 0; a < m.arenas.size(); ++a) {
    const LArena& arena = m.arenas[a];
    if (arena.region.empty()) continue;
    j.begin_object().field("name", arena.region).field("arena", static_cast<uint64_t>(a));
    j.field("capacity", arena.capacity);
    j.field("speed", memory::region_speed_name(static_cast<memory::RegionSpeed>(arena.speed)));
    j.field("size", arena.size).field("lower_bound", arena.lower_bound).field("traffic", arena.traffic);
    j.field("hot_constants", static_cast<uint64_t>(arena.hot_constants));
    j.field("hot_constant_bytes", arena.hot_constant_bytes).field("hot_constant_reads", arena.hot_constant_reads);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

namespace {

// Bytes of one buffer for a lowered method's host arenas
// (schema/arena_layout.h).
uint64_t host_arena_bytes(const LMethod& m) {
  uint64_t end = 0;
  for (const LArena& arena : m.arenas) {
    if (arena.device.type() == fb::DeviceType::CPU)
      (void)abi::next_arena_offset(end, arena.size, arena.alignment, &end);
  }
  return end;
}

// A program of several methods (kiln plan --method): each method's host
// arena bytes, and the groups that share one buffer. The rest of the
// report describes the first method.
void write_methods(JsonWriter& j, const LProgram& program) {
  if (program.methods.size() < 2) return;
  j.key("methods").begin_array();
  for (const LMethod& m : program.methods) {
    j.begin_object().field("name", m.name).field("host_arena_bytes", host_arena_bytes(m)).end_object();
  }
  j.end_array();
  j.key("arena_groups").begin_array();
  for (const std::vector<int>& group : program.arena_groups) {
    uint64_t bytes = 0;
    j.begin_object().key("methods").begin_array();
    for (int m : group) {
      j.value(program.methods[static_cast<size_t>(m)].name);
      bytes = std::max(bytes, host_arena_bytes(program.methods[static_cast<size_t>(m)]));
    }
    j.end_array().field("host_bytes", bytes).end_object();
  }
  j.end_array();
}

// What --precision changed: 16-bit storage on devices (passes/precision.h)
// and the CPU's products with BF16 weights (LowerOptions::bf16_weights).
void write_precision(JsonWriter& j, const PrecisionStats& p) {
  if (p.storage != DType::FLOAT32) {
    j.key("precision_storage").begin_object();
    j.field("dtype", dtype_str(p.storage));
    j.field("kernels_16bit", static_cast<uint64_t>(p.kernels_16bit));
    j.field("kernels_fp32", static_cast<uint64_t>(p.kernels_fp32));
    j.field("casts", static_cast<uint64_t>(p.casts));
    j.field("tensors_16bit", static_cast<uint64_t>(p.tensors_16bit));
    j.field("constants_converted", static_cast<uint64_t>(p.constants_converted));
    j.end_object();
  }
  if (p.cpu_bf16_products > 0) {
    j.key("cpu_bf16").begin_object();
    j.field("products", static_cast<uint64_t>(p.cpu_bf16_products));
    j.field("weight_bytes", p.cpu_bf16_weight_bytes);
    j.end_object();
  }
}

}  // namespace

std::string plan_json(const PlanResult& result) {
  const LProgram& program = result.program;
  JsonWriter j;
  j.begin_object();
  if (program.methods.empty()) {
    j.key("arenas").begin_array().end_array();
    j.key("tensors").begin_array().end_array();
    j.end_object();
    return j.str();
  }
  const LMethod& m = program.methods.front();
  j.field("method", m.name);
  j.field("precision", result.precision);
  write_precision(j, result.precision_stats);
  j.field("instructions", static_cast<uint64_t>(m.instructions.size()));
  // Inputs bounded above (kiln plan --input-shape x=MIN:MAX...).
  j.key("bounds").begin_array();
  for (const LSymbol& s : m.symbols) {
    j.begin_object().field("name", s.name).field("input", static_cast<uint64_t>(s.input));
    j.field("axis", static_cast<uint64_t>(s.axis)).field("min", s.min).field("max", s.max).end_object();
  }
  j.end_array();
  j.field("dynamic_dims", static_cast<uint64_t>(m.dynamic_dims.size()));
  j.key("arenas").begin_array();
  for (size_t a = 0; a < m.arenas.size(); ++a) {
    const LArena& arena = m.arenas[a];
    j.begin_object();
    j.field("id", static_cast<uint64_t>(a));
    j.field("size", arena.size);
    j.field("lower_bound", arena.lower_bound);
    j.field("device", device_str(arena.device));
    j.field("kind", arena.kind == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary");
    if (arena.kind == fb::ArenaKind::SYMMETRIC) j.field("group", arena.group);
    j.field("alignment", arena.alignment);
    j.field("ratio",
            arena.lower_bound ? static_cast<double>(arena.size) / static_cast<double>(arena.lower_bound) : 1.0);
    j.field("algorithm", arena.algorithm);
    j.field("optimal", arena.optimal);
    j.field("first_fit", arena.first_fit);
    j.field("search_nodes", arena.search_nodes);
    j.field("solve_seconds", arena.solve_seconds);
    j.field("peak_instruction", arena.peak_instruction);
    j.key("peak_tensors").begin_array();
    for (int t : arena.peak_tensors) j.value(m.tensors[static_cast<size_t>(t)].name);
    j.end_array();
    if (!arena.region.empty()) j.field("region", arena.region);
    j.end_object();
  }
  j.end_array();
  json_regions(j, m);
  j.key("tensors").begin_array();
  for (const TensorView& v : tensor_views(m)) {
    const LTensor& t = m.tensors[static_cast<size_t>(v.index)];
    j.begin_object();
    j.field("name", t.name);
    j.field("arena", v.arena);
    j.field("offset", v.offset);
    j.field("size", v.size);
    j.field("first", v.first);
    j.field("last", v.last);
    j.key("alias_of");
    if (t.storage == Storage::kAlias) {
      j.value(m.tensors[static_cast<size_t>(t.alias_of)].name);
    } else {
      j.null();
    }
    j.field("alias_offset", t.alias_offset);
    j.field("device", device_str(t.device));
    j.field("category", v.category);
    j.end_object();
  }
  j.end_array();
  // The method's inputs and outputs: dtype, shape, and the quantization of
  // those --quantized-io made int8/uint8 (null for the others).
  for (const char* side : {"inputs", "outputs"}) {
    j.key(side).begin_array();
    for (const int id : side[0] == 'i' ? m.inputs : m.outputs) {
      const LTensor& t = m.tensors[static_cast<size_t>(id)];
      j.begin_object().field("name", t.name).field("dtype", dtype_str(t.dtype));
      j.key("shape").int_array(t.shape);
      j.key("quantization");
      if (t.quantized) {
        j.begin_object().field("scale", static_cast<double>(t.scale)).field("zero_point", t.zero_point).end_object();
      } else {
        j.null();
      }
      j.end_object();
    }
    j.end_array();
  }
  write_reuse(j, m, result);
  write_devices(j, m);
  j.field("round_trips_removed", result.round_trips_removed);
  // How much of the linear work runs int8, and the QDQ patterns folded.
  j.key("int8").begin_object();
  j.field("ops", result.int8.int8_ops).field("linear_ops", result.int8.linear_ops);
  j.field("macs", result.int8.int8_macs).field("linear_macs", result.int8.linear_macs);
  j.key("qdq_folded").begin_object();
  for (const auto& [op, count] : result.qdq.folded) j.field(op, count);
  j.end_object().end_object();
  write_collectives(j, m, result);
  write_kernel_choices(j, m);
  write_methods(j, program);
  j.end_object();
  return j.str() + "\n";
}

namespace {

// The memory picture's layout, in pixels: one panel per arena, stacked.
constexpr double kLeft = 90, kRight = 30, kPanelTitle = 44, kPlotHeight = 460, kAxis = 46, kGap = 24;

// One arena's panel: instructions run left to right, addresses bottom to top.
struct Panel {
  double top;           // of the plot
  double plot_width;    // pixels
  double instructions;  // along x (at least 1)
  double bytes;         // along y (at least 1)

  double x_of(double i) const { return kLeft + i * plot_width / instructions; }
  double y_of(double address) const { return top + kPlotHeight - address * kPlotHeight / bytes; }
};

// The panel's title, frame, address grid and instruction ticks.
std::string panel_frame(const Panel& p, const LArena& arena, size_t a, double y0) {
  std::string body;
  const double ratio =
      arena.lower_bound ? static_cast<double>(arena.size) / static_cast<double>(arena.lower_bound) : 1.0;
  char line[512];
  std::snprintf(line, sizeof(line), "arena %zu (%s, %s): %s bytes, lower bound %s (%.4f x), first fit %s, %s%s", a,
                device_str(arena.device).c_str(), arena.kind == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary",
                with_commas(arena.size).c_str(), with_commas(arena.lower_bound).c_str(), ratio,
                with_commas(arena.first_fit).c_str(), arena.algorithm.c_str(), arena.optimal ? ", optimal" : "");
  std::string title = line;
  if (!arena.region.empty()) {
    title += "; region '" + arena.region + "' (" +
             memory::region_speed_name(static_cast<memory::RegionSpeed>(arena.speed)) + ", " +
             with_commas(arena.capacity) + " bytes), traffic " + with_commas(arena.traffic) + " bytes a run";
  }
  body += "<text x=\"" + fmt(kLeft) + "\" y=\"" + fmt(y0 + 26) + "\" font-size=\"14\" font-weight=\"bold\">" +
          xml_escape(title) + "</text>\n";
  body += "<rect x=\"" + fmt(kLeft) + "\" y=\"" + fmt(p.top) + "\" width=\"" + fmt(p.plot_width) + "\" height=\"" +
          fmt(kPlotHeight) + "\" fill=\"#fbfbfb\" stroke=\"#888\"/>\n";
  // Address grid and labels.
  const double y_step = nice_byte_step(p.bytes / 8);
  for (double v = 0; v <= p.bytes + 0.5; v += y_step) {
    const double y = p.y_of(v);
    body += "<line x1=\"" + fmt(kLeft) + "\" y1=\"" + fmt(y) + "\" x2=\"" + fmt(kLeft + p.plot_width) + "\" y2=\"" +
            fmt(y) + "\" stroke=\"#e5e5e5\"/>\n";
    body += "<text x=\"" + fmt(kLeft - 6) + "\" y=\"" + fmt(y + 4) + "\" text-anchor=\"end\" fill=\"#555\">" +
            xml_escape(human_bytes(v)) + "</text>\n";
  }
  // Instruction ticks.
  const double x_step = nice_step(p.instructions / 12);
  for (double i = 0; i <= p.instructions; i += x_step) {
    const double x = p.x_of(i);
    body += "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(p.top + kPlotHeight) + "\" x2=\"" + fmt(x) + "\" y2=\"" +
            fmt(p.top + kPlotHeight + 5) + "\" stroke=\"#888\"/>\n";
    body += "<text x=\"" + fmt(x) + "\" y=\"" + fmt(p.top + kPlotHeight + 18) +
            "\" text-anchor=\"middle\" fill=\"#555\">" + std::to_string(static_cast<long long>(i)) + "</text>\n";
  }
  body += "<text x=\"" + fmt(kLeft + p.plot_width / 2) + "\" y=\"" + fmt(p.top + kPlotHeight + 36) +
          "\" text-anchor=\"middle\" fill=\"#333\">instruction</text>\n";
  body += "<text transform=\"translate(16," + fmt(p.top + kPlotHeight / 2) +
          ") rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">address</text>\n";
  return body;
}

// One tensor's rectangle (an alias outlined), with its details as a tooltip
// and its name where it fits.
std::string tensor_rect(const Panel& p, const LMethod& m, const TensorView& v) {
  std::string body;
  const bool alias = v.root != v.index;
  const LTensor& t = m.tensors[static_cast<size_t>(v.index)];
  const double x = p.x_of(v.first), w = std::max(1.0, p.x_of(v.last + 1) - x);
  const double y = p.y_of(static_cast<double>(v.offset + v.size)),
               h = std::max(1.0, p.y_of(static_cast<double>(v.offset)) - y);
  std::string title = t.name + "\n" + with_commas(v.size) + " bytes at offset " + with_commas(v.offset) +
                      "\ninstructions " + std::to_string(v.first) + "-" + std::to_string(v.last) + ": " +
                      op_at(m, v.first) + " .. " + op_at(m, v.last) + "\n" + v.category;
  if (alias) title += ", alias of " + m.tensors[static_cast<size_t>(t.alias_of)].name;
  if (alias && t.alias_offset != 0) title += " at +" + std::to_string(t.alias_offset);
  body += "<g><title>" + xml_escape(title) + "</title><rect x=\"" + fmt(x) + "\" y=\"" + fmt(y) + "\" width=\"" +
          fmt(w) + "\" height=\"" + fmt(h) + "\" ";
  body += alias ? "fill=\"none\" stroke=\"#333\" stroke-dasharray=\"4 3\""
                : std::string("fill=\"") + color_of(v) + "\" stroke=\"#fff\" stroke-width=\"0.6\"";
  body += "/>";
  if (!alias && w >= 40 && h >= 13) {
    const std::string label = short_name(t.name, static_cast<size_t>(w / 6.0));
    body += "<text x=\"" + fmt(x + 3) + "\" y=\"" + fmt(y + std::min(h / 2 + 4, 13.0)) +
            "\" font-size=\"10\" fill=\"#222\">" + xml_escape(label) + "</text>";
  }
  body += "</g>\n";
  return body;
}

// The arena's lower bound as a dashed line and its peak instruction.
std::string panel_marks(const Panel& p, const LMethod& m, const LArena& arena) {
  std::string body;
  if (arena.lower_bound > 0) {
    const double y = p.y_of(static_cast<double>(arena.lower_bound));
    body += "<line x1=\"" + fmt(kLeft) + "\" y1=\"" + fmt(y) + "\" x2=\"" + fmt(kLeft + p.plot_width) + "\" y2=\"" +
            fmt(y) + "\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/>\n";
  }
  if (arena.peak_instruction >= 0) {
    const double x = p.x_of(arena.peak_instruction + 0.5);
    body += "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(p.top) + "\" x2=\"" + fmt(x) + "\" y2=\"" +
            fmt(p.top + kPlotHeight) + "\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n";
    const std::string label = "peak: instruction " + std::to_string(arena.peak_instruction) + " (" +
                              op_at(m, arena.peak_instruction) + "), " + std::to_string(arena.peak_tensors.size()) +
                              " tensors, " + with_commas(arena.lower_bound) + " bytes live";
    const bool right_half = x > kLeft + p.plot_width / 2;
    body += "<text x=\"" + fmt(right_half ? x - 6 : x + 6) + "\" y=\"" + fmt(p.top + 14) + "\" text-anchor=\"" +
            (right_half ? "end" : "start") +
            "\" fill=\"#c0392b\" font-weight=\"bold\" stroke=\"#fff\" stroke-width=\"4\" paint-order=\"stroke\">" +
            xml_escape(label) + "</text>\n";
  }
  return body;
}

// The panels of the method's arenas from y0 down; y0 ends below the last.
std::string arena_panels(const LMethod& m, double plot_width, double& y0) {
  std::string body;
  const std::vector<TensorView> views = tensor_views(m);
  const double instructions = static_cast<double>(std::max<size_t>(m.instructions.size(), 1));
  for (size_t a = 0; a < m.arenas.size(); ++a) {
    const LArena& arena = m.arenas[a];
    const Panel p{y0 + kPanelTitle, plot_width, instructions, static_cast<double>(std::max<uint64_t>(arena.size, 1))};
    body += panel_frame(p, arena, a, y0);
    // Tensors: bases first, then aliases outlined on top of them.
    for (int pass = 0; pass < 2; ++pass) {
      for (const TensorView& v : views) {
        if (v.arena != static_cast<int>(a) || v.first < 0 || v.size == 0) continue;
        if ((v.root != v.index) != (pass == 1)) continue;
        body += tensor_rect(p, m, v);
      }
    }
    body += panel_marks(p, m, arena);
    y0 = p.top + kPlotHeight + kAxis + kGap;
  }
  return body;
}

// The legend's row at height ly; lx ends after its last entry.
std::string legend(double ly, double& lx) {
  std::string legend;
  auto swatch = [&](const std::string& fill, const std::string& stroke, const std::string& text) {
    legend += "<rect x=\"" + fmt(lx) + "\" y=\"" + fmt(ly) + "\" width=\"16\" height=\"12\" fill=\"" + fill +
              "\" stroke=\"" + stroke + "\"" + (fill == "none" ? " stroke-dasharray=\"4 3\"" : "") + "/>";
    legend += "<text x=\"" + fmt(lx + 22) + "\" y=\"" + fmt(ly + 10) + "\">" + xml_escape(text) + "</text>\n";
    lx += 30 + 7.0 * static_cast<double>(text.size());
  };
  swatch(kPalette[0], "#fff", "intermediate tensor");
  swatch(kInputColor, "#fff", "method input");
  swatch(kOutputColor, "#fff", "method output");
  swatch(kScratchColor, "#fff", "kernel scratch");
  swatch("none", "#333", "alias (shares its base's bytes)");
  legend += "<line x1=\"" + fmt(lx) + "\" y1=\"" + fmt(ly + 6) + "\" x2=\"" + fmt(lx + 24) + "\" y2=\"" + fmt(ly + 6) +
            "\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/><text x=\"" + fmt(lx + 30) + "\" y=\"" + fmt(ly + 10) +
            "\">lower bound (most bytes live at once)</text>\n";
  return legend;
}

}  // namespace

std::string memory_svg(const LProgram& program) {
  std::string body;
  double width = 900;
  double y0 = 40;  // top of the next panel
  const LMethod* method = program.methods.empty() ? nullptr : &program.methods.front();
  if (method != nullptr) {
    const double instructions = static_cast<double>(std::max<size_t>(method->instructions.size(), 1));
    const double plot_width = std::clamp(instructions * 14.0, 640.0, 1500.0);
    width = kLeft + plot_width + kRight;
    body = arena_panels(*method, plot_width, y0);
  }
  double lx = kLeft;
  const double ly = y0;
  const std::string key = legend(ly, lx);
  const double height = ly + 30;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt(std::max(width, lx + 300)) +
                    "\" height=\"" + fmt(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  svg += "<text x=\"" + fmt(kLeft) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">kiln memory plan" +
         (method != nullptr ? xml_escape(", method '" + method->name + "'") : "") + "</text>\n";
  svg += body + key + "</svg>\n";
  return svg;
}

void write_plan_report(const PlanResult& result, const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    fail("cannot create report directory '", dir, "': ", std::strerror(errno));
  }
  write_file_atomic(dir + "/plan.json", plan_json(result));
  write_file_atomic(dir + "/memory.svg", memory_svg(result.program));
}

}  // namespace kiln::planner
