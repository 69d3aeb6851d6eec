#include "unet/objects/object_metrics.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "unet/core/error.h"

namespace unet {

namespace {

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

std::string size_text(const LabelImage& image) {
  return std::to_string(image.height) + "x" + std::to_string(image.width);
}

void check_label_image(const LabelImage& image, const char* which) {
  if (image.height < 0 || image.width < 0 ||
      image.ids.size() != static_cast<std::size_t>(image.height) * static_cast<std::size_t>(image.width))
    throw Error(ErrorKind::usage, std::string("object metrics: the ") + which + " label image holds " +
                                      std::to_string(image.ids.size()) + " ids for " + size_text(image) +
                                      " pixels");
}

std::int64_t area_in(const std::vector<ObjectArea>& areas, ObjectId id) {
  const auto it = std::lower_bound(areas.begin(), areas.end(), id,
                                   [](const ObjectArea& area, ObjectId value) { return area.id < value; });
  return it != areas.end() && it->id == id ? it->pixels : 0;
}

// The areas of the objects named by `id_of` in `entries`, which must be sorted by that id.
template <class Entries, class IdOf>
std::vector<ObjectArea> areas_by_id(const Entries& entries, IdOf id_of) {
  std::vector<ObjectArea> areas;
  for (const auto& entry : entries) {
    const ObjectId id = id_of(entry);
    if (id == 0) continue;
    if (areas.empty() || areas.back().id != id) areas.push_back({id, 0});
    areas.back().pixels += entry.pixels;
  }
  return areas;
}

// How many values occur two or more times in sorted `ids`, and how many values those runs hold together.
std::pair<std::int64_t, std::int64_t> repeated_runs(const std::vector<ObjectId>& sorted_ids) {
  std::int64_t runs = 0, members = 0;
  for (std::size_t begin = 0; begin < sorted_ids.size();) {
    std::size_t end = begin + 1;
    while (end < sorted_ids.size() && sorted_ids[end] == sorted_ids[begin]) ++end;
    if (end - begin >= 2) {
      ++runs;
      members += static_cast<std::int64_t>(end - begin);
    }
    begin = end;
  }
  return {runs, members};
}

}  // namespace

double iou_threshold(int index) {
  return 0.5 + 0.05 * index;
}

bool iou_above_threshold(std::int64_t intersection, std::int64_t union_pixels, int index) {
  // Exact: the doubles 0.5 + 0.05 * i are not all the nearest doubles to (10 + i) / 20 (0.85 is not), and an
  // IoU of exactly a threshold must not match. Pixel counts are far below where 20 * count could overflow.
  return 20 * intersection > (10 + static_cast<std::int64_t>(index)) * union_pixels;
}

std::int64_t ObjectOverlaps::truth_area(ObjectId id) const {
  return area_in(truth_areas, id);
}

std::int64_t ObjectOverlaps::predicted_area(ObjectId id) const {
  return area_in(predicted_areas, id);
}

ObjectOverlaps object_overlaps(const LabelImage& truth, const LabelImage& predicted) {
  check_label_image(truth, "true");
  check_label_image(predicted, "predicted");
  if (truth.height != predicted.height || truth.width != predicted.width)
    throw Error(ErrorKind::usage, "object metrics: the truth is " + size_text(truth) +
                                      " pixels but the prediction " + size_text(predicted));

  // Pixel counts per (truth id, predicted id), background included so that the areas come from the same
  // table. Neighbouring pixels mostly share their pair, so a run of them costs one hash-map update.
  std::unordered_map<std::uint64_t, std::int64_t> counts;
  counts.reserve(256);
  const auto key_of = [](ObjectId t, ObjectId p) { return (std::uint64_t{t} << 32) | std::uint64_t{p}; };
  std::uint64_t run_key = 0;
  std::int64_t run_length = 0;
  for (std::size_t i = 0; i < truth.ids.size(); ++i) {
    const std::uint64_t key = key_of(truth.ids[i], predicted.ids[i]);
    if (key == run_key) {
      ++run_length;
      continue;
    }
    if (run_length > 0) counts[run_key] += run_length;
    run_key = key;
    run_length = 1;
  }
  if (run_length > 0) counts[run_key] += run_length;

  std::vector<ObjectOverlap> cells;  // every pair but (background, background)
  cells.reserve(counts.size());
  for (const auto& [key, pixels] : counts)
    if (key != 0)
      cells.push_back({static_cast<ObjectId>(key >> 32), static_cast<ObjectId>(key & 0xffffffffu), pixels});

  const auto by_truth = [](const ObjectOverlap& a, const ObjectOverlap& b) {
    return a.truth != b.truth ? a.truth < b.truth : a.predicted < b.predicted;
  };
  const auto by_predicted = [](const ObjectOverlap& a, const ObjectOverlap& b) {
    return a.predicted != b.predicted ? a.predicted < b.predicted : a.truth < b.truth;
  };
  ObjectOverlaps out;
  std::sort(cells.begin(), cells.end(), by_predicted);
  out.predicted_areas = areas_by_id(cells, [](const ObjectOverlap& c) { return c.predicted; });
  std::sort(cells.begin(), cells.end(), by_truth);
  out.truth_areas = areas_by_id(cells, [](const ObjectOverlap& c) { return c.truth; });
  std::copy_if(cells.begin(), cells.end(), std::back_inserter(out.pairs),
               [](const ObjectOverlap& c) { return c.truth != 0 && c.predicted != 0; });
  return out;
}

ImageObjectMetrics image_object_metrics(const ObjectOverlaps& overlaps) {
  ImageObjectMetrics m;
  m.true_objects = static_cast<std::int64_t>(overlaps.truth_areas.size());
  m.predicted_objects = static_cast<std::int64_t>(overlaps.predicted_areas.size());

  std::vector<ObjectId> covering;  // for each covered true object, the predicted object covering it
  std::vector<ObjectId> lying_in;  // for each predicted object lying in a true one, that true object
  for (const ObjectOverlap& pair : overlaps.pairs) {
    const std::int64_t truth_area = overlaps.truth_area(pair.truth);
    const std::int64_t predicted_area = overlaps.predicted_area(pair.predicted);
    const std::int64_t union_pixels = truth_area + predicted_area - pair.pixels;
    // One-to-one at every threshold (the header says why), so a pair above t is a true positive at t.
    for (int t = 0; t < kIouThresholdCount && iou_above_threshold(pair.pixels, union_pixels, t); ++t)
      ++m.at_threshold[static_cast<std::size_t>(t)].true_positives;
    if (iou_above_threshold(pair.pixels, union_pixels, 0))
      m.matched_iou_sum += static_cast<double>(pair.pixels) / static_cast<double>(union_pixels);
    if (2 * pair.pixels > truth_area) covering.push_back(pair.predicted);
    if (2 * pair.pixels > predicted_area) lying_in.push_back(pair.truth);
  }
  for (MatchCounts& counts : m.at_threshold) {
    counts.false_positives = m.predicted_objects - counts.true_positives;
    counts.false_negatives = m.true_objects - counts.true_positives;
  }
  if (m.true_objects > 0 || m.predicted_objects > 0) {
    double sum = 0;
    for (const MatchCounts& c : m.at_threshold)
      sum += static_cast<double>(c.true_positives) /
             static_cast<double>(c.true_positives + c.false_positives + c.false_negatives);
    m.dsb_score = sum / kIouThresholdCount;
  }

  std::sort(covering.begin(), covering.end());
  std::tie(m.merges, m.merged_true_objects) = repeated_runs(covering);
  std::sort(lying_in.begin(), lying_in.end());
  std::tie(m.splits, m.split_pieces) = repeated_runs(lying_in);
  return m;
}

ImageObjectMetrics image_object_metrics(const LabelImage& truth, const LabelImage& predicted) {
  return image_object_metrics(object_overlaps(truth, predicted));
}

ImageObjectMetrics ObjectMetricsAccumulator::add(const LabelImage& truth, const LabelImage& predicted) {
  ImageObjectMetrics image = image_object_metrics(truth, predicted);
  add(image);
  return image;
}

void ObjectMetricsAccumulator::add(const ImageObjectMetrics& image) {
  ++images_;
  true_objects_ += image.true_objects;
  predicted_objects_ += image.predicted_objects;
  dsb_score_sum_ += image.dsb_score;
  matched_iou_sum_ += image.matched_iou_sum;
  for (std::size_t t = 0; t < at_threshold_.size(); ++t) {
    at_threshold_[t].true_positives += image.at_threshold[t].true_positives;
    at_threshold_[t].false_positives += image.at_threshold[t].false_positives;
    at_threshold_[t].false_negatives += image.at_threshold[t].false_negatives;
  }
  merges_ += image.merges;
  merged_true_objects_ += image.merged_true_objects;
  splits_ += image.splits;
  split_pieces_ += image.split_pieces;
}

void ObjectMetricsAccumulator::merge(const ObjectMetricsAccumulator& other) {
  images_ += other.images_;
  true_objects_ += other.true_objects_;
  predicted_objects_ += other.predicted_objects_;
  dsb_score_sum_ += other.dsb_score_sum_;
  matched_iou_sum_ += other.matched_iou_sum_;
  for (std::size_t t = 0; t < at_threshold_.size(); ++t) {
    at_threshold_[t].true_positives += other.at_threshold_[t].true_positives;
    at_threshold_[t].false_positives += other.at_threshold_[t].false_positives;
    at_threshold_[t].false_negatives += other.at_threshold_[t].false_negatives;
  }
  merges_ += other.merges_;
  merged_true_objects_ += other.merged_true_objects_;
  splits_ += other.splits_;
  split_pieces_ += other.split_pieces_;
}

ObjectMetricsSummary ObjectMetricsAccumulator::summary() const {
  const auto ratio = [](double numerator, double denominator) {
    return denominator > 0 ? numerator / denominator : kAbsent;
  };
  ObjectMetricsSummary s;
  s.images = images_;
  s.true_objects = true_objects_;
  s.predicted_objects = predicted_objects_;
  s.dsb_score = ratio(dsb_score_sum_, static_cast<double>(images_));
  s.at_threshold = at_threshold_;
  s.true_positives = at_threshold_[0].true_positives;
  s.false_positives = at_threshold_[0].false_positives;
  s.false_negatives = at_threshold_[0].false_negatives;
  const auto tp = static_cast<double>(s.true_positives);
  const auto fp = static_cast<double>(s.false_positives);
  const auto fn = static_cast<double>(s.false_negatives);
  s.precision = ratio(tp, tp + fp);
  s.recall = ratio(tp, tp + fn);
  s.f1 = ratio(2 * tp, 2 * tp + fp + fn);
  s.matched_iou_sum = matched_iou_sum_;
  s.sq = ratio(matched_iou_sum_, tp);
  s.rq = ratio(tp, tp + 0.5 * (fp + fn));
  s.pq = ratio(matched_iou_sum_, tp + 0.5 * (fp + fn));
  s.merges = merges_;
  s.merged_true_objects = merged_true_objects_;
  s.splits = splits_;
  s.split_pieces = split_pieces_;
  return s;
}

}  // namespace unet
