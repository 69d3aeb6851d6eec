// Dynamic loss scaling (docs/MODEL.md, "Precision"). In mixed-fp16 the loss is multiplied by a scale before
// backward, so that small gradients survive fp16's narrow range, and the gradients are divided by it before
// the optimizer. A step whose summed gradients hold an inf or NaN on any replica is skipped on every replica
// (weights and optimizer state unchanged) and the scale halves; after `growth_interval` clean steps in a row
// it doubles. Other precisions run at scale 1 with no skipping: there a non-finite gradient means the run
// diverged.
#pragma once

#include <cstdint>

#include "unet/config/config.h"

namespace unet {

struct LossScaling {
  bool dynamic = false;
  double initial_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;  // clean steps before the scale grows
  // A scale below this cannot help: non-finite gradients there mean the run diverged.
  double min_scale = 1.0;
};

// The policy a precision trains with: dynamic for mixed-fp16, none otherwise.
LossScaling loss_scaling_for(Precision precision);

class LossScaler {
 public:
  // Starts from `scale` with `clean_steps` already counted (a resumed run), or the policy's initial scale.
  explicit LossScaler(const LossScaling& policy);
  LossScaler(const LossScaling& policy, double scale, std::int64_t clean_steps);

  double scale() const noexcept { return scale_; }
  std::int64_t clean_steps() const noexcept { return clean_steps_; }
  bool dynamic() const noexcept { return policy_.dynamic; }

  enum class Verdict : std::uint8_t { apply, skip, diverged };
  // After a step's gradients were summed across replicas, `non_finite` of them inf or NaN: whether to apply
  // the step. Skipping lowers the scale; applying may raise it. `diverged`: no scaling can help (the
  // policy is not dynamic, or the scale is already at its floor); nothing changes.
  Verdict update(std::int64_t non_finite);

 private:
  LossScaling policy_;
  double scale_;
  std::int64_t clean_steps_;
};

}  // namespace unet
