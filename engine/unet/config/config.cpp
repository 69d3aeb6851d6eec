// The config schema and everything driven by it. Messages come from a key's declared type and bounds, never
// from code written for one key, so every key reports problems in the same words. Cross-key rules (image size
// against depth, data.path against data.source) run only when the keys they read are valid on their own, so
// one mistake gives one message.
#include "unet/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <algorithm>
#include <array>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>

#include <fmt/args.h>
#include <fmt/format.h>

#include "unet/backend/communicator_choice.h"
#include "unet/core/number_text.h"
#include "unet/core/utf8.h"
#include "unet/io/json_limits.h"
#include "unet/io/unique_fd.h"

namespace unet {

namespace {

using json = nlohmann::json;

constexpr std::size_t kShowLimit = 80;

// A value as it appears in a message: its JSON text, cut short.
std::string show(const json& v) {
  // A config file's number quoted as its author would write it (1e22, not the JSON library's 1e+22).
  // A float that holds a whole number keeps its point (8.0), which is what makes it "not an integer".
  if (v.is_number_float()) {
    std::string text = number_text_as_written(v.get<double>());
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    return text;
  }
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > kShowLimit) s = s.substr(0, kShowLimit - 3) + "...";
  return s;
}

std::string as_json_string(std::string_view s) {
  return show(json(std::string(s)));
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

// --- suggestions for unknown keys --------------------------------------------------------------------------

// Edit distance where swapping two neighbours counts as one edit ("trian" -> "train"), or `bound` when it is
// at least that: the distance is asked for every unknown key against every known one, so it keeps three rows
// of the table, not all of it, and stops as soon as no path through the table can come in under the bound.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t bound) {
  const std::size_t m = b.size();
  if ((a.size() > m ? a.size() - m : m - a.size()) >= bound) return bound;
  thread_local std::vector<std::size_t> before, previous, row;
  before.assign(m + 1, 0);
  previous.resize(m + 1);
  row.assign(m + 1, 0);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    std::size_t smallest = row[0];
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
      smallest = std::min(smallest, row[j]);
    }
    // A swap reaches back two rows: stop only when both are past the bound.
    if (smallest >= bound && *std::min_element(previous.begin(), previous.end()) >= bound) return bound;
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return std::min(previous[m], bound);
}

std::string_view leaf_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::string_view section_of(std::string_view path) {
  const auto dot = path.find('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ConfigKey& k : config_schema()) {
      const std::string s(section_of(k.path));
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }();
  return names;
}

bool is_section(std::string_view name) {
  const auto& names = section_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The known key or section closest to `unknown`, if it is close enough to be a typo. A key whose last part
// matches in another section also counts ("batch_size" at the top level -> train.batch_size).
std::optional<std::string> suggest_key(std::string_view unknown) {
  static const std::vector<std::string> candidates = [] {
    std::vector<std::string> out = section_names();
    for (const ConfigKey& k : config_schema()) out.push_back(k.path);
    return out;
  }();
  const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, leaf_of(unknown).size() / 3));
  std::optional<std::string> best;
  std::size_t best_score = limit + 1;
  for (const std::string& c : candidates) {
    std::size_t score = edit_distance(unknown, c, best_score);
    if (section_of(unknown) != section_of(c) && best_score > 1)
      score = std::min(score, edit_distance(leaf_of(unknown), leaf_of(c), best_score - 1) + 1);
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return best;
}

std::string unknown_key_problem(std::string_view path) {
  std::string problem = "unknown key";
  if (auto s = suggest_key(path)) problem += " (did you mean " + *s + "?)";
  return problem;
}

// --- devices -----------------------------------------------------------------------------------------------

// "cpu" -> "cpu:0", "cuda:01" -> "cuda:1"; nothing when the text is not a device.
std::optional<std::string> normalise_device(std::string_view s) {
  if (s == "cpu") return "cpu:0";
  std::string_view kind;
  if (s.starts_with("cpu:")) {
    kind = "cpu";
  } else if (s.starts_with("cuda:")) {
    kind = "cuda";
  } else {
    return std::nullopt;
  }
  const std::string_view digits = s.substr(kind.size() + 1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int index = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (r.ec != std::errc{}) return std::nullopt;
  return std::string(kind) + ":" + std::to_string(index);
}

std::optional<std::string> check_devices(const json& v) {
  std::vector<std::string> seen;
  std::string first_cpu, first_cuda;
  for (const json& e : v) {
    const auto device = normalise_device(e.get_ref<const std::string&>());
    if (!device) return show(e) + " is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...)";
    // Two replicas on one GPU sum through the device communicator, which tests use; for a run, a larger
    // batch on one replica does the same work with less memory, and NCCL refuses it.
    if (std::find(seen.begin(), seen.end(), *device) != seen.end())
      return "lists " + *device + " twice" +
             (device->starts_with("cuda")
                  ? std::string(": NCCL cannot put two replicas on one GPU; for a larger batch than fits, "
                                "use train.accumulation, which splits it exactly")
                  : std::string());
    seen.push_back(*device);
    std::string& first = device->starts_with("cpu") ? first_cpu : first_cuda;
    if (first.empty()) first = *device;
  }
  if (!first_cpu.empty() && !first_cuda.empty())
    return "cannot mix CPU and CUDA devices in one run, got " + first_cpu + " and " + first_cuda;
  return std::nullopt;
}

// --- checkpoint name templates -----------------------------------------------------------------------------
// A template is a {fmt} format string whose fields are named: fmt::vformat parses and renders it. fmt does
// not say which name it could not find, so the names are looked at here first, to answer in our words.

constexpr std::string_view kTemplateKey = "checkpoint.template";

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

// One field as written, "{val_loss:.4f}", and its name, "val_loss".
struct TemplateField {
  std::string_view text;
  std::string_view name;
  bool conversion = false;  // "{epoch!r}"
};

// The fields of a template, found by their opening brace ("{{" is a literal brace). Only the names are read
// here; everything else, brace errors included, is fmt's to find.
std::vector<TemplateField> template_fields(std::string_view t) {
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

std::optional<std::string> check_template(const json& v) {
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

// --- generic validation by type ----------------------------------------------------------------------------

std::string bound_number(const ConfigKey& k, double b) {
  return k.type == ConfigType::number ? number_text(b) : std::to_string(static_cast<long long>(b));
}

std::string bounds_text(const ConfigKey& k) {
  const auto lower = [&] { return std::string(k.min_exclusive ? "> " : ">= ") + bound_number(k, *k.min); };
  const auto upper = [&] { return std::string(k.max_exclusive ? "< " : "<= ") + bound_number(k, *k.max); };
  if (k.min && k.max) {
    if (k.type != ConfigType::number && !k.min_exclusive && !k.max_exclusive)
      return "must be in " + bound_number(k, *k.min) + ".." + bound_number(k, *k.max);
    return "must be " + lower() + " and " + upper();
  }
  if (k.min) return "must be " + lower();
  if (k.max) return "must be " + upper();
  return {};
}

template <class T>
bool out_of_bounds(const ConfigKey& k, T x) {
  if (k.min) {
    const T lo = static_cast<T>(*k.min);
    if (k.min_exclusive ? x <= lo : x < lo) return true;
  }
  if (k.max) {
    const T hi = static_cast<T>(*k.max);
    if (k.max_exclusive ? x >= hi : x > hi) return true;
  }
  return false;
}

// `part` names an element of a pair ("height "), empty for a plain integer key.
std::optional<std::string> integer_problem(const ConfigKey& k, const json& v, const std::string& part) {
  if (!v.is_number_integer()) return part + "must be an integer, got " + show(v);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    if (k.unsigned64) return std::nullopt;  // seeds: only a lower bound of 0
    return part + "must be at most " + std::to_string(INT64_MAX) + ", got " + show(v);
  }
  if (out_of_bounds(k, v.get<std::int64_t>())) return part + bounds_text(k) + ", got " + show(v);
  return std::nullopt;
}

std::optional<std::string> number_problem(const ConfigKey& k, const json& v) {
  if (!v.is_number()) return "must be a number, got " + show(v);
  const double x = v.get<double>();
  if (!std::isfinite(x)) return "must be a finite number, got " + show(v);
  if (out_of_bounds(k, x)) return bounds_text(k) + ", got " + show(v);
  return std::nullopt;
}

std::optional<std::string> string_problem(const ConfigKey& k, const json& v) {
  if (k.type == ConfigType::enumeration) {
    if (!v.is_string() ||
        std::find(k.choices.begin(), k.choices.end(), v.get<std::string>()) == k.choices.end()) {
      std::vector<std::string> shown;
      shown.reserve(k.choices.size());
      for (const auto& c : k.choices) shown.push_back(as_json_string(c));
      return "must be one of " + join(shown, ", ") + ", got " + show(v);
    }
    return std::nullopt;
  }
  if (!v.is_string()) return "must be a string, got " + show(v);
  const std::string& text = v.get_ref<const std::string&>();
  if (k.non_empty && text.empty()) return std::string("must not be empty");
  // Values are stored as JSON text (checkpoints, metrics.jsonl), which is UTF-8; a path of other bytes would
  // be accepted here and fail at the first save, after the training it cost.
  if (!is_valid_utf8(text))
    return not_utf8_problem(text) + (k.type == ConfigType::path
                                         ? ": configs and checkpoints store paths as UTF-8 text; rename the "
                                           "folder, or link to it under a UTF-8 name"
                                         : "");
  return std::nullopt;
}

std::optional<std::string> pair_problem(const ConfigKey& k, const json& v) {
  const std::string shape =
      "[" + join(k.choices.size() == 2 ? k.choices : std::vector<std::string>{"a", "b"}, ", ") + "]";
  if (!v.is_array() || v.size() != 2) return "must be " + shape + ", two integers, got " + show(v);
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string part = k.choices.size() == 2 ? k.choices[i] + " " : "";
    if (auto problem = integer_problem(k, v[i], part)) return problem;
  }
  return std::nullopt;
}

std::optional<std::string> list_problem(const ConfigKey& k, const json& v) {
  if (!v.is_array()) return "must be a list of strings, got " + show(v);
  if (k.non_empty && v.empty()) return std::string("must not be empty");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return "entry " + std::to_string(i) + " must be a string, got " + show(v[i]);
    const std::string& text = v[i].get_ref<const std::string&>();
    if (!is_valid_utf8(text)) return "entry " + std::to_string(i) + " " + not_utf8_problem(text);
  }
  return std::nullopt;
}

