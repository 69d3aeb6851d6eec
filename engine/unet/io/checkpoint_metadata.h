// The metadata values of a checkpoint's header (checkpoint_metadata.cpp): one rule each for reading and
// writing them, shared by save, load and inspect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "unet/io/run_state.h"

namespace unet::checkpoint_metadata {

// Now, as YYYY-MM-DDTHH:MM:SSZ.
std::string utc_now_iso8601();
// YYYY-MM-DDTHH:MM:SS, an optional fraction of a second, then Z or an offset +HH:MM / -HH:MM.
bool is_iso8601_timestamp(std::string_view s);
// A decimal count: digits only (no sign, no spaces), fitting int64.
std::optional<std::int64_t> parse_count(std::string_view text);
// A number in from_chars' form, the whole text.
std::optional<double> parse_number(std::string_view text);
// 64 hexadecimal digits (a SHA-256), either case.
bool is_hex_digest(std::string_view text);
// Hexadecimal letters in lower case.
std::string lower(std::string text);
bool valid_loss_scale(double v);
// The position's own problem, if any: the same rules on save and load.
std::optional<std::string> position_problem(const TrainingPosition& p);
// The position as the header's "position" object.
nlohmann::json position_json(const TrainingPosition& p);

}  // namespace unet::checkpoint_metadata
