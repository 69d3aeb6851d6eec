// Numbers in messages, configs and checkpoint metadata: the shortest text that reads back as exactly the same
// double (0.001, 65536, 1e-05).
#pragma once

#include <charconv>
#include <string>

namespace unet {

inline std::string number_text(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end);
}

}  // namespace unet