std::optional<std::string> number_list_problem(const ConfigKey& k, const json& v) {
  if (!v.is_array()) return "must be a list of numbers, got " + show(v);
  if (k.non_empty && v.empty()) return std::string("must not be empty");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || !std::isfinite(v[i].get<double>()))
      return "entry " + std::to_string(i) + " must be a finite number, got " + show(v[i]);
    if (out_of_bounds(k, v[i].get<double>()))
      return "entry " + std::to_string(i) + " " + bounds_text(k) + ", got " + show(v[i]);
  }
  return std::nullopt;
}

// --- the schema --------------------------------------------------------------------------------------------

template <class Section, class T>
void bind(ConfigKey& k, Section Config::*section, T Section::*field) {
  k.get = [section, field](const Config& c) { return json((c.*section).*field); };
  k.set = [section, field](Config& c, const json& v) { (c.*section).*field = v.get<T>(); };
}

// Bounds on counts. Each is far above any run that makes sense on one machine, and low enough that products
// of them (batch x accumulation, samples x image bytes, epochs x steps per epoch) stay well inside int64, so
// that no user number can wrap into a small or negative count.
constexpr double kMaxBatch = 65536;            // train.batch_size, train.accumulation
constexpr double kMaxImageSide = 65536;        // data.image_size (data.max_image_side has the same bound)
constexpr double kMaxSamples = 16777216;       // data.synthetic_samples: 2^24
constexpr double kMaxEpochs = 1000000;         // train.epochs, checkpoint.every_epochs, checkpoint.keep_last
constexpr double kMaxSteps = 1000000000000.0;  // train.steps: 10^12

// The largest activation a config may ask for, in elements: 2^40 (4 TiB as fp32), far beyond any machine,
// and small enough that the planner's byte sums over all layers stay inside int64.
constexpr std::int64_t kMaxActivationElements = std::int64_t{1} << 40;

// A config is a few KiB; the bound keeps a wrong path (a log, an image) from being read whole.
constexpr std::int64_t kMaxConfigFileBytes = std::int64_t{1} << 20;

