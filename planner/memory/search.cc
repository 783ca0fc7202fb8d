// Memory planning by search: solve() for kAuto and kSearch.
//
// The algorithm, per arena (a Problem):
//   1. Normalise (instance.h): sizes in units, time as sections (the sets of
//      buffers alive together), parts (section ranges no buffer crosses).
//      LB = the largest section total; no plan is smaller. Parts are
//      independent: the arena is the largest part's, and each part keeps
//      its own best plan.
//   2. Greedy by size: first fit, best fit, and first fit with ties broken
//      by longer lifetime; the best plan is the starting point, so the
//      result is never worse than greedy.
//   3. Skyline dives per part (step 6), one per buffer order, until the part
//      meets the target (the largest proven lower bound of any part).
//   4. Probes on the part that sets the arena, in rounds that alternate:
//      full rounds probe capacity C = the target and, if that search runs
//      out of nodes, bisect between the highest C that failed and the part's
//      arena with a quarter of the nodes; restarts probe the target alone
//      with a small budget and the children of the first two levels in a
//      seeded random order (tight searches are heavy-tailed: many short
//      tries often beat one long one). A plan found lowers the arena to its
//      own size; a search that exhausts its tree proves C infeasible and
//      raises that part's lower bound; one that runs out says nothing.
//      Every round uses the next buffer order and the next branching (5);
//      full rounds double their budget when all branchings had one. It
//      stops at the lower bound, or when time or nodes run out.
//   5. Feasibility at C: depth-first branch and bound, with one of two
//      ways to branch. Canonical placements (the scheme of MiniMalloc,
//      ASPLOS 2023, extended):
//        - canonical form: a buffer is only placed at its floor (the highest
//          end of the placed buffers it overlaps in time), in nondecreasing
//          (offset, rank) order, rank being the buffer order. Any plan can be
//          pushed down and sorted into that form;
//        - dominance: with y the unplaced buffer whose floor + size is
//          lowest, nothing is placed at or above that height (y would fit
//          below it);
//        - bounds: every later offset is >= the next one f, so f + the
//          unplaced units of any section <= C, which filters candidates
//          before they are tried; after a placement, in each section whose
//          floors rose, the unplaced buffers must fit above their lowest
//          floor, and those whose floor reached the new end above it;
//        - forced placements: a buffer with no unplaced neighbour, or one the
//          canonical order has passed whose unplaced neighbours all lie
//          above its end, goes to its floor at once (nothing can ever move
//          it), instead of dooming the subtree;
//        - decomposition: when no unplaced buffer crosses a section boundary
//          any more, the groups on either side are searched one after the
//          other, each from scratch; one infeasible group fails the node;
//        - transposition tables: states (unplaced buffers with their floors,
//          hashed incrementally) proven infeasible, and plans of groups
//          already solved, are not searched again.
//      Children are tried in (floor, rank) order: the search's first descent
//      is the skyline dive of step 6.
//      Cells (the bottom-left rule of exact strip packing, adapted): the
//      lowest point of the skyline, in one of the sections at the lowest
//      level, is covered by one of the buffers whose floor is that level,
//      or stays empty up to the next height any of the section's buffers
//      can start at (see expand_cell). Every plan pushed down is reached
//      once, so no canonical order is needed and a failed state fails
//      whatever path led to it; identical buffers are tried once. Which
//      section: the one with the fewest candidates, the rightmost, or the
//      leftmost (three branchings). On near-perfect packings this is the
//      stronger search (MiniMalloc's I at the bound in 0.03 s, where the
//      canonical search does not finish in minutes); on others the
//      canonical one is (G, H), so rounds rotate all four. The cell search
//      shares the bounds, the placement of buffers left without unplaced
//      neighbours, decomposition and the transposition tables.
//   6. Skyline dive: repeatedly place the unplaced buffer with the lowest
//      floor (ties by rank), without backtracking. Floors come from a
//      segment tree over sections; a heap keyed by possibly stale floors
//      holds the candidates (a popped entry whose floor rose goes back in
//      line).
//   7. Parts too large to search whole at once (over 4 million overlapping
//      pairs): the top of the part's plan is re-planned instead. The k
//      buffers that end highest are taken out, the rest stay (each below
//      the removed buffers it overlaps) and their ends become floors; the
//      top is dived again with every order and, when small enough, searched
//      as in 5 at the goal and three capacities up towards the arena, with
//      at least a descent's worth of nodes each. k doubles until the arena
//      goes down; then it starts over. Parts of up to 16 million pairs are
//      also searched whole, in turns: re-planning the top while it improves
//      the plan or for half of the time left, then the whole search for a
//      quarter of it, and again. Their probes are a descent or two (seconds
//      each on such parts, so the bisection of 4 would be spent near the
//      arena): each round takes the next buffer order and branching, probes
//      the goal, then capacities halfway between the highest that failed
//      and the arena, while they succeed.
//   8. Parts larger still, with many twins (buffers alive in the same
//      sections): groups of twins are bundled, each into one buffer with
//      its members stacked, those that remove the most pairs first, until
//      the part is within 16 million pairs; the bundled problem is planned
//      by 1-7 first, with the time left. Its plans are plans of the
//      original (the converse does not hold, hence only there): iopddl S_1
//      has 1,609 weights alive over the same span and 43 million pairs;
//      with them bundled, 14 million.
//
// One search thread, started by solve() with a stack of its own: the search
// recurses once per level (a placement or an empty cell), tens of thousands
// of levels deep on large parts. Deterministic for a given problem and
// options, unless the wall-clock limit stops the dives or the search.

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <numeric>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "memory/instance.h"
#include "memory/problem.h"

namespace kiln::planner::memory {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kUnplaced = UINT64_MAX;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The search recurses once per level: tens of thousands of levels on large
// parts, about 200 bytes each, more than a default 8 MiB stack holds (a
// search of somas bert_large went past 40,000 levels). solve() runs on a
// thread with a 1 GiB stack (address space: pages are committed only as
// the recursion touches them), and a search whose frames would reach below
// stack_floor gives up its probe instead of overflowing.
constexpr size_t kSolveStack = size_t{1} << 30;
constexpr size_t kStackMargin = size_t{8} << 20;
thread_local const char* stack_floor = nullptr;

// Static buffer orders (rank 0 first) for the search and the dives. Letters
// name the keys in order, all descending: T = largest section total the
// buffer lives in, W = lifetime width, A = area (size x width), Z = size.
constexpr const char* kPreorders[] = {"TWA", "WAT", "TAW", "AWT", "ZWT", "WZT"};
// The order dives try them in: the fastest and best on large traces first.
constexpr int kDiveOrder[] = {3, 0, 2, 4, 1, 5};
constexpr int kNumPreorders = sizeof(kPreorders) / sizeof(kPreorders[0]);

// A 64-bit mixing function (splitmix64's finaliser), for hashing.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// rank[i] for the part-local buffers i.
std::vector<int> make_rank(const Instance& in, const std::vector<int>& buffers, const char* keys) {
  const size_t m = buffers.size();
  std::vector<uint64_t> total(m, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t b = static_cast<size_t>(buffers[i]);
    for (int s = in.first[b]; s < in.last[b]; ++s) total[i] = std::max(total[i], in.section_total[static_cast<size_t>(s)]);
  }
  std::vector<int> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    const size_t a = static_cast<size_t>(buffers[static_cast<size_t>(x)]);
    const size_t b = static_cast<size_t>(buffers[static_cast<size_t>(y)]);
    for (const char* k = keys; *k != 0; ++k) {
      switch (*k) {
        case 'T':
          if (total[static_cast<size_t>(x)] != total[static_cast<size_t>(y)]) {
            return total[static_cast<size_t>(x)] > total[static_cast<size_t>(y)];
          }
          break;
        case 'W':
          if (in.width[a] != in.width[b]) return in.width[a] > in.width[b];
          break;
        case 'A': {
          const __int128 aa = static_cast<__int128>(in.size[a]) * in.width[a];
          const __int128 ab = static_cast<__int128>(in.size[b]) * in.width[b];
          if (aa != ab) return aa > ab;
          break;
        }
        case 'Z':
          if (in.size[a] != in.size[b]) return in.size[a] > in.size[b];
          break;
        default: break;
      }
    }
    return x < y;
  });
  std::vector<int> rank(m);
  for (size_t r = 0; r < m; ++r) rank[static_cast<size_t>(order[r])] = static_cast<int>(r);
  return rank;
}

