// Checkpoint-name templates (checkpoint.template): checking one at config time, rendering one when a
// periodic checkpoint is written, and telling which files in a run folder a template made. A template is a
// {fmt} format string whose fields are named: fmt::vformat parses and renders it. fmt does not say which name
// it could not find, so the names are looked at here first, to answer in our words.
#include "unet/config/checkpoint_name.h"

#include <algorithm>
#include <array>
#include <map>
#include <regex>

#include <fmt/args.h>
#include <fmt/format.h>

#include "unet/config/config.h"
#include "unet/config/schema_rules.h"

namespace unet {

using config_detail::as_json_string;
using config_detail::kTemplateKey;
using config_detail::show;
using config_detail::template_fields;
using config_detail::TemplateField;

namespace {

using json = nlohmann::json;

// Constant-initialised, so the schema can be built from any static initialiser.
constexpr std::array<std::string_view, 2> kIntegerFields{"epoch", "step"};
constexpr std::array<std::string_view, 5> kMetricFields{"loss", "val_loss", "val_iou", "val_dice", "val_acc"};

constexpr std::size_t kMaxNameLength = 255;  // bytes in a file name on Linux file systems
constexpr std::size_t kMaxSpecDigits = 3;    // a wider field or a longer precision cannot fit in a file name

// What is wrong with a template, in words for the user; thrown through fmt, which lets it pass.
struct TemplateProblem {
  std::string text;
};

bool is_metric_field(std::string_view name) {
  return std::find(kMetricFields.begin(), kMetricFields.end(), name) != kMetricFields.end();
}

std::string known_fields() {
  std::string known;
  for (std::string_view n : kIntegerFields) known += std::string(n) + ", ";
  for (std::string_view n : kMetricFields) known += std::string(n) + ", ";
  known.resize(known.size() - 2);
  return known;
}

}  // namespace

// The fields of a template, found by their opening brace ("{{" is a literal brace). Only the names are read
// here; everything else, brace errors included, is fmt's to find.
std::vector<TemplateField> config_detail::template_fields(std::string_view t) {
  std::vector<TemplateField> fields;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '{') continue;
    if (i + 1 < t.size() && t[i + 1] == '{') {
      ++i;
      continue;
    }
    const std::size_t name_end = std::min(t.find_first_of(":!}", i + 1), t.size());
    const std::size_t close = t.find('}', i + 1);
    fields.push_back({t.substr(i, close == std::string_view::npos ? close : close + 1 - i),
                      t.substr(i + 1, name_end - i - 1), name_end < t.size() && t[name_end] == '!'});
  }
  return fields;
}

namespace {

void check_field_name(const TemplateField& f) {
  const std::string text(f.text);
  const bool positional =
      std::all_of(f.name.begin(), f.name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (positional) throw TemplateProblem{text + ": a placeholder needs a name: " + known_fields()};
  if (!is_metric_field(f.name) &&
      std::find(kIntegerFields.begin(), kIntegerFields.end(), f.name) == kIntegerFields.end())
    throw TemplateProblem{text + ": unknown placeholder \"" + std::string(f.name) + "\"; use " +
                          known_fields()};
  if (f.conversion) throw TemplateProblem{text + ": conversions such as !r are not supported"};
}

// A value a template names, formatted by fmt's rules for its format spec with three things kept from
// Python's format(), which these templates followed before: type '%' (the value times 100 as 'f', then a
// '%'; a width counts the digits only), a real type (e, f, g, ...) on the integers epoch and step, and a
// real without a spec written as Python's str() writes it, 1.0 rather than fmt's 1.
struct TemplateValue {
  std::string_view name;
  bool integer = false;
  std::int64_t integer_value = 0;
  double real_value = 0.0;
};

std::string render_value(const TemplateValue& v, std::string_view spec) {
  const std::string name(v.name);
  const std::string field = "{" + name + (spec.empty() ? "" : ":" + std::string(spec)) + "}";
  if (spec.find('{') != std::string_view::npos)
    throw TemplateProblem{field + ": a format spec cannot hold another field"};
  std::size_t digits = 0;
  for (const char c : spec) {
    digits = c >= '0' && c <= '9' ? digits + 1 : 0;
    if (digits > kMaxSpecDigits) throw TemplateProblem{field + ": widths and precisions must be below 1000"};
  }
  const char type = spec.empty() ? '\0' : spec.back();
  const bool percent = type == '%';
  const bool real_type =
      percent || (type != '\0' && std::string_view("aAeEfFgG").find(type) != std::string_view::npos);
  if (!v.integer && type != '\0' && std::string_view("bBcdoxX").find(type) != std::string_view::npos)
    throw TemplateProblem{field + ": '" + std::string(1, type) + "' needs an integer, but " + name +
                          " is a real number; use f, e, g or %"};
  if (v.integer && type == 'c')
    throw TemplateProblem{field + ": 'c' (a character) cannot be part of a file name"};

  std::string format = "{:" + std::string(spec) + "}";
  if (percent) format[format.size() - 2] = 'f';
  try {
    std::string text;
    if (v.integer && !real_type) {
      text = fmt::format(fmt::runtime(format), v.integer_value);
    } else {
      const double x = v.integer ? static_cast<double>(v.integer_value) : v.real_value;
      text = fmt::format(fmt::runtime(format), percent ? 100.0 * x : x);
      if (spec.empty() && text.find_first_of(".eEin") == std::string::npos) text += ".0";
    }
    if (percent) text += '%';
    return text;
  } catch (const fmt::format_error& e) {
    std::string reason = e.what();
    if (reason == "missing '}' in format string") reason = "invalid format spec";  // the braces are ours
    throw TemplateProblem{field + ": " + reason + "; " + name +
                          (v.integer ? " is an integer: use a spec such as 03d"
                                     : " is a real number: use a spec such as .4f, .2e, g or .1%")};
  }
}

}  // namespace
}  // namespace unet

