#include "cli/region_options.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "core/file_util.h"

namespace kiln::planner::cli {
namespace {

// "64K" -> 65536; K, M and G are powers of 1024 (KiB, MiB, GiB too).
uint64_t parse_size(const std::string& text, const std::string& spec) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0) {
    throw UsageError{"--memory-region '" + spec + "': size '" + text + "' is not bytes, or a number with K, M or G"};
  }
  const uint64_t size = std::stoull(text.substr(0, digits)) << shift;
  if (size == 0) throw UsageError{"--memory-region '" + spec + "': a region of 0 bytes"};
  return size;
}

memory::RegionSpeed parse_speed(const std::string& text, const std::string& spec) {
  if (text == "fast") return memory::RegionSpeed::kFast;
  if (text.empty() || text == "normal") return memory::RegionSpeed::kNormal;
  if (text == "slow") return memory::RegionSpeed::kSlow;
  throw UsageError{"--memory-region '" + spec + "': speed '" + text + "' is not fast, normal or slow"};
}

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

// The regions of a file: one a line, NAME:SIZE[:SPEED] or NAME SIZE [SPEED].
std::vector<memory::MemoryRegion> read_regions_file(const std::string& path) {
  std::vector<memory::MemoryRegion> regions;
  std::istringstream text(read_file(path));
  std::string line;
  while (std::getline(text, line)) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word, spec;
    while (words >> word) spec += (spec.empty() ? "" : ":") + word;
    if (!spec.empty()) regions.push_back(parse_memory_region(spec));
  }
  if (regions.empty()) throw UsageError{"--memory-regions " + path + ": no region in the file"};
  return regions;
}

constexpr const char* kHelp =
    "  --memory-region NAME:SIZE[:SPEED]\n"
    "                             a memory region of the host (repeatable; SIZE in bytes or with K, M,\n"
    "                             G; SPEED fast, normal (default) or slow): each region is an arena of\n"
    "                             its own, within its size, and the planner puts the tensors read and\n"
    "                             written most per byte in the fastest (tcm:64K:fast, psram:8M:slow)\n"
    "  --memory-regions FILE      the same, one region a line (NAME:SIZE[:SPEED] or NAME SIZE [SPEED])\n"
    "  --hot-constants            copy the constants read most per byte into the room the fast\n"
    "                             regions have left, once at load (weights out of flash into TCM)\n";

}  // namespace

const char* region_options_help() { return kHelp; }

memory::MemoryRegion parse_memory_region(const std::string& spec) {
  const size_t first = spec.find(':');
  if (first == std::string::npos) throw UsageError{"--memory-region expects NAME:SIZE[:SPEED], got '" + spec + "'"};
  const size_t second = spec.find(':', first + 1);
  memory::MemoryRegion region;
  region.name = spec.substr(0, first);
  if (!valid_name(region.name)) {
    throw UsageError{"--memory-region '" + spec + "': the name must be letters, digits, '_', '-' or '.'"};
  }
  const std::string size = spec.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  region.capacity = parse_size(size, spec);
  region.speed = parse_speed(second == std::string::npos ? "" : spec.substr(second + 1), spec);
  return region;
}

std::vector<memory::MemoryRegion> parse_region_options(const Args& args) {
  std::vector<memory::MemoryRegion> regions;
  for (const std::string& spec : args.all("--memory-region")) regions.push_back(parse_memory_region(spec));
  for (const std::string& path : args.all("--memory-regions")) {
    for (memory::MemoryRegion& region : read_regions_file(path)) regions.push_back(std::move(region));
  }
  std::set<std::string> names;
  for (const memory::MemoryRegion& region : regions) {
    if (!names.insert(region.name).second) throw UsageError{"memory region '" + region.name + "' is named twice"};
  }
  return regions;
}

void print_regions(const LMethod& method) {
  uint64_t total = 0, slowest = 0;
  int slowest_speed = -1;
  for (const LArena& arena : method.arenas) {
    if (arena.region.empty()) continue;
    total += arena.traffic;
    slowest_speed = std::max(slowest_speed, arena.speed);
  }
  if (slowest_speed < 0) return;
  for (size_t a = 0; a < method.arenas.size(); ++a) {
    const LArena& arena = method.arenas[a];
    if (arena.region.empty()) continue;
    if (arena.speed == slowest_speed) slowest += arena.traffic;
    std::printf("  region '%s' (%s, %s bytes): arena %zu, %s bytes planned (lower bound %s), traffic %s bytes a run\n",
                arena.region.c_str(), memory::region_speed_name(static_cast<memory::RegionSpeed>(arena.speed)),
                group_digits(arena.capacity).c_str(), a, group_digits(arena.size).c_str(),
                group_digits(arena.lower_bound).c_str(), group_digits(arena.traffic).c_str());
  }
  for (const LArena& arena : method.arenas) {
    if (arena.hot_constants == 0) continue;
    std::printf("  hot consts:  %d constants (%s bytes) copied into '%s' at load: %s bytes of reads a run there\n",
                arena.hot_constants, group_digits(arena.hot_constant_bytes).c_str(), arena.region.c_str(),
                group_digits(arena.hot_constant_reads).c_str());
  }
  std::printf("  traffic:     %s bytes a run in the %s regions, against %s with every tensor there (%.1f%%)\n",
              group_digits(slowest).c_str(), memory::region_speed_name(static_cast<memory::RegionSpeed>(slowest_speed)),
              group_digits(total).c_str(),
              total > 0 ? 100.0 * static_cast<double>(slowest) / static_cast<double>(total) : 0.0);
}

}  // namespace kiln::planner::cli