// Segment tree over sections: raise a range to at least v, read a range
// max. Iterative: a raise tags the O(log n) nodes covering the range and
// lifts the maxima on the two leaf-to-root paths at its ends; a read takes
// the maxima of the covering nodes and the tags on those two paths.
class FloorTree {
 public:
  explicit FloorTree(int n) {
    while (leaves_ < static_cast<size_t>(std::max(n, 1))) leaves_ <<= 1;
    max_.assign(2 * leaves_, 0);
    tag_.assign(2 * leaves_, 0);
  }
  uint64_t max(int a, int b) const {
    uint64_t result = 0;
    size_t l = static_cast<size_t>(a) + leaves_, r = static_cast<size_t>(b) + leaves_;
    for (size_t p = l >> 1; p > 0; p >>= 1) result = std::max(result, tag_[p]);
    for (size_t p = (r - 1) >> 1; p > 0; p >>= 1) result = std::max(result, tag_[p]);
    for (; l < r; l >>= 1, r >>= 1) {
      if (l & 1) result = std::max(result, max_[l++]);
      if (r & 1) result = std::max(result, max_[--r]);
    }
    return result;
  }
  void raise(int a, int b, uint64_t v) {
    size_t l = static_cast<size_t>(a) + leaves_, r = static_cast<size_t>(b) + leaves_;
    for (size_t p = l >> 1; p > 0; p >>= 1) max_[p] = std::max(max_[p], v);
    for (size_t p = (r - 1) >> 1; p > 0; p >>= 1) max_[p] = std::max(max_[p], v);
    for (; l < r; l >>= 1, r >>= 1) {
      if (l & 1) {
        max_[l] = std::max(max_[l], v);
        tag_[l] = std::max(tag_[l], v);
        ++l;
      }
      if (r & 1) {
        --r;
        max_[r] = std::max(max_[r], v);
        tag_[r] = std::max(tag_[r], v);
      }
    }
  }

 private:
  size_t leaves_ = 1;
  std::vector<uint64_t> max_;  // max over the subtree, tags included
  std::vector<uint64_t> tag_;  // a raise of the whole subtree
};

// A set of buffers planned together: a part, or the top of a part's plan
// above buffers frozen below it, whose ends become per-buffer floors.
// Sections are numbered from first_section.
struct Subset {
  std::vector<int> buffers;       // instance indices
  int first_section = 0, last_section = 0;
  std::vector<uint64_t> floors;   // per buffer; empty: all 0
};

Subset whole(const Instance::Part& part) {
  Subset s;
  s.buffers = part.buffers;
  s.first_section = part.first_section;
  s.last_section = part.last_section;
  return s;
}

// Step 5: offsets (units) of the part-local buffers.
// Empty when `deadline` passes first.
std::vector<uint64_t> skyline_dive(const Instance& in, const Subset& part, const std::vector<int>& rank,
                                   Clock::time_point deadline) {
  const size_t m = part.buffers.size();
  const int base = part.first_section;
  FloorTree floors(part.last_section - part.first_section);
  auto floor_of = [&](size_t local, size_t b) {
    const uint64_t f = floors.max(in.first[b] - base, in.last[b] - base);
    return part.floors.empty() ? f : std::max(f, part.floors[local]);
  };
  struct Entry {
    uint64_t floor;
    int rank;
    int local;
    bool operator>(const Entry& o) const { return floor != o.floor ? floor > o.floor : rank > o.rank; }
  };
  std::vector<Entry> storage;
  storage.reserve(m);
  for (size_t i = 0; i < m; ++i) {
    storage.push_back({part.floors.empty() ? 0 : part.floors[i], rank[i], static_cast<int>(i)});
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>(), std::move(storage));
  std::vector<uint64_t> offsets(m, 0);
  for (uint64_t pops = 1; !heap.empty(); ++pops) {
    if ((pops & 0xffff) == 0 && Clock::now() >= deadline) return {};
    Entry e = heap.top();
    heap.pop();
    const size_t b = static_cast<size_t>(part.buffers[static_cast<size_t>(e.local)]);
    const uint64_t floor = floor_of(static_cast<size_t>(e.local), b);
    // Stale: its floor rose since it was pushed. Unless it still comes
    // first with its true floor, it goes back in line.
    if (floor != e.floor && !heap.empty() && Entry{floor, e.rank, e.local} > heap.top()) {
      e.floor = floor;
      heap.push(e);
      continue;
    }
    offsets[static_cast<size_t>(e.local)] = floor;
    floors.raise(in.first[b] - base, in.last[b] - base, floor + in.size[b]);
  }
  return offsets;
}

enum class Outcome { kFound, kInfeasible, kGaveUp };

// How the search branches (step 5). kCanonical places any candidate in
// (floor, rank) order; the cell strategies cover the lowest point of the
// skyline, choosing among the sections at the lowest level the one with the
// fewest candidates, the rightmost or the leftmost. Each is complete; which
// one finds a plan quickly depends on the instance, so solve() rotates them.
enum class Branching { kCellFewest, kCanonical, kCellRight, kCellLeft };
constexpr int kNumBranchings = 4;

// Shared budget of one solve(): time, nodes, progress reports.
struct Budget {
  Clock::time_point start;
  Clock::time_point deadline;
  uint64_t node_limit = 0;  // total over the solve (0: none)
  uint64_t nodes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t best_bytes = 0;
  const std::function<void(const Progress&)>* progress = nullptr;
  Clock::time_point last_report;

  bool exhausted() {
    const Clock::time_point now = Clock::now();
    if (progress != nullptr && *progress && now - last_report > std::chrono::milliseconds(500)) {
      last_report = now;
      (*progress)(Progress{best_bytes, lower_bound_bytes, std::chrono::duration<double>(now - start).count(), nodes});
    }
    return now >= deadline || (node_limit != 0 && nodes >= node_limit);
  }
};

// Overlapping pairs and (buffer, section) memberships of a part, counted
// without listing them, to decide whether a search fits in memory.
std::pair<uint64_t, uint64_t> search_size(const Instance& in, const Subset& part) {
  const size_t sections = static_cast<size_t>(part.last_section - part.first_section);
  std::vector<int64_t> alive(sections + 1, 0), born(sections, 0);
  uint64_t memberships = 0;
  for (int b : part.buffers) {
    const size_t i = static_cast<size_t>(b);
    alive[static_cast<size_t>(in.first[i] - part.first_section)] += 1;
    alive[static_cast<size_t>(in.last[i] - part.first_section)] -= 1;
    born[static_cast<size_t>(in.first[i] - part.first_section)] += 1;
    memberships += static_cast<uint64_t>(in.last[i] - in.first[i]);
  }
  // A pair is counted in the section where the later of the two is born.
  uint64_t pairs = 0;
  int64_t members = 0;
  for (size_t s = 0; s < sections; ++s) {
    members += alive[s];
    const int64_t k = born[s];
    pairs += static_cast<uint64_t>(k * (members - k) + k * (k - 1) / 2);
  }
  return {pairs, memberships};
}

