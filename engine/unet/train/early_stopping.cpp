#include "unet/train/early_stopping.h"

#include <algorithm>
#include <cmath>

#include "unet/core/number_text.h"

namespace unet {

EarlyStopping::EarlyStopping(EarlyStoppingConfig config, const std::string& monitor_class)
    : config_(std::move(config)), monitor_(config_.monitor, monitor_class) {}

EarlyStopping::Verdict EarlyStopping::update(double value, std::int64_t epoch, std::int64_t step) {
  if (!active()) return Verdict::off;
  const bool improved =
      std::isfinite(value) && (!best_ || (monitor_.lower_is_better() ? value < *best_ - config_.min_delta
                                                                     : value > *best_ + config_.min_delta));
  if (improved) {
    best_ = value;
    best_epoch_ = epoch;
    best_step_ = step;
    wait_ = 0;
    return Verdict::improved;
  }
  return ++wait_ < config_.patience ? Verdict::waiting : Verdict::stop;
}

std::string EarlyStopping::stop_reason(std::int64_t epoch) const {
  return monitor_.describe() + " has not improved by more than " + number_text(config_.min_delta) + " for " +
         std::to_string(wait_) + " validation" + (wait_ == 1 ? "" : "s") + " (best " +
         (best_ ? metric_text(*best_) + " at epoch " + std::to_string(best_epoch_)
                : std::string("none: it was never finite")) +
         "); stopped after epoch " + std::to_string(epoch);
}

nlohmann::json EarlyStopping::state() const {
  if (!active()) return nullptr;
  return {{"monitor", monitor_.key()},
          {"best", best_ ? nlohmann::json(*best_) : nlohmann::json(nullptr)},
          {"best_epoch", best_epoch_},
          {"best_step", best_step_},
          {"wait", wait_}};
}

void EarlyStopping::restore(const nlohmann::json& saved) {
  // A state kept for another monitor means nothing for this one: counting starts over.
  if (!saved.is_object() || saved.value("monitor", std::string()) != monitor_.key()) return;
  const auto count = [&](const char* key) {
    const auto v = saved.find(key);
    return v != saved.end() && v->is_number_integer() ? std::max<std::int64_t>(0, v->get<std::int64_t>()) : 0;
  };
  if (const auto value = saved.find("best"); value != saved.end() && value->is_number())
    best_ = value->get<double>();
  best_epoch_ = count("best_epoch");
  best_step_ = count("best_step");
  wait_ = count("wait");
}

}  // namespace unet
