// extract_objects leans on OpenCV for the components and the watershed, and mends what cv::watershed leaves:
// it writes -1 on its image's outer frame (so the image is padded by a pixel here), on the lines where two
// regions meet and where a region meets the background marker; those pixels are given back to an object
// afterwards. The one non-obvious rule is the relief's checkerboard (relief() below), which turns OpenCV's
// flooding by the difference between neighbours into a flooding by level.
#include "unet/objects/instance_extraction.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <unordered_map>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "unet/core/error.h"

namespace unet {

namespace {

constexpr std::int32_t kUnclaimed = -1;  // a foreground pixel without an object yet

std::string dims(std::int64_t height, std::int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

void check_threshold(double value, const char* name) {
  UNET_CHECK(std::isfinite(value) && value >= 0 && value <= 1, usage,
             std::string("extract_objects: the ") + name + " threshold must be in [0, 1], got " +
                 std::to_string(value));
}

// The watershed's relief. cv::watershed floods from the markers giving each pixel it reaches a priority, the
// largest channel difference between that pixel and the neighbour that reached it, and takes the lowest first
// (first in, first out among equals). Written as the plain level, a plateau (the boundary band, whose
// interior probability is ~0 throughout) would cost nothing to cross, and the first seed to reach it would
// take all of it. So the level (0..63, the seed probability's complement) is written on a checkerboard, 128 +
// level on the even squares and 127 - level on the odd ones: every 4-neighbour step then costs 1 + the sum of
// the two pixels' levels, a flood in order of level in which fronts on a plateau advance together and meet
// halfway. Steps inside the foreground cost 1..127; the background is 255 on even squares and 0 on odd ones,
// so each step from it into the foreground costs at least 128, and the background marker moves only once the
// seeds have taken all they can reach.
std::uint8_t relief(bool is_foreground, float seed_probability, int y, int x) {
  const bool even = (y + x) % 2 == 0;
  if (!is_foreground) return even ? 255 : 0;
  const float p = seed_probability > 0 ? std::min(seed_probability, 1.0F) : 0.0F;  // NaN: 0
  const auto level = static_cast<int>(std::lround(63.0F * (1.0F - p)));
  return static_cast<std::uint8_t>(even ? 128 + level : 127 - level);
}

// For each foreground pixel the seed region cv::watershed grew over it (1..seed_count), or kUnclaimed; 0
// outside the foreground. seed_labels: cv::connectedComponents' labels of the seeds.
std::vector<std::int32_t> grow_seeds(const float* seed_probability, const cv::Mat& foreground,
                                     const cv::Mat& seed_labels, int seed_count) {
  const int rows = foreground.rows, cols = foreground.cols;
  std::vector<std::int32_t> owner(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), 0);
  const auto pixel = [cols](int y, int x) {
    return static_cast<std::size_t>(y) * static_cast<std::size_t>(cols) + x;
  };
  if (seed_count == 0) {
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x)
        if (foreground.at<std::uint8_t>(y, x) != 0) owner[pixel(y, x)] = kUnclaimed;
    return owner;
  }
  const std::int32_t background_marker = seed_count + 1;
  cv::Mat relief_image(rows + 2, cols + 2, CV_8UC3, cv::Scalar::all(0));
  cv::Mat markers(rows + 2, cols + 2, CV_32S, cv::Scalar::all(0));
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const bool is_foreground = foreground.at<std::uint8_t>(y, x) != 0;
      const std::uint8_t level = relief(is_foreground, seed_probability[pixel(y, x)], y, x);
      relief_image.at<cv::Vec3b>(y + 1, x + 1) = cv::Vec3b(level, level, level);
      markers.at<std::int32_t>(y + 1, x + 1) =
          is_foreground ? seed_labels.at<std::int32_t>(y, x) : background_marker;
    }
  }
  cv::watershed(relief_image, markers);
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      if (foreground.at<std::uint8_t>(y, x) == 0) continue;
      const std::int32_t region = markers.at<std::int32_t>(y + 1, x + 1);
      owner[pixel(y, x)] = region >= 1 && region <= seed_count ? region : kUnclaimed;
    }
  }
  return owner;
}

// Gives each unclaimed pixel the object of the nearest claimed one through unclaimed pixels (breadth first,
// 8-connected; the queue starts with the claimed pixels in raster order).
void claim_by_nearest(std::vector<std::int32_t>& owner, int rows, int cols) {
  std::vector<std::size_t> queue;
  for (std::size_t i = 0; i < owner.size(); ++i)
    if (owner[i] > 0) queue.push_back(i);
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const std::size_t i = queue[head];
    const int y = static_cast<int>(i / static_cast<std::size_t>(cols)),
              x = static_cast<int>(i % static_cast<std::size_t>(cols));
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        const int ny = y + dy, nx = x + dx;
        if (ny < 0 || ny >= rows || nx < 0 || nx >= cols) continue;
        const std::size_t j = static_cast<std::size_t>(ny) * static_cast<std::size_t>(cols) + nx;
        if (owner[j] != kUnclaimed) continue;
        owner[j] = owner[i];
        queue.push_back(j);
      }
    }
  }
}

}  // namespace