// Step 4 on one part. Part-local buffer i is part.buffers[i]; sections are
// numbered from the part's first.
class PartSearch {
 public:
  PartSearch(const Instance& in, const Subset& part) : m_(part.buffers.size()), initial_floor_(part.floors) {
    if (initial_floor_.empty()) initial_floor_.assign(m_, 0);
    const int base = part.first_section;
    sections_ = part.last_section - part.first_section;
    size_.resize(m_);
    first_.resize(m_);
    last_.resize(m_);
    for (size_t i = 0; i < m_; ++i) {
      const size_t b = static_cast<size_t>(part.buffers[i]);
      size_[i] = in.size[b];
      first_[i] = in.first[b] - base;
      last_[i] = in.last[b] - base;
    }
    // Members of each section, and overlapping pairs (ranges intersect).
    std::vector<std::vector<int>> members(static_cast<size_t>(sections_));
    for (size_t i = 0; i < m_; ++i) {
      for (int s = first_[i]; s < last_[i]; ++s) members[static_cast<size_t>(s)].push_back(static_cast<int>(i));
    }
    member_begin_.push_back(0);
    for (const auto& list : members) {
      member_.insert(member_.end(), list.begin(), list.end());
      member_begin_.push_back(member_.size());
    }
    // Where each buffer sits in each of its sections' member lists.
    entry_begin_.push_back(0);
    for (size_t i = 0; i < m_; ++i) entry_begin_.push_back(entry_begin_.back() + static_cast<size_t>(last_[i] - first_[i]));
    member_position_total_.resize(entry_begin_.back());
    for (size_t s = 0; s < members.size(); ++s) {
      for (size_t k = 0; k < members[s].size(); ++k) {
        const size_t b = static_cast<size_t>(members[s][k]);
        member_position_total_[entry_begin_[b] + (s - static_cast<size_t>(first_[b]))] = k;
      }
    }
    std::vector<std::vector<int>> overlaps(m_);
    for (size_t s = 0; s < members.size(); ++s) {
      // A pair is listed in the first section both share, where the
      // later-born of the two starts.
      for (int i : members[s]) {
        if (first_[static_cast<size_t>(i)] != static_cast<int>(s)) continue;
        for (int j : members[s]) {
          if (j == i || (first_[static_cast<size_t>(j)] == static_cast<int>(s) && j < i)) continue;
          overlaps[static_cast<size_t>(i)].push_back(j);
          overlaps[static_cast<size_t>(j)].push_back(i);
        }
      }
    }
    overlap_begin_.push_back(0);
    for (const auto& list : overlaps) {
      overlap_.insert(overlap_.end(), list.begin(), list.end());
      overlap_begin_.push_back(overlap_.size());
    }
    // Twins: identical buffers (same sections, same size), grouped
    // together in twin_; each buffer knows its group's range.
    twin_.resize(m_);
    std::iota(twin_.begin(), twin_.end(), 0);
    auto twin_key = [&](int b) {
      const size_t i = static_cast<size_t>(b);
      return std::make_tuple(first_[i], last_[i], size_[i]);
    };
    std::stable_sort(twin_.begin(), twin_.end(), [&](int a, int b) { return twin_key(a) < twin_key(b); });
    twin_group_.resize(m_);
    for (size_t a = 0, b = 0; a < m_; a = b) {
      while (b < m_ && twin_key(twin_[b]) == twin_key(twin_[a])) ++b;
      for (size_t x = a; x < b; ++x) twin_group_[static_cast<size_t>(twin_[x])] = {a, b};
    }
    cell_count_.assign(static_cast<size_t>(sections_), 0);
    section_total_.assign(static_cast<size_t>(sections_), 0);
    cut_total_.assign(static_cast<size_t>(std::max(sections_, 1)), 0);
    for (size_t i = 0; i < m_; ++i) {
      for (int s = first_[i]; s < last_[i]; ++s) section_total_[static_cast<size_t>(s)] += size_[i];
      for (int s = first_[i]; s + 1 < last_[i]; ++s) ++cut_total_[static_cast<size_t>(s)];
    }
  }

  // Looks for offsets within `capacity` (units) with the given buffer order
  // and branching. kFound fills out_offsets.
  // A nonzero `shuffle` seeds the order of the children near the root.
  Outcome run(uint64_t capacity, const std::vector<int>& rank, Branching branching, uint64_t node_budget,
              Budget& budget, std::vector<uint64_t>& out_offsets, uint64_t shuffle = 0) {
    branching_ = branching;
    shuffle_seed_ = shuffle;
    capacity_ = capacity;
    rank_ = &rank;
    node_budget_ = node_budget;
    budget_ = &budget;
    offset_.assign(m_, kUnplaced);
    solution_.assign(m_, 0);
    floor_ = initial_floor_;
    degree_.resize(m_);
    for (size_t i = 0; i < m_; ++i) degree_[i] = static_cast<int>(overlap_begin_[i + 1] - overlap_begin_[i]);
    total_ = section_total_;
    cut_ = cut_total_;
    unplaced_member_ = member_;
    member_position_ = member_position_total_;
    member_count_.resize(static_cast<size_t>(sections_));
    for (size_t s = 0; s < static_cast<size_t>(sections_); ++s) member_count_[s] = member_begin_[s + 1] - member_begin_[s];
    position_.resize(m_);
    pool_.clear();
    floor_log_.clear();
    removed_.clear();
    isolated_.clear();
    gave_up_ = false;
    if (zobrist_.empty()) {
      for (size_t k = 0; k < 2 * m_; ++k) zobrist_.push_back(mix(k));
    }
    hash_ = mix(capacity);
    for (size_t i = 0; i < m_; ++i) {
      hash_ ^= floor_key(i, floor_[i]);
      if (floor_[i] + size_[i] > capacity) return Outcome::kInfeasible;
    }
    if (failures_.empty()) failures_.resize(kFailureSlots);
    if (++run_ == 0) {
      std::fill(failures_.begin(), failures_.end(), Failure{});
      run_ = 1;
    }
    solved_.clear();
    for (uint64_t t : total_) {
      if (t > capacity) return Outcome::kInfeasible;
    }
    Context root;
    root.unplaced.resize(m_);
    std::iota(root.unplaced.begin(), root.unplaced.end(), 0);
    root.buffers = root.unplaced;
    root.first_section = 0;
    root.last_section = sections_;
    std::iota(position_.begin(), position_.end(), 0);
    if (decompose(root, 0, -1, 0)) {
      out_offsets = solution_;
      return Outcome::kFound;
    }
    return gave_up_ ? Outcome::kGaveUp : Outcome::kInfeasible;
  }

 private:
  // A set of buffers searched together: the part, or a group that became
  // independent of the rest when no unplaced buffer crossed its edges.
  struct Context {
    std::vector<int> unplaced;  // position_[b] indexes this
    std::vector<int> buffers;   // all of them, placed or not
    int first_section = 0, last_section = 0;
    // hash_ ^ base: the hash of this context's unplaced buffers and floors.
    uint64_t base = 0;
    uint64_t room = 0;  // capacity - largest section total, when created
  };
  struct FloorChange {
    int buffer;
    uint64_t floor;
  };
  struct Removed {
    int buffer;
    size_t position;  // in its context's unplaced list
  };

  void save(const Context& cx) {
    for (int b : cx.buffers) {
      if (offset_[static_cast<size_t>(b)] != kUnplaced) solution_[static_cast<size_t>(b)] = offset_[static_cast<size_t>(b)];
    }
  }

  uint64_t context_key(const Context& cx) const {
    return hash_ ^ cx.base ^ mix(static_cast<uint64_t>(cx.first_section) << 32 | static_cast<uint32_t>(cx.last_section));
  }
  uint64_t floor_key(size_t b, uint64_t floor) const {
    uint64_t x = (floor + zobrist_[2 * b + 1]) * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return x * (zobrist_[2 * b] | 1);
  }

  // True when a plan of cx's unplaced buffers was found (saved in
  // solution_); false when there is none or the budget or the stack ran out
  // (gave_up_). Leaves the state as it found it either way.
  bool dfs(Context& cx, uint64_t last_offset, int last_rank, int level) {
    if (cx.unplaced.empty()) {
      save(cx);
      return true;
    }
    ++budget_->nodes;
    if (node_budget_ == 0 || ((budget_->nodes & 63) == 0 && budget_->exhausted()) ||
        static_cast<const char*>(__builtin_frame_address(0)) < stack_floor) {
      gave_up_ = true;
      return false;
    }
    --node_budget_;
    // A buffer the canonical order has passed (its floor is below the last
    // offset) can only be placed on top of a neighbour placed later. If no
    // unplaced neighbour reaches below its end, nothing will ever move it:
    // it goes to its floor now instead of dooming the subtree. (The cell
    // search has no such order.)
    const Mark entry = mark();
    bool split = false;
    const bool canonical = branching_ == Branching::kCanonical;
    for (size_t k = 0; canonical && k < cx.unplaced.size();) {
      const size_t y = static_cast<size_t>(cx.unplaced[k]);
      const uint64_t f = floor_[y];
      if (f > last_offset || (f == last_offset && (*rank_)[y] >= last_rank)) {
        ++k;
        continue;
      }
      bool free = true;
      for (size_t j = overlap_begin_[y]; j < overlap_begin_[y + 1] && free; ++j) {
        const size_t w = static_cast<size_t>(overlap_[j]);
        if (offset_[w] == kUnplaced && floor_[w] < f + size_[y]) free = false;
      }
      if (!free) {
        ++k;
        continue;
      }
      const size_t isolated_begin = isolated_.size();
      remove(cx, static_cast<int>(y), f, split);
      for (size_t j = isolated_begin; j < isolated_.size(); ++j) {
        const int v = isolated_[j];
        if (offset_[static_cast<size_t>(v)] == kUnplaced) remove(cx, v, floor_[static_cast<size_t>(v)], split);
      }
      isolated_.resize(isolated_begin);
      k = 0;  // the list changed
    }
    bool found;
    if (cx.unplaced.empty()) {
      save(cx);
      found = true;
    } else if (split) {
      found = decompose(cx, last_offset, last_rank, level);
    } else {
      found = expand(cx, last_offset, last_rank, level);
    }
    undo(cx, entry);
    return found;
  }

