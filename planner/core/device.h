// How the planner spells a device in names and messages: "cpu:0",
// "vulkan:1" (the form `--target` and `--place` take). What a device tag
// means (missing tag, equality, type names) is kiln/schema/device.h's, shared
// with the runtime; this adds only the planner's string form.

#ifndef KILN_PLANNER_CORE_DEVICE_H_
#define KILN_PLANNER_CORE_DEVICE_H_

#include <string>

#include "kiln/schema/device.h"

namespace kiln::planner {

// "cpu:0", "vulkan:1"
inline std::string device_str(const fb::Device& device) {
  return std::string(device_type_name(device.type())) + ":" + std::to_string(device.index());
}

}  // namespace kiln::planner

#endif  // KILN_PLANNER_CORE_DEVICE_H_
