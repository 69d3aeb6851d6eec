#include "unet/core/utf8.h"

namespace unet {

std::size_t invalid_utf8_at(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) low = 0xa0;
      if (c == 0xed) high = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) low = 0x90;
      if (c == 0xf4) high = 0x8f;
    } else {
      return i;
    }
    if (n - i < length) return i;
    if (p[i + 1] < low || p[i + 1] > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

std::string escape_invalid_utf8(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const std::size_t bad = invalid_utf8_at(text);
    if (bad == std::string_view::npos) {
      out += text;
      break;
    }
    out += text.substr(0, bad);
    const auto byte = static_cast<unsigned char>(text[bad]);
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
    text.remove_prefix(bad + 1);
  }
  return out;
}

std::string not_utf8_problem(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t bad = invalid_utf8_at(text);
  if (bad == std::string_view::npos) return {};
  const auto byte = static_cast<unsigned char>(text[bad]);
  return std::string("is not valid UTF-8 (byte 0x") + kHex[byte >> 4] + kHex[byte & 0xf] + " at offset " +
         std::to_string(bad) + " of \"" + escape_invalid_utf8(text) + "\")";
}

}  // namespace unet
