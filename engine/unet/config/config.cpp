// What is left of the config once its concerns have their own files: the compute dtype, path resolution,
// and the typed Config built from a document and written back, all by walking config_schema() (schema.cpp).
// The enumerations' names are config_enums.h, validation validate.cpp, reading a file file.cpp.
#include "unet/config/config.h"

#include <algorithm>

#include "unet/config/schema_rules.h"

namespace unet {

using config_detail::lookup;

namespace {

using json = nlohmann::json;

}  // namespace

DType compute_dtype(Precision p) noexcept {
  switch (p) {
    case Precision::fp32:
      return DType::f32;
    case Precision::mixed_bf16:
      return DType::bf16;
    case Precision::mixed_fp16:
      return DType::f16;
  }
  return DType::f32;
}

const char* to_string(ConfigType t) noexcept {
  switch (t) {
    case ConfigType::integer:
      return "integer";
    case ConfigType::number:
      return "number";
    case ConfigType::boolean:
      return "boolean";
    case ConfigType::string:
      return "string";
    case ConfigType::enumeration:
      return "enumeration";
    case ConfigType::path:
      return "path";
    case ConfigType::integer_pair:
      return "integer_pair";
    case ConfigType::string_list:
      return "string_list";
    case ConfigType::number_list:
      return "number_list";
  }
  return "unknown";
}

std::optional<std::int64_t> monitor_class_index(std::string_view monitor_class) {
  // Plain decimal digits only ("1", not "+1", " 1" or "1.0"), and a class a model can have.
  if (monitor_class.empty() || monitor_class.size() > 3 ||
      !std::all_of(monitor_class.begin(), monitor_class.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const std::int64_t index = std::stoll(std::string(monitor_class));
  if (index > 254) return std::nullopt;
  return index;
}

std::filesystem::path Config::resolve(const std::string& p) const {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  if (path.is_absolute() || base_dir.empty()) return path;
  return (base_dir / path).lexically_normal();
}

Config config_from_json(const nlohmann::json& j, const std::filesystem::path& base_dir) {
  const std::vector<ConfigProblem> problems = config_problems(j);
  if (!problems.empty()) throw ConfigError(problems.front().key, problems.front().problem);
  Config c;
  c.base_dir = base_dir;
  for (const ConfigKey& k : config_schema())
    if (const json* v = lookup(j, k.path)) k.set(c, *v);
  validate(c.model);
  return c;
}

nlohmann::json config_to_json(const Config& c) {
  json j = json::object();
  for (const ConfigKey& k : config_schema()) {
    const auto dot = k.path.find('.');
    if (dot == std::string::npos)
      j[k.path] = k.get(c);
    else
      j[k.path.substr(0, dot)][k.path.substr(dot + 1)] = k.get(c);
  }
  return j;
}

std::string config_to_string(const Config& c, int indent) {
  // ordered_json keeps insertion order, so sections and keys come out in schema order.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const ConfigKey& k : config_schema()) {
    auto value = nlohmann::ordered_json::parse(k.get(c).dump());
    const auto dot = k.path.find('.');
    if (dot == std::string::npos)
      j[k.path] = std::move(value);
    else
      j[k.path.substr(0, dot)][k.path.substr(dot + 1)] = std::move(value);
  }
  return j.dump(indent) + "\n";
}

}  // namespace unet
