#include "unet/train/observer.h"

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
  return {{"loss", r.loss},
          {"val_loss", r.val_loss},
          {"val_iou", r.val_iou},
          {"val_dice", r.val_dice},
          {"val_acc", r.val_acc}};
}

}  // namespace unet
