#include "memory/regions.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "memory/method_plan.h"

namespace kiln::planner::memory {
namespace {

uint64_t aligned(uint64_t bytes, uint32_t alignment) {
  const uint64_t a = alignment == 0 ? 1 : alignment;
  return (bytes + a - 1) / a * a;
}

// One region being filled: the tensors taken and the bytes live at each
// instruction.
class RegionFill {
 public:
  RegionFill(const LMethod& method, const Lifetimes& lifetimes, uint32_t alignment, Algorithm algorithm)
      : method_(method), lifetimes_(lifetimes), alignment_(alignment), algorithm_(algorithm) {}

  // Takes what fits of `order` (tensors, most valuable first) into a
  // region of `capacity` bytes; returns the tensors taken, in order taken.
  std::vector<int> fill(const std::vector<int>& order, uint64_t capacity) {
    const size_t steps = std::max<size_t>(1, method_.instructions.size());
    std::vector<uint64_t> live(steps, 0);
    std::vector<int> taken;
    for (int t : order) {
      const uint64_t size = aligned(method_.tensors[static_cast<size_t>(t)].nbytes(), alignment_);
      const auto [begin, end] = span(t);
      uint64_t most = 0;
      for (size_t i = begin; i < end; ++i) most = std::max(most, live[i]);
      if (most + size > capacity) continue;
      for (size_t i = begin; i < end; ++i) live[i] += size;
      taken.push_back(t);
    }
    // The lower bound fits; fragmentation may not.
    while (!taken.empty() && planned_size(taken) > capacity) taken.pop_back();
    return taken;
  }

 private:
  // The instructions [begin, end) a tensor is live over.
  std::pair<size_t, size_t> span(int t) const {
    const int first = lifetimes_.first[static_cast<size_t>(t)];
    const int last = lifetimes_.last[static_cast<size_t>(t)];
    const size_t begin = first >= 0 ? static_cast<size_t>(first) : 0;
    const size_t end = (last >= 0 ? static_cast<size_t>(last) : 0) + 1;
    return {begin, std::min(end, std::max<size_t>(1, method_.instructions.size()))};
  }

  uint64_t planned_size(const std::vector<int>& tensors) const {
    Problem problem;
    problem.alignment = alignment_;
    for (int t : tensors) {
      const auto [begin, end] = span(t);
      problem.buffers.push_back(
          {static_cast<int64_t>(begin), static_cast<int64_t>(end), method_.tensors[static_cast<size_t>(t)].nbytes()});
    }
    SolveOptions options;
    options.algorithm = algorithm_;
    return solve(problem, options).arena_size;
  }

  const LMethod& method_;
  const Lifetimes& lifetimes_;
  uint32_t alignment_;
  Algorithm algorithm_;
};

}  // namespace

const char* region_speed_name(RegionSpeed speed) {
  switch (speed) {
    case RegionSpeed::kFast: return "fast";
    case RegionSpeed::kNormal: return "normal";
    case RegionSpeed::kSlow: return "slow";
  }
  return "normal";
}

bool region_candidate(const LTensor& t) {
  return t.has_memory() && t.device.type() == fb::DeviceType::CPU && !t.persistent && t.symmetric_group < 0;
}

std::vector<uint64_t> tensor_traffic(const LMethod& method) {
  std::vector<uint64_t> traffic(method.tensors.size(), 0);
  for (const LInstruction& ins : method.instructions) {
    for (const auto* list : {&ins.inputs, &ins.outputs, &ins.scratch}) {
      for (int t : *list) {
        if (t >= 0) traffic[static_cast<size_t>(method.root(t))] += method.tensors[static_cast<size_t>(t)].nbytes();
      }
    }
  }
  return traffic;
}

std::vector<int> assign_regions(const LMethod& method, const Lifetimes& lifetimes,
                                const std::vector<MemoryRegion>& regions, uint32_t alignment, Algorithm algorithm) {
  std::vector<int> region_of(method.tensors.size(), -1);
  if (regions.empty()) return region_of;
  const std::vector<uint64_t> traffic = tensor_traffic(method);
  auto length = [&](int t) { return lifetimes.last[static_cast<size_t>(t)] - lifetimes.first[static_cast<size_t>(t)]; };
  std::vector<int> left;
  for (size_t t = 0; t < method.tensors.size(); ++t) {
    if (region_candidate(method.tensors[t])) left.push_back(static_cast<int>(t));
  }
  // Most traffic per byte first: a cross-multiplied comparison, exact.
  std::stable_sort(left.begin(), left.end(), [&](int a, int b) {
    const unsigned __int128 ta = traffic[static_cast<size_t>(a)], tb = traffic[static_cast<size_t>(b)];
    const uint64_t sa = std::max<uint64_t>(1, method.tensors[static_cast<size_t>(a)].nbytes());
    const uint64_t sb = std::max<uint64_t>(1, method.tensors[static_cast<size_t>(b)].nbytes());
    if (ta * sb != tb * sa) return ta * sb > tb * sa;
    if (length(a) != length(b)) return length(a) < length(b);
    return sa < sb;
  });
  std::vector<size_t> order(regions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return regions[a].speed < regions[b].speed; });
  // The fill plans by a greedy algorithm the final plan is never worse than.
  const Algorithm trial =
      algorithm == Algorithm::kAuto || algorithm == Algorithm::kSearch ? Algorithm::kGreedyFirstFit : algorithm;
  RegionFill fill(method, lifetimes, alignment, trial);
  for (size_t k = 0; k + 1 < order.size() && !left.empty(); ++k) {
    const std::vector<int> taken = fill.fill(left, regions[order[k]].capacity);
    for (int t : taken) region_of[static_cast<size_t>(t)] = static_cast<int>(order[k]);
    left.erase(std::remove_if(left.begin(), left.end(), [&](int t) { return region_of[static_cast<size_t>(t)] >= 0; }),
               left.end());
  }
  for (int t : left) region_of[static_cast<size_t>(t)] = static_cast<int>(order.back());
  return region_of;
}

