#include "unet/train/loss_scaler.h"

#include <algorithm>

namespace unet {

LossScaling loss_scaling_for(Precision precision) {
  LossScaling s;
  s.dynamic = precision == Precision::mixed_fp16;
  if (!s.dynamic) s.initial_scale = 1.0;
  return s;
}

LossScaler::LossScaler(const LossScaling& policy) : LossScaler(policy, policy.initial_scale, 0) {}

LossScaler::LossScaler(const LossScaling& policy, double scale, std::int64_t clean_steps)
    : policy_(policy), scale_(scale), clean_steps_(clean_steps) {}

LossScaler::Verdict LossScaler::update(std::int64_t non_finite) {
  if (non_finite > 0) {
    if (!policy_.dynamic || scale_ <= policy_.min_scale) return Verdict::diverged;
    scale_ = std::max(policy_.min_scale, scale_ * policy_.backoff_factor);
    clean_steps_ = 0;
    return Verdict::skip;
  }
  if (!policy_.dynamic) return Verdict::apply;
  if (++clean_steps_ >= policy_.growth_interval) {
    scale_ *= policy_.growth_factor;
    clean_steps_ = 0;
  }
  return Verdict::apply;
}

}  // namespace unet
