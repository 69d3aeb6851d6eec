#include "unet/train/observer.h"

#include "unet/train/monitor.h"

namespace unet {

const char* to_string(TrainerState s) noexcept {
  switch (s) {
    case TrainerState::idle:
      return "idle";
    case TrainerState::preparing:
      return "preparing";
    case TrainerState::running:
      return "running";
    case TrainerState::paused:
      return "paused";
    case TrainerState::stopping:
      return "stopping";
    case TrainerState::finished:
      return "finished";
    case TrainerState::stopped:
      return "stopped";
    case TrainerState::failed:
      return "failed";
  }
  return "?";
}

std::map<std::string, double> monitored_metrics(const EpochReport& r) {
  std::map<std::string, double> metrics{{"loss", r.loss},
                                        {"val_loss", r.val_loss},
                                        {"val_iou", r.val_iou},
                                        {"val_dice", r.val_dice},
                                        {"val_acc", r.val_acc}};
  for (std::size_t k = 0; k < r.val_class_iou.size(); ++k)
    metrics[class_metric_key("val_iou", k)] = r.val_class_iou[k];
  for (std::size_t k = 0; k < r.val_class_dice.size(); ++k)
    metrics[class_metric_key("val_dice", k)] = r.val_class_dice[k];
  if (r.objects) {
    metrics["val_dsb"] = r.val_dsb;
    metrics["val_f1"] = r.val_f1;
    metrics["val_pq"] = r.val_pq;
  }
  return metrics;
}

}  // namespace unet
