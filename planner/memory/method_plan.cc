#include "memory/method_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/error.h"
#include "memory/regions.h"

namespace kiln::planner::memory {

Lifetimes compute_lifetimes(const LMethod& method) {
  const size_t n = method.tensors.size();
  Lifetimes lt;
  lt.first.assign(n, -1);
  lt.last.assign(n, -1);
  auto touch = [&](int t, int i) {
    if (t < 0) return;
    const size_t r = static_cast<size_t>(method.root(t));
    if (lt.first[r] < 0 || i < lt.first[r]) lt.first[r] = i;
    lt.last[r] = std::max(lt.last[r], i);
  };
  for (size_t i = 0; i < method.instructions.size(); ++i) {
    const LInstruction& ins = method.instructions[i];
    for (int t : ins.inputs) touch(t, static_cast<int>(i));
    for (int t : ins.outputs) touch(t, static_cast<int>(i));
    for (int t : ins.scratch) touch(t, static_cast<int>(i));
  }
  const int end = std::max<int>(0, static_cast<int>(method.instructions.size()) - 1);
  for (size_t t = 0; t < n; ++t) {
    const LTensor& tensor = method.tensors[t];
    if ((tensor.storage == Storage::kUser && tensor.user_fallback) || tensor.persistent) {
      lt.first[t] = 0;
      lt.last[t] = end;
    }
  }
  return lt;
}

namespace {

// The arena's tensors planned as a bare Problem: offsets into the tensors,
// size, lower bound and how the plan was made into the arena.
void plan_arena(LMethod& method, LArena& arena, size_t index, const std::vector<int>& members, const Lifetimes& lt,
                const SolveOptions& options) {
  Problem problem;
  problem.alignment = arena.alignment;
  for (int t : members) {
    const LTensor& tensor = method.tensors[static_cast<size_t>(t)];
    Buffer b;
    // A tensor no instruction touches still gets (unshared) bytes.
    b.begin = lt.first[static_cast<size_t>(t)] >= 0 ? lt.first[static_cast<size_t>(t)] : 0;
    b.end = (lt.last[static_cast<size_t>(t)] >= 0 ? lt.last[static_cast<size_t>(t)] : 0) + 1;
    b.size = tensor.nbytes();
    problem.buffers.push_back(b);
  }
  const Solution solution = solve(problem, options);
  const std::string problem_found = check_solution(problem, solution);
  if (!problem_found.empty()) fail("internal error: memory plan of arena ", index, " is invalid: ", problem_found);
  for (size_t i = 0; i < members.size(); ++i) {
    method.tensors[static_cast<size_t>(members[i])].offset = solution.offsets[i];
  }
  const LowerBound lb = lower_bound(problem);
  arena.size = solution.arena_size;
  arena.lower_bound = lb.bytes;
  arena.peak_instruction = static_cast<int>(lb.moment);
  arena.peak_tensors.clear();
  for (int i : lb.live) arena.peak_tensors.push_back(members[static_cast<size_t>(i)]);
  arena.algorithm = solution.algorithm;
  arena.first_fit = solution.first_fit != 0                           ? solution.first_fit
                    : options.algorithm == Algorithm::kGreedyFirstFit ? solution.arena_size
                                                                      : solve_greedy(problem, false).arena_size;
  arena.optimal = solution.optimal || solution.arena_size == lb.bytes;
  arena.search_nodes = solution.nodes;
  arena.solve_seconds = solution.seconds;
}

// With memory regions: one host arena per region, in the order given,
// before any other arena; the traffic each region's tensors see.
void add_region_arenas(LMethod& method, const MethodPlanOptions& options, std::vector<std::vector<int>>& members) {
  const std::vector<uint64_t> traffic = tensor_traffic(method);
  for (const MemoryRegion& region : options.regions) {
    LArena arena;
    arena.alignment = options.alignment;
    arena.region = region.name;
    arena.capacity = region.capacity;
    arena.speed = static_cast<int>(region.speed);
    method.arenas.push_back(arena);
    members.emplace_back();
  }
  for (size_t t = 0; t < method.tensors.size(); ++t) {
    const int r = method.tensors[t].region;
    if (r >= 0) method.arenas[static_cast<size_t>(r)].traffic += traffic[t];
  }
}

}  // namespace

void plan_method_memory(LMethod& method, const MethodPlanOptions& options) {
  const Lifetimes lt = compute_lifetimes(method);
  // One arena per device, in order of first appearance; on a device, the
  // constants uploaded at load (persistent) get an arena of their own,
  // written once and never reused, beside the one the run reuses; and the
  // tensors symmetric placement put in a communicator group's symmetric
  // arena get that arena (one per device and group), planned like any other.
  // With memory regions, the host tensors of ordinary arenas go to the
  // regions' arenas instead (memory/regions.h).
  const std::vector<int> region_of =
      assign_regions(method, lt, options.regions, options.alignment, options.solve.algorithm);
  std::map<std::tuple<int, int, bool, int>, int> arena_of;
  std::vector<std::vector<int>> members;
  method.arenas.clear();
  for (size_t t = 0; t < method.tensors.size(); ++t) method.tensors[t].region = region_of[t];
  add_region_arenas(method, options, members);
  for (size_t t = 0; t < method.tensors.size(); ++t) {
    LTensor& tensor = method.tensors[t];
    if (!tensor.has_memory()) continue;
    if (tensor.region >= 0) {
      tensor.arena = tensor.region;
      members[static_cast<size_t>(tensor.region)].push_back(static_cast<int>(t));
      continue;
    }
    const bool device_constant = tensor.device.type() != fb::DeviceType::CPU && tensor.persistent;
    const auto key = std::make_tuple(static_cast<int>(tensor.device.type()), static_cast<int>(tensor.device.index()),
                                     device_constant, tensor.symmetric_group);
    auto it = arena_of.find(key);
    if (it == arena_of.end()) {
      it = arena_of.emplace(key, static_cast<int>(method.arenas.size())).first;
      LArena arena;
      arena.device = tensor.device;
      if (tensor.symmetric_group >= 0) {
        arena.kind = fb::ArenaKind::SYMMETRIC;
        arena.group = static_cast<uint32_t>(tensor.symmetric_group);
      }
      arena.alignment = options.alignment;
      if (tensor.device.type() != fb::DeviceType::CPU && options.device_alignment) {
        arena.alignment = std::max(arena.alignment, options.device_alignment(tensor.device));
      }
      method.arenas.push_back(arena);
      members.emplace_back();
    }
    tensor.arena = it->second;
    members[static_cast<size_t>(it->second)].push_back(static_cast<int>(t));
  }
  for (size_t a = 0; a < method.arenas.size(); ++a) {
    plan_arena(method, method.arenas[a], a, members[a], lt, options.solve);
    check_region_capacity(method.arenas[a]);
  }
  if (options.hot_constants) copy_hot_constants(method, options.regions, options.alignment);
}

}  // namespace kiln::planner::memory
