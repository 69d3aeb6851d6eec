// A device as a config names it ("cpu:0", "cuda:1"): a kind and an index, and the one grammar that reads it.
// It lives in core/, below config/ and backend/, so that a Config can hold its devices typed without pulling
// in the backends. The one rule: device text is parsed here only (parse_device), once, where it enters
// (the config's devices key, a command line, a test's environment); everything else holds DeviceId.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unet {

enum class DeviceKind : std::uint8_t { cpu, cuda };
constexpr const char* to_string(DeviceKind k) noexcept {
  return k == DeviceKind::cpu ? "cpu" : "cuda";
}

struct DeviceId {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  std::string str() const { return std::string(to_string(kind)) + ":" + std::to_string(index); }
  bool operator==(const DeviceId&) const = default;
};

// "cpu" (cpu:0), "cpu:N", "cuda:N" with N decimal digits ("cuda:01" is cuda:1); nothing for other text.
std::optional<DeviceId> parse_device(std::string_view text) noexcept;

// Each device's str(), in order: the config file's "devices" list.
std::vector<std::string> device_names(const std::vector<DeviceId>& devices);

// parse_device(), or ConfigError naming `key` for text that is not a device.
DeviceId parse_device_id(const std::string& text, const std::string& key = "devices");

}  // namespace unet
