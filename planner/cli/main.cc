// kiln: the command-line tool. `kiln plan` turns an ONNX model into a .kiln
// program; the other subcommands run, inspect and verify programs.

#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  plan MODEL.onnx -o OUT.kiln   plan a model into a program and print its memory plan\n"
    "  run PROGRAM.kiln --input FILE run a program on .npy or .pb inputs\n"
    "  inspect PROGRAM.kiln [--json] show arenas, tensors, instructions and delegates\n"
    "  verify PROGRAM.kiln           check a program's memory plan independently\n"
    "  memplan INTERVALS.csv         plan a bare interval set (memory planner benchmark)\n"
    "\n"
    "`kiln <command> --help` describes each command's options.\n";

struct Command {
  const char* name;
  int (*run)(const kiln::planner::cli::Argv&);
};

constexpr Command kCommands[] = {
    {"plan", kiln::planner::cli::cmd_plan},
    {"run", kiln::planner::cli::cmd_run},
    {"inspect", kiln::planner::cli::cmd_inspect},
    {"verify", kiln::planner::cli::cmd_verify},
    {"memplan", kiln::planner::cli::cmd_memplan},
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
  try {
    return command->run(args);
  } catch (const kiln::planner::cli::UsageError& e) {
    std::fprintf(stderr, "kiln %s: %s (see kiln %s --help)\n", command->name, e.message.c_str(), command->name);
    return 2;
  } catch (const kiln::planner::PlanError& e) {
    std::fprintf(stderr, "kiln %s: error: %s\n", command->name, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln %s: internal error: %s\n", command->name, e.what());
    return 1;
  }
}
