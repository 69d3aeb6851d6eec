// The learning rate (and one-cycle's momentum) at each optimizer step, as torch.optim.lr_scheduler computes
// them when its scheduler is stepped once per optimizer step (docs/MODEL.md, "Learning-rate schedules"). Step
// k (0-based) trains with at(k): the value before the k-th scheduler.step().
//
//   warm-up    LinearLR(start_factor, total_iters = W) for k < W, then the schedule below at t = k - W over
//              T' = T - W steps (SequentialLR with milestone W)
//   constant   lr
//   step       lr * gamma^floor(t / (step_epochs * steps_per_epoch))          (StepLR)
//   cosine     min_lr + (lr - min_lr) (1 + cos(pi t / T')) / 2, t <= T'       (CosineAnnealingLR)
//   poly       lr (1 - t / T')^power, t <= T'                                  (PolynomialLR, nnU-Net)
//   one_cycle  OneCycleLR(max_lr = lr, total_steps = T, pct_start, anneal "cos", div_factor,
//              final_div_factor, three_phase false), momentum 0.95 -> 0.85 -> 0.95 when cycled
//   plateau    lr times gamma^(reductions), never below min_lr: ReduceLROnPlateau(mode min for losses and
//              max otherwise, factor gamma, patience, threshold (relative), cooldown, min_lr, eps 1e-8),
//              stepped once per validation
//
// Past the end of a run (T changed on resume) cosine, poly and one_cycle hold their last value. The state
// that is not a function of the step (plateau's) travels in checkpoints as JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "unet/config/config.h"
#include "unet/train/monitor.h"

namespace unet {

struct ScheduledValues {
  double lr = 0;
  std::optional<double> momentum;  // one_cycle with cycle_momentum: Adam's beta1 or SGD's momentum
};

class LearningRateSchedule {
 public:
  // base_lr is train.lr (one_cycle's max_lr). total_steps > 0 and steps_per_epoch > 0. Throws ConfigError
  // naming schedule.warmup_steps when the warm-up does not leave at least one step of the schedule.
  // `monitor_class`: checkpoint.monitor_class, the class a plateau's val_iou or val_dice follows (monitor.h).
  LearningRateSchedule(const ScheduleConfig& config, double base_lr, std::int64_t total_steps,
                       std::int64_t steps_per_epoch, const std::string& monitor_class = "mean");

  ScheduledValues at(std::int64_t step) const;

  // plateau: after a validation with the monitored metric's value. Returns a log line when the rate was
  // lowered; a non-finite value counts as no improvement. Other kinds ignore it.
  std::optional<std::string> on_validation(double value);

  // plateau's state (the best value, validations without improvement, cooldown left, the rate); {} for the
  // others. set_state accepts what state() wrote and ignores an empty or foreign object.
  nlohmann::json state() const;
  void set_state(const nlohmann::json& state);

 private:
  double after_warmup(std::int64_t t) const;

  ScheduleConfig config_;
  Monitor monitor_;
  double base_lr_;
  std::int64_t total_steps_, steps_per_epoch_;
  // plateau
  double plateau_lr_;
  std::optional<double> best_;
  std::int64_t bad_validations_ = 0, cooldown_left_ = 0;
};

// Whether a monitored metric improves downwards (the losses) rather than upwards (IoU, Dice, accuracy).
bool lower_is_better(const std::string& monitor);

}  // namespace unet