  // The children of a node: each candidate placed at its floor.
  bool expand(Context& cx, uint64_t last_offset, int last_rank, int level) {
    if (branching_ != Branching::kCanonical) return expand_cell(cx, level);
    const uint64_t key = context_key(cx);
    Failure& slot = failures_[key & (failures_.size() - 1)];
    if (slot.run == run_ && slot.key == key &&
        (slot.offset < last_offset || (slot.offset == last_offset && slot.rank <= last_rank))) {
      return false;
    }
    const std::vector<int>& rank = *rank_;
    uint64_t min_height = UINT64_MAX;
    for (int u : cx.unplaced) {
      min_height = std::min(min_height, floor_[static_cast<size_t>(u)] + size_[static_cast<size_t>(u)]);
    }
    // Every later placement is at or above the next offset f, so each
    // section's unplaced units must fit above it: f + total <= capacity
    // (for the sections of the buffer placed at f too: what remains there
    // goes above its end).
    uint64_t most = 0;
    for (int s = cx.first_section; s < cx.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
    const uint64_t highest = capacity_ - most;
    const size_t pool_begin = pool_.size();
    for (int u : cx.unplaced) {
      const size_t i = static_cast<size_t>(u);
      const uint64_t f = floor_[i];
      if (f >= min_height || f + size_[i] > capacity_) continue;
      if (f < last_offset || (f == last_offset && rank[i] < last_rank)) continue;
      if (f > highest) continue;
      pool_.push_back(u);
    }
    std::sort(pool_.begin() + static_cast<std::ptrdiff_t>(pool_begin), pool_.end(), [&](int a, int b) {
      const uint64_t fa = floor_[static_cast<size_t>(a)], fb = floor_[static_cast<size_t>(b)];
      return fa != fb ? fa < fb : rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
    });
    const size_t pool_end = pool_.size();
    shuffle(pool_begin, level);
    bool found = false;
    for (size_t k = pool_begin; k < pool_end && !found && !gave_up_; ++k) {
      const int u = pool_[k];
      const uint64_t offset = floor_[static_cast<size_t>(u)];
      const Mark mark = this->mark();
      bool split = false;
      if (place(cx, u, offset, split, level)) {
        found = split ? decompose(cx, offset, rank[static_cast<size_t>(u)], level + 1)
                      : dfs(cx, offset, rank[static_cast<size_t>(u)], level + 1);
      }
      undo(cx, mark);
    }
    pool_.resize(pool_begin);
    if (!found && !gave_up_) {
      Failure& f = failures_[key & (failures_.size() - 1)];
      if (f.run != run_ || f.key != key || last_offset < f.offset || (last_offset == f.offset && last_rank < f.rank)) {
        f = Failure{key, last_offset, last_rank, run_};
      }
    }
    return found;
  }

  // A restart takes the children of its first levels in a seeded random
  // order (Fisher-Yates).
  void shuffle(size_t pool_begin, int level) {
    const size_t pool_end = pool_.size();
    if (shuffle_seed_ == 0 || level >= kShuffleDepth || pool_end - pool_begin < 2) return;
    for (size_t k = pool_end - 1; k > pool_begin; --k) {
      const uint64_t r = mix(shuffle_seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(level) * 1000003 + k);
      std::swap(pool_[k], pool_[pool_begin + r % (k - pool_begin + 1)]);
    }
  }

  // The cell search's children. L, the lowest level of any section (the
  // lowest floor among its unplaced buffers), never goes down: every
  // unplaced buffer ends up at or above it. One section at level L is
  // chosen; the point (section, L) is either covered by one of its buffers
  // whose floor is L (one child per buffer, in rank order), or left empty:
  // then the section's buffers all start at `next` or above, where `next` is
  // the lowest height one of them can start at: its floor when above L,
  // else the lowest end of an unplaced neighbour outside the section (a
  // buffer that is not at its floor rests on another one). Every plan is
  // reached exactly once (it is pushed down first), so a state fails the
  // same way whatever path led to it.
  // Symmetry: of identical buffers (same sections, same size), only the
  // lowest-ranked unplaced one is tried (any plan can swap them).
  bool expand_cell(Context& cx, int level) {
    const uint64_t key = context_key(cx);
    Failure& slot = failures_[key & (failures_.size() - 1)];
    if (slot.run == run_ && slot.key == key) return false;
    // The sections at the lowest level are those of the buffers whose
    // floor is that level.
    uint64_t lowest = UINT64_MAX, most = 0;
    for (int u : cx.unplaced) lowest = std::min(lowest, floor_[static_cast<size_t>(u)]);
    for (int s = cx.first_section; s < cx.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
    if (lowest == UINT64_MAX || lowest + most > capacity_) return false;
    at_lowest_.clear();
    for (int u : cx.unplaced) {
      if (floor_[static_cast<size_t>(u)] == lowest) at_lowest_.push_back(u);
    }
    int at = branching_ == Branching::kCellRight ? -1 : INT32_MAX;
    for (int u : at_lowest_) {
      const size_t i = static_cast<size_t>(u);
      switch (branching_) {
        case Branching::kCellRight: at = std::max(at, last_[i] - 1); break;
        case Branching::kCellLeft: at = std::min(at, first_[i]); break;
        default:
          for (int t = first_[i]; t < last_[i]; ++t) ++cell_count_[static_cast<size_t>(t)];
          break;
      }
    }
    if (branching_ == Branching::kCellFewest) {
      // The one with the fewest buffers at that level (the leftmost of
      // those); the counts are cleared on the way.
      int fewest = INT32_MAX;
      for (int u : at_lowest_) {
        const size_t i = static_cast<size_t>(u);
        for (int t = first_[i]; t < last_[i]; ++t) {
          const int count = cell_count_[static_cast<size_t>(t)];
          if (count != 0 && (count < fewest || (count == fewest && t < at))) {
            fewest = count;
            at = t;
          }
        }
      }
      for (int u : at_lowest_) {
        const size_t i = static_cast<size_t>(u);
        for (int t = first_[i]; t < last_[i]; ++t) cell_count_[static_cast<size_t>(t)] = 0;
      }
    }
    const size_t cell = static_cast<size_t>(at);
    const std::vector<int>& rank = *rank_;
    const size_t pool_begin = pool_.size();
    const int* list = &unplaced_member_[member_begin_[cell]];
    uint64_t next = UINT64_MAX;
    for (size_t k = 0; k < member_count_[cell]; ++k) {
      const size_t v = static_cast<size_t>(list[k]);
      if (floor_[v] != lowest) {
        next = std::min(next, floor_[v]);
        continue;
      }
      for (size_t j = overlap_begin_[v]; j < overlap_begin_[v + 1]; ++j) {
        const size_t w = static_cast<size_t>(overlap_[j]);
        if (offset_[w] != kUnplaced || (first_[w] <= at && at < last_[w])) continue;
        next = std::min(next, floor_[w] + size_[w]);
      }
      if (lowest + size_[v] > capacity_) continue;
      bool symmetric = false;
      for (size_t j = twin_group_[v].first; j < twin_group_[v].second && !symmetric; ++j) {
        const size_t w = static_cast<size_t>(twin_[j]);
        symmetric = offset_[w] == kUnplaced && rank[w] < rank[v];
      }
      if (!symmetric) pool_.push_back(static_cast<int>(v));
    }
    std::sort(pool_.begin() + static_cast<std::ptrdiff_t>(pool_begin), pool_.end(),
              [&](int a, int b) { return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)]; });
    shuffle(pool_begin, level);
    const size_t pool_end = pool_.size();
    bool found = false;
    for (size_t k = pool_begin; k < pool_end && !found && !gave_up_; ++k) {
      const Mark mark = this->mark();
      bool split = false;
      if (place(cx, pool_[k], lowest, split, level)) {
        found = split ? decompose(cx, 0, -1, level + 1) : dfs(cx, 0, -1, level + 1);
      }
      undo(cx, mark);
    }
    pool_.resize(pool_begin);
    if (!found && !gave_up_ && next != UINT64_MAX && next + total_[cell] <= capacity_) {
      const Mark mark = this->mark();
      if (raise_section(cell, next)) found = dfs(cx, 0, -1, level + 1);
      undo(cx, mark);
    }
    if (!found && !gave_up_) slot = Failure{key, 0, -1, run_};
    return found;
  }