template <>
struct fmt::formatter<unet::TemplateValue> {
  std::string_view spec;  // between ':' and '}'; empty without one

  format_parse_context::iterator parse(format_parse_context& ctx) {
    auto end = ctx.begin();
    while (end != ctx.end() && *end != '}') ++end;
    spec = std::string_view(ctx.begin(), static_cast<std::size_t>(end - ctx.begin()));
    return end;
  }

  format_context::iterator format(const unet::TemplateValue& v, format_context& ctx) const {
    const std::string text = unet::render_value(v, spec);
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};

namespace unet {
namespace {

// Renders a template. With `metrics` null (a check at config time) every metric is there, with a sample
// value.
std::string render_template(std::string_view tmpl, std::int64_t epoch, std::int64_t step,
                            const std::map<std::string, double>* metrics) {
  for (const TemplateField& f : template_fields(tmpl)) {
    check_field_name(f);
    if (metrics && is_metric_field(f.name) && !metrics->contains(std::string(f.name)))
      throw TemplateProblem{std::string(f.text) + " needs the metric " + std::string(f.name) +
                            ", which is not available"};
  }
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("epoch", TemplateValue{"epoch", true, epoch, 0.0}));
  args.push_back(fmt::arg("step", TemplateValue{"step", true, step, 0.0}));
  for (std::string_view name : kMetricFields) {
    double value = 0.5;
    if (metrics) {
      const auto it = metrics->find(std::string(name));
      if (it == metrics->end()) continue;  // only named by templates refused above
      value = it->second;
    }
    args.push_back(fmt::arg(name.data(), TemplateValue{name, false, 0, value}));
  }
  try {
    return fmt::vformat(tmpl, args);
  } catch (const fmt::format_error& e) {
    std::string problem = as_json_string(tmpl) + ": " + e.what();
    if (problem.find("'}'") != std::string::npos) problem += "; write {{ and }} for literal braces";
    throw TemplateProblem{problem};
  }
}

std::string reserved_names_text() {
  return std::string(kMetricsFileName) + ", " + std::string(kLastCheckpointName) + ", " +
         std::string(kBestCheckpointName) + ", " + std::string(kRunLockName) + ", " +
         std::string(kValidationSplitName) + ", " + std::string(kRequestedCheckpointPrefix) +
         "* and names beginning with '.'";
}

}  // namespace

std::optional<std::string> config_detail::check_template(const json& v) {
  const std::string& s = v.get_ref<const std::string&>();
  if (s.find_first_of("/\\") != std::string::npos) return "must be a file name, not a path, got " + show(v);
  try {
    const std::string name = render_template(s, 1, 1, nullptr);
    if (name.size() > kMaxNameLength)
      return "renders file names of " + std::to_string(name.size()) +
             " characters; a file name has at most " + std::to_string(kMaxNameLength);
    // The sample values render the shortest numbers, so a fill character that could lead the name shows.
    if (is_reserved_run_file_name(name))
      return "renders \"" + name + "\", a name the run keeps for its own files (" + reserved_names_text() +
             "), got " + show(v);
  } catch (const TemplateProblem& p) {
    return p.text;
  }
  return std::nullopt;
}

std::string format_checkpoint_name(const std::string& tmpl, std::int64_t epoch, std::int64_t step,
                                   const std::map<std::string, double>& metrics) {
  std::string name;
  try {
    name = render_template(tmpl, epoch, step, &metrics);
  } catch (const TemplateProblem& p) {
    throw ConfigError(std::string(kTemplateKey), p.text);
  }
  if (is_reserved_run_file_name(name))
    throw ConfigError(
        std::string(kTemplateKey),
        "renders \"" + name + "\", a name the run keeps for its own files (" + reserved_names_text() + ")");
  return name;
}

bool is_reserved_run_file_name(std::string_view file_name) {
  return file_name.empty() || file_name.front() == '.' || file_name == kMetricsFileName ||
         file_name == kLastCheckpointName || file_name == kBestCheckpointName || file_name == kRunLockName ||
         file_name == kValidationSplitName || file_name.starts_with(kRequestedCheckpointPrefix);
}

bool matches_checkpoint_template(const std::string& tmpl, std::string_view file_name) {
  if (is_reserved_run_file_name(file_name)) return false;
  // What a field can render: digits, signs, a point, exponents, hexadecimal digits and base prefixes, inf and
  // nan, '%', the padding blank, and the fill character its spec names.
  const std::string number_characters = "0-9a-fA-FxXoOiInN.%+ \\-";
  const auto escaped = [](char c) {
    return std::string(std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos ? "\\" : "") +
           c;
  };
  std::string pattern;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if ((c == '{' || c == '}') && i + 1 < tmpl.size() && tmpl[i + 1] == c) {
      pattern += escaped(c);
      ++i;
      continue;
    }
    if (c != '{') {
      pattern += escaped(c);
      continue;
    }
    const std::size_t close = tmpl.find('}', i);
    if (close == std::string::npos) return false;  // not a valid template
    const std::string_view field(tmpl.data() + i + 1, close - i - 1);
    const std::size_t colon = field.find(':');
    const std::string_view spec =
        colon == std::string_view::npos ? std::string_view{} : field.substr(colon + 1);
    std::string characters = number_characters;
    if (spec.size() >= 2 && std::string_view("<>^").find(spec[1]) != std::string_view::npos)
      characters += escaped(spec[0]);
    pattern += "[" + characters + "]+";
    i = close;
  }
  try {
    return std::regex_match(file_name.begin(), file_name.end(), std::regex(pattern));
  } catch (const std::regex_error&) {
    return false;
  }
}

}  // namespace unet
