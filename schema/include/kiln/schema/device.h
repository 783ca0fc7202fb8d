// Device tags as the program carries them: one definition of what a missing
// tag means, when two tags name the same device, and how a device type is
// spelled, shared by the planner (which writes tags) and the runtime (which
// reads them). Header-only, no heap, usable in firmware.

#ifndef KILN_SCHEMA_DEVICE_H_
#define KILN_SCHEMA_DEVICE_H_

#include "kiln/schema/program_generated.h"

namespace kiln {

inline fb::Device host_device() { return fb::Device(fb::DeviceType::CPU, 0); }

// A tensor, arena or delegate without a device tag lives on the host.
inline fb::Device device_or_cpu(const fb::Device* device) { return device != nullptr ? *device : host_device(); }

inline bool is_host(const fb::Device& device) { return device.type() == fb::DeviceType::CPU; }

inline bool same_device(const fb::Device& a, const fb::Device& b) {
  return a.type() == b.type() && a.index() == b.index();
}

// The addends a CollectiveCall may carry after its reduced input (a bias
// and a residual fused into its write; schema: CollectiveCall).
constexpr uint32_t kMaxCollectiveAddends = 2;

inline bool operator==(const fb::Device& a, const fb::Device& b) { return same_device(a, b); }
inline bool operator!=(const fb::Device& a, const fb::Device& b) { return !same_device(a, b); }

// "cpu", "cuda", ...: the prefix of a target name ("vulkan:0") and the
// word in messages; "invalid" outside the enum.
constexpr const char* device_type_name(fb::DeviceType type) {
  switch (type) {
    case fb::DeviceType::CPU: return "cpu";
    case fb::DeviceType::CUDA: return "cuda";
    case fb::DeviceType::VULKAN: return "vulkan";
    case fb::DeviceType::NULL_DEVICE: return "null";
  }
  return "invalid";
}

}  // namespace kiln

#endif  // KILN_SCHEMA_DEVICE_H_