  // The cell search's empty cell: the unplaced buffers of section s get
  // floors of at least `height`. False when a bound shows that nothing
  // completes the plan.
  bool raise_section(size_t s, uint64_t height) {
    int lo = static_cast<int>(s), hi = lo + 1;
    const int* list = &unplaced_member_[member_begin_[s]];
    for (size_t k = 0; k < member_count_[s]; ++k) {
      const size_t v = static_cast<size_t>(list[k]);
      if (floor_[v] < height && !raise_floor(v, height, lo, hi)) return false;
    }
    return sections_fit(lo, hi, height);
  }

  // No unplaced buffer crosses some boundary inside cx any more: search the
  // groups between such boundaries one after the other. They share no
  // section, so each is complete on its own, from offset 0 (no canonical
  // order between them), and one infeasible group makes cx infeasible.
  bool decompose(Context& cx, uint64_t last_offset, int last_rank, int level) {
    std::vector<Context> groups;
    int start = cx.first_section;
    for (int s = cx.first_section; s < cx.last_section; ++s) {
      if (s + 1 == cx.last_section || cut_[static_cast<size_t>(s)] == 0) {
        Context g;
        g.first_section = start;
        g.last_section = s + 1;
        groups.push_back(std::move(g));
        start = s + 1;
      }
    }
    if (groups.size() == 1) return dfs(cx, last_offset, last_rank, level);
    for (int b : cx.unplaced) {
      const int s = first_[static_cast<size_t>(b)];
      auto it = std::upper_bound(groups.begin(), groups.end(), s,
                                 [](int x, const Context& g) { return x < g.first_section; });
      (it - 1)->unplaced.push_back(b);
    }
    size_t nonempty = 0;
    for (const Context& g : groups) nonempty += g.unplaced.empty() ? 0 : 1;
    if (nonempty <= 1) return dfs(cx, last_offset, last_rank, level);
    // Tightest group first: the one most likely to fail ends the search
    // of this node soonest.
    for (Context& g : groups) {
      uint64_t most = 0;
      for (int s = g.first_section; s < g.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
      g.room = capacity_ - most;
    }
    std::stable_sort(groups.begin(), groups.end(), [](const Context& a, const Context& b) { return a.room < b.room; });
    bool found = true;
    for (Context& g : groups) {
      if (g.unplaced.empty()) continue;
      g.buffers = g.unplaced;
      uint64_t own = 0;
      for (size_t k = 0; k < g.unplaced.size(); ++k) {
        const size_t b = static_cast<size_t>(g.unplaced[k]);
        position_[b] = k;
        own ^= floor_key(b, floor_[b]);
      }
      g.base = hash_ ^ own;
      // A group met before in the same state: reuse its plan.
      const uint64_t key = context_key(g);
      auto known = solved_.find(key);
      if (known != solved_.end()) {
        for (const auto& [b, offset] : known->second) solution_[static_cast<size_t>(b)] = offset;
        continue;
      }
      found = dfs(g, 0, -1, level);
      if (!found) break;
      if (solved_.size() < kMaxSolvedGroups) {
        std::vector<std::pair<int, uint64_t>>& plan = solved_[key];
        for (int b : g.buffers) plan.emplace_back(b, solution_[static_cast<size_t>(b)]);
      }
    }
    for (size_t k = 0; k < cx.unplaced.size(); ++k) position_[static_cast<size_t>(cx.unplaced[k])] = k;
    if (found) save(cx);
    return found;
  }

  // How far the logs went before a placement, to undo it.
  struct Mark {
    size_t floors, removed;
  };
  Mark mark() const { return {floor_log_.size(), removed_.size()}; }

  // Places u at offset, and with it every buffer left without unplaced
  // neighbours (its floor is final and nothing else can move it, so it
  // goes there now, in any order). False when a bound shows that nothing
  // completes the plan. Sets split when a boundary inside cx lost its last
  // crossing buffer.
  bool place(Context& cx, int u, uint64_t offset, bool& split, int level) {
    const size_t i = static_cast<size_t>(u);
    const uint64_t top = offset + size_[i];
    const size_t isolated_begin = isolated_.size();
    remove(cx, u, offset, split);
    // Raise the floors of overlapping unplaced buffers, all to `top`.
    bool ok = true;
    int lo = first_[i], hi = last_[i];
    for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
      const size_t v = static_cast<size_t>(overlap_[k]);
      if (offset_[v] == kUnplaced && floor_[v] < top) ok &= raise_floor(v, top, lo, hi);
    }
    for (size_t k = isolated_begin; k < isolated_.size(); ++k) {
      const int v = isolated_[k];
      if (offset_[static_cast<size_t>(v)] == kUnplaced) remove(cx, v, floor_[static_cast<size_t>(v)], split);
    }
    isolated_.resize(isolated_begin);
    return ok && sections_fit(lo, hi, top);
  }

  // Raises v's floor to `height` (logged for undo) and widens [lo, hi) to
  // its sections. False when v no longer fits under the capacity.
  bool raise_floor(size_t v, uint64_t height, int& lo, int& hi) {
    floor_log_.push_back({static_cast<int>(v), floor_[v]});
    hash_ ^= floor_key(v, floor_[v]) ^ floor_key(v, height);
    floor_[v] = height;
    lo = std::min(lo, first_[v]);
    hi = std::max(hi, last_[v]);
    return height + size_[v] <= capacity_;
  }

  // Sections [lo, hi), whose buffers' floors rose to `height`. The unplaced
  // buffers with floor >= t must fit in [t, capacity) for every t; the
  // thresholds that can newly fail are those up to `height`, and only where
  // height + total exceeds the capacity. Two are checked: the lowest floor
  // (all of them) and `height`.
  bool sections_fit(int lo, int hi, uint64_t height) const {
    for (int s = lo; s < hi; ++s) {
      const size_t si = static_cast<size_t>(s);
      if (height + total_[si] > capacity_ && !section_fits(si, height)) return false;
    }
    return true;
  }

