// apply_intensity: the per-value transforms are plain loops over the HWC buffer (per-channel statistics in
// double, so that the mean of a large patch does not drift); the blur is OpenCV's, on a view of the caller's
// buffer. The noise is drawn value by value in buffer order from its own seed, never in parallel, so that it
// is the same bytes whatever the thread count.
#include "unet/data/augment_intensity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "unet/core/error.h"
#include "unet/core/rng.h"

namespace unet {

namespace {

struct ChannelStats {
  double mean = 0;
  float min = std::numeric_limits<float>::max(), max = std::numeric_limits<float>::lowest();
};

std::vector<ChannelStats> channel_stats(const float* image, std::int64_t pixels, std::int64_t channels) {
  std::vector<ChannelStats> stats(static_cast<std::size_t>(channels));
  std::vector<double> sums(stats.size(), 0.0);
  for (std::int64_t p = 0; p < pixels; ++p) {
    for (std::size_t c = 0; c < stats.size(); ++c) {
      const float v = image[p * channels + static_cast<std::int64_t>(c)];
      sums[c] += v;
      stats[c].min = std::min(stats[c].min, v);
      stats[c].max = std::max(stats[c].max, v);
    }
  }
  for (std::size_t c = 0; c < stats.size(); ++c) stats[c].mean = sums[c] / static_cast<double>(pixels);
  return stats;
}

// Every value of channel c replaced by f(v, stats of c).
template <typename F>
void per_channel(float* image, std::int64_t pixels, std::int64_t channels, F f) {
  const std::vector<ChannelStats> stats = channel_stats(image, pixels, channels);
  for (std::int64_t p = 0; p < pixels; ++p)
    for (std::size_t c = 0; c < stats.size(); ++c) {
      float& v = image[p * channels + static_cast<std::int64_t>(c)];
      v = f(v, stats[c]);
    }
}

}  // namespace

void apply_intensity(const IntensityDraw& draw, float* image, std::int64_t height, std::int64_t width,
                     std::int64_t channels) {
  UNET_CHECK(height >= 1 && width >= 1 && channels >= 1 && channels <= CV_CN_MAX &&
                 height <= std::numeric_limits<int>::max() && width <= std::numeric_limits<int>::max(),
             usage,
             "apply_intensity: an image of " + std::to_string(height) + "x" + std::to_string(width) + "x" +
                 std::to_string(channels));
  const std::int64_t pixels = height * width, values = pixels * channels;

  if (draw.noise_sigma > 0) {
    Rng noise(draw.noise_seed);
    for (std::int64_t i = 0; i < values; ++i)
      image[i] = static_cast<float>(image[i] + draw.noise_sigma * noise.normal());
  }
  if (draw.blur_sigma) {
    cv::Mat view(static_cast<int>(height), static_cast<int>(width), CV_32FC(static_cast<int>(channels)),
                 image);
    // Size(0, 0): OpenCV sizes the kernel from sigma (for float images, 8 sigma + 1, made odd).
    cv::GaussianBlur(view, view, cv::Size(0, 0), *draw.blur_sigma, *draw.blur_sigma, cv::BORDER_REFLECT_101);
  }
  if (draw.brightness) {
    const auto factor = static_cast<float>(*draw.brightness);
    std::for_each(image, image + values, [factor](float& v) { v *= factor; });
  }
  if (draw.contrast) {
    const double factor = *draw.contrast;
    per_channel(image, pixels, channels, [factor](float v, const ChannelStats& s) {
      return std::clamp(static_cast<float>((v - s.mean) * factor + s.mean), s.min, s.max);
    });
  }
  if (draw.gamma) {
    const double gamma = *draw.gamma;
    per_channel(image, pixels, channels, [gamma](float v, const ChannelStats& s) {
      if (!(s.max > s.min)) return v;  // a constant channel: nothing to rescale
      const double range = static_cast<double>(s.max) - s.min;
      return static_cast<float>(s.min + range * std::pow((v - s.min) / range, gamma));
    });
  }
}

}  // namespace unet
