#include "report/json.h"

#include <cmath>
#include <cstdio>

namespace kiln::planner {

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.back()) out_ << ",";
  first_.back() = false;
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ << "{";
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  first_.pop_back();
  out_ << "}";
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ << "[";
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  first_.pop_back();
  out_ << "]";
  return *this;
}
JsonWriter& JsonWriter::key(const std::string& k) {
  separate();
  out_ << json_escape(k) << ":";
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(const std::string& v) {
  separate();
  out_ << json_escape(v);
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  separate();
  out_ << v;
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t v) {
  separate();
  out_ << v;
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  separate();
  if (std::isfinite(v)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    out_ << buf;
  } else {
    out_ << "null";
  }
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ << (v ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::null() {
  separate();
  out_ << "null";
  return *this;
}
JsonWriter& JsonWriter::int_array(const std::vector<int64_t>& values) {
  begin_array();
  for (int64_t v : values) value(v);
  return end_array();
}

}  // namespace kiln::planner
