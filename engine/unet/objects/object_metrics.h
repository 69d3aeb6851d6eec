// Object metrics: how well the objects of a predicted label image match those of the truth (docs/METRICS.md,
// "Object metrics"): the Data Science Bowl 2018 score, precision, recall and F1 at IoU 0.5, panoptic quality,
// and the objects the prediction merged or split. The rule everything rests on: a true and a predicted object
// match at threshold t when their IoU is strictly above t, and since every threshold is at least 0.5, an
// object has at most one partner above it (two partners would each share more than half of it, and they are
// disjoint), so the matching is one-to-one with no assignment to solve: each overlapping pair is judged
// alone.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "unet/objects/label_image.h"

namespace unet {

// The DSB 2018 thresholds 0.50, 0.55, ..., 0.95: threshold i is (10 + i) / 20.
inline constexpr int kIouThresholdCount = 10;

// Threshold `index` as a number for reports and charts: 0.5 + 0.05 * index (the eighth reads
// 0.8500000000000001). Matching does not compare against this double: see iou_above_threshold.
double iou_threshold(int index);

// Whether intersection / union_pixels > threshold `index`, decided exactly in integers:
// 20 * intersection > (10 + index) * union_pixels. An IoU of exactly 0.6 is not above 0.6.
bool iou_above_threshold(std::int64_t intersection, std::int64_t union_pixels, int index);

struct ObjectArea {
  ObjectId id = 0;
  std::int64_t pixels = 0;
};

struct ObjectOverlap {
  ObjectId truth = 0, predicted = 0;
  std::int64_t pixels = 0;  // pixels labelled `truth` in the truth and `predicted` in the prediction
};

// One image's truth and prediction laid over each other: a sparse table, since each object meets few others.
struct ObjectOverlaps {
  std::vector<ObjectArea> truth_areas;      // every true object (id > 0), ascending id
  std::vector<ObjectArea> predicted_areas;  // every predicted object (id > 0), ascending id
  std::vector<ObjectOverlap>
      pairs;  // every true/predicted pair sharing a pixel, ascending (truth, predicted)

  // An object's pixels; 0 for an id the image lacks.
  std::int64_t truth_area(ObjectId id) const;
  std::int64_t predicted_area(ObjectId id) const;
};

// Counts the overlaps in one pass over the pixels. Ids can be any uint32 (not consecutive); 0 is the
// background. Throws ErrorKind::usage when the two images differ in size (naming both) or one holds a number
// of ids other than height * width.
ObjectOverlaps object_overlaps(const LabelImage& truth, const LabelImage& predicted);

// Matches at one IoU threshold.
struct MatchCounts {
  std::int64_t true_positives = 0;   // matched pairs
  std::int64_t false_positives = 0;  // predicted objects without a match
  std::int64_t false_negatives = 0;  // true objects without a match
};

// One image's object metrics.
struct ImageObjectMetrics {
  std::int64_t true_objects = 0, predicted_objects = 0;
  std::array<MatchCounts, kIouThresholdCount> at_threshold{};  // [threshold index]
  // The DSB 2018 score: the mean over the thresholds of TP / (TP + FP + FN); 1 for an image with no true and
  // no predicted object (nothing to find, nothing found).
  double dsb_score = 1;
  double matched_iou_sum = 0;  // IoU summed over the pairs matched at 0.5 (panoptic quality's numerator)
  // A predicted object that covers (holds more than half the pixels of) two or more true objects is a merge;
  // merged_true_objects counts the true objects so covered.
  std::int64_t merges = 0, merged_true_objects = 0;
  // A true object in which two or more predicted objects lie (more than half of each one's pixels) is a
  // split; split_pieces counts the predicted objects lying in them.
  std::int64_t splits = 0, split_pieces = 0;
};

ImageObjectMetrics image_object_metrics(const ObjectOverlaps& overlaps);
ImageObjectMetrics image_object_metrics(const LabelImage& truth, const LabelImage& predicted);

// A dataset's object metrics. A value over nothing is NaN (absent, as docs/METRICS.md's "Absent metrics"):
// dsb_score without images, precision without predicted objects, recall without true objects, f1, rq and pq
// without any object, sq without a match.
struct ObjectMetricsSummary {
  std::int64_t images = 0, true_objects = 0, predicted_objects = 0;
  double dsb_score = 0;  // the mean over images of their DSB scores (Kaggle's)
  std::array<MatchCounts, kIouThresholdCount> at_threshold{};  // summed over images, [threshold index]
  std::int64_t true_positives = 0, false_positives = 0, false_negatives = 0;  // at IoU 0.5 (at_threshold[0])
  double precision = 0;                                                       // TP / (TP + FP)
  double recall = 0;                                                          // TP / (TP + FN)
  double f1 = 0;                                                              // 2TP / (2TP + FP + FN)
  double matched_iou_sum = 0;  // IoU summed over every pair matched at 0.5
  // Panoptic quality (Kirillov et al. 2019) at 0.5: pq = matched_iou_sum / (TP + FP/2 + FN/2) = sq * rq, with
  // sq = matched_iou_sum / TP (the mean IoU of the matches) and rq = f1. With objects but no match pq is 0
  // while sq is NaN.
  double pq = 0, sq = 0, rq = 0;
  std::int64_t merges = 0, merged_true_objects = 0, splits = 0, split_pieces = 0;
};

// Sums the images of a validation pass, then gives its summary. Accumulators filled apart (one per process)
// merge into the one that adding all their images would have made; the sums of doubles (scores, IoU) may
// then differ in their last bits, as the order of the additions differs.
class ObjectMetricsAccumulator {
 public:
  // Adds one image and returns its metrics.
  ImageObjectMetrics add(const LabelImage& truth, const LabelImage& predicted);
  void add(const ImageObjectMetrics& image);
  void merge(const ObjectMetricsAccumulator& other);

  std::int64_t images() const noexcept { return images_; }
  ObjectMetricsSummary summary() const;

 private:
  std::int64_t images_ = 0, true_objects_ = 0, predicted_objects_ = 0;
  double dsb_score_sum_ = 0;
  double matched_iou_sum_ = 0;
  std::array<MatchCounts, kIouThresholdCount> at_threshold_{};
  std::int64_t merges_ = 0, merged_true_objects_ = 0, splits_ = 0, split_pieces_ = 0;
};

}  // namespace unet