  // Takes u out of the unplaced sets at `offset` (no floors change).
  void remove(Context& cx, int u, uint64_t offset, bool& split) {
    const size_t i = static_cast<size_t>(u);
    offset_[i] = offset;
    hash_ ^= floor_key(i, floor_[i]);
    const size_t p = position_[i];
    const int moved = cx.unplaced.back();
    cx.unplaced[p] = moved;
    position_[static_cast<size_t>(moved)] = p;
    cx.unplaced.pop_back();
    removed_.push_back({u, p});
    for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
      const size_t v = static_cast<size_t>(overlap_[k]);
      if (offset_[v] == kUnplaced && --degree_[v] == 0) isolated_.push_back(static_cast<int>(v));
    }
    for (int s = first_[i]; s < last_[i]; ++s) {
      const size_t si = static_cast<size_t>(s);
      total_[si] -= size_[i];
      // Swap u behind the section's unplaced members; its own position
      // stays recorded for restore().
      int* list = &unplaced_member_[member_begin_[si]];
      const size_t j = member_position_[entry(i, s)];
      const size_t last = --member_count_[si];
      const int other = list[last];
      list[j] = other;
      list[last] = u;
      member_position_[entry(static_cast<size_t>(other), s)] = j;
    }
    for (int s = first_[i]; s + 1 < last_[i]; ++s) {
      if (--cut_[static_cast<size_t>(s)] == 0 && s >= cx.first_section && s + 1 < cx.last_section) split = true;
    }
  }

  void restore(Context& cx, int u, size_t p) {
    const size_t i = static_cast<size_t>(u);
    for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
      const size_t v = static_cast<size_t>(overlap_[k]);
      if (offset_[v] == kUnplaced) ++degree_[v];
    }
    for (int s = first_[i]; s + 1 < last_[i]; ++s) ++cut_[static_cast<size_t>(s)];
    for (int s = last_[i] - 1; s >= first_[i]; --s) {
      const size_t si = static_cast<size_t>(s);
      total_[si] += size_[i];
      int* list = &unplaced_member_[member_begin_[si]];
      const size_t j = member_position_[entry(i, s)];
      const size_t last = member_count_[si]++;
      const int other = list[j];
      list[j] = u;
      list[last] = other;
      member_position_[entry(static_cast<size_t>(other), s)] = last;
    }
    if (p == cx.unplaced.size()) {
      cx.unplaced.push_back(u);
    } else {
      const int moved = cx.unplaced[p];
      cx.unplaced.push_back(moved);
      position_[static_cast<size_t>(moved)] = cx.unplaced.size() - 1;
      cx.unplaced[p] = u;
    }
    position_[i] = p;
    offset_[i] = kUnplaced;
    hash_ ^= floor_key(i, floor_[i]);
  }

  // Undoes everything since `mark`: the placement and the buffers placed
  // with it, newest first.
  void undo(Context& cx, const Mark& mark) {
    while (floor_log_.size() > mark.floors) {
      const size_t v = static_cast<size_t>(floor_log_.back().buffer);
      hash_ ^= floor_key(v, floor_[v]) ^ floor_key(v, floor_log_.back().floor);
      floor_[v] = floor_log_.back().floor;
      floor_log_.pop_back();
    }
    while (removed_.size() > mark.removed) {
      const Removed r = removed_.back();
      removed_.pop_back();
      restore(cx, r.buffer, r.position);
    }
  }

  // The unplaced buffers of section s are stacked above their lowest
  // floor, and those whose floor reached `top` above `top`.
  bool section_fits(size_t s, uint64_t top) const {
    uint64_t lowest = UINT64_MAX, above_top = 0;
    const int* list = &unplaced_member_[member_begin_[s]];
    for (size_t k = 0; k < member_count_[s]; ++k) {
      const size_t v = static_cast<size_t>(list[k]);
      lowest = std::min(lowest, floor_[v]);
      if (floor_[v] >= top) above_top += size_[v];
    }
    return lowest + total_[s] <= capacity_ && top + above_top <= capacity_;
  }

  size_t entry(size_t buffer, int section) const {
    return entry_begin_[buffer] + static_cast<size_t>(section - first_[buffer]);
  }

  // A node proven to have no completion: its state's hash and the
  // weakest canonical bound (offset, rank) it was searched under.
  struct Failure {
    uint64_t key = 0;
    uint64_t offset = 0;
    int rank = 0;
    uint32_t run = 0;  // entries of earlier runs (other capacity or order) are void
  };
  static constexpr size_t kFailureSlots = size_t{1} << 18;
  static constexpr size_t kMaxSolvedGroups = 100000;

  // Levels whose children a restart shuffles: deep enough to change the
  // early decisions, shallow enough to keep the heuristic's order below.
  static constexpr int kShuffleDepth = 2;

  size_t m_;
  std::vector<uint64_t> initial_floor_;
  int sections_ = 0;
  std::vector<uint64_t> size_;
  std::vector<int> first_, last_;
  std::vector<size_t> overlap_begin_;
  std::vector<int> overlap_;
  std::vector<size_t> member_begin_;
  std::vector<int> member_;                     // per section, its buffers
  std::vector<size_t> entry_begin_;             // per buffer, into member_position_
  std::vector<size_t> member_position_total_;
  std::vector<uint64_t> section_total_;
  std::vector<int> cut_total_;  // buffers crossing boundary s | s+1
  std::vector<int> twin_;  // buffers, identical ones next to each other
  std::vector<std::pair<size_t, size_t>> twin_group_;  // per buffer: its twins' range in twin_ (itself included)
  // Scratch of expand_cell, used up before it recurses: the buffers at the
  // lowest level, and per section a count (all 0 between uses).
  std::vector<int> at_lowest_;
  std::vector<int> cell_count_;

  uint64_t capacity_ = 0;
  Branching branching_ = Branching::kCanonical;
  uint64_t shuffle_seed_ = 0;
  const std::vector<int>* rank_ = nullptr;
  uint64_t node_budget_ = 0;
  Budget* budget_ = nullptr;
  bool gave_up_ = false;
  std::vector<uint64_t> offset_;
  std::vector<uint64_t> solution_;
  std::vector<uint64_t> floor_;          // per buffer: highest end of placed overlapping buffers
  std::vector<int> degree_;              // per buffer: unplaced overlapping buffers
  std::vector<uint64_t> total_;          // per section: unplaced units
  std::vector<int> cut_;                 // per boundary: unplaced buffers crossing it
  std::vector<size_t> position_;
  std::vector<int> pool_;
  std::vector<FloorChange> floor_log_;
  std::vector<Removed> removed_;
  std::vector<int> isolated_;
  std::vector<int> unplaced_member_;     // member_ reordered: unplaced first in each section
  std::vector<size_t> member_count_;     // per section: unplaced members
  std::vector<size_t> member_position_;  // per (buffer, section): index in unplaced_member_
  // Transposition tables: the state of a context is the set of its
  // unplaced buffers with their floors, hashed incrementally (Zobrist).
  // A 64-bit collision could wrongly prune; at 2^-64 per lookup that is
  // accepted.
  std::vector<uint64_t> zobrist_;
  uint64_t hash_ = 0;
  std::vector<Failure> failures_;
  uint32_t run_ = 0;
  std::unordered_map<uint64_t, std::vector<std::pair<int, uint64_t>>> solved_;  // group plans
};

// Best fit walks every gap below its choice: skipped by solve() above this
// many buffers (still available on its own).
constexpr size_t kMaxBestFit = 20'000;

// Parts larger than this (overlapping pairs, memberships) have the top of
// their plan re-planned (step 7) instead of being searched whole: the
// search keeps both as lists, and its nodes get slow. Up to the second
// pair limit (about 0.5 GB of lists) the part is searched whole once
// re-planning the top gives up: somas pangu_2.6B (12 million pairs) meets
// its bound that way, which re-planning its top alone does not.
constexpr uint64_t kMaxSearchPairs = 4'000'000;
constexpr uint64_t kMaxLateSearchPairs = 16'000'000;
constexpr uint64_t kMaxSearchMemberships = 20'000'000;
// Buffer orders x branchings, before large parts' probe budgets double.
constexpr int kNumLargeCombos = std::lcm(kNumPreorders, kNumBranchings);

}  // namespace

