// Private to engine/unet/config: what the rest of config/ needs of checkpoint-name templates
// (checkpoint_name.cpp). The public functions (format_checkpoint_name, matches_checkpoint_template, the
// reserved run-file names) are declared in config.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace unet::config_detail {

inline constexpr std::string_view kTemplateKey = "checkpoint.template";

// One field as written, "{val_loss:.4f}", and its name, "val_loss".
struct TemplateField {
  std::string_view text;
  std::string_view name;
  bool conversion = false;  // "{epoch!r}"
};

// The fields of a template, found by their opening brace ("{{" is a literal brace). Only the names are read
// here; everything else, brace errors included, is fmt's to find.
std::vector<TemplateField> template_fields(std::string_view t);

// checkpoint.template's own rule (ConfigKey::check): a file name, not a path, that renders with sample values
// to a name that fits a file system and is none of the run's own names. The problem, if any.
std::optional<std::string> check_template(const nlohmann::json& v);

}  // namespace unet::config_detail
