#include "unet/objects/threshold_search.h"

#include <optional>
#include <string>
#include <utility>

#include "unet/core/error.h"

namespace unet {

ObjectMaps object_maps(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
                       std::int64_t channels, LabelImage truth) {
  UNET_CHECK(
      channels == 1 || channels == 3, usage,
      "object maps: probabilities of 1 (sigmoid) or 3 (background, interior, boundary) channels, got " +
          std::to_string(channels));
  UNET_CHECK(height >= 0 && width >= 0 &&
                 probabilities.size() == static_cast<std::size_t>(height * width * channels),
             usage,
             "object maps: " + std::to_string(probabilities.size()) + " probabilities for " +
                 std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels));
  UNET_CHECK(truth.height == height && truth.width == width, usage,
             "object maps: the truth is " + std::to_string(truth.height) + "x" + std::to_string(truth.width) +
                 " but the probabilities " + std::to_string(height) + "x" + std::to_string(width));
  ObjectMaps maps;
  maps.height = height;
  maps.width = width;
  const auto pixels = static_cast<std::size_t>(height * width);
  maps.seed.resize(pixels);
  maps.foreground.resize(pixels);
  const auto c = static_cast<std::size_t>(channels);
  for (std::size_t i = 0; i < pixels; ++i) {
    if (channels == 1) {
      maps.seed[i] = maps.foreground[i] = probabilities[i];
    } else {
      maps.seed[i] = probabilities[i * c + 1];
      maps.foreground[i] = probabilities[i * c + 1] + probabilities[i * c + 2];
    }
  }
  maps.truth = std::move(truth);
  return maps;
}

ObjectMetricsSummary score_thresholds(const std::vector<ObjectMaps>& images,
                                      const ExtractionThresholds& thresholds) {
  ObjectMetricsAccumulator metrics;
  for (const ObjectMaps& image : images)
    metrics.add(image.truth, extract_objects(image.seed.data(), image.foreground.data(), image.height,
                                             image.width, thresholds));
  return metrics.summary();
}

ThresholdChoice best_thresholds(const std::vector<ObjectMaps>& images, std::int64_t min_size,
                                const ThresholdGrid& grid) {
  UNET_CHECK(!grid.seed.empty() && !grid.foreground.empty(), usage, "threshold search: an empty grid");
  std::optional<ThresholdChoice> best;
  for (const double seed : grid.seed) {
    for (const double foreground : grid.foreground) {
      const ExtractionThresholds thresholds{seed, foreground, min_size};
      ObjectMetricsSummary metrics = score_thresholds(images, thresholds);
      // NaN (no image) never beats; the first pair stands then.
      if (!best || metrics.dsb_score > best->metrics.dsb_score) best = ThresholdChoice{thresholds, metrics};
    }
  }
  return *best;
}

}  // namespace unet
