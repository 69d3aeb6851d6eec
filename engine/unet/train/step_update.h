// What a training step does once its gradients are summed across replicas (docs/MODEL.md, "Precision"): the
// loss scaler's verdict (apply, skip, or the run diverged), the count of skipped steps with the log line each
// one gets, the clipping factor (torch.nn.utils.clip_grad_norm_'s, folded into the gradients' scale), the
// optimizer at the scheduled rate and momentum, and the check that the update left the state finite. The
// trainer stops a diverged run itself (it saves and reports); this object only says so and why.
#pragma once

#include <cstdint>
#include <string>

#include "unet/step/data_parallel.h"
#include "unet/train/loss_scaler.h"
#include "unet/train/lr_schedule.h"
#include "unet/train/observer.h"

namespace unet {

class StepUpdate {
 public:
  // `clip_grad_norm` is optimizer.clip_grad_norm (0: no clipping); `skipped_steps` those a resumed run
  // skipped.
  StepUpdate(LossScaler scaler, std::int64_t skipped_steps, double clip_grad_norm);

  // The scale the next step's loss is multiplied by before backward.
  double scale() const noexcept { return scaler_.scale(); }
  const LossScaler& scaler() const noexcept { return scaler_; }
  std::int64_t skipped_steps() const noexcept { return skipped_steps_; }
  // Back to an earlier position's count (early stopping's restore_best).
  void set_skipped_steps(std::int64_t skipped) noexcept { skipped_steps_ = skipped; }

  struct Result {
    bool skipped = false;         // no weight changed; the scale was lowered
    double clip_factor = 1.0;     // < 1: the gradients were clipped
    double loss_scale = 1.0;      // the scale the step's gradients were computed at
    std::string skip_log;         // when skipped: the line that says so
    std::string diverged;         // non-empty: the run diverged, and what was inf or NaN
    bool state_is_finite = true;  // when diverged: the weights and optimizer state are still finite
    double loss = 0, lr = 0, gradient_norm = 0;  // the step's, and the rate it was applied at
    std::int64_t skipped_steps = 0;              // in the run so far, this one included

    // A step report with what the update knows (the loss, rate, gradient norm, clipping, scale and skips).
    StepReport report() const;
  };
  // Step `step` (0-based, taken at scale()) produced `outcome`: applies it on `dp` at `scheduled`, or skips
  // it.
  Result update(const StepOutcome& outcome, DataParallel& dp, const ScheduledValues& scheduled,
                std::int64_t step);

 private:
  LossScaler scaler_;
  std::int64_t skipped_steps_;
  double clip_grad_norm_;
};

}  // namespace unet
