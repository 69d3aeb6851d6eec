// Command-line helpers the benchmarks share.
#pragma once

#include <charconv>
#include <cstdio>
#include <optional>
#include <string>

namespace unet::bench {

// A count option's value: a whole number in [lowest, highest], or a message naming the program, the option
// and the text (--steps 0 used to divide by zero and index an empty list).
inline std::optional<int> parse_count(const char* program, const std::string& flag, const std::string& text,
                                      int lowest, int highest) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size() && value >= lowest && value <= highest)
    return value;
  std::fprintf(stderr, "%s: %s must be a whole number in %d..%d, got '%s'\n", program, flag.c_str(), lowest,
               highest, text.c_str());
  return std::nullopt;
}

}  // namespace unet::bench
