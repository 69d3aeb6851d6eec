// A device as a config names it ("cpu:0", "cuda:1"): a kind and an index, and the one grammar that reads it.
// It lives in core/, below config/ and backend/, so that a Config can hold its devices typed without pulling
// in the backends. The one rule: device text is parsed here only (parse_device), once, where it enters
// (the config's devices key, a command line, a test's environment); everything else holds DeviceId.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unet {

enum class DeviceKind : std::uint8_t { cpu, cuda };

// Every kind's name in the grammar, in the enum's order: a new kind of device is one enum value and one row
// here (and its entry in backend/registry/device_kinds.cpp).
inline constexpr std::array<std::string_view, 2> kDeviceKindNames{"cpu", "cuda"};

constexpr const char* to_string(DeviceKind k) noexcept {
  return kDeviceKindNames[static_cast<std::size_t>(k)].data();
}

struct DeviceId {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  std::string str() const { return std::string(to_string(kind)) + ":" + std::to_string(index); }
  bool operator==(const DeviceId&) const = default;
};

// "cpu" (cpu:0), or a kind's name, a colon and decimal digits ("cpu:N", "cuda:N") ("cuda:01" is cuda:1);
// nothing for other text.
std::optional<DeviceId> parse_device(std::string_view text) noexcept;

// Each device's str(), in order: the config file's "devices" list.
std::vector<std::string> device_names(const std::vector<DeviceId>& devices);

// What parse_device() reads, for messages: "cpu, cpu:N or cuda:N".
std::string device_forms();

// parse_device(), or ConfigError naming `key` for text that is not a device.
DeviceId parse_device_id(const std::string& text, const std::string& key = "devices");

}  // namespace unet
