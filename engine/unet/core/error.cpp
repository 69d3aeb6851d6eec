#include "unet/core/error.h"

#include <cstdio>
#include <filesystem>

namespace unet {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::config:
      return "config";
    case ErrorKind::usage:
      return "usage";
    case ErrorKind::data:
      return "data";
    case ErrorKind::io:
      return "io";
    case ErrorKind::backend:
      return "backend";
    case ErrorKind::out_of_memory:
      return "out_of_memory";
    case ErrorKind::unsupported:
      return "unsupported";
    case ErrorKind::cancelled:
      return "cancelled";
    case ErrorKind::diverged:
      return "diverged";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, std::string message, std::string device, std::string hint,
             std::source_location where)
    : std::runtime_error(compose(message, device, hint)),
      kind_(kind),
      message_(std::move(message)),
      device_(std::move(device)),
      hint_(std::move(hint)),
      location_(std::filesystem::path(where.file_name()).filename().string() + ":" +
                std::to_string(where.line())) {}

std::string Error::compose(const std::string& message, const std::string& device, const std::string& hint) {
  std::string text = device.empty() ? message : device + ": " + message;
  if (!hint.empty()) text += " (hint: " + hint + ")";
  return text;
}

ConfigError::ConfigError(std::string key, const std::string& problem, std::source_location where)
    : Error(ErrorKind::config, key.empty() ? problem : key + ": " + problem, {}, {}, where),
      key_(std::move(key)) {}

void log_noexcept(const char* what, const std::string& detail) noexcept {
  std::fprintf(stderr, "unet: %s: %s\n", what, detail.c_str());
}

}  // namespace unet
