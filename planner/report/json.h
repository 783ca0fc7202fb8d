// A small streaming JSON writer for reports (plan.json, inspect --json).

#ifndef KILN_PLANNER_REPORT_JSON_H_
#define KILN_PLANNER_REPORT_JSON_H_

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::planner {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(uint32_t v) { return value(static_cast<uint64_t>(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& null();
  template <typename T>
  JsonWriter& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }
  JsonWriter& int_array(const std::vector<int64_t>& values);
  std::string str() const { return out_.str(); }

 private:
  void separate();
  std::ostringstream out_;
  std::vector<bool> first_ = {true};
  bool after_key_ = false;
};

std::string json_escape(const std::string& s);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_REPORT_JSON_H_
