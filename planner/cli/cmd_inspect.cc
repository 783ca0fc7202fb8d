// kiln inspect and kiln verify: read a program back and show or check it.

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/host_tensor.h"
#include "emit/program_file.h"
#include "kiln/schema/arena_layout.h"
#include "kiln/schema/delegate_generated.h"
#include "report/json.h"
#include "verify/verifier.h"

namespace kiln::planner::cli {
namespace {

// "+RELU" when the kernel applies a fused activation, else "".
std::string fused_activation_suffix(const fb::KernelCall* call) {
  const fb::FusedActivation* a = nullptr;
  if (const auto* p = call->params_as_ConvParams()) a = p->activation();
  if (const auto* p = call->params_as_GemmParams()) a = p->activation();
  if (const auto* p = call->params_as_BinaryParams()) a = p->activation();
  if (const auto* p = call->params_as_MatMulParams()) a = p->activation();
  if (a == nullptr || a->kind() == fb::Activation::NONE) return "";
  return std::string("+") + fb::EnumNameActivation(a->kind());
}

// " [im2col+GEMM]" for a Conv its device backend runs through a GEMM
// (ConvParams.algorithm), " [GEMM]" where the input is the operand itself
// (1x1, stride 1, no padding: no column buffer), else "".
std::string conv_algorithm_suffix(const fb::KernelCall& call) {
  const auto* p = call.params_as_ConvParams();
  if (p == nullptr || p->algorithm() != fb::ConvAlgorithm::IM2COL_GEMM) return "";
  bool as_columns = true;
  for (const auto* list : {p->kernel(), p->strides()}) {
    for (uint32_t i = 0; list != nullptr && i < list->size(); ++i) as_columns = as_columns && list->Get(i) == 1;
  }
  for (uint32_t i = 0; p->pads() != nullptr && i < p->pads()->size(); ++i)
    as_columns = as_columns && p->pads()->Get(i) == 0;
  return as_columns ? " [GEMM]" : " [im2col+GEMM]";
}

std::string device_str(const fb::Device* d) { return d == nullptr ? "cpu:0" : planner::device_str(*d); }

// A delegate's compile spec "precision" (kiln plan --precision), "fp32" where absent.
std::string delegate_precision(const fb::Delegate& delegate) {
  if (delegate.compile_specs() != nullptr) {
    for (const fb::CompileSpec* spec : *delegate.compile_specs()) {
      if (spec->key() != nullptr && spec->key()->str() == "precision" && spec->value() != nullptr) {
        return std::string(spec->value()->begin(), spec->value()->end());
      }
    }
  }
  return "fp32";
}

std::string name_of(const fb::Tensor& t) { return t.name() != nullptr ? t.name()->str() : ""; }

std::vector<int64_t> shape_of(const fb::Tensor& t) {
  std::vector<int64_t> s;
  if (t.shape() != nullptr) s.assign(t.shape()->begin(), t.shape()->end());
  return s;
}

std::vector<int64_t> list_of(const flatbuffers::Vector<int32_t>* v) {
  std::vector<int64_t> out;
  if (v != nullptr) out.assign(v->begin(), v->end());
  return out;
}

std::string storage_str(const fb::Method& m, const fb::Tensor& t) {
  switch (t.storage_type()) {
    case fb::Storage::PlannedStorage: {
      const auto* p = t.storage_as_PlannedStorage();
      return str("arena ", p->arena(), " @ ", p->offset());
    }
    case fb::Storage::ConstantStorage: {
      const auto* c = t.storage_as_ConstantStorage();
      if (c->ranks() == nullptr || c->ranks()->size() == 0) return str("constant #", c->index());
      std::string shards;
      for (uint32_t r = 0; r < c->ranks()->size(); ++r) shards += str(r == 0 ? "" : ", ", "#", c->ranks()->Get(r));
      return str("constant per rank of group ", c->group(), ": ", shards);
    }
    case fb::Storage::AliasStorage: {
      const uint32_t base = t.storage_as_AliasStorage()->base();
      const uint64_t offset = t.storage_as_AliasStorage()->offset();
      const std::string name = name_of(*m.tensors()->Get(base));
      const std::string at = offset != 0 ? str(" @ +", offset) : std::string();
      return name.empty() ? str("alias of #", base, at) : str("alias of #", base, " '", name, "'", at);
    }
    case fb::Storage::UserStorage: {
      const auto* fallback = t.storage_as_UserStorage()->fallback();
      return fallback ? str("user (fallback arena ", fallback->arena(), " @ ", fallback->offset(), ")") : "user";
    }
    default: return "?";
  }
}

std::string ids(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

void print_program_header(const ProgramFile& file) {
  const fb::Program& p = file.program();
  uint64_t constant_bytes = 0;
  if (p.constants()) {
    for (const auto* c : *p.constants()) constant_bytes += c->size();
  }
  std::printf("program: schema version %u, produced by %s\n", p.version(), p.producer() ? p.producer()->c_str() : "?");
  std::printf("  file %s bytes: flatbuffer %s, data segment %s at offset %s (%u constants, %s bytes)\n",
              group_digits(file.file_size()).c_str(), group_digits(file.flatbuffer_size()).c_str(),
              group_digits(p.segment_size()).c_str(), group_digits(file.segment_offset()).c_str(),
              p.constants() ? p.constants()->size() : 0, group_digits(constant_bytes).c_str());
}

void print_arenas(const fb::Method& m) {
  std::printf("  arenas:\n");
  if (!m.arenas()) return;
  for (uint32_t a = 0; a < m.arenas()->size(); ++a) {
    const fb::Arena& arena = *m.arenas()->Get(a);
    std::printf("    #%u %-8s %-9s %14s bytes  align %u%s%s\n", a, device_str(arena.device()).c_str(),
                arena.kind() == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary", group_digits(arena.size()).c_str(),
                arena.alignment(),
                arena.kind() == fb::ArenaKind::SYMMETRIC ? str("  group ", arena.group()).c_str() : "",
                arena.region() != nullptr ? str("  region '", arena.region()->str(), "'").c_str() : "");
  }
}

// The method's inputs or outputs (`what`), with their quantization.
void print_io(const fb::Method& m, const char* what, const flatbuffers::Vector<uint32_t>* list) {
  std::printf("  %s:\n", what);
  if (list == nullptr) return;
  for (uint32_t t : *list) {
    const fb::Tensor& tensor = *m.tensors()->Get(t);
    const fb::Quantization* q = tensor.quantization();
    std::printf("    #%u '%s' %s %s%s\n", t, name_of(tensor).c_str(), dtype_str(tensor.dtype()).c_str(),
                shape_str(shape_of(tensor)).c_str(),
                q != nullptr ? str("  quantized: scale ", q->scale(), ", zero point ", q->zero_point()).c_str() : "");
  }
}

void print_tensors(const fb::Method& m) {
  std::printf("  tensors:\n");
  if (!m.tensors()) return;
  int width = 8;
  for (const fb::Tensor* tensor : *m.tensors()) width = std::max(width, static_cast<int>(name_of(*tensor).size()));
  width = std::min(width, 48);
  for (uint32_t t = 0; t < m.tensors()->size(); ++t) {
    const fb::Tensor& tensor = *m.tensors()->Get(t);
    std::printf("    #%-4u %-*s %-8s %-20s %12s B  %-8s %s\n", t, width, name_of(tensor).c_str(),
                dtype_str(tensor.dtype()).c_str(), shape_str(shape_of(tensor)).c_str(),
                group_digits(tensor.nbytes()).c_str(), device_str(tensor.device()).c_str(),
                storage_str(m, tensor).c_str());
  }
}

void print_instruction(const fb::Method& m, uint32_t i) {
  const fb::Instruction& ins = *m.instructions()->Get(i);
  // The model node it came from, unless the program was planned without names.
  const std::string node = ins.name() && ins.name()->size() != 0 ? str("  (", ins.name()->str(), ")") : "";
  switch (ins.kind_type()) {
    case fb::InstructionKind::KernelCall: {
      const auto* call = ins.kind_as_KernelCall();
      const std::string op =
          (m.operators() && call->op() < m.operators()->size() ? m.operators()->Get(call->op())->name()->str() : "?") +
          fused_activation_suffix(call);
      std::printf(
          "    #%-4u kernel %-18s %s -> %s%s%s\n", i, op.c_str(), ids(list_of(call->inputs())).c_str(),
          ids(list_of(call->outputs())).c_str(),
          call->scratch() && call->scratch()->size() ? str(" scratch ", ids(list_of(call->scratch()))).c_str() : "",
          node.c_str());
      break;
    }
    case fb::InstructionKind::CopyCall: {
      const auto* copy = ins.kind_as_CopyCall();
      std::printf("    #%-4u copy   #%u -> #%u  %s bytes%s\n", i, copy->src(), copy->dst(),
                  group_digits(m.tensors()->Get(copy->src())->nbytes()).c_str(), node.c_str());
      break;
    }
    case fb::InstructionKind::DelegateCall: {
      const auto* call = ins.kind_as_DelegateCall();
      std::printf("    #%-4u delegate #%u %s -> %s%s\n", i, call->delegate(), ids(list_of(call->inputs())).c_str(),
                  ids(list_of(call->outputs())).c_str(), node.c_str());
      break;
    }
    case fb::InstructionKind::CollectiveCall: {
      const auto* call = ins.kind_as_CollectiveCall();
      // A device all-reduce kernel: which, its grid and its signal words.
      std::string kernel;
      if (call->algorithm() != fb::AllReduceAlgorithm::COMMUNICATOR) {
        kernel = std::string("  ") + (call->algorithm() == fb::AllReduceAlgorithm::ONE_SHOT ? "one" : "two") +
                 "-shot kernel, " + std::to_string(call->blocks()) + " block" + (call->blocks() == 1 ? "" : "s") +
                 ", signals at " + std::to_string(call->signal_offset());
      }
      // Inputs after the first: addends fused into its write.
      std::vector<int64_t> inputs = list_of(call->inputs());
      std::string addends;
      if (inputs.size() > 1) {
        addends = " + " + ids(std::vector<int64_t>(inputs.begin() + 1, inputs.end()));
        inputs.resize(1);
      }
      std::printf("    #%-4u collective %s group %u %s%s -> %s%s%s\n", i, fb::EnumNameCollectiveKind(call->kind()),
                  call->group(), ids(inputs).c_str(), addends.c_str(), ids(list_of(call->outputs())).c_str(),
                  kernel.c_str(), node.c_str());
      break;
    }
    default: std::printf("    #%-4u ?\n", i);
  }
}

// The copies made when the method loads (constants to their device).
void print_load_copies(const fb::Method& m) {
  if (!m.init_instructions() || !m.init_instructions()->size()) return;
  std::printf("  at load:\n");
  for (uint32_t i = 0; i < m.init_instructions()->size(); ++i) {
    const auto* copy = m.init_instructions()->Get(i)->kind_as_CopyCall();
    if (copy == nullptr) continue;
    std::printf("    copy   #%u -> #%u  %s bytes to %s\n", copy->src(), copy->dst(),
                group_digits(m.tensors()->Get(copy->src())->nbytes()).c_str(),
                device_str(m.tensors()->Get(copy->dst())->device()).c_str());
  }
}

// The kernels of an inline DelegateGraph blob, or nullptr for another blob.
const fb::DelegateGraph* inline_delegate_graph(const fb::Delegate& delegate) {
  if (!delegate.inline_blob() || !fb::DelegateGraphBufferHasIdentifier(delegate.inline_blob()->data())) return nullptr;
  const fb::DelegateGraph* graph = fb::GetDelegateGraph(delegate.inline_blob()->data());
  return graph->kernels() && graph->operators() ? graph : nullptr;
}

std::string op_name(const fb::DelegateGraph& graph, const fb::KernelCall& k) {
  return k.op() < graph.operators()->size() ? graph.operators()->Get(k.op())->name()->str() : "?";
}

void print_delegates(const fb::Method& m) {
  std::printf("  delegates:%s\n", m.delegates() && m.delegates()->size() ? "" : " none");
  if (!m.delegates()) return;
  for (uint32_t d = 0; d < m.delegates()->size(); ++d) {
    const fb::Delegate& delegate = *m.delegates()->Get(d);
    std::string kernels;
    if (const fb::DelegateGraph* graph = inline_delegate_graph(delegate)) {
      for (const fb::KernelCall* k : *graph->kernels()) {
        kernels += (kernels.empty() ? "" : " ") + op_name(*graph, *k) + conv_algorithm_suffix(*k);
      }
    }
    std::printf("    #%u %s on %s, %s, blob %s bytes %s, state %s bytes: %s\n", d, delegate.backend()->c_str(),
                device_str(delegate.device()).c_str(), delegate_precision(delegate).c_str(),
                group_digits(delegate.inline_blob() ? delegate.inline_blob()->size() : 0).c_str(),
                delegate.segment() >= 0 ? "(in segment)" : "(inline)", group_digits(delegate.state_bytes()).c_str(),
                kernels.c_str());
  }
}

// A program of several methods: each with the bytes of its host arenas,
// and the groups of methods that may share one buffer for them.
void print_method_list(const fb::Program& p) {
  if (p.methods()->size() < 2 && p.arena_groups() == nullptr) return;
  std::printf("methods:");
  for (const fb::Method* m : *p.methods()) {
    std::printf(" '%s' (%s host arena bytes)", m->name()->c_str(), group_digits(abi::host_arena_bytes(*m)).c_str());
  }
  std::printf("\n");
  if (p.arena_groups() == nullptr) return;
  for (const fb::ArenaGroup* group : *p.arena_groups()) {
    std::string names;
    for (uint32_t m : *group->methods())
      names += str(names.empty() ? "'" : ", '", p.methods()->Get(m)->name()->str(), "'");
    std::printf("arena group: %s never run at the same time; one host buffer of %s bytes\n", names.c_str(),
                group_digits(group->host_bytes()).c_str());
  }
}

void json_arena_groups(JsonWriter& j, const fb::Program& p) {
  if (p.arena_groups() == nullptr) return;
  j.key("arena_groups").begin_array();
  for (const fb::ArenaGroup* group : *p.arena_groups()) {
    j.begin_object().field("host_bytes", group->host_bytes());
    j.key("methods").int_array(std::vector<int64_t>(group->methods()->begin(), group->methods()->end()));
    j.end_object();
  }
  j.end_array();
}

// Inputs bounded above (kiln plan --input-shape NAME=MIN:MAX...): each
// symbol, and how many extents follow the symbols.
void print_bounds(const fb::Method& m) {
  if (m.symbols() == nullptr || m.symbols()->size() == 0) return;
  std::printf("  bounded inputs (planned at the maximum; %u extents follow them):\n",
              m.dynamic_dims() != nullptr ? m.dynamic_dims()->size() : 0u);
  for (const fb::Symbol* s : *m.symbols()) {
    const uint32_t input = m.inputs()->Get(s->input());
    const fb::Tensor& t = *m.tensors()->Get(input);
    std::printf("    '%s' %lld:%lld  input #%u '%s' dimension %u\n", s->name() ? s->name()->c_str() : "",
                static_cast<long long>(s->min()), static_cast<long long>(s->max()), input,
                t.name() ? t.name()->c_str() : "", s->axis());
  }
}

void print_text(const ProgramFile& file) {
  print_program_header(file);
  print_method_list(file.program());
  for (const fb::Method* m : *file.program().methods()) {
    std::printf("\nmethod '%s': bookkeeping %s bytes\n", m->name()->c_str(),
                group_digits(m->bookkeeping_bytes()).c_str());
    print_arenas(*m);
    print_io(*m, "inputs", m->inputs());
    print_io(*m, "outputs", m->outputs());
    print_bounds(*m);
    print_tensors(*m);
    std::printf("  instructions:\n");
    if (m->instructions()) {
      for (uint32_t i = 0; i < m->instructions()->size(); ++i) print_instruction(*m, i);
    }
    print_load_copies(*m);
    print_delegates(*m);
  }
}

void json_arenas(JsonWriter& j, const fb::Method& m) {
  j.key("arenas").begin_array();
  if (m.arenas()) {
    for (uint32_t a = 0; a < m.arenas()->size(); ++a) {
      const fb::Arena& arena = *m.arenas()->Get(a);
      j.begin_object().field("id", a).field("size", arena.size()).field("alignment", arena.alignment());
      j.field("device", device_str(arena.device()));
      if (arena.region() != nullptr) j.field("region", arena.region()->str());
      j.field("kind", arena.kind() == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary").end_object();
    }
  }
  j.end_array();
}

void json_tensor(JsonWriter& j, const fb::Tensor& tensor, uint32_t t) {
  j.begin_object().field("id", t).field("name", name_of(tensor)).field("dtype", dtype_str(tensor.dtype()));
  j.key("shape").int_array(shape_of(tensor));
  j.field("bytes", tensor.nbytes()).field("device", device_str(tensor.device()));
  if (const fb::Quantization* q = tensor.quantization()) {
    j.key("quantization")
        .begin_object()
        .field("scale", static_cast<double>(q->scale()))
        .field("zero_point", q->zero_point());
    j.end_object();
  }
  switch (tensor.storage_type()) {
    case fb::Storage::PlannedStorage:
      j.field("storage", "planned").field("arena", tensor.storage_as_PlannedStorage()->arena());
      j.field("offset", tensor.storage_as_PlannedStorage()->offset());
      break;
    case fb::Storage::ConstantStorage:
      j.field("storage", "constant").field("constant", tensor.storage_as_ConstantStorage()->index());
      break;
    case fb::Storage::AliasStorage:
      j.field("storage", "alias").field("alias_of", tensor.storage_as_AliasStorage()->base());
      j.field("alias_offset", tensor.storage_as_AliasStorage()->offset());
      break;
    case fb::Storage::UserStorage:
      j.field("storage", "user");
      if (const auto* f = tensor.storage_as_UserStorage()->fallback()) {
        j.field("arena", f->arena()).field("offset", f->offset());
      }
      break;
    default: j.field("storage", "none");
  }
  j.end_object();
}

void json_instruction(JsonWriter& j, const fb::Method& m, uint32_t i) {
  const fb::Instruction& ins = *m.instructions()->Get(i);
  j.begin_object().field("id", i).field("node", ins.name() ? ins.name()->str() : "");
  switch (ins.kind_type()) {
    case fb::InstructionKind::KernelCall: {
      const auto* call = ins.kind_as_KernelCall();
      j.field("kind", "kernel").field("op", m.operators()->Get(call->op())->name()->str());
      j.key("inputs").int_array(list_of(call->inputs()));
      j.key("outputs").int_array(list_of(call->outputs()));
      j.key("scratch").int_array(list_of(call->scratch()));
      break;
    }
    case fb::InstructionKind::CopyCall: {
      const auto* copy = ins.kind_as_CopyCall();
      j.field("kind", "copy").field("src", copy->src()).field("dst", copy->dst());
      j.field("bytes", m.tensors()->Get(copy->src())->nbytes());
      break;
    }
    case fb::InstructionKind::DelegateCall: {
      const auto* call = ins.kind_as_DelegateCall();
      j.field("kind", "delegate").field("delegate", call->delegate());
      j.key("inputs").int_array(list_of(call->inputs()));
      j.key("outputs").int_array(list_of(call->outputs()));
      break;
    }
    case fb::InstructionKind::CollectiveCall: {
      const auto* call = ins.kind_as_CollectiveCall();
      j.field("kind", "collective").field("group", call->group());
      j.key("inputs").int_array(list_of(call->inputs()));
      j.key("outputs").int_array(list_of(call->outputs()));
      if (call->algorithm() != fb::AllReduceAlgorithm::COMMUNICATOR) {
        j.field("algorithm",
                std::string(call->algorithm() == fb::AllReduceAlgorithm::ONE_SHOT ? "one-shot" : "two-shot"));
        j.field("blocks", call->blocks()).field("signal_offset", call->signal_offset());
      }
      break;
    }
    default: j.field("kind", "none");
  }
  j.end_object();
}

void json_delegates(JsonWriter& j, const fb::Method& m) {
  j.key("delegates").begin_array();
  if (m.delegates()) {
    for (uint32_t d = 0; d < m.delegates()->size(); ++d) {
      const fb::Delegate& delegate = *m.delegates()->Get(d);
      j.begin_object().field("id", d).field("backend", delegate.backend()->str());
      j.field("device", device_str(delegate.device())).field("state_bytes", delegate.state_bytes());
      j.field("precision", delegate_precision(delegate));
      j.key("kernels").begin_array();
      if (const fb::DelegateGraph* graph = inline_delegate_graph(delegate)) {
        for (const fb::KernelCall* k : *graph->kernels()) {
          j.begin_object();
          j.field("op", op_name(*graph, *k));
          if (const auto* conv = k->params_as_ConvParams()) {
            j.field("algorithm", fb::EnumNameConvAlgorithm(conv->algorithm()));
          }
          j.key("inputs").int_array(list_of(k->inputs()));
          j.key("outputs").int_array(list_of(k->outputs()));
          j.end_object();
        }
      }
      j.end_array().end_object();
    }
  }
  j.end_array();
}

void print_json(const ProgramFile& file) {
  const fb::Program& p = file.program();
  JsonWriter j;
  j.begin_object();
  j.field("version", p.version()).field("producer", p.producer() ? p.producer()->str() : "");
  j.field("file_bytes", file.file_size()).field("segment_bytes", p.segment_size());
  j.key("methods").begin_array();
  for (const fb::Method* m : *p.methods()) {
    j.begin_object().field("name", m->name()->str()).field("bookkeeping_bytes", m->bookkeeping_bytes());
    json_arenas(j, *m);
    j.key("inputs").int_array(m->inputs() ? std::vector<int64_t>(m->inputs()->begin(), m->inputs()->end())
                                          : std::vector<int64_t>{});
    j.key("outputs").int_array(m->outputs() ? std::vector<int64_t>(m->outputs()->begin(), m->outputs()->end())
                                            : std::vector<int64_t>{});
    j.key("bounds").begin_array();
    if (m->symbols()) {
      for (const fb::Symbol* s : *m->symbols()) {
        j.begin_object().field("name", s->name() ? s->name()->str() : "").field("input", s->input());
        j.field("axis", s->axis()).field("min", s->min()).field("max", s->max()).end_object();
      }
    }
    j.end_array();
    j.field("dynamic_dims", m->dynamic_dims() != nullptr ? m->dynamic_dims()->size() : 0u);
    j.key("tensors").begin_array();
    if (m->tensors()) {
      for (uint32_t t = 0; t < m->tensors()->size(); ++t) json_tensor(j, *m->tensors()->Get(t), t);
    }
    j.end_array();
    j.key("instructions").begin_array();
    if (m->instructions()) {
      for (uint32_t i = 0; i < m->instructions()->size(); ++i) json_instruction(j, *m, i);
    }
    j.end_array();
    json_delegates(j, *m);
    j.end_object();
  }
  j.end_array();
  json_arena_groups(j, p);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int cmd_inspect(const Argv& argv) {
  const Args args(argv, {{"--json", false}, {"--help", false}});
  if (args.has("--help")) {
    std::fputs(
        "usage: kiln inspect PROGRAM.kiln [--json]\n\nShows the methods, the groups of them that share one "
        "arena buffer, arenas, tensors (arena, offset, size, device, alias), instructions and delegates.\n",
        stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one program file"};
  const std::string path = args.positional()[0];
  const ProgramFile file(read_file(path), path);
  if (args.has("--json")) {
    print_json(file);
  } else {
    print_text(file);
  }
  return 0;
}

int cmd_verify(const Argv& argv) {
  const Args args(argv, {{"--help", false}});
  if (args.has("--help")) {
    std::fputs(
        "usage: kiln verify PROGRAM.kiln\n\nChecks independently that no two tensors alive at the same "
        "time share bytes\n(unless one is a declared alias of the other), that every tensor lies inside "
        "its\narena, and alignment. Exits 1 and names the tensors on a violation.\n",
        stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one program file"};
  const std::string path = args.positional()[0];
  const std::string bytes = read_file(path);
  const auto errors = verify_program(bytes);
  if (errors.empty()) {
    const ProgramFile file(bytes, path);
    size_t tensors = 0;
    for (const fb::Method* m : *file.program().methods()) tensors += m->tensors() ? m->tensors()->size() : 0;
    std::printf("kiln verify: %s: ok (%u method%s, %zu tensors)\n", path.c_str(), file.program().methods()->size(),
                file.program().methods()->size() == 1 ? "" : "s", tensors);
    return 0;
  }
  for (const auto& e : errors) std::fprintf(stderr, "kiln verify: %s: %s\n", path.c_str(), e.c_str());
  return 1;
}

}  // namespace kiln::planner::cli
