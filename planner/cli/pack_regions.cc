#include "cli/pack_regions.h"

#include <algorithm>
#include <cctype>

#include "cli/args.h"
#include "core/error.h"

namespace kiln::planner::cli {
namespace {

// A region's name as part of a C name: letters and digits kept, the rest '_'.
std::string c_part(const std::string& s, bool upper) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(upper ? std::toupper(u) : c) : '_';
  }
  return out;
}

}  // namespace

std::vector<PackRegion> pack_regions(const Program& program, const std::string& array,
                                     const std::vector<std::string>& specs) {
  std::vector<PackRegion> regions;
  for (size_t m = 0; m < program.num_methods(); ++m) {
    const MethodMeta meta = program.method_meta(program.method_name(m).get()).get();
    for (size_t a = 0; a < meta.num_arenas(); ++a) {
      const ArenaInfo arena = meta.arena(a).get();
      if (arena.region == nullptr || arena.region[0] == '\0') continue;
      auto it =
          std::find_if(regions.begin(), regions.end(), [&](const PackRegion& r) { return r.name == arena.region; });
      if (it == regions.end()) {
        PackRegion region;
        region.name = arena.region;
        region.symbol = array + "_region_" + c_part(region.name, false);
        region.macro = c_part(array, true) + "_REGION_" + c_part(region.name, true);
        regions.push_back(region);
        it = regions.end() - 1;
      }
      it->size = std::max(it->size, arena.size);
      it->alignment = std::max(it->alignment, arena.alignment);
    }
  }
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw UsageError{"--section expects REGION=SECTION, got '" + spec + "'"};
    }
    const std::string name = spec.substr(0, eq);
    auto it = std::find_if(regions.begin(), regions.end(), [&](const PackRegion& r) { return r.name == name; });
    if (it == regions.end()) fail("--section ", spec, ": the program has no memory region '", name, "'");
    it->section = spec.substr(eq + 1);
  }
  return regions;
}

std::string region_header_text(const std::vector<PackRegion>& regions) {
  if (regions.empty()) return "";
  std::string out =
      "/* Memory regions (kiln plan --memory-region): one buffer each, defined in the\n"
      " * .c file, as large as the region's arena in any method; pass it as that\n"
      " * arena's span. */\n";
  for (const PackRegion& r : regions) {
    out += "#define " + r.macro + "_SIZE " + std::to_string(r.size) + "u\n";
    out += "#define " + r.macro + "_ALIGNMENT " + std::to_string(r.alignment) + "u\n";
    out += "extern uint8_t " + r.symbol + "[" + r.macro + "_SIZE > 0 ? " + r.macro + "_SIZE : 1]; /* region '" +
           r.name + "'" + (r.section.empty() ? "" : ", section " + r.section) + " */\n";
  }
  return out + "\n";
}

std::string region_source_text(const std::vector<PackRegion>& regions) {
  std::string out;
  for (const PackRegion& r : regions) {
    out += "\n/* memory region '" + r.name + "' */\n";
    if (!r.section.empty()) out += "__attribute__((section(\"" + r.section + "\")))\n";
    out += "_Alignas(" + std::to_string(r.alignment) + ") uint8_t " + r.symbol + "[" + r.macro + "_SIZE > 0 ? " +
           r.macro + "_SIZE : 1];\n";
  }
  return out;
}

}  // namespace kiln::planner::cli
