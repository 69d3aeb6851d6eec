#include "unet/infer/probability_rows.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "unet/core/error.h"

namespace unet {

ProbabilityRowResizer::Taps ProbabilityRowResizer::linear_taps(std::int64_t in, std::int64_t out) {
  Taps taps;
  taps.first.resize(static_cast<std::size_t>(out));
  taps.count.assign(static_cast<std::size_t>(out), 1);
  taps.weights.assign(static_cast<std::size_t>(out) * 2, 0.0f);
  if (in == out) {
    for (std::int64_t i = 0; i < out; ++i) {
      taps.first[static_cast<std::size_t>(i)] = i;
      taps.weights[static_cast<std::size_t>(2 * i)] = 1.0f;
    }
    return taps;
  }
  // Output i samples input coordinate (i + 0.5) * in / out - 0.5, clamped to [0, in - 1].
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    const auto o = static_cast<std::size_t>(i);
    const double x = std::max(0.0, (static_cast<double>(i) + 0.5) * scale - 0.5);
    const auto left = static_cast<std::int64_t>(std::floor(x));
    if (left >= in - 1) {
      taps.first[o] = in - 1;
      taps.weights[2 * o] = 1.0f;
      continue;
    }
    const double right_weight = x - static_cast<double>(left);
    taps.first[o] = left;
    taps.count[o] = 2;
    taps.weights[2 * o] = static_cast<float>(1.0 - right_weight);
    taps.weights[2 * o + 1] = static_cast<float>(right_weight);
  }
  return taps;
}

ProbabilityRowResizer::ProbabilityRowResizer(std::function<const float*(std::int64_t)> source_row,
                                             std::int64_t height, std::int64_t width, std::int64_t channels,
                                             std::int64_t new_height, std::int64_t new_width)
    : source_row_(std::move(source_row)),
      channels_(channels),
      new_width_(new_width),
      down_(linear_taps(height, new_height)),
      across_(linear_taps(width, new_width)),
      out_(static_cast<std::size_t>(new_width * channels)) {
  UNET_CHECK(height >= 1 && width >= 1 && channels >= 1 && new_height >= 1 && new_width >= 1, usage,
             "ProbabilityRowResizer: a size of " + std::to_string(height) + "x" + std::to_string(width) +
                 " to " + std::to_string(new_height) + "x" + std::to_string(new_width));
}

const float* ProbabilityRowResizer::along_x(std::int64_t source_y) {
  for (int slot = 0; slot < 2; ++slot)
    if (cached_y_[slot] == source_y) {
      last_used_ = slot;
      return cached_[slot].data();
    }
  // The other slot than the one used last: the rows of an output row, and of the next, are kept.
  const int slot = 1 - last_used_;
  last_used_ = slot;
  std::vector<float>& dst = cached_[slot];
  dst.resize(static_cast<std::size_t>(new_width_ * channels_));
  const float* src = source_row_(source_y);
  const auto cs = static_cast<std::size_t>(channels_);
  // The same sums, in the same order, as resize_probabilities': bit for bit.
  for (std::size_t x = 0; x < static_cast<std::size_t>(new_width_); ++x) {
    const float* base = src + static_cast<std::size_t>(across_.first[x]) * cs;
    const float* weight = across_.weights.data() + x * 2;
    const int taps = across_.count[x];
    for (std::size_t ch = 0; ch < cs; ++ch) {
      float sum = 0.0f;
      for (int k = 0; k < taps; ++k) sum += weight[k] * base[static_cast<std::size_t>(k) * cs + ch];
      dst[x * cs + ch] = sum;
    }
  }
  cached_y_[slot] = source_y;
  return dst.data();
}

std::span<const float> ProbabilityRowResizer::row(std::int64_t y) {
  const auto o = static_cast<std::size_t>(y);
  UNET_CHECK(y >= 0 && o < down_.first.size(), usage, "ProbabilityRowResizer: no row " + std::to_string(y));
  std::fill(out_.begin(), out_.end(), 0.0f);
  for (int k = 0; k < down_.count[o]; ++k) {
    const float* src = along_x(down_.first[o] + k);
    const float wk = down_.weights[2 * o + static_cast<std::size_t>(k)];
    for (std::size_t i = 0; i < out_.size(); ++i) out_[i] += wk * src[i];
  }
  return out_;
}

}  // namespace unet
