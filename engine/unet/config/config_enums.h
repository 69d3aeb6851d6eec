// The config's enumerations (precision, optimizer.kind, schedule.kind, data.source) and the names a config
// file writes them by (loss.kind's are the loss table's, kLossKinds in unet/loss/terms.h). The one rule: each
// enumeration has one name table, below; its to_string(), its parse_*() and the schema's choices (schema.cpp)
// all read that table, so a value is added by adding one row. The tables are in the order the schema offers
// the choices; a name, once written to files, is never renamed (old configs and checkpoints hold it).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unet/model/normalize.h"

namespace unet {

enum class Precision { fp32, mixed_fp16, mixed_bf16 };
// The optimizer (docs/MODEL.md, "Optimizers"): adam (L2 weight decay, torch.optim.Adam), adamw (decoupled),
// sgd (momentum, Nesterov optional).
enum class OptimizerKind { adam, adamw, sgd };
// The learning-rate schedule (docs/MODEL.md, "Learning-rate schedules").
enum class ScheduleKind { constant, step, cosine, one_cycle, poly, plateau };
// Where the samples come from: generated shapes, images/ and masks/ folders, or the DSB 2018 layout.
enum class DataSource { synthetic, folder, dsb2018 };
// How training images become the model's input: resized to data.image_size, or cropped at the file's own
// resolution into data.patch_size patches.
enum class DataMode { resize, patch };
// What the masks label and the model learns: each pixel's class (semantic), or objects apart from each other
// (instances: instance labels in, a target that separates touching objects trained, objects out).
enum class ModelTask { semantic, instances };
// task instances: the training target made from instance labels (docs/MODEL.md, "Instance targets and
// post-processing"): three classes (background, interior, boundary) or the binary mask with the U-Net
// paper's border weights.
enum class InstanceTarget { boundary, weight_map };

template <class E>
struct EnumName {
  E value;
  const char* name;
};

inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::fp32, "fp32"}, {Precision::mixed_fp16, "mixed-fp16"}, {Precision::mixed_bf16, "mixed-bf16"}};
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {
    {OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}, {OptimizerKind::sgd, "sgd"}};
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::constant, "constant"},   {ScheduleKind::step, "step"}, {ScheduleKind::cosine, "cosine"},
    {ScheduleKind::one_cycle, "one_cycle"}, {ScheduleKind::poly, "poly"}, {ScheduleKind::plateau, "plateau"}};
inline constexpr EnumName<DataSource> kDataSourceNames[] = {
    {DataSource::synthetic, "synthetic"}, {DataSource::folder, "folder"}, {DataSource::dsb2018, "dsb2018"}};

inline constexpr EnumName<DataMode> kDataModeNames[] = {{DataMode::resize, "resize"},
                                                        {DataMode::patch, "patch"}};
inline constexpr EnumName<ModelTask> kTaskNames[] = {{ModelTask::semantic, "semantic"},
                                                     {ModelTask::instances, "instances"}};
inline constexpr EnumName<InstanceTarget> kInstanceTargetNames[] = {
    {InstanceTarget::boundary, "boundary"}, {InstanceTarget::weight_map, "weight_map"}};
// data.normalize and data.normalize_scope (the enumerations are the model's: unet/model/normalize.h).
inline constexpr EnumName<NormalizeMode> kNormalizeModeNames[] = {{NormalizeMode::scale_255, "scale_255"},
                                                                  {NormalizeMode::percentile, "percentile"},
                                                                  {NormalizeMode::zscore, "zscore"},
                                                                  {NormalizeMode::range, "range"}};
inline constexpr EnumName<NormalizeScope> kNormalizeScopeNames[] = {{NormalizeScope::image, "image"},
                                                                    {NormalizeScope::dataset, "dataset"}};

// The name of `value` in `names`; "?" for a value the table lacks (a cast from a bad integer).
template <class E, std::size_t N>
constexpr const char* name_in(const EnumName<E> (&names)[N], E value) noexcept {
  for (const EnumName<E>& n : names)
    if (n.value == value) return n.name;
  return "?";
}

// The value named `text` in `names`; nothing for another text.
template <class E, std::size_t N>
constexpr std::optional<E> value_in(const EnumName<E> (&names)[N], std::string_view text) noexcept {
  for (const EnumName<E>& n : names)
    if (text == n.name) return n.value;
  return std::nullopt;
}

// Every name in `names`, in order: a key's choices.
template <class E, std::size_t N>
std::vector<std::string> names_of(const EnumName<E> (&names)[N]) {
  std::vector<std::string> out;
  out.reserve(N);
  for (const EnumName<E>& n : names) out.emplace_back(n.name);
  return out;
}

constexpr const char* to_string(Precision p) noexcept {
  return name_in(kPrecisionNames, p);
}
constexpr const char* to_string(OptimizerKind k) noexcept {
  return name_in(kOptimizerKindNames, k);
}
constexpr const char* to_string(ScheduleKind k) noexcept {
  return name_in(kScheduleKindNames, k);
}
constexpr const char* to_string(DataSource s) noexcept {
  return name_in(kDataSourceNames, s);
}
constexpr const char* to_string(DataMode m) noexcept {
  return name_in(kDataModeNames, m);
}
constexpr const char* to_string(NormalizeMode m) noexcept {
  return name_in(kNormalizeModeNames, m);
}
constexpr const char* to_string(ModelTask t) noexcept {
  return name_in(kTaskNames, t);
}
constexpr const char* to_string(InstanceTarget t) noexcept {
  return name_in(kInstanceTargetNames, t);
}

constexpr std::optional<Precision> parse_precision(std::string_view text) noexcept {
  return value_in(kPrecisionNames, text);
}
constexpr std::optional<OptimizerKind> parse_optimizer_kind(std::string_view text) noexcept {
  return value_in(kOptimizerKindNames, text);
}
constexpr std::optional<ScheduleKind> parse_schedule_kind(std::string_view text) noexcept {
  return value_in(kScheduleKindNames, text);
}
constexpr std::optional<DataSource> parse_data_source(std::string_view text) noexcept {
  return value_in(kDataSourceNames, text);
}

}  // namespace unet
