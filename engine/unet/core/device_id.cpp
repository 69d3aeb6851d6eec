// The device grammar (device_id.h): the one place device text becomes a DeviceId.
#include "unet/core/device_id.h"

#include <algorithm>
#include <charconv>

#include "unet/core/error.h"

namespace unet {

std::optional<DeviceId> parse_device(std::string_view text) noexcept {
  if (text == "cpu") return DeviceId{DeviceKind::cpu, 0};
  for (std::size_t k = 0; k < kDeviceKindNames.size(); ++k) {
    const auto kind = static_cast<DeviceKind>(k);
    const std::string_view name = kDeviceKindNames[k];
    if (!text.starts_with(name) || text.size() <= name.size() || text[name.size()] != ':') continue;
    // Digits only: from_chars alone would take a sign ("cuda:-0").
    const std::string_view digits = text.substr(name.size() + 1);
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    int index = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return DeviceId{kind, index};
  }
  return std::nullopt;
}

std::vector<std::string> device_names(const std::vector<DeviceId>& devices) {
  std::vector<std::string> names;
  names.reserve(devices.size());
  for (const DeviceId& d : devices) names.push_back(d.str());
  return names;
}

std::string device_forms() {
  std::string forms = "cpu";
  for (std::size_t k = 0; k < kDeviceKindNames.size(); ++k)
    forms += std::string(k + 1 == kDeviceKindNames.size() ? " or " : ", ") +
             std::string(kDeviceKindNames[k]) + ":N";
  return forms;
}

DeviceId parse_device_id(const std::string& text, const std::string& key) {
  if (const std::optional<DeviceId> id = parse_device(text)) return *id;
  throw ConfigError(key, "\"" + text + "\" is not a device; use " + device_forms());
}

}  // namespace unet
