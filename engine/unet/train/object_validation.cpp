#include "unet/train/object_validation.h"

#include <utility>

namespace unet {

void ObjectValidation::add(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
                           std::int64_t channels, LabelImage truth) {
  images_.push_back(object_maps(probabilities, height, width, channels, std::move(truth)));
}

void ObjectValidation::report(EpochReport& r) {
  ThresholdChoice choice;
  if (instances_.tune_thresholds) {
    choice = best_thresholds(images_, instances_.min_size);
  } else {
    choice.thresholds = {instances_.seed_threshold, instances_.foreground_threshold, instances_.min_size};
    choice.metrics = score_thresholds(images_, choice.thresholds);
  }
  const ObjectMetricsSummary& m = choice.metrics;
  r.objects = true;
  r.val_dsb = m.dsb_score;
  r.val_f1 = m.f1;
  r.val_precision = m.precision;
  r.val_recall = m.recall;
  r.val_pq = m.pq;
  r.val_merges = m.merges;
  r.val_splits = m.splits;
  r.val_seed_threshold = choice.thresholds.seed;
  r.val_foreground_threshold = choice.thresholds.foreground;
  images_.clear();
}

}  // namespace unet
