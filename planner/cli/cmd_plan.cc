// kiln plan: ONNX model -> .kiln program, with a memory summary.

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/file_util.h"
#include "emit/emitter.h"
#include "onnx/import.h"
#include "pipeline.h"
#include "report/plan_report.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln plan MODEL.onnx -o OUT.kiln [options]\n"
    "\n"
    "Plans MODEL.onnx into a program and prints its memory plan.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE          the program to write (required)\n"
    "  --input-shape NAME=DIMS    static shape for an input with symbolic dims (1x3x224x224)\n"
    "  --freeze NAME=FILE         replace input NAME by the constant in FILE (.npy or .pb)\n"
    "  --algo NAME                memory planning: auto (default), search, best-fit, first-fit, naive\n"
    "  --time-limit SEC           time budget of the memory search (default 10)\n"
    "  --report DIR               also write DIR/plan.json and DIR/memory.svg (the memory plan)\n"
    "  --alignment BYTES          arena alignment (default 64)\n"
    "  --plan-io                  also reserve arena memory for inputs and outputs\n";

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t next = text.find_first_of("x,", pos);
    const std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0) throw UsageError{"bad dimensions '" + text + "' for " + what};
    dims.push_back(v);
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return dims;
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError{option + " expects NAME=VALUE, got '" + text + "'"};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::string device_str(const fb::Device& d) {
  std::string name = fb::EnumNameDeviceType(d.type());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name + ":" + std::to_string(d.index());
}

void print_summary(const std::string& model, const std::string& output, const PlanResult& result) {
  const LProgram& program = result.program;
  std::printf("kiln plan: %s -> %s (%s bytes)\n", model.c_str(), output.c_str(),
              group_digits(result.bytes.size()).c_str());
  uint64_t constant_bytes = 0;
  for (const auto& c : program.constants) constant_bytes += c->nbytes();
  for (const LMethod& m : program.methods) {
    size_t planned = 0, constants = 0, user = 0, aliases = 0;
    for (const LTensor& t : m.tensors) {
      switch (t.storage) {
        case Storage::kPlanned: ++planned; break;
        case Storage::kConstant: ++constants; break;
        case Storage::kUser: ++user; break;
        case Storage::kAlias: ++aliases; break;
      }
    }
    std::printf("  method '%s': %zu instructions, %zu inputs, %zu outputs\n", m.name.c_str(),
                m.instructions.size(), m.inputs.size(), m.outputs.size());
    std::printf("  tensors:     %zu (%zu planned, %zu constant, %zu user-provided, %zu alias)\n",
                m.tensors.size(), planned, constants, user, aliases);
    std::printf("  constants:   %s bytes\n", group_digits(constant_bytes).c_str());
    std::printf("  bookkeeping: %s bytes\n", group_digits(method_bookkeeping_bytes(m)).c_str());
    std::printf("  %-5s %-8s %-9s %14s %14s %7s %14s  %s\n", "arena", "device", "kind", "size", "lower bound",
                "ratio", "first fit", "algorithm");
    for (size_t a = 0; a < m.arenas.size(); ++a) {
      const LArena& arena = m.arenas[a];
      const double ratio =
          arena.lower_bound ? static_cast<double>(arena.size) / static_cast<double>(arena.lower_bound) : 1.0;
      std::printf("  %-5zu %-8s %-9s %14s %14s %7.4f %14s  %s%s\n", a, device_str(arena.device).c_str(),
                  arena.kind == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary", group_digits(arena.size).c_str(),
                  group_digits(arena.lower_bound).c_str(), ratio, group_digits(arena.first_fit).c_str(),
                  arena.algorithm.c_str(), arena.optimal ? ", optimal" : "");
      if (arena.peak_instruction >= 0 && static_cast<size_t>(arena.peak_instruction) < m.instructions.size()) {
        const LInstruction& peak = m.instructions[static_cast<size_t>(arena.peak_instruction)];
        std::printf("        peak at instruction %d (%s '%s'), %zu tensors live:", arena.peak_instruction,
                    peak.kind == LInstruction::Kind::kCopy ? "copy" : peak.op.c_str(), peak.name.c_str(),
                    arena.peak_tensors.size());
        // The largest few, by size.
        std::vector<int> live = arena.peak_tensors;
        std::stable_sort(live.begin(), live.end(), [&](int x, int y) {
          return m.tensors[static_cast<size_t>(x)].nbytes() > m.tensors[static_cast<size_t>(y)].nbytes();
        });
        for (size_t k = 0; k < live.size() && k < 4; ++k) {
          const LTensor& t = m.tensors[static_cast<size_t>(live[k])];
          std::printf("%s '%s' %s", k == 0 ? "" : ",", t.name.c_str(), group_digits(t.nbytes()).c_str());
        }
        std::printf("%s\n", live.size() > 4 ? ", ..." : "");
      }
    }
  }
}

}  // namespace

int cmd_plan(const Argv& argv) {
  const Args args(argv, {{"-o", true}, {"--output", true}, {"--input-shape", true}, {"--freeze", true},
                         {"--algo", true}, {"--time-limit", true}, {"--alignment", true}, {"--plan-io", false},
                         {"--report", true}, {"--help", false}});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one model file"};
  const std::string model = args.positional()[0];
  const std::string output = args.has("-o") ? args.get("-o") : args.get("--output");
  if (output.empty()) throw UsageError{"missing -o OUT.kiln"};

  PlanOptions options;
  for (const std::string& spec : args.all("--input-shape")) {
    auto [name, dims] = split_assignment(spec, "--input-shape");
    options.import.input_shapes[name] = parse_dims(dims, name);
  }
  for (const std::string& spec : args.all("--freeze")) {
    auto [name, file] = split_assignment(spec, "--freeze");
    options.import.frozen_inputs[name] = read_tensor_file(file);
  }
  options.memory.solve.algorithm = memory::parse_algorithm(args.get("--algo", "auto"));
  options.memory.solve.time_limit_s = args.get_double("--time-limit", 10.0);
  if (options.memory.solve.time_limit_s < 0) throw UsageError{"--time-limit must not be negative"};
  const long alignment = args.get_int("--alignment", 64);
  if (alignment < 1 || alignment > 4096 || (alignment & (alignment - 1)) != 0) {
    throw UsageError{"--alignment must be a power of two from 1 to 4096"};
  }
  options.memory.alignment = static_cast<uint32_t>(alignment);
  options.plan_io = args.has("--plan-io");

  SearchProgress progress(model);
  options.memory.solve.progress = progress.callback();
  const PlanResult result = plan_onnx_file(model, options);
  progress.finish();
  write_file_atomic(output, result.bytes);
  if (args.has("--report")) write_plan_report(result.program, args.get("--report"));
  print_summary(model, output, result);
  if (args.has("--report")) {
    std::printf("  report:      %s/plan.json, %s/memory.svg\n", args.get("--report").c_str(),
                args.get("--report").c_str());
  }
  return 0;
}

std::string group_digits(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace kiln::planner::cli
