#include "targets/target.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace kiln::planner {
namespace {

std::vector<std::unique_ptr<BackendPlanner>>& planners() {
  static std::vector<std::unique_ptr<BackendPlanner>> all;
  return all;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string TargetDevice::str() const {
  return device.type() == fb::DeviceType::CPU ? "cpu" : backend + ":" + std::to_string(device.index());
}

void register_backend_planner(std::unique_ptr<BackendPlanner> planner) {
  auto& all = planners();
  for (auto& p : all) {
    if (p->name() == planner->name()) {
      p = std::move(planner);
      return;
    }
  }
  all.push_back(std::move(planner));
}

const BackendPlanner* find_backend_planner(const std::string& name) {
  for (const auto& p : planners()) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

const BackendPlanner* backend_planner_for(fb::DeviceType type) {
  for (const auto& p : planners()) {
    if (p->device_type() == type) return p.get();
  }
  return nullptr;
}

std::vector<std::string> backend_planner_names() {
  std::vector<std::string> names;
  for (const auto& p : planners()) names.push_back(p->name());
  return names;
}

void check_precision(const std::string& precision, const std::vector<TargetDevice>& targets) {
  if (precision != "fp32" && precision != "tf32" && precision != "fp16" && precision != "bf16") {
    throw PlanError("--precision '" + precision + "': fp32, tf32, fp16 or bf16");
  }
  for (const TargetDevice& t : targets) {
    if (t.planner == nullptr) continue;
    const std::string why = t.planner->precision_refusal(precision);
    if (!why.empty()) throw PlanError("--precision " + precision + ": " + t.str() + " refuses it (" + why + ")");
  }
}

std::vector<TargetDevice> parse_targets(const std::string& list, const std::map<std::string, int>& device_counts) {
  for (const auto& [name, count] : device_counts) {
    if (find_backend_planner(name) == nullptr) fail("--device-count names unknown backend '", name, "'");
    if (count < 0) fail("--device-count ", name, "=", count, " is negative");
  }
  std::vector<TargetDevice> targets;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = list.find(',', pos);
    const std::string item = lower(list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (item.empty()) fail("empty entry in target list '", list, "'");
    TargetDevice target;
    const size_t colon = item.find(':');
    target.backend = item.substr(0, colon);
    int index = 0;
    if (colon != std::string::npos) {
      const std::string digits = item.substr(colon + 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 3) {
        fail("target '", item, "': device index must be a number");
      }
      index = std::stoi(digits);
    }
    if (target.backend == "cpu") {
      if (index != 0) fail("target '", item, "': there is one CPU device, cpu:0");
      target.device = fb::Device(fb::DeviceType::CPU, 0);
    } else {
      target.planner = find_backend_planner(target.backend);
      if (target.planner == nullptr) {
        std::string known = "cpu";
        for (const auto& n : backend_planner_names()) known += ", " + n;
        fail("unknown target backend '", target.backend, "' (known: ", known, ")");
      }
      auto it = device_counts.find(target.backend);
      const int available = it != device_counts.end() ? it->second : target.planner->max_devices();
      if (index >= available) {
        fail("target '", item, "': device index ", index, " is out of range; ", target.backend, " has ", available,
             " device", available == 1 ? "" : "s", " (0..", available - 1, ")");
      }
      target.device = fb::Device(target.planner->device_type(), static_cast<uint8_t>(index));
    }
    for (const TargetDevice& t : targets) {
      if (t.str() == target.str()) fail("target '", item, "' is listed twice");
    }
    targets.push_back(target);
  }
  if (targets.empty()) fail("the target list is empty");
  return targets;
}

}  // namespace kiln::planner