std::vector<ConfigKey> build_schema() {
  std::vector<ConfigKey> keys;
  // The reference is used before the next add().
  const auto add = [&keys](std::string path, ConfigType type, const char* group, const char* label,
                           const char* help) -> ConfigKey& {
    ConfigKey& k = keys.emplace_back();
    k.path = std::move(path);
    k.type = type;
    k.group = group;
    k.label = label;
    k.help = help;
    return k;
  };
  const auto integer = [&add](std::string path, const char* group, const char* label, const char* help,
                              std::optional<double> min, std::optional<double> max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto seed = [&add](std::string path, const char* group, const char* help) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, "Seed", help);
    k.min = 0;
    k.unsigned64 = true;
    return k;
  };

  // Model: the ranges validate(UNetSpec) enforces.
  bind(integer("model.in_channels", "Model", "Input channels",
               "Channels of the input images: 1 grayscale, 3 RGB.", 1, 64),
       &Config::model, &UNetSpec::in_channels);
  bind(integer("model.classes", "Model", "Classes",
               "Output channels: 1 for binary masks (sigmoid), more for one channel per class (softmax).", 1,
               255),
       &Config::model, &UNetSpec::classes);
  bind(integer("model.width", "Model", "Base width",
               "Channels of the first level; each level down doubles them.", 1, 1024),
       &Config::model, &UNetSpec::width);
  bind(integer("model.depth", "Model", "Depth",
               "Down-sampling levels; image height and width must be multiples of 2^depth.", 1, 6),
       &Config::model, &UNetSpec::depth);
  bind(add("model.separable", ConfigType::boolean, "Model", "Separable convolutions",
           "Depthwise-separable 3x3 convolutions: fewer parameters and less compute."),
       &Config::model, &UNetSpec::separable);

  // Loss: docs/MODEL.md, "Losses". The cross-key rules against model.classes are in config_problems().
  {
    ConfigKey& k =
        add("loss.kind", ConfigType::enumeration, "Loss", "Loss",
            "cross_entropy: binary (sigmoid) or softmax cross-entropy by model.classes; dice: soft "
            "Dice per image; cross_entropy_dice: both, weighted (nnU-Net's default); focal: focal "
            "loss; focal_dice: focal and Dice.");
    k.choices = {"cross_entropy", "dice", "cross_entropy_dice", "focal", "focal_dice"};
    k.get = [](const Config& c) { return json(to_string(c.loss.kind)); };
    k.set = [](Config& c, const json& v) { c.loss.kind = *parse_loss_kind(v.get<std::string>()); };
  }
  {
    ConfigKey& k = add("loss.cross_entropy_weight", ConfigType::number, "Loss", "Cross-entropy weight",
                       "The cross-entropy (or focal) term's weight, in every loss kind that has the term (alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::cross_entropy_weight);
  }
  {
    ConfigKey& k = add("loss.dice_weight", ConfigType::number, "Loss", "Dice weight",
                       "The Dice term's weight, in every loss kind that has the term (alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::dice_weight);
  }
  {
    ConfigKey& k = add("loss.focal_gamma", ConfigType::number, "Loss", "Focal gamma",
                       "Focal kinds: the focusing exponent of (1 - p_t)^gamma; 0 gives cross-entropy.");
    k.min = 0;
    k.max = 100;
    bind(k, &Config::loss, &LossConfig::focal_gamma);
  }
  {
    ConfigKey& k = add("loss.focal_alpha", ConfigType::number, "Loss", "Focal alpha",
                       "Focal kinds, binary models only: the foreground's weight alpha (the background's 1 - "
                       "alpha), as torchvision's sigmoid_focal_loss; -1 turns it off.");
    k.min = -1;
    k.max = 1;
    k.check = [](const json& v) -> std::optional<std::string> {
      const double a = v.get<double>();
      if (a < 0 && a != -1) return "must be -1 (off) or in [0, 1], got " + show(v);
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::focal_alpha);
  }
  {
    ConfigKey& k = add("loss.class_weights", ConfigType::number_list, "Loss", "Class weights",
                       "One weight per class, background first (a binary model: [background, foreground]); "
                       "they weight each pixel's cross-entropy/focal term by its class, and the Dice term's "
                       "mean over classes. Empty: all 1.");
    k.min = 0;
    k.check = [](const json& v) -> std::optional<std::string> {
      if (v.size() > static_cast<std::size_t>(kMaxLossClasses - 1))
        return "holds " + std::to_string(v.size()) + " weights; a model has at most 255 classes";
      if (!v.empty() && std::all_of(v.begin(), v.end(), [](const json& w) { return w.get<double>() == 0; }))
        return std::string("must hold at least one weight > 0");
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::class_weights);
  }
  bind(integer("loss.ignore_index", "Loss", "Ignore label",
               "A mask value whose pixels add no loss, no gradient and no metric (unlabelled pixels, e.g. "
               "255); -1: none.",
               -1, 255),
       &Config::loss, &LossConfig::ignore_index);
  {
    ConfigKey& k = add("loss.dice_smooth", ConfigType::number, "Loss", "Dice smoothing",
                       "s in (2 sum(p t) + s) / (sum(p) + sum(t) + s): keeps Dice defined for a class absent "
                       "from an image and its prediction.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::loss, &LossConfig::dice_smooth);
  }
  bind(add("loss.dice_include_background", ConfigType::boolean, "Loss", "Dice of the background",
           "Include class 0 (the background) in the Dice term's mean over classes; false, as nnU-Net, scores "
           "the foreground classes only."),
       &Config::loss, &LossConfig::dice_include_background);

  {
    ConfigKey& k =
        add("data.source", ConfigType::enumeration, "Data", "Source",
            "synthetic: generated shapes; folder: path/images/* and path/masks/*, matched by file stem; "
            "dsb2018: the Data Science Bowl 2018 layout, instance masks merged.");
    k.choices = {"synthetic", "folder", "dsb2018"};
    bind(k, &Config::data, &DataConfig::source);
  }
  bind(add("data.path", ConfigType::path, "Data", "Dataset folder",
           "Required for the folder and dsb2018 sources; relative to the config file."),
       &Config::data, &DataConfig::path);
  {
    ConfigKey& k = add("data.image_size", ConfigType::integer_pair, "Data", "Image size",
                       "[height, width] the images are resized to; each a multiple of 2^model.depth.");
    k.min = 1;
    k.max = kMaxImageSide;
    k.choices = {"height", "width"};  // the names of the pair's two values
    k.get = [](const Config& c) { return json::array({c.data.image_height, c.data.image_width}); };
    k.set = [](Config& c, const json& v) {
      c.data.image_height = v[0].get<std::int64_t>();
      c.data.image_width = v[1].get<std::int64_t>();
    };
  }
  {
    ConfigKey& k = add("data.val_fraction", ConfigType::number, "Data", "Validation fraction",
                       "The share of samples held out for validation, in [0, 1).");
    k.min = 0;
    k.max = 1;
    k.max_exclusive = true;
    bind(k, &Config::data, &DataConfig::val_fraction);
  }
  bind(add("data.augment", ConfigType::boolean, "Data", "Augment",
           "Random augmentation of the training images."),
       &Config::data, &DataConfig::augment);
  bind(add("data.shuffle", ConfigType::boolean, "Data", "Shuffle",
           "Shuffle the training samples every epoch."),
       &Config::data, &DataConfig::shuffle);
  bind(integer("data.synthetic_samples", "Data", "Synthetic samples",
               "How many images the synthetic source generates.", 2, kMaxSamples),
       &Config::data, &DataConfig::synthetic_samples);
  bind(seed("data.seed", "Data", "Seeds the split, the shuffling, augmentation and synthetic images."),
       &Config::data, &DataConfig::seed);
  bind(add("data.skip_bad", ConfigType::boolean, "Data", "Skip bad files",
           "false: any bad file (missing partner, damaged, wrong size...) stops the run and all are listed; "
           "true: bad samples are left out and counted."),
       &Config::data, &DataConfig::skip_bad);
  bind(integer("data.max_image_side", "Data", "Largest image side",
               "The largest width or height an image or mask file may declare; larger files are refused "
               "before they are decoded. It also bounds the data scan's memory: its threads together decode "
               "at most what one pair of this side needs (24 bytes a pixel: 6 GiB at 16384, 384 MiB at "
               "4096).",
               16, 65536),
       &Config::data, &DataConfig::max_image_side);
  bind(integer("data.prefetch", "Data", "Prefetch (batches)",
               "Batches the prefetch thread prepares ahead of training.", 1, 64),
       &Config::data, &DataConfig::prefetch);
  // The upper bound keeps cache_mib * 2^20 bytes inside int64.
  bind(integer("data.cache_mib", "Data", "Sample cache (MiB)",
               "Decoded samples are kept in memory up to this many MiB; the rest are decoded again each "
               "time they are read. 0: nothing is kept.",
               0, static_cast<double>(INT64_MAX >> 20)),
       &Config::data, &DataConfig::cache_mib);
  bind(
      add("data.validation_split", ConfigType::path, "Data", "Validation split from",
          "A run folder (or its validation.json) whose validation images this run validates on too, so that "
          "runs compare on the same images; it takes the place of val_fraction. Empty: val_fraction and seed "
          "choose them. Every run writes its own split to validation.json, and a resumed run keeps it."),
      &Config::data, &DataConfig::validation_split);

  bind(integer("train.epochs", "Training", "Epochs", "Passes over the training set.", 1, kMaxEpochs),
       &Config::train, &TrainConfig::epochs);
  bind(integer("train.steps", "Training", "Steps", "Optimizer steps to run; > 0 overrides epochs.", 0,
               kMaxSteps),
       &Config::train, &TrainConfig::steps);
  bind(integer("train.batch_size", "Training", "Batch size", "The global batch: all devices together.", 1,
               kMaxBatch),
       &Config::train, &TrainConfig::batch_size);
  bind(integer("train.accumulation", "Training", "Gradient accumulation",
               "Micro-batches whose gradients are summed before each optimizer step.", 1, kMaxBatch),
       &Config::train, &TrainConfig::accumulation);
  {
    ConfigKey& k =
        add("train.lr", ConfigType::number, "Training", "Learning rate", "The optimizer's step size.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::train, &TrainConfig::lr);
  }
  {
    ConfigKey& k =
        add("train.weight_decay", ConfigType::number, "Training", "Weight decay",
            "Added to the gradient as weight_decay x weight (L2) by adam and sgd; decoupled by adamw "
            "(each weight multiplied by 1 - lr x weight_decay); 0 turns it off.");
    k.min = 0;
    bind(k, &Config::train, &TrainConfig::weight_decay);
  }
  bind(seed("train.seed", "Training", "Seeds the weight initialisation."), &Config::train,
       &TrainConfig::seed);
  bind(integer("train.val_every_steps", "Training", "Validate every N steps",
               "> 0: validate also every this many optimizer steps, for long epochs; best.safetensors, the "
               "plateau schedule and early stopping see each validation. 0: at each epoch's end only.",
               0, kMaxSteps),
       &Config::train, &TrainConfig::val_every_steps);

  // A number key with inclusive bounds unless said otherwise.
  const auto number = [&add](std::string path, const char* group, const char* label, const char* help,
                             std::optional<double> min, std::optional<double> max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto choice = [&add](std::string path, const char* group, const char* label, const char* help,
                             std::vector<std::string> choices) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::enumeration, group, label, help);
    k.choices = std::move(choices);
    return k;
  };
  const std::vector<std::string> monitors{"val_loss", "val_iou", "val_dice", "val_acc", "loss"};

  bind(choice("optimizer.kind", "Optimizer", "Optimizer",
              "adam: torch.optim.Adam (weight decay as L2); adamw: AdamW (decoupled weight decay); sgd: SGD "
              "with momentum (Nesterov optional), as nnU-Net trains.",
              {"adam", "adamw", "sgd"}),
       &Config::optimizer, &OptimizerConfig::kind);
  {
    ConfigKey& k = number("optimizer.beta1", "Optimizer", "Beta 1",
                          "adam, adamw: decay of the gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta1);
  }
  {
    ConfigKey& k = number("optimizer.beta2", "Optimizer", "Beta 2",
                          "adam, adamw: decay of the squared gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta2);
  }
  {
    ConfigKey& k = number("optimizer.eps", "Optimizer", "Epsilon",
                          "adam, adamw: added to the denominator for numerical stability.", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::eps);
  }
  {
    ConfigKey& k = number("optimizer.momentum", "Optimizer", "Momentum",
                          "sgd: momentum in [0, 1); 0 is plain SGD. nnU-Net uses 0.99 with Nesterov.", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::momentum);
  }
  bind(add("optimizer.nesterov", ConfigType::boolean, "Optimizer", "Nesterov momentum",
           "sgd: Nesterov's momentum (needs optimizer.momentum > 0)."),
       &Config::optimizer, &OptimizerConfig::nesterov);
  bind(number("optimizer.clip_grad_norm", "Optimizer", "Clip gradient norm",
              "> 0: gradients whose global L2 norm exceeds this are scaled down to it before each step "
              "(torch.nn.utils.clip_grad_norm_); 0 turns clipping off. The norm is logged either way.",
              0, {}),
       &Config::optimizer, &OptimizerConfig::clip_grad_norm);

  bind(choice("schedule.kind", "Schedule", "Learning-rate schedule",
              "constant; step (x gamma every step_epochs epochs); cosine (down to min_lr); one_cycle (up to "
              "train.lr and down, per step); poly (nnU-Net's (1 - t/T)^power); plateau (x gamma when the "
              "monitored metric stops improving).",
              {"constant", "step", "cosine", "one_cycle", "poly", "plateau"}),
       &Config::schedule, &ScheduleConfig::kind);
  bind(integer("schedule.warmup_steps", "Schedule", "Warm-up steps",
               "Optimizer steps over which the rate rises linearly from warmup_start_factor x train.lr to "
               "train.lr before the schedule begins; 0: none. Not with one_cycle, which warms up itself.",
               0, kMaxSteps),
       &Config::schedule, &ScheduleConfig::warmup_steps);
  {
    ConfigKey& k = number("schedule.warmup_start_factor", "Schedule", "Warm-up start factor",
                          "The share of train.lr the warm-up starts from, in (0, 1].", 0, 1);
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::warmup_start_factor);
  }
  bind(integer("schedule.step_epochs", "Schedule", "Step every (epochs)",
               "step: the rate is multiplied by gamma every this many epochs.", 1, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::step_epochs);
  {
    ConfigKey& k = number("schedule.gamma", "Schedule", "Gamma",
                          "step and plateau: the factor the rate is multiplied by, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::gamma);
  }
  bind(number("schedule.min_lr", "Schedule", "Minimum rate",
              "cosine: the rate it ends at (eta_min); plateau: the rate it never goes below. Below train.lr.",
              0, {}),
       &Config::schedule, &ScheduleConfig::min_lr);
  {
    ConfigKey& k = number("schedule.power", "Schedule", "Power", "poly: the exponent (nnU-Net: 0.9).", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::power);
  }
  {
    ConfigKey& k = number("schedule.pct_start", "Schedule", "Rising share",
                          "one_cycle: the share of the run spent rising to train.lr, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::pct_start);
  }
  {
    ConfigKey& k = number("schedule.div_factor", "Schedule", "Start divisor",
                          "one_cycle: the rate starts at train.lr / div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::div_factor);
  }
  {
    ConfigKey& k = number("schedule.final_div_factor", "Schedule", "End divisor",
                          "one_cycle: the rate ends at the start rate / final_div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::final_div_factor);
  }
  bind(add("schedule.cycle_momentum", ConfigType::boolean, "Schedule", "Cycle momentum",
           "one_cycle: cycle Adam's beta1 or SGD's momentum inversely to the rate, between 0.85 and 0.95 "
           "(torch.optim.lr_scheduler.OneCycleLR's default)."),
       &Config::schedule, &ScheduleConfig::cycle_momentum);
  bind(choice("schedule.monitor", "Schedule", "Plateau monitor",
              "plateau: the metric watched after each validation; losses improve downwards, the others "
              "upwards.",
              monitors),
       &Config::schedule, &ScheduleConfig::monitor);
  bind(integer("schedule.patience", "Schedule", "Plateau patience",
               "plateau: validations without improvement before the rate is lowered.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::patience);
  bind(number("schedule.threshold", "Schedule", "Plateau threshold",
              "plateau: the relative improvement that counts (1e-4: 0.01 %).", 0, {}),
       &Config::schedule, &ScheduleConfig::threshold);
  bind(integer("schedule.cooldown", "Schedule", "Plateau cooldown",
               "plateau: validations after a reduction before patience counts again.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::cooldown);

  bind(integer("early_stopping.patience", "Early stopping", "Patience",
               "Stop when the monitored metric has not improved for this many validations; 0 turns early "
               "stopping off.",
               0, kMaxEpochs),
       &Config::early_stopping, &EarlyStoppingConfig::patience);
  bind(choice("early_stopping.monitor", "Early stopping", "Monitor",
              "The metric early stopping watches; losses improve downwards, the others upwards.", monitors),
       &Config::early_stopping, &EarlyStoppingConfig::monitor);
  bind(number("early_stopping.min_delta", "Early stopping", "Minimum change",
              "An improvement smaller than this does not count.", 0, {}),
       &Config::early_stopping, &EarlyStoppingConfig::min_delta);
  bind(add("early_stopping.restore_best", ConfigType::boolean, "Early stopping", "Restore best weights",
           "When early stopping ends the run, go back to the weights of its best validation: the run's "
           "model and last.safetensors are those."),
       &Config::early_stopping, &EarlyStoppingConfig::restore_best);

  {
    ConfigKey& k = add("precision", ConfigType::enumeration, "Precision", "Precision",
                       "fp32, or mixed precision computing in fp16 (with loss scaling) or bf16.");
    k.choices = {"fp32", "mixed-fp16", "mixed-bf16"};
    k.get = [](const Config& c) { return json(to_string(c.precision)); };
    k.set = [](Config& c, const json& v) { c.precision = *parse_precision(v.get<std::string>()); };
  }

  bind(add("memory.checkpointing", ConfigType::boolean, "Memory", "Activation checkpointing",
           "Recompute activations in the backward pass instead of keeping them: less memory, more compute."),
       &Config::memory, &MemoryConfig::checkpointing);
  bind(add("memory.growth", ConfigType::boolean, "Memory", "Grow on demand",
           "Reserve device memory as it is needed rather than up front."),
       &Config::memory, &MemoryConfig::growth);
  // The upper bound keeps cap_mib * 2^20 bytes inside int64.
  bind(integer("memory.cap_mib", "Memory", "Memory cap (MiB)",
               "> 0 makes every device behave as if it had this much memory; 0: no cap.", 0,
               static_cast<double>(INT64_MAX >> 20)),
       &Config::memory, &MemoryConfig::cap_mib);
  bind(add("memory.auto_recover_oom", ConfigType::boolean, "Memory", "Recover from out-of-memory",
           "Try to continue after an out-of-memory error instead of stopping the run."),
       &Config::memory, &MemoryConfig::auto_recover_oom);

  {
    ConfigKey& k =
        add("devices", ConfigType::string_list, "Devices", "Devices",
            "cpu, cpu:N (CPU replicas, data-parallel on one CPU) or cuda:N; CPU and CUDA devices do not "
            "mix in one run.");
    k.non_empty = true;
    k.check = check_devices;
    k.get = [](const Config& c) { return json(c.devices); };
    k.set = [](Config& c, const json& v) {
      c.devices.clear();
      for (const json& e : v) c.devices.push_back(*normalise_device(e.get_ref<const std::string&>()));
    };
  }

  bind(add("cuda.tf32", ConfigType::boolean, "Devices", "TF32 on GPUs",
           "GPUs only: let fp32 convolutions use TF32 tensor cores (Ampere and newer): faster, with inputs "
           "rounded to 10-bit mantissas. No effect on CPUs or in mixed precision."),
       &Config::cuda, &CudaConfig::tf32);
  bind(add("cuda.deterministic", ConfigType::boolean, "Devices", "Deterministic GPU convolutions",
           "GPUs only: use only convolution algorithms cuDNN reports as deterministic, so that a run repeats "
           "bit for bit on the same GPU; false may pick faster ones. No effect on CPUs."),
       &Config::cuda, &CudaConfig::deterministic);
  bind(add("cuda.expandable_arena", ConfigType::boolean, "Devices", "Expandable GPU memory arena",
           "GPUs only: take device memory as one address range backed page by page (2 MiB) as the run "
           "grows, so that memory is not split between block sizes and the plan's reserved bytes are exact; "
           "false: one cudaMalloc per new block, for tools that follow only cudaMalloc. Used only where the "
           "driver supports virtual memory management. No effect on CPUs."),
       &Config::cuda, &CudaConfig::expandable_arena);
  {
    ConfigKey& k =
        add("cuda.communicator", ConfigType::enumeration, "Devices", "GPU communicator",
            "Several GPUs only: how replicas sum their gradients. auto: NCCL between distinct GPUs "
            "when it is installed, else the device communicator; nccl: NCCL or an error saying why "
            "not; device: the project's own sum, in rank order as CPU replicas add (through peer "
            "pointers, or the host without peer access). No effect on CPUs or one GPU.");
    k.choices = {"auto", "nccl", "device"};
    k.get = [](const Config& c) { return json(to_string(c.cuda.communicator)); };
    k.set = [](Config& c, const json& v) {
      c.cuda.communicator = *parse_communicator_choice(v.get<std::string>());
    };
  }

  {
    ConfigKey& k = add(
        "cuda.comm_dtype", ConfigType::enumeration, "Devices", "GPU gradient sums in",
        "Several GPUs summing through NCCL only: f32, or bf16 (the gradients cast to bf16, summed, cast "
        "back: half the traffic between GPUs, with 8 significant bits, as PyTorch DDP's bf16 compression "
        "hook). A run whose GPUs sum otherwise (the device communicator) refuses bf16; CPU replicas always "
        "sum in f32.");
    k.choices = {"f32", "bf16"};
    k.get = [](const Config& c) { return json(c.cuda.bf16_sums ? "bf16" : "f32"); };
    k.set = [](Config& c, const json& v) { c.cuda.bf16_sums = v.get<std::string>() == "bf16"; };
  }

  bind(integer("comm.bucket_mib", "Devices", "Gradient bucket (MiB)",
               "Several replicas only: gradients are summed across replicas in buckets of this many MiB as "
               "backward finishes them (the decoder's first), on the last micro-batch of a step, so that the "
               "sums overlap the rest of backward; 0: one sum of all gradients after backward. The sums "
               "are the same either way.",
               0, 1024),
       &Config::comm, &CommConfig::bucket_mib);

  {
    ConfigKey& k = add("checkpoint.dir", ConfigType::path, "Checkpoints", "Run folder",
                       "Where checkpoints and metrics.jsonl go; relative to the config file.");
    k.non_empty = true;
    bind(k, &Config::checkpoint, &CheckpointConfig::dir);
  }
  bind(integer("checkpoint.every_epochs", "Checkpoints", "Every N epochs",
               "Periodic checkpoint interval; 0 turns periodic checkpoints off (last.safetensors is still "
               "written).",
               0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::every_epochs);
  {
    ConfigKey& k =
        add("checkpoint.template", ConfigType::string, "Checkpoints", "File name template",
            "Placeholders {epoch}, {step}, {loss}, {val_loss}, {val_iou}, {val_dice}, {val_acc}, each "
            "with an optional {fmt} format spec such as {epoch:02d}, {val_loss:.4f} or {val_acc:.1%}.");
    k.non_empty = true;
    k.check = check_template;
    bind(k, &Config::checkpoint, &CheckpointConfig::filename_template);
  }
  bind(add("checkpoint.save_best_only", ConfigType::boolean, "Checkpoints", "Save best only",
           "Write a periodic checkpoint only when the monitored metric improves."),
       &Config::checkpoint, &CheckpointConfig::save_best_only);
  {
    ConfigKey& k = add("checkpoint.monitor", ConfigType::enumeration, "Checkpoints", "Monitor",
                       "The metric save_best_only compares: losses improve downwards, the others upwards.");
    k.choices = monitors;
    bind(k, &Config::checkpoint, &CheckpointConfig::monitor);
  }
  bind(integer("checkpoint.keep_last", "Checkpoints", "Keep last",
               "How many of the newest periodic checkpoints to keep.", 0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::keep_last);

  const Config defaults;
  for (ConfigKey& k : keys) k.default_value = k.get(defaults);
  return keys;
}

// The value at a dotted path, or nullptr when it or its section is missing (or the section is not an object).
const json* lookup(const json& j, std::string_view path) {
  const auto dot = path.find('.');
  if (dot == std::string_view::npos) {
    const auto it = j.find(std::string(path));
    return it == j.end() ? nullptr : &*it;
  }
  const auto section = j.find(std::string(path.substr(0, dot)));
  if (section == j.end() || !section->is_object()) return nullptr;
  const auto it = section->find(std::string(path.substr(dot + 1)));
  return it == section->end() ? nullptr : &*it;
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(" \t") - first + 1));
}

}  // namespace

// --- public ------------------------------------------------------------------------------------------------

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

const char* to_string(Precision p) noexcept {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::mixed_fp16:
      return "mixed-fp16";
    case Precision::mixed_bf16:
      return "mixed-bf16";
  }
  return "fp32";
}

std::optional<Precision> parse_precision(std::string_view text) noexcept {
  if (text == "fp32") return Precision::fp32;
  if (text == "mixed-fp16") return Precision::mixed_fp16;
  if (text == "mixed-bf16") return Precision::mixed_bf16;
  return std::nullopt;
}

const char* to_string(LossKind k) noexcept {
  switch (k) {
    case LossKind::cross_entropy:
      return "cross_entropy";
    case LossKind::dice:
      return "dice";
    case LossKind::cross_entropy_dice:
      return "cross_entropy_dice";
    case LossKind::focal:
      return "focal";
    case LossKind::focal_dice:
      return "focal_dice";
  }
  return "cross_entropy";
}

std::optional<LossKind> parse_loss_kind(std::string_view text) noexcept {
  for (LossKind k : {LossKind::cross_entropy, LossKind::dice, LossKind::cross_entropy_dice, LossKind::focal,
                     LossKind::focal_dice})
    if (text == to_string(k)) return k;
  return std::nullopt;
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

std::filesystem::path Config::resolve(const std::string& p) const {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  if (path.is_absolute() || base_dir.empty()) return path;
  return (base_dir / path).lexically_normal();
}

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = build_schema();
  return schema;
}

const ConfigKey* find_config_key(std::string_view path) {
  for (const ConfigKey& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

std::optional<std::string> validate_value(const ConfigKey& k, const nlohmann::json& v) {
  std::optional<std::string> problem;
  switch (k.type) {
    case ConfigType::integer:
      problem = integer_problem(k, v, "");
      break;
    case ConfigType::number:
      problem = number_problem(k, v);
      break;
    case ConfigType::boolean:
      if (!v.is_boolean()) problem = "must be true or false, got " + show(v);
      break;
    case ConfigType::string:
    case ConfigType::enumeration:
    case ConfigType::path:
      problem = string_problem(k, v);
      break;
    case ConfigType::integer_pair:
      problem = pair_problem(k, v);
      break;
    case ConfigType::string_list:
      problem = list_problem(k, v);
      break;
    case ConfigType::number_list:
      problem = number_list_problem(k, v);
      break;
  }
  if (!problem && k.check) problem = k.check(v);
  return problem;
}

std::vector<ConfigProblem> config_problems(const nlohmann::json& j) {
  std::vector<ConfigProblem> out;
  if (!j.is_object()) {
    out.push_back({"", "a config must be a JSON object, got " + show(j)});
    return out;
  }
  for (const auto& [name, value] : j.items()) {
    if (is_section(name)) {
      if (!value.is_object()) {
        out.push_back({name, "must be an object, got " + show(value)});
        continue;
      }
      for (const auto& member : value.items()) {
        const std::string path = name + "." + member.key();
        if (member.key().find('.') != std::string::npos || !find_config_key(path))
          out.push_back({path, unknown_key_problem(path)});
      }
    } else if (name.find('.') != std::string::npos && find_config_key(name)) {
      out.push_back({name, "unknown key; write it inside its section: {\"" + std::string(section_of(name)) +
                               "\": {\"" + std::string(leaf_of(name)) + "\": ...}}"});
    } else if (!find_config_key(name)) {
      out.push_back({name, unknown_key_problem(name)});
    }
  }

  std::set<std::string> bad;
  for (const ConfigKey& k : config_schema()) {
    if (const json* v = lookup(j, k.path)) {
      if (auto problem = validate_value(k, *v)) {
        out.push_back({k.path, *problem});
        bad.insert(k.path);
      }
    }
  }
  const auto valid = [&](std::initializer_list<const char*> paths) {
    for (const char* p : paths)
      if (bad.count(p)) return false;
    return true;
  };
  const auto value = [&](const char* path) -> json {
    const json* v = lookup(j, path);
    return v ? *v : find_config_key(path)->default_value;
  };

  if (valid({"data.image_size", "model.depth"})) {
    const json size = value("data.image_size");
    const std::int64_t depth = value("model.depth").get<std::int64_t>();
    const std::int64_t multiple = std::int64_t{1} << depth;
    for (std::size_t i = 0; i < 2; ++i) {
      const std::int64_t n = size[i].get<std::int64_t>();
      if (n % multiple == 0) continue;
      std::string problem = std::string(i == 0 ? "height " : "width ") + std::to_string(n) +
                            " is not a multiple of 2^depth = " + std::to_string(multiple) + " (model.depth " +
                            std::to_string(depth) + "); try ";
      const std::int64_t below = n / multiple * multiple;
      if (below > 0) problem += std::to_string(below) + " or ";
      problem += std::to_string(below + multiple);
      out.push_back({"data.image_size", problem});
      break;
    }
  }
  if (valid({"data.source", "model.classes"}) && value("data.source").get<std::string>() == "dsb2018" &&
      value("model.classes").get<std::int64_t>() != 1) {
    out.push_back(
        {"model.classes", "must be 1 with data.source \"dsb2018\" (its nucleus masks are binary), got " +
                              show(value("model.classes"))});
  }
  // Each key is bounded on its own, but their product is the size of the largest activation (level 0 at the
  // widest of the decoder's concatenation, the head and the input): bounded so that a tensor's bytes, and the
  // planner's sums of them over every layer, stay far inside int64 (a plan of 2^63 bytes would wrap
  // negative).
  if (valid({"train.batch_size", "model.width", "model.classes", "model.in_channels", "data.image_size"})) {
    const json size = value("data.image_size");
    const std::int64_t channels =
        std::max({2 * value("model.width").get<std::int64_t>(), value("model.classes").get<std::int64_t>(),
                  value("model.in_channels").get<std::int64_t>()});
    const std::int64_t batch = value("train.batch_size").get<std::int64_t>();
    // Each factor is at most 2^16 (2^11 for channels), so the product fits int64.
    const std::int64_t elements =
        batch * channels * size[0].get<std::int64_t>() * size[1].get<std::int64_t>();
    if (elements > kMaxActivationElements)
      out.push_back({"train.batch_size",
                     "a batch of " + std::to_string(batch) + " images of " +
                         std::to_string(size[0].get<std::int64_t>()) + "x" +
                         std::to_string(size[1].get<std::int64_t>()) + " with " + std::to_string(channels) +
                         " channels (2 x model.width, or model.classes) makes activations of " +
                         std::to_string(elements) + " elements; at most 2^40 (" +
                         std::to_string(kMaxActivationElements) +
                         ") can be planned: lower the batch, the image size or the width"});
  }
  if (valid({"optimizer.kind", "optimizer.nesterov", "optimizer.momentum"}) &&
      value("optimizer.kind").get<std::string>() == "sgd" && value("optimizer.nesterov").get<bool>() &&
      value("optimizer.momentum").get<double>() == 0)
    out.push_back({"optimizer.nesterov", "needs optimizer.momentum > 0 (it is 0)"});
  if (valid({"schedule.kind", "schedule.warmup_steps"}) &&
      value("schedule.kind").get<std::string>() == "one_cycle" &&
      value("schedule.warmup_steps").get<std::int64_t>() > 0)
    out.push_back({"schedule.warmup_steps",
                   "must be 0 with schedule.kind \"one_cycle\", which warms up itself "
                   "(schedule.pct_start); got " +
                       show(value("schedule.warmup_steps"))});
  if (valid({"schedule.kind", "schedule.cycle_momentum", "optimizer.kind", "optimizer.momentum"}) &&
      value("schedule.kind").get<std::string>() == "one_cycle" &&
      value("schedule.cycle_momentum").get<bool>() && value("optimizer.kind").get<std::string>() == "sgd" &&
      value("optimizer.momentum").get<double>() == 0)
    out.push_back({"schedule.cycle_momentum",
                   "needs optimizer.momentum > 0 with sgd (plain SGD has no momentum "
                   "to cycle); set it false or give SGD momentum"});
  if (valid({"schedule.kind", "schedule.min_lr", "train.lr"})) {
    const std::string kind = value("schedule.kind").get<std::string>();
    if ((kind == "cosine" || kind == "plateau") &&
        value("schedule.min_lr").get<double>() >= value("train.lr").get<double>())
      out.push_back({"schedule.min_lr", "must be below train.lr (" + show(value("train.lr")) + "), got " +
                                            show(value("schedule.min_lr"))});
  }
  // bf16 sums are NCCL's: CPU replicas sum in f32.
  if (valid({"cuda.comm_dtype", "devices"}) && value("cuda.comm_dtype").get<std::string>() == "bf16") {
    for (const json& d : value("devices"))
      if (d.get<std::string>().starts_with("cpu")) {
        out.push_back({"cuda.comm_dtype", "\"bf16\" is for GPUs summing through NCCL; CPU replicas (" +
                                              d.get<std::string>() + ") sum in f32: set it to \"f32\""});
        break;
      }
  }
  // A metric of the validation set needs one.
  if (valid({"data.val_fraction"}) && value("data.val_fraction").get<double>() == 0) {
    if (valid({"schedule.kind", "schedule.monitor"}) &&
        value("schedule.kind").get<std::string>() == "plateau" &&
        value("schedule.monitor").get<std::string>() != "loss")
      out.push_back({"schedule.monitor", show(value("schedule.monitor")) +
                                             " needs a validation set, and data.val_fraction is 0; monitor "
                                             "\"loss\" or hold out a validation fraction"});
    if (valid({"early_stopping.patience", "early_stopping.monitor"}) &&
        value("early_stopping.patience").get<std::int64_t>() > 0 &&
        value("early_stopping.monitor").get<std::string>() != "loss")
      out.push_back({"early_stopping.monitor", show(value("early_stopping.monitor")) +
                                                   " needs a validation set, and data.val_fraction is 0; "
                                                   "monitor \"loss\" or hold out a validation fraction"});
  }
  if (valid({"loss.class_weights", "model.classes"})) {
    const std::size_t count = value("loss.class_weights").size();
    const std::int64_t classes = value("model.classes").get<std::int64_t>();
    const std::int64_t wanted = classes == 1 ? 2 : classes;
    if (count != 0 && static_cast<std::int64_t>(count) != wanted)
      out.push_back({"loss.class_weights", "holds " + std::to_string(count) + " weights but model.classes " +
                                               std::to_string(classes) + " needs " + std::to_string(wanted) +
                                               (classes == 1 ? " ([background, foreground])"
                                                             : " (one per class, background first)") +
                                               ", or none"});
  }
  if (valid({"loss.focal_alpha", "model.classes"}) && value("model.classes").get<std::int64_t>() > 1) {
    const double alpha = value("loss.focal_alpha").get<double>();
    const double fallback = find_config_key("loss.focal_alpha")->default_value.get<double>();
    if (alpha != -1 && alpha != fallback)
      out.push_back({"loss.focal_alpha", "applies to binary models only (model.classes 1), got " +
                                             show(value("loss.focal_alpha")) +
                                             "; weight a softmax model's classes with loss.class_weights"});
  }
  if (valid({"loss.kind", "loss.class_weights", "loss.dice_include_background", "model.classes"}) &&
      value("loss.kind").get<std::string>() == "dice" && value("model.classes").get<std::int64_t>() == 1 &&
      !value("loss.dice_include_background").get<bool>() && !value("loss.class_weights").empty())
    out.push_back({"loss.class_weights",
                   "has no effect with loss.kind \"dice\" on a binary model, whose Dice has the foreground "
                   "alone; set loss.dice_include_background or leave the weights empty"});
  if (valid({"data.source", "data.path"})) {
    const std::string source = value("data.source").get<std::string>();
    if (source != "synthetic" && value("data.path").get<std::string>().empty())
      out.push_back({"data.path", "required when data.source is \"" + source + "\""});
  }
  return out;
}

// --- what a run can train with -----------------------------------------------------------------------------

namespace {

bool is_validation_metric(std::string_view metric) {
  return metric.starts_with("val_");
}

std::string percent_text(double share) {
  return fmt::format("{:.0f}%", 100.0 * share);
}

}  // namespace

std::vector<ConfigProblem> validation_problems(const Config& c, const std::string& why) {
  std::vector<ConfigProblem> out;
  const auto quoted = [](const std::string& s) { return as_json_string(s); };
  if (c.schedule.kind == "plateau" && is_validation_metric(c.schedule.monitor))
    out.push_back({"schedule.monitor", quoted(c.schedule.monitor) +
                                           " (the plateau schedule's metric) needs validation samples, and " +
                                           why + "; monitor \"loss\" or hold out validation samples"});
  if (c.early_stopping.patience > 0 && is_validation_metric(c.early_stopping.monitor))
    out.push_back({"early_stopping.monitor",
                   quoted(c.early_stopping.monitor) + " (early stopping, early_stopping.patience " +
                       std::to_string(c.early_stopping.patience) + ") needs validation samples, and " + why +
                       "; monitor \"loss\" or hold out validation samples"});
  if (is_validation_metric(c.checkpoint.monitor))
    out.push_back(
        {"checkpoint.monitor",
         quoted(c.checkpoint.monitor) + " chooses best.safetensors" +
             (c.checkpoint.save_best_only ? " and the periodic files checkpoint.save_best_only keeps"
                                          : std::string()) +
             " by a validation metric, and " + why +
             ": no checkpoint would ever count as best; monitor \"loss\" (the training loss) or hold "
             "out validation samples"});
  if (c.checkpoint.every_epochs > 0) {
    // The template with each validation metric replaced by the training loss, as the name to use instead.
    const std::string& tmpl = c.checkpoint.filename_template;
    std::string instead = tmpl, named;
    const std::vector<TemplateField> fields = template_fields(tmpl);
    for (auto f = fields.rbegin(); f != fields.rend(); ++f) {
      if (!is_validation_metric(f->name)) continue;
      named = std::string(f->text);
      instead.replace(static_cast<std::size_t>(f->name.data() - tmpl.data()), f->name.size(), "loss");
    }
    if (!named.empty())
      out.push_back({std::string(kTemplateKey),
                     quoted(tmpl) + " names " + named + ", a validation metric, and " + why +
                         ": the periodic checkpoints could not be named; use " + quoted(instead) +
                         " (the training loss) or hold out validation samples"});
  }
  return out;
}

std::optional<ConfigProblem> warmup_problem(const Config& c, std::int64_t total_steps,
                                            const std::string& steps_text) {
  const ScheduleConfig& s = c.schedule;
  if (s.warmup_steps == 0 || s.warmup_steps < total_steps) return std::nullopt;
  // The rate of the run's last step (0-based total_steps - 1), still on the warm-up's line.
  const double last =
      s.warmup_start_factor + (1.0 - s.warmup_start_factor) *
                                  static_cast<double>(std::max<std::int64_t>(0, total_steps - 1)) /
                                  static_cast<double>(s.warmup_steps);
  return ConfigProblem{"schedule.warmup_steps",
                       "is " + std::to_string(s.warmup_steps) + " but the run has " +
                           std::to_string(total_steps) + " optimizer step" + (total_steps == 1 ? "" : "s") +
                           " (" + steps_text + "): the whole run would be warm-up, at " +
                           percent_text(s.warmup_start_factor) + " to " + percent_text(last) +
                           " of train.lr, and the " + s.kind + " schedule would never begin; set it below " +
                           std::to_string(total_steps) + " (a tenth of the run is usual) or train longer"};
}

std::vector<ConfigProblem> training_problems(const Config& c) {
  std::vector<ConfigProblem> out;
  const LossConfig& loss = c.loss;
  const std::string kind = as_json_string(to_string(loss.kind));
  // The loss: at least one of the terms loss.kind has must weigh more than 0, or every prediction scores 0.
  const bool cross_entropy_counts = loss.has_cross_entropy() && loss.cross_entropy_weight > 0;
  const bool dice_counts = loss.has_dice() && loss.dice_weight > 0;
  if (!cross_entropy_counts && !dice_counts) {
    if (loss.has_cross_entropy() && loss.has_dice())
      out.push_back({"loss.cross_entropy_weight",
                     "is 0, and so is loss.dice_weight: the loss (loss.kind " + kind +
                         ") is 0 whatever the model predicts, so the run cannot learn; give either term a "
                         "weight above 0"});
    else
      out.push_back({loss.has_cross_entropy() ? "loss.cross_entropy_weight" : "loss.dice_weight",
                     "is 0, and it scales the whole loss of loss.kind " + kind +
                         ": the loss is 0 whatever the model predicts, so the run cannot learn; give it a "
                         "weight above 0"});
  }
  // Class weights: a class weighed 0 adds nothing to the loss (the key's own check refuses all of them 0).
  // Dice alone averages the foreground classes (and the background with dice_include_background): all of
  // those 0, and it has nothing to learn.
  if (!loss.class_weights.empty() && !loss.has_cross_entropy()) {
    const std::size_t first = loss.dice_include_background ? 0 : 1;
    if (first < loss.class_weights.size() &&
        std::all_of(loss.class_weights.begin() + static_cast<std::ptrdiff_t>(first), loss.class_weights.end(),
                    [](double w) { return w == 0; }))
      out.push_back({"loss.class_weights",
                     show(json(loss.class_weights)) +
                         " weighs 0 every class the Dice term averages (classes " + std::to_string(first) +
                         ".." + std::to_string(loss.class_weights.size() - 1) +
                         " with loss.kind \"dice\"), so the run cannot learn; weigh one of them above 0"});
  }
  // Keys of the other optimizer: judged against their defaults, because configs are written out whole (every
  // checkpoint, every file the workbench saves holds every key); a value changed from it is a setting the
  // user meant and the run would never read.
  const OptimizerConfig defaults;
  const OptimizerConfig& o = c.optimizer;
  const std::string optimizer = as_json_string(o.kind);
  const auto unread = [&](const char* key, const std::string& value, const std::string& fallback,
                          const char* reader) {
    out.push_back({key, "is " + value + ", but optimizer.kind " + optimizer + " does not use it (" + reader +
                            " does): it would change nothing; leave it at " + fallback +
                            " (its default) or choose an optimizer that reads it"});
  };
  if (o.kind == "sgd") {
    if (o.beta1 != defaults.beta1)
      unread("optimizer.beta1", number_text(o.beta1), number_text(defaults.beta1), "adam or adamw");
    if (o.beta2 != defaults.beta2)
      unread("optimizer.beta2", number_text(o.beta2), number_text(defaults.beta2), "adam or adamw");
    if (o.eps != defaults.eps)
      unread("optimizer.eps", number_text(o.eps), number_text(defaults.eps), "adam or adamw");
  } else {
    if (o.momentum != defaults.momentum)
      unread("optimizer.momentum", number_text(o.momentum), number_text(defaults.momentum), "sgd");
    if (o.nesterov != defaults.nesterov)
      unread("optimizer.nesterov", o.nesterov ? "true" : "false", defaults.nesterov ? "true" : "false",
             "sgd");
  }
  if (c.data.val_fraction == 0 && c.data.validation_split.empty()) {
    std::vector<ConfigProblem> more = validation_problems(c, "data.val_fraction is 0");
    out.insert(out.end(), more.begin(), more.end());
  }
  if (c.train.steps > 0)
    if (auto p = warmup_problem(c, c.train.steps, "train.steps " + std::to_string(c.train.steps)))
      out.push_back(std::move(*p));
  return out;
}

void throw_config_problems(const std::vector<ConfigProblem>& problems) {
  if (problems.empty()) return;
  std::string text = problems.front().problem;
  for (std::size_t i = 1; i < problems.size(); ++i)
    text += "; and " + (problems[i].key.empty() ? "" : problems[i].key + ": ") + problems[i].problem;
  throw ConfigError(problems.front().key, text);
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

nlohmann::json read_config_document(const std::filesystem::path& file) {
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the checks below refuse it, and devices such as
  // /dev/zero, before anything is read.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) throw ConfigError(name, "the config file does not exist");
    throw ConfigError(name, std::string("cannot open the config file: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw ConfigError(name, std::string("cannot read the config file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(name, "is a folder, not a config file");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(name, "is not a regular file (a pipe, device or socket); give the path of a JSON file");
  if (st.st_size > kMaxConfigFileBytes)
    throw ConfigError(name, "is " + std::to_string(st.st_size) + " bytes; a config file is at most " +
                                std::to_string(kMaxConfigFileBytes) + " bytes (1 MiB)");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(name, std::string("cannot read the config file: ") + std::strerror(errno));
    if (n == 0) break;  // it shrank meanwhile: parse what there is
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return parse_config_text(text, name);
}

nlohmann::json parse_config_text(std::string_view text, const std::string& source) {
  // Duplicate keys are refused while parsing (a DOM keeps one of them silently), naming the dotted key; the
  // key being read also names where a number too large for a double is. Each level keeps the key that
  // opened it and the keys seen in it; a dotted path is joined only for a message, so that neither time nor
  // memory grows with the depth times the keys (the depth itself is bounded by parse_json_bounded()).
  struct Level {
    std::string key;  // the key last read when this object opened (the top level's is not used)
    std::set<std::string, std::less<>> seen;
  };
  std::vector<Level> objects;
  std::string last_key;
  const auto dotted = [&](std::string_view leaf) {
    std::string path;
    for (std::size_t i = 1; i < objects.size(); ++i) path += objects[i].key + ".";
    return path + std::string(leaf);
  };
  const auto hook = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      objects.push_back({last_key, {}});
    } else if (event == json::parse_event_t::object_end) {
      if (!objects.empty()) objects.pop_back();
    } else if (event == json::parse_event_t::key && !objects.empty()) {
      last_key = parsed.get<std::string>();
      if (!objects.back().seen.insert(last_key).second)
        throw ConfigError(dotted(last_key),
                          "appears twice in the config file " + source + "; keep one of them");
    }
  };

  json j;
  try {
    j = parse_json_bounded(text, /*allow_exceptions=*/true, hook);
  } catch (const JsonTooDeep& e) {
    throw ConfigError(source, "has " + std::string(e.what()) + "; a config holds at most " +
                                  std::to_string(kMaxJsonDepth) + " levels (a real one has 2 or 3)");
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and may point one past the end; line and column count from 1.
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::size_t line = 1 + static_cast<std::size_t>(std::count(
                                     text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    const std::size_t line_start = at == 0 ? 0 : text.rfind('\n', at - 1) + 1;  // npos + 1 == 0
    const std::size_t column = at - line_start + 1;
    std::string reason = e.what();
    if (const auto p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    if (reason.starts_with("parse error"))
      if (const auto p = reason.find(": "); p != std::string::npos) reason = reason.substr(p + 2);
    throw ConfigError(source, "line " + std::to_string(line) + ", column " + std::to_string(column) +
                                  " (byte " + std::to_string(e.byte) + "): invalid JSON: " + reason);
  } catch (const json::exception& e) {
    // A number beyond double's range (1e400) is out_of_range.406, without a position.
    std::string reason = e.what();
    if (const auto p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    const std::string where =
        objects.empty() || last_key.empty() ? std::string() : " at key " + dotted(last_key);
    throw ConfigError(source, "invalid JSON" + where + ": " + reason +
                                  " (a number must fit a 64-bit float, up to about 1.8e308)");
  }
  return j;
}

Config load_config_file(const std::filesystem::path& file) {
  return config_from_json(read_config_document(file), std::filesystem::absolute(file).parent_path());
}

std::string override_key(std::string_view assignment) {
  return trim(assignment.substr(0, assignment.find('=')));
}

void apply_override(nlohmann::json& j, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos)
    throw ConfigError("--set", "expected key=value, got " + as_json_string(assignment));
  const std::string key = override_key(assignment);
  const std::string raw(assignment.substr(eq + 1));
  if (key.empty()) throw ConfigError("--set", "the key before '=' is empty in " + as_json_string(assignment));
  const ConfigKey* k = find_config_key(key);
  if (!k) {
    if (is_section(key))
      throw ConfigError(key, "is a section; set its keys one at a time, e.g. " + key + ".<key>=...");
    throw ConfigError(key, unknown_key_problem(key));
  }
  json value;
  try {
    value = parse_json_bounded(raw, /*allow_exceptions=*/false);
  } catch (const JsonTooDeep& e) {
    throw ConfigError(key, "the value has " + std::string(e.what()) + "; a config holds at most " +
                               std::to_string(kMaxJsonDepth) + " levels");
  }
  const bool textual =
      k->type == ConfigType::string || k->type == ConfigType::enumeration || k->type == ConfigType::path;
  if (value.is_discarded() || (textual && !value.is_string())) value = raw;
  if (!textual && value.is_string()) {
    // A number JSON cannot hold (1e400) is the user's number, not a string.
    errno = 0;
    char* end = nullptr;
    const std::string text = trim(raw);
    (void)std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && errno == ERANGE)
      throw ConfigError(key, "must fit a 64-bit float (up to about 1.8e308), got " + text);
  }
  if (auto problem = validate_value(*k, value)) {
    // The user's own text, not the JSON library's rendering of the number (1e22, not 1e+22).
    const std::string shown = ", got " + show(value);
    if (value.is_number_float() && problem->ends_with(shown))
      problem = problem->substr(0, problem->size() - shown.size()) + ", got " + trim(raw);
    throw ConfigError(key, *problem);
  }

  if (j.is_null()) j = json::object();
  if (!j.is_object()) throw ConfigError("", "a config must be a JSON object, got " + show(j));
  const std::string section(section_of(key));
  if (section.empty()) {
    j[key] = std::move(value);
    return;
  }
  json& s = j[section];
  if (s.is_null()) s = json::object();
  if (!s.is_object()) throw ConfigError(section, "must be an object, got " + show(s));
  s[std::string(leaf_of(key))] = std::move(value);
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
