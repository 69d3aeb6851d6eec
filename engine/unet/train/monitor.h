// The monitored value: what checkpoint.monitor (best.safetensors, save_best_only), early_stopping.monitor and
// schedule.monitor (plateau) watch after a validation, defined once for all three. A monitor is a metric of
// monitored_metrics(); val_iou and val_dice stand for the class checkpoint.monitor_class names: "mean" (the
// mean over the foreground classes validation reports, a binary model's foreground) or one class's own IoU or
// Dice, so that the class that matters on an imbalanced task can choose the best checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "unet/train/observer.h"

namespace unet {

class Monitor {
 public:
  // `metric`: a monitor key's value ("val_loss", "val_iou", ...); `monitor_class`: checkpoint.monitor_class.
  Monitor(std::string metric, const std::string& monitor_class);

  const std::string& metric() const noexcept { return metric_; }
  // The class whose IoU or Dice is watched; none: the metric as validation reports it.
  const std::optional<std::int64_t>& class_index() const noexcept { return class_; }
  // Its name among monitored_metrics() and in a checkpoint's metrics: "val_loss", "val_iou",
  // "val_iou_class1".
  std::string key() const;
  // For a person: "val_loss", "val_iou of class 1".
  std::string describe() const;
  // Losses improve downwards, the others upwards.
  bool lower_is_better() const;
  // Its value after the validation `r` reported; NaN where absent.
  double value(const EpochReport& r) const;

 private:
  std::string metric_;
  std::optional<std::int64_t> class_;
};

// The key of class `k`'s `metric` ("val_iou" or "val_dice") among monitored_metrics(): "val_iou_class1".
std::string class_metric_key(const std::string& metric, std::size_t k);

}  // namespace unet
