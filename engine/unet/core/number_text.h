// Numbers in messages, configs and checkpoint metadata: the shortest text that reads back as exactly the same
// double (0.001, 65536, 1e-05).
#pragma once

#include <array>
#include <charconv>
#include <string>

namespace unet {

inline std::string number_text(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end);
}

// The same number as a person writes it in a config: no '+' and no leading zeros in the exponent (1e22, 1e-5,
// not 1e+22, 1e-05). It reads back as the same double; for messages, where the user's own spelling is quoted.
inline std::string number_text_as_written(double v) {
  std::string text = number_text(v);
  const auto e = text.find('e');
  if (e == std::string::npos) return text;
  std::string exponent = text.substr(e + 1);
  std::string sign;
  if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-')) {
    if (exponent.front() == '-') sign = "-";
    exponent.erase(0, 1);
  }
  const auto digits = exponent.find_first_not_of('0');
  exponent = digits == std::string::npos ? "0" : exponent.substr(digits);
  return text.substr(0, e + 1) + sign + exponent;
}

// A measured value for a log line: 6 significant digits (0.141198, not 0.14119790480528355).
inline std::string metric_text(double v) {
  std::array<char, 32> buffer{};
  const auto end =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), v, std::chars_format::general, 6).ptr;
  return std::string(buffer.data(), end);
}

}  // namespace unet
