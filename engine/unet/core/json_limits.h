// Bounds on the JSON and text files the program reads that others may have written: a config file, a
// checkpoint's metadata, a metrics.jsonl record, a data.validation_split file. The one rule: nothing is
// parsed or held whose size or nesting is not bounded here first, so a small hostile file cannot cost
// memory, time or stack out of proportion to what it holds (docs/CONFIG.md and docs/METRICS.md say the
// limits). nlohmann's parser is iterative, but printing a value (an error message) and much else recurse,
// so the depth is refused while parsing, before any of them runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace unet {

// Objects and arrays nested at most this deep in any JSON document the program reads; the top-level value
// counts as level 1 ({"train": {"lr": 0.1}} is 2 levels). A real config is 2 or 3 levels.
inline constexpr int kMaxJsonDepth = 64;

// The longest metrics.jsonl record a reader accepts, its '\n' not counted; real records are under 4 KiB.
inline constexpr std::int64_t kMaxMetricsRecordBytes = std::int64_t{1} << 20;  // 1 MiB

// The largest data.validation_split file (a list of sample names): 64 MiB holds about a million names.
inline constexpr std::int64_t kMaxValidationSplitBytes = std::int64_t{64} << 20;

// Thrown by parse_json_bounded() at the first object or array that opens past kMaxJsonDepth.
// Its what(): "objects and arrays nested more than 64 levels deep", for a message that names the source.
class JsonTooDeep : public std::runtime_error {
 public:
  JsonTooDeep();
};

// What a caller's own parse callback sees: nlohmann's (depth, event, value); it returns nothing, and throws
// to refuse the document.
using JsonParseHook = std::function<void(int depth, nlohmann::json::parse_event_t event, nlohmann::json&)>;

// nlohmann::json::parse with the nesting bounded: throws JsonTooDeep for a document nested past
// kMaxJsonDepth, whatever allow_exceptions says (which is for the parser's own syntax errors, as in
// nlohmann::json::parse). `hook`, when given, sees every parse event first.
nlohmann::json parse_json_bounded(std::string_view text, bool allow_exceptions = true,
                                  const JsonParseHook& hook = {});

// Reads `file` whole when it is a regular file of at most max_bytes; otherwise leaves `text` empty and says
// why, in words that follow the file's name ("is 70000000 bytes; ... at most 67108864 bytes (64 MiB)").
// Opening does not wait on a FIFO, and a device or folder is refused before anything is read.
std::optional<std::string> read_capped_file(const std::filesystem::path& file, std::int64_t max_bytes,
                                            std::string& text);

// Calls `line` with each line of a text file (without its '\n'; the last one even without a '\n'), reading in
// blocks, so that memory stays bounded by max_line_bytes whatever the file holds. A line longer than that is
// not kept: `too_long` gets its number (from 1) and its length in bytes, and reading goes on after it.
// Returns false when the file cannot be opened or read (or is not a regular file).
bool for_each_capped_line(const std::filesystem::path& file, std::int64_t max_line_bytes,
                          const std::function<void(std::string_view line)>& line,
                          const std::function<void(std::int64_t number, std::int64_t bytes)>& too_long);

}  // namespace unet
