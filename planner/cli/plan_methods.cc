#include "cli/plan_methods.h"

#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "core/error.h"
#include "emit/program_file.h"
#include "kiln/schema/arena_layout.h"

namespace kiln::planner::cli {

std::vector<MethodModel> parse_method_options(const Args& args) {
  std::vector<MethodModel> models;
  std::set<std::string> names;
  for (const std::string& spec : args.all("--method")) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw UsageError{"--method expects NAME=MODEL.onnx, got '" + spec + "'"};
    }
    MethodModel model{spec.substr(0, eq), spec.substr(eq + 1)};
    if (!names.insert(model.name).second) throw UsageError{"--method: method '" + model.name + "' is named twice"};
    models.push_back(std::move(model));
  }
  if (!models.empty() && !args.positional().empty()) {
    throw UsageError{"give the models with --method NAME=MODEL.onnx, or one model without it, not both"};
  }
  if (!models.empty() && args.has("--bundle-test")) {
    throw UsageError{"--bundle-test bundles a test of one method; it does not combine with --method"};
  }
  if (models.empty() && args.has("--concurrent-methods")) {
    throw UsageError{"--concurrent-methods needs --method"};
  }
  return models;
}

void print_arena_groups(const PlanResult& result) {
  const ProgramFile file(result.bytes, "program");
  const fb::Program& program = file.program();
  const auto* methods = program.methods();
  if (methods == nullptr || methods->size() < 2) return;
  uint64_t constants = 0;
  for (const auto& c : result.program.constants) constants += c->nbytes();
  std::printf("  segment:     %s bytes of constants, each stored once (%s bytes over all methods)\n",
              group_digits(program.segment_size()).c_str(), group_digits(constants).c_str());
  uint64_t alone = 0;
  for (const fb::Method* m : *methods) alone += abi::host_arena_bytes(*m);
  if (program.arena_groups() == nullptr || program.arena_groups()->size() == 0) {
    std::printf("  arenas:      the methods may run at the same time: %s host bytes, one buffer each\n",
                group_digits(alone).c_str());
    return;
  }
  for (const fb::ArenaGroup* group : *program.arena_groups()) {
    std::string names;
    std::string sizes;
    for (uint32_t m : *group->methods()) {
      const fb::Method& method = *methods->Get(m);
      names += str(names.empty() ? "'" : ", '", method.name()->str(), "'");
      sizes += str(sizes.empty() ? "" : " + ", group_digits(abi::host_arena_bytes(method)));
    }
    std::printf("  arenas:      %s never run at the same time: one host buffer of %s bytes (each alone: %s = %s)\n",
                names.c_str(), group_digits(group->host_bytes()).c_str(), sizes.c_str(), group_digits(alone).c_str());
  }
}

}  // namespace kiln::planner::cli
