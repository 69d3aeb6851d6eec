#include "unet/train/step_update.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "unet/core/number_text.h"

namespace unet {

StepUpdate::StepUpdate(LossScaler scaler, std::int64_t skipped_steps, double clip_grad_norm)
    : scaler_(scaler), skipped_steps_(skipped_steps), clip_grad_norm_(clip_grad_norm) {}

StepUpdate::Result StepUpdate::update(const StepOutcome& outcome, DataParallel& dp,
                                      const ScheduledValues& scheduled, std::int64_t step) {
  Result r;
  r.loss_scale = scaler_.scale();
  r.loss = outcome.mean_loss();
  r.lr = scheduled.lr;
  r.gradient_norm = outcome.gradient_norm;
  // A non-finite loss counts as a non-finite gradient: dynamic scaling skips the step, fp32 and bf16 stop.
  const bool loss_finite = std::isfinite(outcome.mean_loss());
  const LossScaler::Verdict verdict = scaler_.update(outcome.non_finite_gradients + (loss_finite ? 0 : 1));
  if (verdict == LossScaler::Verdict::diverged) {
    r.diverged = outcome.non_finite_gradients > 0
                     ? std::to_string(outcome.non_finite_gradients) + " gradients are inf or NaN"
                     : "the loss is " + number_text(outcome.mean_loss());
    return r;
  }
  if (verdict == LossScaler::Verdict::skip) {
    r.skipped = true;
    r.skipped_steps = ++skipped_steps_;
    r.skip_log = "step " + std::to_string(step + 1) +
                 " skipped: " + std::to_string(outcome.non_finite_gradients) +
                 " gradients were inf/NaN at loss scale " + number_text(r.loss_scale) +
                 "; the scale is now " + number_text(scaler_.scale());
    return r;
  }
  r.skipped_steps = skipped_steps_;
  // torch.nn.utils.clip_grad_norm_'s factor, folded into the gradients' scale.
  if (clip_grad_norm_ > 0) r.clip_factor = std::min(1.0, clip_grad_norm_ / (outcome.gradient_norm + 1e-6));
  dp.apply_optimizer({.lr = static_cast<float>(scheduled.lr),
                      .momentum = scheduled.momentum
                                      ? std::optional<float>(static_cast<float>(*scheduled.momentum))
                                      : std::nullopt,
                      .grad_scale = static_cast<float>(r.clip_factor / r.loss_scale)});
  // Finite gradients can still overflow the weights or Adam's moments when the step size is far too large;
  // that state must neither train on nor be saved.
  if (const std::int64_t bad = dp.non_finite_state(); bad > 0) {
    r.diverged = std::to_string(bad) + " weights or optimizer moments became inf or NaN in the update";
    r.state_is_finite = false;
  }
  return r;
}

StepReport StepUpdate::Result::report() const {
  StepReport s;
  s.loss = loss;
  s.lr = lr;
  s.grad_norm = gradient_norm;
  s.clipped = clip_factor < 1.0;
  s.loss_scale = loss_scale;
  s.skipped = skipped;
  s.skipped_steps = skipped_steps;
  return s;
}

}  // namespace unet
