// The post-processing's two thresholds found on the validation set, as StarDist tunes its own: every pair of
// a small grid is tried on every validation image, and the pair with the best DSB score is kept (issue 27).
// The network's output enters as the two maps extract_objects reads (object_maps), so a search never runs
// the network again.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "unet/objects/instance_extraction.h"
#include "unet/objects/label_image.h"
#include "unet/objects/object_metrics.h"

namespace unet {

// One image's output as extract_objects reads it, with the objects it should find.
struct ObjectMaps {
  std::int64_t height = 0, width = 0;
  std::vector<float> seed, foreground;  // [height, width]
  LabelImage truth;
};

// From a model's probabilities as the predictor gives them ([height, width, channels], row-major): channels
// 1 (a sigmoid, the weight_map target): seed = foreground = p; channels 3 (the boundary target's softmax of
// background, interior, boundary): seed = p_interior, foreground = p_interior + p_boundary. Throws
// ErrorKind::usage for another channel count, a size that does not match, or truth of another size.
ObjectMaps object_maps(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
                       std::int64_t channels, LabelImage truth);

// The grid: seed thresholds 0.3, 0.4, ..., 0.9 and foreground thresholds 0.3, 0.4, ..., 0.7.
struct ThresholdGrid {
  std::vector<double> seed{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  std::vector<double> foreground{0.3, 0.4, 0.5, 0.6, 0.7};
};

struct ThresholdChoice {
  ExtractionThresholds thresholds;
  ObjectMetricsSummary metrics;  // of every image at those thresholds
};

// The objects of every image at `thresholds`, scored against its truth.
ObjectMetricsSummary score_thresholds(const std::vector<ObjectMaps>& images,
                                      const ExtractionThresholds& thresholds);

// The pair of the grid (with `min_size`) whose DSB score over `images` is highest; of equal scores the first
// in the grid's order (seed slower, foreground faster), so that the choice repeats. With no image: the grid's
// first pair, its metrics over nothing (NaN scores).
ThresholdChoice best_thresholds(const std::vector<ObjectMaps>& images, std::int64_t min_size,
                                const ThresholdGrid& grid = {});

}  // namespace unet
