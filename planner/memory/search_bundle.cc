// Bundling twins (step 8 of search.cc), for parts too large to be searched
// whole even in turns (over kMaxLateSearchPairs overlapping pairs).
//
// Twins are buffers alive in exactly the same sections. Bundling a group of
// them makes one buffer with its members stacked in instance order:
//
//   twins: alive in the same         one bundled buffer; each twin
//   sections (here s3 to s5)         lies `skip` units above its base
//     t1 [s3 ...... s5)             +-----------+
//     t2 [s3 ...... s5)     ==>     |    t3     |
//     t3 [s3 ...... s5)             +-----------+  skip(t3) = t1 + t2
//                                   |    t2     |
//                                   +-----------+  skip(t2) = t1
//                                   |    t1     |
//                                   +-----------+  skip(t1) = 0
//
// The bundled problem is smaller, and its plans are plans of this one; the
// reverse does not hold (a plan may want the twins apart), so bundles only
// serve parts too large to be searched as they are, and only as many groups
// are bundled as it takes to bring a part within kMaxLateSearchPairs by an
// estimate, those that remove the most pairs first. The bundled problem is
// planned by steps 1-7 with the time left; each part keeps the better of
// that plan and greedy's, and goes on with steps 3-7 if time is left.

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "memory/search_internal.h"

namespace kiln::planner::memory::search {

Bundles bundle_twins(const Instance& in, const std::vector<bool>& part_bundled, bool every_group) {
  Bundles b;
  b.group.assign(in.count(), -1);
  b.skip.assign(in.count(), 0);
  std::vector<int> leader(in.count());  // the group member the others join
  std::iota(leader.begin(), leader.end(), 0);
  for (size_t p = 0; p < in.parts.size(); ++p) {
    if (!part_bundled[p]) continue;
    const Instance::Part& part = in.parts[p];
    std::unordered_map<uint64_t, std::vector<int>> by_sections;
    std::vector<int> firsts, lasts;
    for (int x : part.buffers) {
      const size_t i = static_cast<size_t>(x);
      by_sections[static_cast<uint64_t>(in.first[i]) << 32 | static_cast<uint32_t>(in.last[i])].push_back(x);
      firsts.push_back(in.first[i]);
      lasts.push_back(in.last[i]);
    }
    std::sort(firsts.begin(), firsts.end());
    std::sort(lasts.begin(), lasts.end());
    // Pairs a group takes away when bundled: its extra members' pairs with
    // the buffers they overlap, and among themselves.
    struct Group {
      uint64_t saved;
      const std::vector<int>* members;
    };
    std::vector<Group> groups;
    for (const auto& [key, members] : by_sections) {
      if (members.size() < 2) continue;
      const size_t i = static_cast<size_t>(members[0]);
      const uint64_t overlapping =
          part.buffers.size() -
          static_cast<uint64_t>(std::upper_bound(lasts.begin(), lasts.end(), in.first[i]) - lasts.begin()) -
          static_cast<uint64_t>(firsts.end() - std::lower_bound(firsts.begin(), firsts.end(), in.last[i]));
      const uint64_t g = members.size();
      groups.push_back({(g - 1) * (overlapping - g) + g * (g - 1) / 2, &members});
    }
    std::sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) {
      return x.saved != y.saved ? x.saved > y.saved : (*x.members)[0] < (*y.members)[0];
    });
    auto [pairs, memberships] = search_size(in, whole(part));
    for (const Group& group : groups) {
      if (!every_group && pairs <= kMaxLateSearchPairs && memberships <= kMaxSearchMemberships) break;
      const size_t first = static_cast<size_t>(*std::min_element(group.members->begin(), group.members->end()));
      for (int x : *group.members) leader[static_cast<size_t>(x)] = static_cast<int>(first);
      pairs -= std::min(pairs, group.saved);
      memberships -=
          std::min(memberships, (group.members->size() - 1) * static_cast<uint64_t>(in.last[first] - in.first[first]));
    }
  }
  for (size_t i = 0; i < in.count(); ++i) {
    const size_t l = static_cast<size_t>(leader[i]);
    if (l != i) {
      Buffer& bundle = b.problem.buffers[static_cast<size_t>(b.group[l])];
      b.skip[i] = bundle.size;
      bundle.size += in.size[i];
      b.group[i] = b.group[l];
      continue;
    }
    b.group[i] = static_cast<int>(b.problem.buffers.size());
    b.problem.buffers.push_back(Buffer{in.first[i], in.last[i], in.size[i]});
  }
  return b;
}

// Step 8: plans the parts too large to be searched whole even late with
// their twins bundled, when that makes them small enough. Few groups first;
// every group if that estimate fell short (bundled groups that overlap each
// other save fewer pairs than their sum).
void Solver::plan_bundled() {
  std::vector<bool> bundled(num_parts_, false);
  bool any = false;
  for (size_t p = 0; p < num_parts_; ++p) {
    bundled[p] = parts_[p].pairs > kMaxLateSearchPairs || parts_[p].memberships > kMaxSearchMemberships;
    any = any || bundled[p];
  }
  Bundles bundles;
  Instance inner;
  bool smaller = false;
  for (int every = 0; every < 2 && any && !smaller; ++every) {
    bundles = bundle_twins(in_, bundled, every == 1);
    inner = make_instance(bundles.problem);
    smaller = true;
    for (const Instance::Part& part : inner.parts) {
      const auto [pairs, memberships] = search_size(inner, whole(part));
      smaller = smaller && pairs <= kMaxLateSearchPairs && memberships <= kMaxSearchMemberships;
    }
  }
  if (!smaller || budget_.exhausted()) return;
  SolveOptions nested = options_;
  nested.time_limit_s = std::chrono::duration<double>(budget_.deadline - Clock::now()).count();
  const uint64_t outer_best = budget_.best_bytes, unit = in_.unit;
  const double outer_elapsed = seconds_since(start_);
  if (options_.progress) {
    nested.progress = [&options = options_, outer_best, unit, outer_elapsed](const Progress& inner_progress) {
      Progress p = inner_progress;
      p.best = std::min(outer_best, p.best * unit);
      p.lower_bound *= unit;
      p.elapsed_s += outer_elapsed;
      options.progress(p);
    };
  }
  const Solution plan = solve_search(bundles.problem, inner, nested, Clock::now());
  budget_.nodes += plan.nodes;
  for (size_t p = 0; p < num_parts_; ++p) {
    std::vector<uint64_t> local;
    for (int b : in_.parts[p].buffers) {
      const size_t i = static_cast<size_t>(b);
      local.push_back(plan.offsets[static_cast<size_t>(bundles.group[i])] + bundles.skip[i]);
    }
    accept(p, std::move(local));
  }
}

}  // namespace kiln::planner::memory::search
