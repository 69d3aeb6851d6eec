// Both targets need distances per object (to its own edge, or from the background to it), and an image may
// hold hundreds of objects: each object's distance transform runs on a window around it (its bounding box,
// enlarged for border_weights by the distance beyond which the weight's term is cut off), never on the whole
// image.
#include "unet/objects/instance_targets.h"

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

// An object's bounding box; y1 and x1 exclusive.
struct ObjectBox {
  ObjectId id = 0;
  std::int64_t y0 = 0, x0 = 0, y1 = 0, x1 = 0;
};

std::string dims(std::int64_t height, std::int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

void check_labels(const LabelImage& labels, const char* caller) {
  // OpenCV's images count rows and columns in int.
  constexpr std::int64_t kMaxSide = std::numeric_limits<int>::max();
  const bool sides_ok =
      labels.height >= 0 && labels.width >= 0 && labels.height <= kMaxSide && labels.width <= kMaxSide;
  UNET_CHECK(sides_ok && labels.ids.size() == static_cast<std::size_t>(labels.height * labels.width), usage,
             std::string(caller) + ": a label image of " + dims(labels.height, labels.width) + " holds " +
                 std::to_string(labels.ids.size()) + " ids (each side from 0 to " + std::to_string(kMaxSide) +
                 ", one id per pixel)");
}

// The bounding box of each id but 0, in ascending id order.
std::vector<ObjectBox> object_boxes(const LabelImage& labels) {
  std::unordered_map<ObjectId, std::size_t> index;
  std::vector<ObjectBox> boxes;
  for (std::int64_t y = 0; y < labels.height; ++y) {
    for (std::int64_t x = 0; x < labels.width; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      const auto [it, added] = index.try_emplace(id, boxes.size());
      if (added) {
        boxes.push_back({id, y, x, y + 1, x + 1});
        continue;
      }
      ObjectBox& box = boxes[it->second];
      box.x0 = std::min(box.x0, x);
      box.x1 = std::max(box.x1, x + 1);
      box.y1 = y + 1;  // rows come in order
    }
  }
  std::sort(boxes.begin(), boxes.end(), [](const ObjectBox& a, const ObjectBox& b) { return a.id < b.id; });
  return boxes;
}

// The Euclidean distance from each pixel of the window to the nearest pixel where is_zero(y, x) holds (image
// coordinates); the window must hold at least one such pixel.
template <typename IsZero>
cv::Mat window_distances(const ObjectBox& window, IsZero is_zero) {
  const int rows = static_cast<int>(window.y1 - window.y0), cols = static_cast<int>(window.x1 - window.x0);
  cv::Mat source(rows, cols, CV_8U);
  for (int r = 0; r < rows; ++r) {
    auto* row = source.ptr<std::uint8_t>(r);
    for (int c = 0; c < cols; ++c) row[c] = is_zero(window.y0 + r, window.x0 + c) ? 0 : 1;
  }
  cv::Mat distances;
  cv::distanceTransform(source, distances, cv::DIST_L2, cv::DIST_MASK_PRECISE, CV_32F);
  return distances;
}

}  // namespace

std::vector<std::uint8_t> boundary_classes(const LabelImage& labels, int boundary_width) {
  UNET_CHECK(boundary_width >= 1, usage,
             "boundary_classes: boundary_width must be >= 1, got " + std::to_string(boundary_width));
  check_labels(labels, "boundary_classes");
  const std::int64_t height = labels.height, width = labels.width;
  const auto pixel = [width](std::int64_t y, std::int64_t x) {
    return static_cast<std::size_t>(y * width + x);
  };

  std::vector<std::uint8_t> classes(labels.ids.size(), kBackgroundClass);
  std::vector<bool> edge(labels.ids.size(), false);
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      classes[pixel(y, x)] = kInteriorClass;
      edge[pixel(y, x)] =
          (y > 0 && labels.at(y - 1, x) != id) || (y + 1 < height && labels.at(y + 1, x) != id) ||
          (x > 0 && labels.at(y, x - 1) != id) || (x + 1 < width && labels.at(y, x + 1) != id);
    }
  }
  if (boundary_width == 1) {  // distance < 1: the edge pixels themselves
    for (std::size_t i = 0; i < edge.size(); ++i)
      if (edge[i]) classes[i] = kBoundaryClass;
    return classes;
  }

  // Within an object's bounding box lie all its edge pixels, so the distances there are exact.
  for (const ObjectBox& box : object_boxes(labels)) {
    bool has_edge = false;
    for (std::int64_t y = box.y0; y < box.y1 && !has_edge; ++y)
      for (std::int64_t x = box.x0; x < box.x1 && !has_edge; ++x)
        has_edge = edge[pixel(y, x)] && labels.at(y, x) == box.id;
    if (!has_edge) continue;  // the object fills the image: all interior
    const cv::Mat distances = window_distances(
        box, [&](std::int64_t y, std::int64_t x) { return edge[pixel(y, x)] && labels.at(y, x) == box.id; });
    for (std::int64_t y = box.y0; y < box.y1; ++y) {
      const auto* row = distances.ptr<float>(static_cast<int>(y - box.y0));
      for (std::int64_t x = box.x0; x < box.x1; ++x)
        if (labels.at(y, x) == box.id && row[x - box.x0] < static_cast<float>(boundary_width))
          classes[pixel(y, x)] = kBoundaryClass;
    }
  }
  return classes;
}

