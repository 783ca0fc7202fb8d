#include "memory/instance.h"

#include <algorithm>
#include <numeric>

namespace kiln::planner::memory {

uint64_t Instance::lower_bound() const {
  uint64_t lb = 0;
  for (uint64_t t : section_total) lb = std::max(lb, t);
  return lb;
}

Instance make_instance(const Problem& problem) {
  Instance in;
  const uint64_t align = std::max<uint64_t>(1, problem.alignment);
  std::vector<int64_t>& begin = in.begin;
  std::vector<int64_t> end;
  uint64_t gcd = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.size == 0) continue;
    in.original.push_back(static_cast<int>(i));
    const uint64_t units = (b.size + align - 1) / align;
    in.size.push_back(units);
    in.bytes.push_back(b.size);
    gcd = std::gcd(gcd, units);
    begin.push_back(b.begin);
    // An empty lifetime still needs bytes while it is written: one moment.
    end.push_back(b.end > b.begin ? b.end : b.begin + 1);
    in.width.push_back(end.back() - begin.back());
  }
  if (gcd == 0) gcd = 1;
  in.unit = align * gcd;
  for (uint64_t& s : in.size) s /= gcd;

  // Sweep begin/end events in time order, deaths before births at the same
  // moment (half-open lifetimes). A section is recorded at a death when a
  // birth happened since the last one: the set alive then is maximal.
  const size_t n = in.size.size();
  struct Event {
    int64_t time;
    int kind;  // 0 death, 1 birth
    int buffer;
  };
  std::vector<Event> events;
  events.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    events.push_back({begin[i], 1, static_cast<int>(i)});
    events.push_back({end[i], 0, static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.buffer < b.buffer;
  });
  in.first.assign(n, 0);
  in.last.assign(n, 0);
  bool born_since_record = false;
  int64_t last_birth = 0;
  uint64_t live = 0;
  for (const Event& e : events) {
    const size_t b = static_cast<size_t>(e.buffer);
    if (e.kind == 1) {
      in.first[b] = in.num_sections;
      live += in.size[b];
      born_since_record = true;
      last_birth = e.time;
    } else {
      if (born_since_record) {
        in.section_total.push_back(live);
        in.section_moment.push_back(last_birth);
        ++in.num_sections;
        born_since_record = false;
      }
      in.last[b] = in.num_sections;
      live -= in.size[b];
    }
  }

  // Parts: cut between sections s and s+1 when no buffer spans both.
  std::vector<int> crossing(static_cast<size_t>(std::max(in.num_sections, 1)), 0);
  for (size_t i = 0; i < n; ++i) {
    // The buffer crosses the boundaries first..last-2 (s | s+1).
    if (in.last[i] - in.first[i] >= 2) {
      crossing[static_cast<size_t>(in.first[i])] += 1;
      crossing[static_cast<size_t>(in.last[i] - 1)] -= 1;
    }
  }
  std::vector<int> part_of_section(static_cast<size_t>(in.num_sections), 0);
  int running = 0;
  for (int s = 0; s < in.num_sections; ++s) {
    if (s == 0 || running == 0) {
      Instance::Part p;
      p.first_section = s;
      in.parts.push_back(p);
    }
    Instance::Part& p = in.parts.back();
    p.last_section = s + 1;
    p.lower_bound = std::max(p.lower_bound, in.section_total[static_cast<size_t>(s)]);
    part_of_section[static_cast<size_t>(s)] = static_cast<int>(in.parts.size()) - 1;
    running += crossing[static_cast<size_t>(s)];
  }
  for (size_t i = 0; i < n; ++i) {
    in.parts[static_cast<size_t>(part_of_section[static_cast<size_t>(in.first[i])])].buffers.push_back(
        static_cast<int>(i));
  }
  return in;
}

uint64_t arena_units(const Instance& instance, const std::vector<uint64_t>& unit_offsets) {
  uint64_t top = 0;
  for (size_t i = 0; i < instance.count(); ++i) top = std::max(top, unit_offsets[i] + instance.size[i]);
  return top;
}

Solution to_solution(const Problem& problem, const Instance& instance, const std::vector<uint64_t>& unit_offsets,
                     const char* algorithm) {
  Solution s;
  s.algorithm = algorithm;
  s.offsets.assign(problem.buffers.size(), 0);
  for (size_t i = 0; i < instance.count(); ++i) {
    s.offsets[static_cast<size_t>(instance.original[i])] = unit_offsets[i] * instance.unit;
  }
  s.arena_size = arena_units(instance, unit_offsets) * instance.unit;
  return s;
}

}  // namespace kiln::planner::memory
