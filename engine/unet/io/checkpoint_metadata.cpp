// The metadata values of a checkpoint's header, each read and written by one rule here (checkpoint.cpp uses
// them on save, load and inspect): the save time, counts and numbers as text, the state digest, the training
// position. A value read from a file is refused, never coerced: these parsers take nothing but the exact
// form.
#include "unet/io/checkpoint_metadata.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <utility>

#include "unet/core/number_text.h"

namespace unet::checkpoint_metadata {

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(text, n);
}

// YYYY-MM-DDTHH:MM:SS, an optional fraction of a second, then Z or an offset +HH:MM / -HH:MM. A timestamp
// without a zone names no instant, so it is refused.
bool is_iso8601_timestamp(std::string_view s) {
  const auto number = [&](std::size_t at, std::size_t digits, int lo, int hi) {
    if (at + digits > s.size()) return false;
    int v = 0;
    for (std::size_t i = at; i < at + digits; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi;
  };
  const auto is = [&](std::size_t at, char c) { return at < s.size() && s[at] == c; };
  if (!(number(0, 4, 0, 9999) && is(4, '-') && number(5, 2, 1, 12) && is(7, '-') && number(8, 2, 1, 31) &&
        is(10, 'T') && number(11, 2, 0, 23) && is(13, ':') && number(14, 2, 0, 59) && is(16, ':') &&
        number(17, 2, 0, 60))) {  // 60: a leap second
    return false;
  }
  std::size_t at = 19;
  if (is(at, '.')) {
    const std::size_t first = ++at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
    if (at == first) return false;
  }
  if (is(at, 'Z')) return at + 1 == s.size();
  if (is(at, '+') || is(at, '-')) {
    return number(at + 1, 2, 0, 23) && is(at + 3, ':') && number(at + 4, 2, 0, 59) && at + 6 == s.size();
  }
  return false;
}

// A decimal count: digits only (no sign, no spaces), fitting int64.
std::optional<std::int64_t> parse_count(std::string_view text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

bool is_hex_digest(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

std::string lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

bool valid_loss_scale(double v) {
  return std::isfinite(v) && v > 0.0;
}

// The position's own problem, if any: the same rules on save and load.
std::optional<std::string> position_problem(const TrainingPosition& p) {
  const std::pair<const char*, std::int64_t> counts[] = {{"step", p.step},
                                                         {"epoch", p.epoch},
                                                         {"epoch_step", p.epoch_step},
                                                         {"clean_steps", p.clean_steps},
                                                         {"effective_batch", p.effective_batch},
                                                         {"skipped_steps", p.skipped_steps}};
  for (const auto& [name, value] : counts) {
    if (value < 0) return std::string(name) + " must be >= 0, got " + std::to_string(value);
  }
  if (!p.training_state.is_object()) return "training_state must be a JSON object";
  if (p.skipped_steps > p.step)
    return "skipped_steps must be <= step (" + std::to_string(p.step) + "), got " +
           std::to_string(p.skipped_steps);
  if (p.epoch_step > p.step)
    return "epoch_step must be <= step (" + std::to_string(p.step) + "), got " + std::to_string(p.epoch_step);
  // Samples per step: at most train.batch_size x train.accumulation, each bounded by 2^16. A larger one
  // (a damaged or forged file) would overflow the trainer's arithmetic on positions.
  if (p.effective_batch > (std::int64_t{1} << 32))
    return "effective_batch must be <= 4294967296 (train.batch_size x train.accumulation), got " +
           std::to_string(p.effective_batch);
  if (!valid_loss_scale(p.loss_scale))
    return "loss_scale must be a positive finite number, got " + number_text(p.loss_scale);
  if (!p.metrics.is_object()) return "metrics must be a JSON object, got " + p.metrics.dump();
  return std::nullopt;
}

nlohmann::json position_json(const TrainingPosition& p) {
  nlohmann::json j{{"step", p.step},
                   {"epoch", p.epoch},
                   {"epoch_step", p.epoch_step},
                   {"loss_scale", p.loss_scale},
                   {"clean_steps", p.clean_steps}};
  if (p.effective_batch > 0) j["effective_batch"] = p.effective_batch;
  if (p.skipped_steps > 0) j["skipped_steps"] = p.skipped_steps;
  return j;
}

}  // namespace unet::checkpoint_metadata
