// kiln: the command-line tool. `kiln plan` turns an ONNX model into a .kiln
// program; the other subcommands run, inspect and verify programs.

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "targets/target.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  plan MODEL.onnx -o OUT.kiln   plan a model into a program and print its memory plan\n"
    "  run PROGRAM.kiln --input FILE run a program on .npy or .pb inputs\n"
    "  inspect PROGRAM.kiln [--json] show arenas, tensors, instructions and delegates\n"
    "  verify PROGRAM.kiln           check a program's memory plan independently\n"
    "  pack PROGRAM.kiln --c-array NAME -o DIR\n"
    "                                write the program as C source and a header of buffer sizes\n"
    "  memplan INTERVALS.csv         plan a bare interval set (memory planner benchmark)\n"
    "  profile TRACE                 where a traced run's time went (kiln run --profile=TRACE)\n"
    "  bench PROGRAM.kiln            time a program: latency percentiles, memory, per-op time\n"
    "  quantize MODEL.onnx --calibration DIR -o OUT.onnx\n"
    "                                quantize a float model to int8 (QDQ) on calibration inputs\n"
    "\n"
    "`kiln <command> --help` describes each command's options.\n";

// Error messages quote names from input files, which may hold any bytes:
// print control and non-ASCII bytes escaped so the message stays one line of text.
std::string printable(const char* text) {
  std::string out;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(text); *p != 0; ++p) {
    if (*p >= 0x20 && *p < 0x7f) {
      out += static_cast<char>(*p);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", *p);
      out += buf;
    }
  }
  return out;
}

struct Command {
  const char* name;
  int (*run)(const kiln::planner::cli::Argv&);
};

constexpr Command kCommands[] = {
    {"plan", kiln::planner::cli::cmd_plan},         {"run", kiln::planner::cli::cmd_run},
    {"inspect", kiln::planner::cli::cmd_inspect},   {"verify", kiln::planner::cli::cmd_verify},
    {"pack", kiln::planner::cli::cmd_pack},         {"memplan", kiln::planner::cli::cmd_memplan},
    {"profile", kiln::planner::cli::cmd_profile},   {"bench", kiln::planner::cli::cmd_bench},
    {"quantize", kiln::planner::cli::cmd_quantize},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::puts("kiln 0.1.0");
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (std::strcmp(c.name, argv[1]) == 0) command = &c;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "kiln: unknown command '%s'\n\n%s", argv[1], kUsage);
    return 2;
  }
  const kiln::planner::cli::Argv args(argv + 2, argv + argc);
  kiln::planner::register_builtin_backends();
  try {
    return command->run(args);
  } catch (const kiln::planner::cli::UsageError& e) {
    std::fprintf(stderr, "kiln %s: %s (see kiln %s --help)\n", command->name, e.message.c_str(), command->name);
    return 2;
  } catch (const kiln::planner::PlanError& e) {
    std::fprintf(stderr, "kiln %s: error: %s\n", command->name, printable(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln %s: internal error: %s\n", command->name, printable(e.what()).c_str());
    return 1;
  }
}