LabelImage separate_touching(const LabelImage& labels) {
  check_labels(labels, "separate_touching");
  const std::int64_t height = labels.height, width = labels.width;
  LabelImage separated = labels;
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      bool touches_smaller = false;
      for (std::int64_t dy = -1; dy <= 1 && !touches_smaller; ++dy) {
        for (std::int64_t dx = -1; dx <= 1 && !touches_smaller; ++dx) {
          const std::int64_t ny = y + dy, nx = x + dx;
          if (ny < 0 || ny >= height || nx < 0 || nx >= width) continue;
          const ObjectId other = labels.at(ny, nx);  // the original labels: removals do not cascade
          touches_smaller = other != 0 && other < id;
        }
      }
      if (touches_smaller) separated.at(y, x) = 0;
    }
  }
  return separated;
}

std::vector<float> border_weights(const LabelImage& labels, double w0, double sigma, bool balance_classes) {
  UNET_CHECK(std::isfinite(w0) && w0 >= 0, usage,
             "border_weights: w0 must be finite and >= 0, got " + std::to_string(w0));
  UNET_CHECK(std::isfinite(sigma) && sigma > 0, usage,
             "border_weights: sigma must be finite and > 0, got " + std::to_string(sigma));
  check_labels(labels, "border_weights");
  const std::int64_t height = labels.height, width = labels.width;
  const std::size_t pixels = labels.ids.size();

  double background_weight = 1, foreground_weight = 1;
  const auto foreground = static_cast<std::size_t>(
      std::count_if(labels.ids.begin(), labels.ids.end(), [](ObjectId id) { return id != 0; }));
  if (balance_classes && foreground > 0 && foreground < pixels) {
    background_weight = static_cast<double>(pixels) / (2.0 * static_cast<double>(pixels - foreground));
    foreground_weight = static_cast<double>(pixels) / (2.0 * static_cast<double>(foreground));
  }
  std::vector<float> weights(pixels);
  for (std::size_t i = 0; i < pixels; ++i)
    weights[i] = static_cast<float>(labels.ids[i] == 0 ? background_weight : foreground_weight);

  const std::vector<ObjectBox> boxes = object_boxes(labels);
  if (boxes.size() < 2 || w0 == 0) return weights;

  // w0 * exp(-s^2 / (2 sigma^2)) < w0 / 1000 for s >= cutoff. A pixel with d1 + d2 < cutoff has both
  // distances < cutoff, so it lies within both objects' windows (box enlarged by ceil(cutoff)) and its d1, d2
  // are exact; elsewhere the distances found are no smaller than the true ones, so their sum is >= cutoff
  // too.
  const double cutoff = std::sqrt(2.0 * std::log(1000.0)) * sigma;
  const auto reach = static_cast<std::int64_t>(std::ceil(cutoff));
  constexpr float kFar = std::numeric_limits<float>::infinity();
  std::vector<float> nearest(pixels, kFar), second(pixels, kFar);
  for (const ObjectBox& box : boxes) {
    const ObjectBox window{box.id, std::max<std::int64_t>(box.y0 - reach, 0),
                           std::max<std::int64_t>(box.x0 - reach, 0), std::min(box.y1 + reach, height),
                           std::min(box.x1 + reach, width)};
    const cv::Mat distances =
        window_distances(window, [&](std::int64_t y, std::int64_t x) { return labels.at(y, x) == box.id; });
    for (std::int64_t y = window.y0; y < window.y1; ++y) {
      const auto* row = distances.ptr<float>(static_cast<int>(y - window.y0));
      for (std::int64_t x = window.x0; x < window.x1; ++x) {
        if (labels.at(y, x) != 0) continue;
        const auto i = static_cast<std::size_t>(y * width + x);
        const float d = row[x - window.x0];
        if (d < nearest[i]) {
          second[i] = nearest[i];
          nearest[i] = d;
        } else if (d < second[i]) {
          second[i] = d;
        }
      }
    }
  }
  for (std::size_t i = 0; i < pixels; ++i) {
    if (labels.ids[i] != 0) continue;
    const double sum = static_cast<double>(nearest[i]) + static_cast<double>(second[i]);
    if (sum < cutoff)
      weights[i] = static_cast<float>(background_weight + w0 * std::exp(-sum * sum / (2 * sigma * sigma)));
  }
  return weights;
}

}  // namespace unet