void check_region_capacity(const LArena& arena) {
  if (arena.region.empty() || arena.size <= arena.capacity) return;
  fail("memory region '", arena.region, "' overflows: its plan needs ", arena.size, " bytes (lower bound ",
       arena.lower_bound, "), the region holds ", arena.capacity, ": ", arena.size - arena.capacity,
       " bytes over; give it more, or add a region");
}

void copy_hot_constants(LMethod& method, const std::vector<MemoryRegion>& regions, uint32_t alignment) {
  // Readers of each CPU constant: kernel inputs on the CPU.
  std::vector<int> readers(method.tensors.size(), 0);
  for (const LInstruction& ins : method.instructions) {
    if (ins.kind != LInstruction::Kind::kKernel || ins.device.type() != fb::DeviceType::CPU) continue;
    for (int t : ins.inputs) {
      if (t >= 0) ++readers[static_cast<size_t>(t)];
    }
  }
  std::vector<int> candidates;
  for (size_t t = 0; t < method.tensors.size(); ++t) {
    const LTensor& c = method.tensors[t];
    if (c.storage == Storage::kConstant && c.device.type() == fb::DeviceType::CPU && readers[t] > 0 && c.nbytes() > 0) {
      candidates.push_back(static_cast<int>(t));
    }
  }
  // Reads per byte are the readers' count: most readers first, then smaller.
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    if (readers[static_cast<size_t>(a)] != readers[static_cast<size_t>(b)]) {
      return readers[static_cast<size_t>(a)] > readers[static_cast<size_t>(b)];
    }
    return method.tensors[static_cast<size_t>(a)].nbytes() < method.tensors[static_cast<size_t>(b)].nbytes();
  });
  std::vector<int> copy_of(method.tensors.size(), -1);
  for (size_t r = 0; r < regions.size() && r < method.arenas.size(); ++r) {
    if (regions[r].speed != RegionSpeed::kFast) continue;
    LArena& arena = method.arenas[r];
    for (int c : candidates) {
      if (copy_of[static_cast<size_t>(c)] >= 0) continue;
      const uint64_t bytes = method.tensors[static_cast<size_t>(c)].nbytes();
      const uint64_t offset = (arena.size + alignment - 1) / alignment * alignment;
      if (offset + bytes > arena.capacity) continue;
      LTensor copy = method.tensors[static_cast<size_t>(c)];
      copy.name += "/in_" + regions[r].name;
      copy.storage = Storage::kPlanned;
      copy.constant = -1;
      copy.persistent = true;
      copy.arena = static_cast<int>(r);
      copy.region = static_cast<int>(r);
      copy.offset = offset;
      copy_of[static_cast<size_t>(c)] = method.add_tensor(std::move(copy));
      arena.size = offset + bytes;
      ++arena.hot_constants;
      arena.hot_constant_bytes += bytes;
      arena.hot_constant_reads += bytes * static_cast<uint64_t>(readers[static_cast<size_t>(c)]);
      arena.traffic += bytes * static_cast<uint64_t>(readers[static_cast<size_t>(c)]);
      LInstruction load;
      load.kind = LInstruction::Kind::kCopy;
      load.inputs = {c};
      load.outputs = {copy_of[static_cast<size_t>(c)]};
      load.name = method.tensors[static_cast<size_t>(c)].name + " to " + regions[r].name;
      method.init_instructions.push_back(std::move(load));
    }
  }
  for (LInstruction& ins : method.instructions) {
    if (ins.kind != LInstruction::Kind::kKernel || ins.device.type() != fb::DeviceType::CPU) continue;
    for (int& t : ins.inputs) {
      if (t >= 0 && copy_of[static_cast<size_t>(t)] >= 0) t = copy_of[static_cast<size_t>(t)];
    }
  }
}

}  // namespace kiln::planner::memory
