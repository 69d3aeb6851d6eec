// Text that must be UTF-8: what goes into JSON (configs, checkpoints' metadata, metrics.jsonl,
// validation.json). Linux paths are bytes and may not be; the engine refuses such a path where it enters (a
// config value, a data file's name) instead of failing when it is written, and shows the bytes escaped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace unet {

// The offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF), or npos.
std::size_t invalid_utf8_at(std::string_view text) noexcept;

inline bool is_valid_utf8(std::string_view text) noexcept {
  return invalid_utf8_at(text) == std::string_view::npos;
}

// `text` with every byte that breaks UTF-8 written as \xNN (and the valid characters as they are), for
// messages: "run\xff".
std::string escape_invalid_utf8(std::string_view text);

// The problem with a path or name that is not UTF-8, for an error message: "is not valid UTF-8 (byte 0xff
// at offset 3 of \"run\xff\")".
std::string not_utf8_problem(std::string_view text);

}  // namespace unet