namespace {

// Twins are buffers alive in exactly the same sections. Bundling them (each
// group one buffer, its members stacked in instance order) gives a smaller
// problem whose plans are plans of this one; the reverse does not hold, so
// bundles only serve parts too large to be searched as they are, and only
// as many groups are bundled as it takes to bring the part within
// kMaxLateSearchPairs by an estimate, those that remove the most pairs
// first (or every group: `every_group`).
struct Bundles {
  Problem problem;             // sizes in the instance's units, time in sections
  std::vector<int> group;      // per instance buffer: its buffer in `problem`
  std::vector<uint64_t> skip;  // per instance buffer: units below it in its group
};

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
      memberships -= std::min(memberships, (group.members->size() - 1) * static_cast<uint64_t>(in.last[first] - in.first[first]));
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

// kAuto and kSearch on `in`, the instance of `problem`; runs on the thread
// solve() starts.
Solution solve_search(const Problem& problem, const Instance& in, const SolveOptions& options,
                      Clock::time_point start) {
  // Greedy plans: first fit; best fit (its gap walk is slow on very large
  // traces); and first fit with ties in size broken by longer lifetime
  // first, which often packs long-lived buffers better.
  std::vector<uint64_t> greedy = greedy_offsets(in, false);
  const uint64_t ff_arena = arena_units(in, greedy);
  uint64_t bf_arena = 0;
  const char* greedy_name = "first-fit";
  if (in.count() <= kMaxBestFit) {
    std::vector<uint64_t> best_fit = greedy_offsets(in, true);
    bf_arena = arena_units(in, best_fit);
    if (bf_arena < ff_arena) {
      greedy = std::move(best_fit);
      greedy_name = "best-fit";
    }
  }
  {
    std::vector<int> order(in.count());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
      if (in.bytes[x] != in.bytes[y]) return in.bytes[x] > in.bytes[y];
      return in.width[x] > in.width[y];
    });
    std::vector<uint64_t> long_first = first_fit_in_order(in, order);
    if (arena_units(in, long_first) < arena_units(in, greedy)) {
      greedy = std::move(long_first);
      greedy_name = "first-fit";
    }
  }

  Budget budget;
  budget.start = start;
  budget.last_report = start;
  budget.deadline = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(std::max(0.0, options.time_limit_s)));
  budget.node_limit = options.node_limit;
  budget.lower_bound_bytes = in.lower_bound() * in.unit;
  budget.progress = &options.progress;

  // Per part: its plan (part-local order), arena, proven lower bound, and
  // whether the search improved it.
  struct PartState {
    std::vector<uint64_t> offsets;
    uint64_t arena = 0;
    uint64_t lower = 0;
    bool searched = false;
    bool too_large = false;     // its top is re-planned (step 7)
    bool search_later = false;  // and it is searched whole in turns
    bool sized = false;
    uint64_t pairs = 0, memberships = 0;  // search_size() of the part
    int rounds = 0;
    uint64_t failed = 0;  // step 7's ladder: the highest capacity that failed
    bool replanning = false;        // step 7's phase
    Clock::time_point phase_until;  // and its end
    int replan_rounds = 0;
    std::unique_ptr<PartSearch> search;
    std::vector<std::vector<int>> ranks;
  };
  const size_t num_parts = in.parts.size();
  std::vector<PartState> parts(num_parts);
  for (size_t p = 0; p < num_parts; ++p) {
    const Instance::Part& part = in.parts[p];
    parts[p].lower = part.lower_bound;
    std::tie(parts[p].pairs, parts[p].memberships) = search_size(in, whole(part));
    for (int b : part.buffers) {
      const uint64_t o = greedy[static_cast<size_t>(b)];
      parts[p].offsets.push_back(o);
      parts[p].arena = std::max(parts[p].arena, o + in.size[static_cast<size_t>(b)]);
    }
  }
  auto arena = [&] {
    uint64_t a = 0;
    for (const PartState& ps : parts) a = std::max(a, ps.arena);
    return a;
  };
  auto target = [&] {
    uint64_t t = 0;
    for (const PartState& ps : parts) t = std::max(t, ps.lower);
    return t;
  };
  auto accept = [&](size_t p, std::vector<uint64_t> local) {
    uint64_t top = 0;
    for (size_t i = 0; i < local.size(); ++i) {
      top = std::max(top, local[i] + in.size[static_cast<size_t>(in.parts[p].buffers[i])]);
    }
    if (top < parts[p].arena) {
      parts[p].arena = top;
      parts[p].offsets = std::move(local);
      parts[p].searched = true;
      budget.best_bytes = arena() * in.unit;
    }
  };
  budget.best_bytes = arena() * in.unit;

  // Step 8: parts too large to be searched whole even late are planned
  // with their twins bundled first, when that makes them small enough;
  // each part keeps the better of that plan and greedy's, and goes on with
  // 2-7 if time is left.
  {
    std::vector<bool> bundled(num_parts, false);
    bool any = false;
    for (size_t p = 0; p < num_parts; ++p) {
      bundled[p] = parts[p].pairs > kMaxLateSearchPairs || parts[p].memberships > kMaxSearchMemberships;
      any = any || bundled[p];
    }
    // Few groups first; every group if that estimate fell short (bundled
    // groups that overlap each other save fewer pairs than their sum).
    Bundles bundles;
    Instance inner;
    bool smaller = false;
    for (int every = 0; every < 2 && any && !smaller; ++every) {
      bundles = bundle_twins(in, bundled, every == 1);
      inner = make_instance(bundles.problem);
      smaller = true;
      for (const Instance::Part& part : inner.parts) {
        const auto [pairs, memberships] = search_size(inner, whole(part));
        smaller = smaller && pairs <= kMaxLateSearchPairs && memberships <= kMaxSearchMemberships;
      }
    }
    if (smaller && !budget.exhausted()) {
      SolveOptions nested = options;
      nested.time_limit_s = std::chrono::duration<double>(budget.deadline - Clock::now()).count();
      const uint64_t outer_best = budget.best_bytes, unit = in.unit;
      const double outer_elapsed = seconds_since(start);
      if (options.progress) {
        nested.progress = [&options, outer_best, unit, outer_elapsed](const Progress& inner_progress) {
          Progress p = inner_progress;
          p.best = std::min(outer_best, p.best * unit);
          p.lower_bound *= unit;
          p.elapsed_s += outer_elapsed;
          options.progress(p);
        };
      }
      const Solution plan = solve_search(bundles.problem, inner, nested, Clock::now());
      budget.nodes += plan.nodes;
      for (size_t p = 0; p < num_parts; ++p) {
        std::vector<uint64_t> local;
        for (int b : in.parts[p].buffers) {
          const size_t i = static_cast<size_t>(b);
          local.push_back(plan.offsets[static_cast<size_t>(bundles.group[i])] + bundles.skip[i]);
        }
        accept(p, std::move(local));
      }
    }
  }

  // Step 2: skyline dives, on the parts above the target. The first dive
  // of each part runs whatever the time limit.
  for (size_t p = 0; p < num_parts; ++p) {
    for (int k = 0; k < kNumPreorders && parts[p].arena > target(); ++k) {
      if (k > 0 && budget.exhausted()) break;
      const int h = kDiveOrder[k];
      std::vector<uint64_t> dive = skyline_dive(in, whole(in.parts[p]), make_rank(in, in.parts[p].buffers, kPreorders[h]),
                                                k == 0 ? Clock::time_point::max() : budget.deadline);
      if (!dive.empty()) accept(p, std::move(dive));
    }
  }

  auto branching_of = [&](int k) {
    const int only = options.branching;
    return static_cast<Branching>(only >= 0 && only < kNumBranchings ? only : k % kNumBranchings);
  };

  // Step 3: probe capacities on the part that sets the arena.
  enum class Probe { kFound, kInfeasible, kGaveUp };
  // Round k of a kind uses buffer order k and branching k (cycling).
  auto probe = [&](size_t p, uint64_t capacity, uint64_t nodes, int k, uint64_t shuffle = 0) {
    PartState& ps = parts[p];
    std::vector<uint64_t> found;
    const Branching branching = branching_of(k);
    switch (ps.search->run(capacity, ps.ranks[static_cast<size_t>(k % kNumPreorders)], branching, nodes, budget,
                           found, shuffle)) {
      case Outcome::kFound: accept(p, std::move(found)); return Probe::kFound;
      case Outcome::kInfeasible: ps.lower = std::max(ps.lower, capacity + 1); return Probe::kInfeasible;
      case Outcome::kGaveUp: break;
    }
    return Probe::kGaveUp;
  };
  // Node budgets: enough for a few descents of the part at least.
  constexpr uint64_t kFirstBudget = 1000;
  constexpr uint64_t kRestartBudget = 1000;

  // A share of the time left, from now.
  auto window = [&](int share) { return Clock::now() + (budget.deadline - Clock::now()) / share; };

  // Step 7: re-plan the top of a large part's plan. True when the part's
  // arena went down.
  auto replan_top = [&](size_t p, int attempt, Clock::time_point until) {
    auto stop = [&] { return budget.exhausted() || Clock::now() >= until; };
    PartState& ps = parts[p];
    const Instance::Part& part = in.parts[p];
    const size_t m = part.buffers.size();
    std::vector<uint64_t> top(m);
    for (size_t i = 0; i < m; ++i) top[i] = ps.offsets[i] + in.size[static_cast<size_t>(part.buffers[i])];
    std::vector<size_t> by_top(m);
    std::iota(by_top.begin(), by_top.end(), 0);
    std::stable_sort(by_top.begin(), by_top.end(), [&](size_t a, size_t b) { return top[a] > top[b]; });
    for (size_t k = 64; !stop(); k *= 2) {
      k = std::min(k, m);
      const uint64_t frozen_top = k < m ? top[by_top[k]] : 0;
      std::vector<size_t> local;
      Subset sub;
      sub.first_section = part.last_section;
      sub.last_section = part.first_section;
      for (size_t i = 0; i < m; ++i) {
        if (top[i] <= frozen_top) continue;
        const size_t b = static_cast<size_t>(part.buffers[i]);
        local.push_back(i);
        sub.buffers.push_back(static_cast<int>(b));
        sub.first_section = std::min(sub.first_section, in.first[b]);
        sub.last_section = std::max(sub.last_section, in.last[b]);
      }
      if (sub.buffers.empty()) continue;  // more than k buffers share the top end
      FloorTree frozen(part.last_section - part.first_section);
      for (size_t i = 0; i < m; ++i) {
        if (top[i] > frozen_top) continue;
        const size_t b = static_cast<size_t>(part.buffers[i]);
        frozen.raise(in.first[b] - part.first_section, in.last[b] - part.first_section, top[i]);
      }
      for (int b : sub.buffers) {
        const size_t bi = static_cast<size_t>(b);
        sub.floors.push_back(frozen.max(in.first[bi] - part.first_section, in.last[bi] - part.first_section));
      }
      auto try_top = [&](const std::vector<uint64_t>& offsets) {
        std::vector<uint64_t> plan = ps.offsets;
        for (size_t j = 0; j < local.size(); ++j) plan[local[j]] = offsets[j];
        const uint64_t before = ps.arena;
        accept(p, std::move(plan));
        return ps.arena < before;
      };
      for (int h : kDiveOrder) {
        std::vector<uint64_t> dive = skyline_dive(in, sub, make_rank(in, sub.buffers, kPreorders[h]), budget.deadline);
        if (!dive.empty() && try_top(dive)) return true;
        if (stop()) return false;
      }
      const auto [pairs, memberships] = search_size(in, sub);
      if (pairs <= kMaxSearchPairs && memberships <= kMaxSearchMemberships) {
        PartSearch search(in, sub);
        const std::vector<int> rank = make_rank(in, sub.buffers, kPreorders[attempt % kNumPreorders]);
        // At least a descent's worth of nodes (a probe with fewer never
        // places the whole subset).
        const uint64_t nodes = std::max<uint64_t>(kFirstBudget << std::min(attempt, 20), 2 * sub.buffers.size());
        // The goal first, then halfway up to the arena, and halfway again,
        // four capacities in all (closer to the arena a probe gains little).
        const uint64_t goal = target();
        for (uint64_t c = goal; c < ps.arena && (ps.arena - c) * 16 > ps.arena - goal && !stop();
             c += (ps.arena - c + 1) / 2) {
          std::vector<uint64_t> found;
          const Branching branching = branching_of(attempt);
          if (search.run(c, rank, branching, nodes, budget, found) == Outcome::kFound && try_top(found)) return true;
        }
      }
      if (k == m) break;
    }
    return false;
  };

  while (!budget.exhausted()) {
    size_t p = 0;
    for (size_t q = 1; q < num_parts; ++q) {
      if (parts[q].arena > parts[p].arena) p = q;
    }
    const uint64_t goal = target();
    if (num_parts == 0 || parts[p].arena <= goal) break;
    PartState& ps = parts[p];
    if (!ps.sized) {
      ps.sized = true;
      if (ps.pairs > kMaxSearchPairs || ps.memberships > kMaxSearchMemberships) {
        ps.too_large = true;
        ps.search_later = ps.pairs <= kMaxLateSearchPairs && ps.memberships <= kMaxSearchMemberships;
        ps.replanning = true;
        ps.phase_until = window(2);
      }
    }
    if (ps.too_large && !ps.search_later) {
      if (replan_top(p, ps.replan_rounds++, budget.deadline)) continue;
      break;
    }
    if (ps.search_later) {
      // Turns (step 7): re-planning the top while it improves the plan or
      // for half of the time left, then the whole search for a quarter of
      // the time left, and again.
      if (ps.replanning) {
        if (replan_top(p, ps.replan_rounds++, ps.phase_until)) {
          ps.phase_until = window(2);
          continue;
        }
        if (budget.exhausted()) break;
        ps.replanning = false;
        ps.phase_until = window(4);
      } else if (Clock::now() >= ps.phase_until) {
        ps.replanning = true;
        ps.phase_until = window(2);
        continue;
      }
    }
    if (!ps.search) {
      ps.search = std::make_unique<PartSearch>(in, whole(in.parts[p]));
      for (int h = 0; h < kNumPreorders; ++h) ps.ranks.push_back(make_rank(in, in.parts[p].buffers, kPreorders[h]));
    }
    // Odd rounds are restarts: the goal alone, with a small fixed budget
    // and the first levels shuffled (searches at a tight capacity are
    // heavy-tailed: many short tries beat one long one). Even rounds: the
    // goal with the round's budget, then, if that fails, bisection between
    // the highest capacity that failed and the arena with a quarter of it;
    // those budgets double after every branching had one.
    const int round = ps.rounds++;
    const uint64_t descent = 2 * in.parts[p].buffers.size();
    if (ps.search_later) {
      // Large parts (step 7): a probe is one or two descents, seconds each,
      // so rounds only differ in order and branching; each probes the goal,
      // then climbs a ladder: halfway between the highest capacity that
      // failed and the arena (the plan found tends to lie just below the
      // capacity), repeated while it finds plans. A failure moves the next
      // round's rung up, to within 1/64 of the arena, then back to the goal.
      const uint64_t nodes = descent << std::min(round / kNumLargeCombos, 30);
      if (probe(p, goal, nodes, round) != Probe::kGaveUp) continue;
      if (ps.failed < goal || ps.failed + 1 >= ps.arena || (ps.arena - ps.failed) * 64 < ps.arena - goal) {
        ps.failed = goal;
      }
      while (ps.arena > ps.failed + 1 && !budget.exhausted()) {
        const uint64_t c = ps.failed + (ps.arena - ps.failed) / 2;
        if (probe(p, c, nodes, round) != Probe::kFound) {
          ps.failed = c;
          break;
        }
      }
      continue;
    }
    if (round % 2 == 1) {
      probe(p, goal, std::max(kRestartBudget, descent), round / 2, static_cast<uint64_t>(round));
      continue;
    }
    const int full = round / 2;
    const uint64_t nodes = std::max(kFirstBudget, descent) << std::min(full / kNumBranchings, 30);
    const Probe r = probe(p, goal, nodes, full);
    if (r != Probe::kGaveUp) continue;
    uint64_t failed = goal;
    while (ps.arena > failed + 1 && !budget.exhausted()) {
      const uint64_t c = failed + (ps.arena - failed) / 2;
      if (probe(p, c, std::max(kFirstBudget, nodes / 4), full) != Probe::kFound) failed = c;
    }
  }

  // Assemble the parts.
  std::vector<uint64_t> result(in.count(), 0);
  bool searched = false;
  const uint64_t final_arena = arena();
  for (size_t p = 0; p < num_parts; ++p) {
    for (size_t i = 0; i < in.parts[p].buffers.size(); ++i) {
      result[static_cast<size_t>(in.parts[p].buffers[i])] = parts[p].offsets[i];
    }
    if (parts[p].searched && parts[p].arena == final_arena) searched = true;
  }
  Solution s = to_solution(problem, in, result, searched ? "search" : greedy_name);
  s.optimal = final_arena <= target();
  s.lower_bound = in.lower_bound() * in.unit;
  s.first_fit = ff_arena * in.unit;
  s.best_fit = bf_arena * in.unit;
  s.nodes = budget.nodes;
  s.parts = static_cast<int>(num_parts);
  s.seconds = seconds_since(start);
  return s;
}

