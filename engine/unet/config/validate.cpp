// Judging config values: one value against its key's declared type and bounds (validate_value), a whole
// document (config_problems: unknown keys, then every key, then the cross-key rules) and what a training run
// adds (training_problems). Messages come from a key's declared type and bounds, never from code written for
// one key, so every key reports problems in the same words. Cross-key rules (image size against depth,
// data.path against data.source) run only when the keys they read are valid on their own, so one mistake
// gives one message.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "unet/config/checkpoint_name.h"
#include "unet/config/class_rule.h"
#include "unet/config/config.h"
#include "unet/config/key_applies.h"
#include "unet/config/schema_rules.h"
#include "unet/config/suggest.h"
#include "unet/core/number_text.h"
#include "unet/core/utf8.h"
#include "unet/loss/kinds.h"

namespace unet {

using config_detail::as_json_string;
using config_detail::is_section;
using config_detail::kTemplateKey;
using config_detail::leaf_of;
using config_detail::lookup;
using config_detail::section_of;
using config_detail::show;
using config_detail::template_fields;
using config_detail::TemplateField;
using config_detail::unknown_key_problem;

namespace {

using json = nlohmann::json;

constexpr std::size_t kShowLimit = 80;

}  // namespace

// A value as it appears in a message: its JSON text, cut short.
std::string config_detail::show(const json& v) {
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

std::string config_detail::as_json_string(std::string_view s) {
  return show(json(std::string(s)));
}

namespace {

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
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

// The largest activation a config may ask for, in elements: 2^40 (4 TiB as fp32), far beyond any machine,
// and small enough that the planner's byte sums over all layers stay inside int64.
constexpr std::int64_t kMaxActivationElements = std::int64_t{1} << 40;

}  // namespace

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
  // A valid enumeration key's value, read by its name table (config_enums.h).
  const auto named = [&](const char* path, const auto& names) {
    return *value_in(names, value(path).get<std::string>());
  };

  for (const char* size_key : {"data.image_size", "data.patch_size"}) {
    if (!valid({size_key, "model.depth"})) continue;
    const json size = value(size_key);
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
      out.push_back({size_key, problem});
      break;
    }
  }
  if (valid({"data.channels", "model.in_channels"}) && !value("data.channels").empty() &&
      value("data.channels").size() != value("model.in_channels").get<std::size_t>())
    out.push_back({"data.channels", "names " + std::to_string(value("data.channels").size()) +
                                        " channel(s) but model.in_channels is " +
                                        show(value("model.in_channels")) + "; name one per input channel"});
  if (valid({"data.normalize_mean", "data.normalize_std"}) &&
      value("data.normalize_mean").size() != value("data.normalize_std").size())
    out.push_back({"data.normalize_std", "holds " + std::to_string(value("data.normalize_std").size()) +
                                             " value(s) and data.normalize_mean " +
                                             std::to_string(value("data.normalize_mean").size()) +
                                             ": give one mean and one std per channel, or neither"});
  if (valid({"data.val_path", "data.source"}) && !value("data.val_path").get<std::string>().empty() &&
      named("data.source", kDataSourceNames) == DataSource::synthetic)
    out.push_back({"data.val_path",
                   "is for the folder and dsb2018 sources; the synthetic source validates on "
                   "data.val_fraction of its images"});
  const bool instances = valid({"task"}) && named("task", kTaskNames) == ModelTask::instances;
  // A semantic task: only the source may fix the classes (the target is not read).
  if (valid({"data.source", "model.classes", "task"}) && !instances) {
    const std::optional<std::int64_t> fixed =
        required_classes(ModelTask::semantic, InstanceTarget{}, named("data.source", kDataSourceNames));
    if (fixed && value("model.classes").get<std::int64_t>() != *fixed)
      out.push_back(
          {"model.classes", "must be " + std::to_string(*fixed) +
                                " with data.source \"dsb2018\" (its nucleus masks are binary), got " +
                                show(value("model.classes"))});
  }
  // The object metrics are measured with task instances only.
  for (const char* key : {"schedule.monitor", "early_stopping.monitor", "checkpoint.monitor"}) {
    if (instances || !valid({key, "task"})) continue;
    const std::string metric = value(key).get<std::string>();
    if (metric == "val_dsb" || metric == "val_f1" || metric == "val_pq")
      out.push_back({key, show(value(key)) + " is an object metric, measured with task \"instances\" only"});
  }
  // task instances: the model's outputs are the target's (docs/MODEL.md, "Instance targets and
  // post-processing"), and the border weights act on the per-pixel term.
  if (instances && valid({"instances.target", "model.classes"})) {
    const InstanceTarget target = named("instances.target", kInstanceTargetNames);
    const bool boundary = target == InstanceTarget::boundary;
    const std::int64_t wanted = *required_classes(ModelTask::instances, target, DataSource::synthetic);
    if (value("model.classes").get<std::int64_t>() != wanted)
      out.push_back({"model.classes", std::string("must be ") + std::to_string(wanted) +
                                          " with task \"instances\" and instances.target " +
                                          (boundary ? "\"boundary\" (background, interior, boundary)"
                                                    : "\"weight_map\" (a binary mask)") +
                                          ", got " + show(value("model.classes"))});
    if (!boundary && valid({"loss.kind"})) {
      const std::optional<LossKind> kind = parse_loss_kind(value("loss.kind").get<std::string>());
      std::string weighing;  // the kinds with a per-pixel term, from the kinds table
      bool weighs = false;
      for (const LossKindInfo& info : kLossKinds) {
        if (info.pixel_term == PixelTerm::none) continue;
        weighing += (weighing.empty() ? "" : ", ") + std::string(to_string(info.kind));
        weighs = weighs || info.kind == kind;
      }
      if (!weighs)
        out.push_back({"loss.kind",
                       "has no per-pixel term for instances.target \"weight_map\"'s border "
                       "weights to weigh (" +
                           weighing + " have one), got " + show(value("loss.kind"))});
    }
  }
  // Each key is bounded on its own, but their product is the size of the largest activation (level 0 at the
  // widest of the decoder's concatenation, the head and the input): bounded so that a tensor's bytes, and the
  // planner's sums of them over every layer, stay far inside int64 (a plan of 2^63 bytes would wrap
  // negative).
  if (valid({"train.batch_size", "model.width", "model.classes", "model.in_channels", "data.image_size",
             "data.patch_size", "data.mode"})) {
    const json size =
        value(named("data.mode", kDataModeNames) == DataMode::patch ? "data.patch_size" : "data.image_size");
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
      named("optimizer.kind", kOptimizerKindNames) == OptimizerKind::sgd &&
      value("optimizer.nesterov").get<bool>() && value("optimizer.momentum").get<double>() == 0)
    out.push_back({"optimizer.nesterov", "needs optimizer.momentum > 0 (it is 0)"});
  if (valid({"schedule.kind", "schedule.warmup_steps"}) &&
      named("schedule.kind", kScheduleKindNames) == ScheduleKind::one_cycle &&
      value("schedule.warmup_steps").get<std::int64_t>() > 0)
    out.push_back({"schedule.warmup_steps",
                   "must be 0 with schedule.kind \"one_cycle\", which warms up itself "
                   "(schedule.pct_start); got " +
                       show(value("schedule.warmup_steps"))});
  if (valid({"schedule.kind", "schedule.cycle_momentum", "optimizer.kind", "optimizer.momentum"}) &&
      named("schedule.kind", kScheduleKindNames) == ScheduleKind::one_cycle &&
      value("schedule.cycle_momentum").get<bool>() &&
      named("optimizer.kind", kOptimizerKindNames) == OptimizerKind::sgd &&
      value("optimizer.momentum").get<double>() == 0)
    out.push_back({"schedule.cycle_momentum",
                   "needs optimizer.momentum > 0 with sgd (plain SGD has no momentum "
                   "to cycle); set it false or give SGD momentum"});
  if (valid({"schedule.kind", "schedule.min_lr", "train.lr"})) {
    const ScheduleKind kind = named("schedule.kind", kScheduleKindNames);
    if ((kind == ScheduleKind::cosine || kind == ScheduleKind::plateau) &&
        value("schedule.min_lr").get<double>() >= value("train.lr").get<double>())
      out.push_back({"schedule.min_lr", "must be below train.lr (" + show(value("train.lr")) + "), got " +
                                            show(value("schedule.min_lr"))});
  }
  // bf16 sums are NCCL's: CPU replicas sum in f32.
  if (valid({"cuda.comm_dtype", "devices"}) && value("cuda.comm_dtype").get<std::string>() == "bf16") {
    for (const json& d : value("devices"))
      if (parse_device(d.get_ref<const std::string&>())->kind == DeviceKind::cpu) {
        out.push_back({"cuda.comm_dtype", "\"bf16\" is for GPUs summing through NCCL; CPU replicas (" +
                                              d.get<std::string>() + ") sum in f32: set it to \"f32\""});
        break;
      }
  }
  // A metric of the validation set needs one.
  if (valid({"data.val_fraction"}) && value("data.val_fraction").get<double>() == 0) {
    if (valid({"schedule.kind", "schedule.monitor"}) &&
        named("schedule.kind", kScheduleKindNames) == ScheduleKind::plateau &&
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
  if (valid({"checkpoint.monitor_class", "model.classes"})) {
    // A binary model (1 output channel) has two classes, background and foreground.
    const std::int64_t classes = std::max<std::int64_t>(2, value("model.classes").get<std::int64_t>());
    if (const auto index = monitor_class_index(value("checkpoint.monitor_class").get<std::string>());
        index && *index >= classes)
      out.push_back({"checkpoint.monitor_class", "is class " + std::to_string(*index) +
                                                     ", but model.classes " + show(value("model.classes")) +
                                                     " gives classes 0.." + std::to_string(classes - 1) +
                                                     (classes == 2 ? " (background, foreground)" : "")});
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
      parse_loss_kind(value("loss.kind").get<std::string>()) == LossKind::dice &&
      value("model.classes").get<std::int64_t>() == 1 && !value("loss.dice_include_background").get<bool>() &&
      !value("loss.class_weights").empty())
    out.push_back({"loss.class_weights",
                   "has no effect with loss.kind \"dice\" on a binary model, whose Dice has the foreground "
                   "alone; set loss.dice_include_background or leave the weights empty"});
  if (valid({"data.source", "data.path"})) {
    const DataSource source = named("data.source", kDataSourceNames);
    if (source != DataSource::synthetic && value("data.path").get<std::string>().empty())
      out.push_back({"data.path", "required when data.source is \"" + std::string(to_string(source)) + "\""});
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
  if (c.schedule.kind == ScheduleKind::plateau && is_validation_metric(c.schedule.monitor))
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
                           " of train.lr, and the " + to_string(s.kind) +
                           " schedule would never begin; set it below " + std::to_string(total_steps) +
                           " (a tenth of the run is usual) or train longer"};
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
  // Keys of the other optimizer (key_applies() says which): judged against their defaults, because configs
  // are written out whole (every checkpoint, every file the workbench saves holds every key); a value changed
  // from it is a setting the user meant and the run would never read. Numbers as number_text() writes them.
  const auto value_text = [](const json& v) {
    return v.is_number() ? number_text(v.get<double>()) : v.dump();
  };
  for (const ConfigKey& k : config_schema()) {
    if (section_of(k.path) != "optimizer") continue;
    const json value = k.get(c);
    std::string why;
    if (value != k.default_value && !key_applies(c, k.path, &why))
      out.push_back({k.path, "is " + value_text(value) + ", but " + why +
                                 ": it would change nothing; leave it at " + value_text(k.default_value) +
                                 " (its default) or choose an optimizer that reads it"});
  }
  // A class chosen for val_iou and val_dice that no monitor in use reads.
  if (monitor_class_index(c.checkpoint.monitor_class)) {
    const auto per_class = [](const std::string& monitor) {
      return monitor == "val_iou" || monitor == "val_dice";
    };
    if (!per_class(c.checkpoint.monitor) &&
        !(c.early_stopping.patience > 0 && per_class(c.early_stopping.monitor)) &&
        !(c.schedule.kind == ScheduleKind::plateau && per_class(c.schedule.monitor)))
      out.push_back(
          {"checkpoint.monitor_class",
           "is class " + c.checkpoint.monitor_class +
               ", but no monitor in use watches val_iou or val_dice (checkpoint.monitor " +
               as_json_string(c.checkpoint.monitor) +
               "): it would change nothing; leave it at \"mean\" (its default) or monitor val_iou or "
               "val_dice"});
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

}  // namespace unet
