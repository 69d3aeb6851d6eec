// Private to engine/unet/config: the few helpers its files share. config.cpp's one big room became files of
// one concern each (schema.cpp the key table, validate.cpp the value and cross-key checks, file.cpp reading a
// config, checkpoint_name.cpp the file-name templates, suggest.cpp the "did you mean" for unknown keys); what
// more than one of them needs is declared here. Nothing outside config/ includes it: the public API is
// config.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace unet::config_detail {

// A value as it appears in a message: its JSON text, cut short (validate.cpp).
std::string show(const nlohmann::json& v);
// A text as a message quotes it: a JSON string, cut short as show() cuts.
std::string as_json_string(std::string_view s);

// "batch_size" of "train.batch_size"; a key without a section ("devices") is its own leaf.
inline std::string_view leaf_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

// "train" of "train.batch_size"; empty for a key without a section.
inline std::string_view section_of(std::string_view path) {
  const auto dot = path.find('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

// The schema's sections ("model", "loss", ...), in schema order (schema.cpp).
const std::vector<std::string>& section_names();
bool is_section(std::string_view name);

// The value at a dotted path, or nullptr when it or its section is missing (or the section is not an object).
const nlohmann::json* lookup(const nlohmann::json& j, std::string_view path);

}  // namespace unet::config_detail
