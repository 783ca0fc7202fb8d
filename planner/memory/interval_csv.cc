#include "memory/interval_csv.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"

namespace kiln::planner::memory {
namespace {

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> fields;
  size_t pos = 0;
  for (;;) {
    const size_t comma = line.find(',', pos);
    std::string f = line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!f.empty() && std::isspace(static_cast<unsigned char>(f.back()))) f.pop_back();
    size_t lead = 0;
    while (lead < f.size() && std::isspace(static_cast<unsigned char>(f[lead]))) ++lead;
    fields.push_back(f.substr(lead));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return fields;
}

template <typename T>
T parse_number(const std::string& field, const std::string& what, const std::string& where) {
  T value{};
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (field.empty() || ec != std::errc() || ptr != end) fail(where, ": ", what, " '", field, "' is not a valid number");
  return value;
}

}  // namespace

IntervalFile parse_interval_csv(const std::string& text, const std::string& name, LifetimeConvention lifetimes) {
  IntervalFile file;
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  bool header = false;
  size_t columns = 0;
  std::vector<uint64_t> offsets;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::vector<std::string> fields = split_row(line);
    const std::string where = str(name, ":", line_no);
    if (!header) {
      header = true;
      columns = fields.size();
      if (columns != 4 && columns != 5) {
        fail(where, ": expected a header 'id,begin,end,size' (and optionally ',offset'), got '", line, "'");
      }
      std::string names;
      for (const auto& f : fields) {
        std::string lower = f;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        names += lower + ",";
      }
      const bool says_inclusive = names.find("incl") != std::string::npos || names.find("last") != std::string::npos ||
                                  names.find("first") != std::string::npos;
      file.inclusive =
          lifetimes == LifetimeConvention::kInclusive || (lifetimes == LifetimeConvention::kDetect && says_inclusive);
      continue;
    }
    if (fields.size() != columns) fail(where, ": expected ", columns, " fields, got ", fields.size());
    Buffer b;
    b.begin = parse_number<int64_t>(fields[1], "begin", where);
    const int64_t end = parse_number<int64_t>(fields[2], "end", where);
    b.size = parse_number<uint64_t>(fields[3], "size", where);
    b.end = file.inclusive ? end + 1 : end;
    if (b.end <= b.begin) {
      fail(where, ": buffer '", fields[0], "' has an empty lifetime (", fields[1], ", ", fields[2],
           file.inclusive ? ", inclusive)" : ", half-open)");
    }
    file.problem.buffers.push_back(b);
    file.ids.push_back(fields[0]);
    if (columns == 5) offsets.push_back(parse_number<uint64_t>(fields[4], "offset", where));
  }
  if (!header) fail(name, ": empty file (expected a header 'id,begin,end,size')");
  if (columns == 5) file.offsets = std::move(offsets);
  return file;
}

IntervalFile read_interval_csv(const std::string& path, LifetimeConvention lifetimes) {
  return parse_interval_csv(read_file(path), path, lifetimes);
}

std::string plan_csv(const IntervalFile& file, const Solution& solution) {
  std::string out = "id,offset\n";
  for (size_t i = 0; i < file.ids.size(); ++i) out += file.ids[i] + "," + std::to_string(solution.offsets[i]) + "\n";
  return out;
}

}  // namespace kiln::planner::memory
