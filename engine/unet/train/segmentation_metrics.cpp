#include "unet/train/segmentation_metrics.h"

#include <string>

#include "unet/backend/backend.h"
#include "unet/core/error.h"

namespace unet {

SegmentationMetrics segmentation_metrics(const std::vector<std::int64_t>& counts, int classes) {
  UNET_CHECK(classes >= 1 && static_cast<std::int64_t>(counts.size()) == segmentation_counts_size(classes),
             usage,
             "segmentation_metrics: " + std::to_string(counts.size()) + " counts for " +
                 std::to_string(classes) + " classes; segmentation_counts_size gives " +
                 std::to_string(classes >= 1 ? segmentation_counts_size(classes) : 0));
  const int k = classes > 1 ? classes : 2;
  SegmentationMetrics m;
  double iou = 0, dice = 0;
  int present = 0;  // foreground classes in the truth or the prediction
  for (int c = 0; c < k; ++c) {
    const auto tp = static_cast<double>(counts[3 * static_cast<std::size_t>(c)]);
    const auto fp = static_cast<double>(counts[3 * static_cast<std::size_t>(c) + 1]);
    const auto fn = static_cast<double>(counts[3 * static_cast<std::size_t>(c) + 2]);
    // A class neither labelled nor predicted on any labelled pixel has no score: absent, never perfect.
    const bool seen = tp + fp + fn > 0;
    m.class_iou.push_back(seen ? tp / (tp + fp + fn) : NAN);
    m.class_dice.push_back(seen ? 2 * tp / (2 * tp + fp + fn) : NAN);
    if (c == 0 || !seen) continue;  // the means are over the foreground classes present
    iou += m.class_iou.back();
    dice += m.class_dice.back();
    ++present;
  }
  m.iou = present > 0 ? iou / present : NAN;
  m.dice = present > 0 ? dice / present : NAN;
  const auto total = static_cast<double>(counts[3 * static_cast<std::size_t>(k) + 1]);
  m.accuracy = total > 0 ? static_cast<double>(counts[3 * static_cast<std::size_t>(k)]) / total : NAN;
  return m;
}

}  // namespace unet
