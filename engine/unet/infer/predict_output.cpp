// A prediction's output: its probability maps as 8-bit images, its class mask, and the same bytes row by row
// for the rows predict_rows() hands on (predictor.h). Apart from the predictor, which produces probabilities
// and knows nothing of how they are written.
#include <algorithm>
#include <cmath>
#include <string>

#include "unet/infer/predictor.h"

namespace unet {

namespace {

// A pixel's class: a binary model's foreground (1) at or over the threshold, else the most probable class
// (the lowest index on a tie).
std::uint8_t class_of(const float* v, std::int64_t channels, double threshold) {
  if (channels == 1) return v[0] >= threshold ? 1 : 0;
  std::int64_t best = 0;
  for (std::int64_t k = 1; k < channels; ++k)
    if (v[k] > v[best]) best = k;
  return static_cast<std::uint8_t>(best);
}

std::uint8_t probability_level(float p) {
  return static_cast<std::uint8_t>(std::lround(std::clamp(p, 0.0f, 1.0f) * 255.0f));
}

}  // namespace

std::vector<std::uint8_t> class_mask(const Prediction& p, double threshold) {
  const auto pixels = static_cast<std::size_t>(p.height * p.width);
  UNET_CHECK(p.channels >= 1 && p.probabilities.size() == pixels * static_cast<std::size_t>(p.channels),
             usage, "class_mask: a prediction whose probabilities do not match its shape");
  std::vector<std::uint8_t> mask(pixels, 0);
  for (std::size_t i = 0; i < pixels; ++i)
    mask[i] =
        class_of(p.probabilities.data() + i * static_cast<std::size_t>(p.channels), p.channels, threshold);
  return mask;
}

Image probability_image(const Prediction& p, std::int64_t channel) {
  UNET_CHECK(channel >= 0 && channel < p.channels, usage,
             "probability_image: no channel " + std::to_string(channel));
  Image image{p.height, p.width, 1, std::vector<std::uint8_t>(static_cast<std::size_t>(p.height * p.width))};
  for (std::int64_t i = 0; i < p.height * p.width; ++i)
    image.pixels[static_cast<std::size_t>(i)] =
        probability_level(p.probabilities[static_cast<std::size_t>(i * p.channels + channel)]);
  return image;
}

Image mask_image(const Prediction& p, double threshold) {
  std::vector<std::uint8_t> mask = class_mask(p, threshold);
  if (p.channels == 1)
    for (std::uint8_t& v : mask) v = v ? 255 : 0;
  return Image{p.height, p.width, 1, std::move(mask)};
}

void probability_row(const PredictionRow& row, std::int64_t channel, std::span<std::uint8_t> out) {
  UNET_CHECK(channel >= 0 && channel < row.channels && std::ssize(out) == row.width &&
                 std::ssize(row.probabilities) == row.width * row.channels,
             usage,
             "probability_row: channel " + std::to_string(channel) + " of a row of " +
                 std::to_string(row.width) + " pixels into " + std::to_string(out.size()));
  for (std::int64_t x = 0; x < row.width; ++x)
    out[static_cast<std::size_t>(x)] =
        probability_level(row.probabilities[static_cast<std::size_t>(x * row.channels + channel)]);
}

void mask_row(const PredictionRow& row, double threshold, std::span<std::uint8_t> out) {
  UNET_CHECK(
      std::ssize(out) == row.width && std::ssize(row.probabilities) == row.width * row.channels, usage,
      "mask_row: a row of " + std::to_string(row.width) + " pixels into " + std::to_string(out.size()));
  for (std::int64_t x = 0; x < row.width; ++x) {
    const std::uint8_t k = class_of(row.probabilities.data() + x * row.channels, row.channels, threshold);
    out[static_cast<std::size_t>(x)] = row.channels == 1 ? (k ? 255 : 0) : k;
  }
}

}  // namespace unet