LabelImage extract_objects(const float* seed_probability, const float* foreground_probability,
                           std::int64_t height, std::int64_t width, const ExtractionThresholds& thresholds) {
  // OpenCV counts rows and columns in int, and the watershed's image is two wider and taller.
  constexpr std::int64_t kMaxSide = std::numeric_limits<int>::max() - 2;
  UNET_CHECK(height >= 0 && width >= 0 && height <= kMaxSide && width <= kMaxSide, usage,
             "extract_objects: an image of " + dims(height, width) + " (each side from 0 to " +
                 std::to_string(kMaxSide) + ")");
  check_threshold(thresholds.seed, "seed");
  check_threshold(thresholds.foreground, "foreground");
  UNET_CHECK(thresholds.min_size >= 0, usage,
             "extract_objects: min_size must be >= 0, got " + std::to_string(thresholds.min_size));
  LabelImage objects(height, width);
  if (height == 0 || width == 0) return objects;
  UNET_CHECK(
      seed_probability != nullptr && foreground_probability != nullptr, usage,
      "extract_objects: a " + dims(height, width) + " image without its seed or foreground probability");

  const int rows = static_cast<int>(height), cols = static_cast<int>(width);
  cv::Mat foreground(rows, cols, CV_8U), seeds(rows, cols, CV_8U);
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const std::size_t i = static_cast<std::size_t>(y) * static_cast<std::size_t>(cols) + x;
      const bool is_foreground = foreground_probability[i] > thresholds.foreground;
      foreground.at<std::uint8_t>(y, x) = is_foreground ? 1 : 0;
      seeds.at<std::uint8_t>(y, x) = is_foreground && seed_probability[i] > thresholds.seed ? 1 : 0;
    }
  }
  cv::Mat seed_labels;
  const int seed_count = cv::connectedComponents(seeds, seed_labels, 8, CV_32S) - 1;
  std::vector<std::int32_t> owner = grow_seeds(seed_probability, foreground, seed_labels, seed_count);
  claim_by_nearest(owner, rows, cols);

  // What is still unclaimed lies in foreground components without a seed: one object each.
  cv::Mat seedless(rows, cols, CV_8U);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      seedless.at<std::uint8_t>(y, x) = owner[static_cast<std::size_t>(y) * cols + x] == kUnclaimed ? 1 : 0;
  cv::Mat seedless_labels;
  const int seedless_count = cv::connectedComponents(seedless, seedless_labels, 8, CV_32S) - 1;
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      std::int32_t& o = owner[static_cast<std::size_t>(y) * cols + x];
      if (o == kUnclaimed) o = seed_count + seedless_labels.at<std::int32_t>(y, x);
    }
  }

  const auto object_count = static_cast<std::size_t>(seed_count) + static_cast<std::size_t>(seedless_count);
  std::vector<std::int64_t> area(object_count + 1, 0);
  for (const std::int32_t o : owner) ++area[static_cast<std::size_t>(o)];
  std::vector<ObjectId> renumbered(object_count + 1, 0);
  ObjectId next = 1;
  for (std::size_t i = 0; i < owner.size(); ++i) {
    const auto o = static_cast<std::size_t>(owner[i]);
    if (o == 0 || area[o] < thresholds.min_size) continue;
    if (renumbered[o] == 0) renumbered[o] = next++;
    objects.ids[i] = renumbered[o];
  }
  return objects;
}

ObjectTable describe_objects(const LabelImage& labels, const float* probability) {
  UNET_CHECK(labels.height >= 0 && labels.width >= 0 &&
                 labels.ids.size() == static_cast<std::size_t>(labels.height * labels.width),
             usage,
             "describe_objects: a label image of " + dims(labels.height, labels.width) + " holds " +
                 std::to_string(labels.ids.size()) + " ids");
  struct Sums {
    std::int64_t rows = 0, columns = 0;
    double probability = 0;
  };
  std::unordered_map<ObjectId, std::size_t> index;
  ObjectTable table;
  std::vector<Sums> sums;
  for (std::int64_t y = 0; y < labels.height; ++y) {
    for (std::int64_t x = 0; x < labels.width; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      const auto [it, added] = index.try_emplace(id, table.size());
      if (added) {
        ObjectDescription first;
        first.id = id;
        first.y0 = y;
        first.x0 = x;
        first.y1 = y + 1;
        first.x1 = x + 1;
        table.push_back(first);
        sums.emplace_back();
      }
      ObjectDescription& object = table[it->second];
      Sums& sum = sums[it->second];
      ++object.area;
      object.x0 = std::min(object.x0, x);
      object.x1 = std::max(object.x1, x + 1);
      object.y1 = y + 1;  // rows come in order
      sum.rows += y;
      sum.columns += x;
      if (probability != nullptr) sum.probability += probability[y * labels.width + x];
    }
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto area = static_cast<double>(table[i].area);
    table[i].centroid_y = static_cast<double>(sums[i].rows) / area;
    table[i].centroid_x = static_cast<double>(sums[i].columns) / area;
    if (probability != nullptr) table[i].mean_probability = sums[i].probability / area;
  }
  std::sort(table.begin(), table.end(),
            [](const ObjectDescription& a, const ObjectDescription& b) { return a.id < b.id; });
  return table;
}

}  // namespace unet
