#include "cli/text.h"

#include "unet/core/utf8.h"

namespace unet::cli {

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  };
  std::size_t next_bad = invalid_utf8_at(text);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (i == next_bad) {
      // A byte that is not UTF-8 (a Latin-1 file name) shows as its value, not as whatever the terminal
      // makes of it.
      escape(byte);
      next_bad = invalid_utf8_at(text.substr(i + 1));
      if (next_bad != std::string_view::npos) next_bad += i + 1;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      escape(byte);
    } else if (byte == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      // U+0080..U+009F, the C1 controls (U+009B is a terminal's CSI): escaped as the code point's bytes.
      escape(byte);
      escape(static_cast<unsigned char>(text[++i]));
    } else {
      out += c;
    }
  }
  return out;
}

std::string with_commas(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string set_flags(const nlohmann::json& changes) {
  std::string flags;
  for (const auto& [key, value] : changes.items()) {
    const std::string v = value.is_string() ? value.get<std::string>() : value.dump();
    flags += (flags.empty() ? "" : " ") + std::string("--set ") + (value.is_array() ? "'" : "") + key + "=" +
             v + (value.is_array() ? "'" : "");
  }
  return flags;
}

}  // namespace unet::cli
