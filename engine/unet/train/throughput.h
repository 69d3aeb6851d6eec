// Throughput and the time left, for the step reports: images per second over a window of recent steps, and
// an ETA from the mean step time of that window plus the validations still to come at their running average.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

#include "unet/train/observer.h"

namespace unet {

class Throughput {
 public:
  explicit Throughput(std::size_t window = 20) : window_(window) {}

  // A step of `samples` images took `seconds`.
  void add_step(std::int64_t samples, double seconds);
  // The same for the step `r` reports (its position set): fills in its time, throughput and the ETA.
  void report_step(StepReport& r, std::int64_t samples, double seconds);
  // A validation took `seconds`: the average halves toward each new one.
  void add_validation(double seconds);

  // Images per second over the recent steps (0 before any time was measured).
  double images_per_second() const;
  double validation_seconds() const noexcept { return validation_seconds_; }

  // Seconds left when `step` of `total_steps` are done, `epoch_step` of them in the current epoch of
  // `steps_per_epoch`: the steps left at the recent mean, and a validation at each epoch's end still to come
  // (the run's last, partial epoch included).
  double eta_seconds(std::int64_t step, std::int64_t epoch_step, std::int64_t steps_per_epoch,
                     std::int64_t total_steps) const;

 private:
  std::size_t window_;
  std::deque<std::pair<std::int64_t, double>> recent_;  // (samples, seconds) of recent steps
  double validation_seconds_ = 0;
};

}  // namespace unet
