// Validation's segmentation metrics from the counts the backends gather (segmentation_counts_size(),
// backend.h): per class true positives, false positives and false negatives, then the correct and labelled
// pixels. Kept apart from the trainer so that the metric rules can be read, and tested, on their own.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace unet {

// Foreground IoU, Dice and pixel accuracy from segmentation counts (mean over the classes > 0 present when
// multi-class), and each class's IoU and Dice (class 0, the background, first; a binary model's two classes
// are background and foreground). Metrics over nothing are absent (NaN), never perfect: a class neither
// labelled nor predicted on any labelled pixel has no IoU or Dice and is left out of the means; IoU and Dice
// are NaN when no foreground class is present, and accuracy when no pixel is labelled.
struct SegmentationMetrics {
  double iou = NAN, dice = NAN, accuracy = NAN;
  std::vector<double> class_iou, class_dice;
};
SegmentationMetrics segmentation_metrics(const std::vector<std::int64_t>& counts, int classes);

}  // namespace unet