struct SolveJob {
  const Problem* problem;
  const SolveOptions* options;
  Clock::time_point start;
  Solution result;
  std::exception_ptr error;
};

void run_job(SolveJob& job, const char* floor) {
  stack_floor = floor;
  try {
    job.result = solve_search(*job.problem, make_instance(*job.problem), *job.options, job.start);
  } catch (...) {
    job.error = std::current_exception();
  }
  stack_floor = nullptr;
}

extern "C" void* solve_thread(void* arg) {
  run_job(*static_cast<SolveJob*>(arg),
          static_cast<const char*>(__builtin_frame_address(0)) - (kSolveStack - kStackMargin));
  return nullptr;
}

}  // namespace

Solution solve(const Problem& problem, const SolveOptions& options) {
  SolveJob job{&problem, &options, Clock::now(), {}, nullptr};
  switch (options.algorithm) {
    case Algorithm::kNaive: return solve_naive(problem);
    case Algorithm::kGreedyFirstFit: return solve_greedy(problem, false);
    case Algorithm::kGreedyBestFit: return solve_greedy(problem, true);
    case Algorithm::kSearch:
    case Algorithm::kAuto: break;
  }
  pthread_attr_t attr;
  pthread_t thread;
  bool started = pthread_attr_init(&attr) == 0;
  if (started) {
    started = pthread_attr_setstacksize(&attr, kSolveStack) == 0 && pthread_create(&thread, &attr, solve_thread, &job) == 0;
    pthread_attr_destroy(&attr);
  }
  if (started) {
    pthread_join(thread, nullptr);
  } else {
    // No thread to be had (address space or thread limits): search on this
    // one, within half of what its stack limit allows.
    rlimit limit{};
    size_t room = size_t{8} << 20;
    if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) room = limit.rlim_cur;
    room = std::min(room, kSolveStack);
    run_job(job, static_cast<const char*>(__builtin_frame_address(0)) - room / 2);
  }
  if (job.error) std::rethrow_exception(job.error);
  return std::move(job.result);
}

}  // namespace kiln::planner::memory
