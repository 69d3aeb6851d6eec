// libFuzzer target: the config front door. The input is a config document (what --config reads), a --set
// assignment (its first line) and a checkpoint.template (its second line). Refusals must be unet::Error
// (ConfigError names the key); a JSON library exception or any other escaping, a crash, a leak or undefined
// behaviour is a finding. A config accepted once must survive its own round trip.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "unet/config/config.h"
#include "unet/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t first_end = text.find('\n');
  const std::string_view assignment = text.substr(0, first_end);
  const std::string_view rest =
      first_end == std::string_view::npos ? std::string_view() : text.substr(first_end + 1);
  const std::string_view tmpl = rest.substr(0, rest.find('\n'));

  try {
    nlohmann::json doc = nlohmann::json::object();
    unet::apply_override(doc, assignment);
    (void)unet::config_problems(doc);
    const unet::Config c = unet::config_from_json(doc);
    if (unet::config_from_json(unet::config_to_json(c)) != c) __builtin_trap();
  } catch (const unet::Error&) {
  }
  try {
    (void)unet::format_checkpoint_name(std::string(tmpl), 3, 120, {{"loss", 0.5}, {"val_loss", 0.25}});
  } catch (const unet::Error&) {
  }
  nlohmann::json doc;
  try {
    doc = unet::parse_config_text(text, "the fuzz input");  // as --config parses the file, depth bounded
  } catch (const unet::Error&) {
    return 0;  // not JSON, a duplicate key or nesting past the limit: a ConfigError naming the input
  }
  try {
    (void)unet::config_problems(doc);
    const unet::Config c = unet::config_from_json(doc);
    (void)unet::config_to_string(c);
  } catch (const unet::Error&) {
  }
  return 0;
}
