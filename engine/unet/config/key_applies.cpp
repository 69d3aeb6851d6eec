// key_applies(): which keys the rest of a config leaves unread, and why. Each rule names the value that
// rules a key out and the values that would read it, from what the trainer does: the learning-rate schedule
// (train/lr_schedule.cpp) reads each schedule.* key under the kinds listed here only, the optimizer its own
// kind's keys, the loss the terms its kind has (loss/kinds.h), the periodic checkpoints their keys only when
// they are on (train/checkpoint_policy.cpp), the CUDA backend cuda.* only on a GPU, augmentation
// (data/augment_draw.cpp) augment.* only under data.augment and a transform's settings only when its
// probability is above 0; instances.* only under task "instances", each target's settings under that target.
#include "unet/config/key_applies.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "unet/config/schema_rules.h"
#include "unet/loss/kinds.h"

namespace unet {

namespace {

using config_detail::as_json_string;

bool any_of_keys(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// True when `current` (the value of `kind_key`) is one of `readers`; else false, and *why says which
// values read the key: `schedule.kind "constant" does not use it (step or plateau does)`.
template <typename Kind>
bool read_by(Kind current, const std::vector<Kind>& readers, std::string_view kind_key, std::string* why) {
  if (std::find(readers.begin(), readers.end(), current) != readers.end()) return true;
  if (why) {
    std::string names;
    for (std::size_t i = 0; i < readers.size(); ++i) {
      if (i > 0) names += i + 1 == readers.size() ? " or " : ", ";
      names += to_string(readers[i]);
    }
    *why = std::string(kind_key) + " " + as_json_string(to_string(current)) + " does not use it (" + names +
           " does)";
  }
  return false;
}

// The loss kinds whose table row (loss/kinds.h) passes `has`.
template <typename Predicate>
std::vector<LossKind> loss_kinds_where(Predicate has) {
  std::vector<LossKind> out;
  for (const LossKindInfo& info : kLossKinds)
    if (has(info)) out.push_back(info.kind);
  return out;
}

// False with `text` as *why.
bool ruled_out(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

bool schedule_key_applies(const Config& c, std::string_view key, std::string* why) {
  using S = ScheduleKind;
  const S kind = c.schedule.kind;
  const auto by = [&](const std::vector<S>& readers) { return read_by(kind, readers, "schedule.kind", why); };
  if (key == "schedule.step_epochs") return by({S::step});
  if (key == "schedule.gamma") return by({S::step, S::plateau});
  if (key == "schedule.min_lr") return by({S::cosine, S::plateau});
  if (key == "schedule.power") return by({S::poly});
  if (any_of_keys(key, {"schedule.pct_start", "schedule.div_factor", "schedule.final_div_factor",
                        "schedule.cycle_momentum"}))
    return by({S::one_cycle});
  if (any_of_keys(key, {"schedule.monitor", "schedule.patience", "schedule.cooldown", "schedule.threshold"}))
    return by({S::plateau});
  // one_cycle warms up itself (schedule.pct_start); every other kind starts with the linear warm-up.
  const std::vector<S> warming = {S::constant, S::step, S::cosine, S::poly, S::plateau};
  if (key == "schedule.warmup_steps") return by(warming);
  if (key == "schedule.warmup_start_factor") {
    if (!by(warming)) return false;
    if (c.schedule.warmup_steps == 0) return ruled_out(why, "schedule.warmup_steps is 0 (no warm-up)");
  }
  return true;
}

bool loss_key_applies(const Config& c, std::string_view key, std::string* why) {
  const auto by = [&](auto has) { return read_by(c.loss.kind, loss_kinds_where(has), "loss.kind", why); };
  if (key == "loss.cross_entropy_weight")
    return by([](const LossKindInfo& k) { return k.pixel_term != PixelTerm::none; });
  if (any_of_keys(key, {"loss.dice_weight", "loss.dice_smooth", "loss.dice_include_background"}))
    return by([](const LossKindInfo& k) { return k.image_term != ImageTerm::none; });
  if (any_of_keys(key, {"loss.focal_gamma", "loss.focal_alpha"})) {
    if (!by([](const LossKindInfo& k) { return k.pixel_term == PixelTerm::focal; })) return false;
    if (key == "loss.focal_alpha" && c.model.classes != 1)
      return ruled_out(why, "model.classes is " + std::to_string(c.model.classes) +
                                ": it applies to binary models only (model.classes 1)");
  }
  return true;
}

}  // namespace

bool key_applies(const Config& c, std::string_view key, std::string* why) {
  const std::string_view section = config_detail::section_of(key);
  if (section == "schedule") return schedule_key_applies(c, key, why);
  if (section == "loss") return loss_key_applies(c, key, why);
  if (section == "optimizer") {
    using O = OptimizerKind;
    if (any_of_keys(key, {"optimizer.beta1", "optimizer.beta2", "optimizer.eps"}))
      return read_by(c.optimizer.kind, {O::adam, O::adamw}, "optimizer.kind", why);
    if (any_of_keys(key, {"optimizer.momentum", "optimizer.nesterov"}))
      return read_by(c.optimizer.kind, {O::sgd}, "optimizer.kind", why);
    return true;
  }
  if (section == "cuda") {
    const bool gpu = std::any_of(c.devices.begin(), c.devices.end(),
                                 [](const DeviceId& d) { return d.kind == DeviceKind::cuda; });
    return gpu || ruled_out(why, "no GPU is among the devices: it is for GPUs only");
  }
  if (section == "data") {
    using D = DataSource;
    if (key == "data.path") return read_by(c.data.source, {D::folder, D::dsb2018}, "data.source", why);
    if (key == "data.synthetic_samples") return read_by(c.data.source, {D::synthetic}, "data.source", why);
    if (any_of_keys(key, {"data.val_fraction", "data.validation_split"}) && !c.data.val_path.empty())
      return ruled_out(why, "data.val_path is set: its folder is the validation set");
    if (key == "data.val_fraction" && !c.data.validation_split.empty())
      return ruled_out(why, "data.validation_split is set: it takes the place of val_fraction");
    if (key == "data.val_path") return read_by(c.data.source, {D::folder, D::dsb2018}, "data.source", why);
    if (key == "data.image_size") return read_by(c.data.mode, {DataMode::resize}, "data.mode", why);
    if (any_of_keys(key, {"data.patch_size", "data.foreground_oversample", "data.patches_per_epoch"}))
      return read_by(c.data.mode, {DataMode::patch}, "data.mode", why);
    using N = NormalizeMode;
    const N norm = c.data.normalize.mode;
    if (key == "data.normalize_percentiles") return read_by(norm, {N::percentile}, "data.normalize", why);
    if (key == "data.normalize_clip") return read_by(norm, {N::percentile, N::range}, "data.normalize", why);
    if (key == "data.normalize_range") return read_by(norm, {N::range}, "data.normalize", why);
    if (key == "data.normalize_scope") return read_by(norm, {N::zscore}, "data.normalize", why);
    if (any_of_keys(key, {"data.normalize_mean", "data.normalize_std"})) {
      if (!read_by(norm, {N::zscore}, "data.normalize", why)) return false;
      if (c.data.normalize.scope != NormalizeScope::dataset)
        return ruled_out(why, "data.normalize_scope is \"image\": each image's own values are used");
    }
    return true;
  }
  if (section == "augment") {
    if (!c.data.augment) return ruled_out(why, "data.augment is false (no augmentation)");
    // A transform's settings ("augment.elastic_sigma") are read only when its probability
    // ("augment.elastic_p") is above 0.
    const std::string_view leaf = config_detail::leaf_of(key);
    const std::string probability = "augment." + std::string(leaf.substr(0, leaf.find('_'))) + "_p";
    const ConfigKey* chance = probability == key ? nullptr : find_config_key(probability);
    if (chance && chance->get(c) == 0) return ruled_out(why, probability + " is 0 (it never happens)");
    return true;
  }
  if (section == "instances") {
    if (!read_by(c.task, {ModelTask::instances}, "task", why)) return false;
    using T = InstanceTarget;
    if (key == "instances.boundary_width")
      return read_by(c.instances.target, {T::boundary}, "instances.target", why);
    if (any_of_keys(key, {"instances.border_w0", "instances.border_sigma", "instances.balance_classes"}))
      return read_by(c.instances.target, {T::weight_map}, "instances.target", why);
    return true;
  }
  if (key == "train.epochs" && c.train.steps > 0)
    return ruled_out(why, "train.steps is " + std::to_string(c.train.steps) + ": it overrides epochs");
  if (any_of_keys(key,
                  {"early_stopping.monitor", "early_stopping.min_delta", "early_stopping.restore_best"}) &&
      c.early_stopping.patience == 0)
    return ruled_out(why, "early_stopping.patience is 0 (early stopping is off)");
  if (any_of_keys(key, {"checkpoint.template", "checkpoint.keep_last", "checkpoint.save_best_only"}) &&
      c.checkpoint.every_epochs == 0)
    return ruled_out(why, "checkpoint.every_epochs is 0 (no periodic checkpoints)");
  return true;
}

}  // namespace unet
