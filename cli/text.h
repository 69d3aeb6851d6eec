// Text for a terminal, shared by the commands and the progress printer: names escaped so that they cannot
// forge lines, numbers with thousands separators, and the --set flags that make a set of config changes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace unet::cli {

// `text` as one line of a terminal: control characters (a newline or an escape sequence in a file name), the
// C1 controls and bytes that are not UTF-8 are written as \n, \r, \t or \xNN, so that a name cannot forge or
// hide lines of the output, and a Latin-1 name shows its bytes.
std::string printable(std::string_view text);

// 1234567 as "1,234,567".
std::string with_commas(std::int64_t v);

// The command line that makes `changes` ({"train.batch_size": 4, "devices": ["cpu"]}): "--set key=value" for
// each, space-separated, an array quoted for the shell; empty for no changes.
std::string set_flags(const nlohmann::json& changes);

}  // namespace unet::cli
