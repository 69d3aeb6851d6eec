#include "unet/train/throughput.h"

namespace unet {

void Throughput::add_step(std::int64_t samples, double seconds) {
  recent_.emplace_back(samples, seconds);
  if (recent_.size() > window_) recent_.pop_front();
}

void Throughput::add_validation(double seconds) {
  validation_seconds_ = validation_seconds_ > 0 ? 0.5 * (validation_seconds_ + seconds) : seconds;
}

double Throughput::images_per_second() const {
  double samples = 0, seconds = 0;
  for (const auto& [n, s] : recent_) samples += static_cast<double>(n), seconds += s;
  return seconds > 0 ? samples / seconds : 0.0;
}

double Throughput::eta_seconds(std::int64_t step, std::int64_t epoch_step, std::int64_t steps_per_epoch,
                               std::int64_t total_steps) const {
  if (recent_.empty()) return 0.0;
  double seconds = 0;
  for (const auto& [n, s] : recent_) seconds += s;
  const double step_time = seconds / static_cast<double>(recent_.size());
  const std::int64_t remaining_steps = total_steps - step;
  const std::int64_t remaining_validations =
      (remaining_steps + epoch_step) / steps_per_epoch + (remaining_steps % steps_per_epoch ? 1 : 0);
  return static_cast<double>(remaining_steps) * step_time +
         static_cast<double>(remaining_validations) * validation_seconds_;
}

void Throughput::report_step(StepReport& r, std::int64_t samples, double seconds) {
  add_step(samples, seconds);
  r.img_per_s = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  r.img_per_s_avg = images_per_second();
  r.step_seconds = seconds;
  r.eta_seconds = eta_seconds(r.step, r.epoch_step, r.steps_per_epoch, r.total_steps);
}

}  // namespace unet
