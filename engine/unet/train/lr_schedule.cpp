#include "unet/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "unet/core/number_text.h"

namespace unet {

namespace {

constexpr double kPlateauEps = 1e-8;  // ReduceLROnPlateau's eps: smaller reductions are ignored
constexpr double kBaseMomentum = 0.85, kMaxMomentum = 0.95;  // OneCycleLR's defaults

// OneCycleLR's _annealing_cos: from `start` at pct 0 to `end` at pct 1.
double cosine_anneal(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

}  // namespace

bool lower_is_better(const std::string& monitor) {
  return monitor == "loss" || monitor == "val_loss";
}

LearningRateSchedule::LearningRateSchedule(const ScheduleConfig& config, double base_lr,
                                           std::int64_t total_steps, std::int64_t steps_per_epoch,
                                           const std::string& monitor_class)
    : config_(config),
      monitor_(config.monitor, monitor_class),
      base_lr_(base_lr),
      total_steps_(std::max<std::int64_t>(1, total_steps)),
      steps_per_epoch_(std::max<std::int64_t>(1, steps_per_epoch)),
      plateau_lr_(base_lr) {
  if (config_.kind != ScheduleKind::constant && config_.kind != ScheduleKind::plateau &&
      config_.warmup_steps >= total_steps_)
    throw ConfigError("schedule.warmup_steps", "is " + std::to_string(config_.warmup_steps) +
                                                   " but the run has " + std::to_string(total_steps_) +
                                                   " steps: the " + to_string(config_.kind) +
                                                   " schedule needs at least one step after the warm-up");
}

ScheduledValues LearningRateSchedule::at(std::int64_t step) const {
  step = std::max<std::int64_t>(0, step);
  const std::int64_t warmup = config_.warmup_steps;
  if (config_.kind == ScheduleKind::one_cycle) {
    // OneCycleLR: two phases; the second starts where the first ends (a fractional step).
    const auto total = static_cast<double>(total_steps_);
    const double initial = base_lr_ / config_.div_factor, final_lr = initial / config_.final_div_factor;
    const double rise_end = config_.pct_start * total - 1.0, fall_end = total - 1.0;
    const auto k = static_cast<double>(std::min(step, total_steps_ - 1));
    const bool rising = k <= rise_end;
    const double from = rising ? 0.0 : rise_end, to = rising ? rise_end : fall_end;
    // A phase of zero length (tiny runs) is over at once; torch divides by zero there.
    const double pct = to > from ? (k - from) / (to - from) : 1.0;
    ScheduledValues v;
    v.lr = rising ? cosine_anneal(initial, base_lr_, pct) : cosine_anneal(base_lr_, final_lr, pct);
    if (config_.cycle_momentum)
      v.momentum = rising ? cosine_anneal(kMaxMomentum, kBaseMomentum, pct)
                          : cosine_anneal(kBaseMomentum, kMaxMomentum, pct);
    return v;
  }
  if (step < warmup) {
    // LinearLR from start_factor to 1 over the warm-up; plateau's rate is what it warms up to.
    const double start = config_.warmup_start_factor;
    const double factor = start + (1.0 - start) * static_cast<double>(step) / static_cast<double>(warmup);
    return {(config_.kind == ScheduleKind::plateau ? plateau_lr_ : base_lr_) * factor, std::nullopt};
  }
  return {after_warmup(step - warmup), std::nullopt};
}

double LearningRateSchedule::after_warmup(std::int64_t t) const {
  const std::int64_t span = total_steps_ - config_.warmup_steps;  // T', >= 1 but for constant and plateau
  const auto progress = [&] {
    return static_cast<double>(std::min(t, span)) / static_cast<double>(std::max<std::int64_t>(1, span));
  };
  if (config_.kind == ScheduleKind::step) {
    const std::int64_t every = config_.step_epochs * steps_per_epoch_;
    const std::int64_t decays = t / every;  // floor: StepLR decays at whole multiples
    return base_lr_ * std::pow(config_.gamma, static_cast<double>(decays));
  }
  if (config_.kind == ScheduleKind::cosine)
    return config_.min_lr +
           (base_lr_ - config_.min_lr) * (1.0 + std::cos(std::numbers::pi * progress())) / 2.0;
  if (config_.kind == ScheduleKind::poly) return base_lr_ * std::pow(1.0 - progress(), config_.power);
  if (config_.kind == ScheduleKind::plateau) return plateau_lr_;
  return base_lr_;  // constant
}

std::optional<std::string> LearningRateSchedule::on_validation(double value) {
  if (config_.kind != ScheduleKind::plateau) return std::nullopt;
  const bool lower = monitor_.lower_is_better();
  // Relative threshold, as ReduceLROnPlateau's threshold_mode "rel"; NaN never improves.
  const bool improved = !best_ || (lower ? value < *best_ * (1.0 - config_.threshold)
                                         : value > *best_ * (1.0 + config_.threshold));
  if (improved && std::isfinite(value)) {
    best_ = value;
    bad_validations_ = 0;
  } else {
    ++bad_validations_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_validations_ = 0;
  }
  if (bad_validations_ <= config_.patience) return std::nullopt;
  cooldown_left_ = config_.cooldown;
  bad_validations_ = 0;
  const double lowered = std::max(plateau_lr_ * config_.gamma, config_.min_lr);
  if (plateau_lr_ - lowered <= kPlateauEps) return std::nullopt;
  const double was = plateau_lr_;
  plateau_lr_ = lowered;
  return "learning rate lowered from " + number_text(was) + " to " + number_text(lowered) + ": " +
         monitor_.describe() + " has not improved for " + std::to_string(config_.patience + 1) +
         " validation" + (config_.patience == 0 ? "" : "s") + " (best " +
         (best_ ? metric_text(*best_) : std::string("none")) + ")";
}

nlohmann::json LearningRateSchedule::state() const {
  if (config_.kind != ScheduleKind::plateau) return nlohmann::json::object();
  nlohmann::json j{
      {"lr", plateau_lr_}, {"bad_validations", bad_validations_}, {"cooldown_left", cooldown_left_}};
  j["best"] = best_ ? nlohmann::json(*best_) : nlohmann::json(nullptr);
  return j;
}

void LearningRateSchedule::set_state(const nlohmann::json& state) {
  if (config_.kind != ScheduleKind::plateau || !state.is_object()) return;
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto it = state.find(key);
    return it != state.end() && it->is_number() && std::isfinite(it->get<double>())
               ? std::optional<double>(it->get<double>())
               : std::nullopt;
  };
  if (const auto lr = number("lr"); lr && *lr > 0) plateau_lr_ = std::max(*lr, config_.min_lr);
  best_ = number("best");
  if (const auto n = number("bad_validations"); n && *n >= 0)
    bad_validations_ = static_cast<std::int64_t>(*n);
  if (const auto n = number("cooldown_left"); n && *n >= 0)
    cooldown_left_ = std::min(static_cast<std::int64_t>(*n), config_.cooldown);
}

}  // namespace unet
