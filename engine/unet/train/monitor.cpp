// The monitored value (see monitor.h).
#include "unet/train/monitor.h"

#include <cmath>
#include <map>

#include "unet/config/config.h"
#include "unet/train/lr_schedule.h"

namespace unet {

namespace {
bool per_class(const std::string& metric) {
  return metric == "val_iou" || metric == "val_dice";
}
}  // namespace

std::string class_metric_key(const std::string& metric, std::size_t k) {
  return metric + "_class" + std::to_string(k);
}

Monitor::Monitor(std::string metric, const std::string& monitor_class) : metric_(std::move(metric)) {
  // Only IoU and Dice are measured per class; the losses and the accuracy stay what they are.
  if (per_class(metric_)) class_ = monitor_class_index(monitor_class);
}

std::string Monitor::key() const {
  return class_ ? class_metric_key(metric_, static_cast<std::size_t>(*class_)) : metric_;
}

std::string Monitor::describe() const {
  return class_ ? metric_ + " of class " + std::to_string(*class_) : metric_;
}

bool Monitor::lower_is_better() const {
  return unet::lower_is_better(metric_);
}

double Monitor::value(const EpochReport& r) const {
  // A class the validation did not measure (more than the model has) is absent.
  const std::map<std::string, double> metrics = monitored_metrics(r);
  const auto found = metrics.find(key());
  return found == metrics.end() ? NAN : found->second;
}

}  // namespace unet
