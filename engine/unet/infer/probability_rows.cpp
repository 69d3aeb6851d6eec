#include "unet/infer/probability_rows.h"

#include <algorithm>
#include <string>

#include "unet/core/error.h"

namespace unet {

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
    const float* weight = across_.weights.data() + x * static_cast<std::size_t>(across_.stride);
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
    const float wk = down_.weights[o * static_cast<std::size_t>(down_.stride) + static_cast<std::size_t>(k)];
    for (std::size_t i = 0; i < out_.size(); ++i) out_[i] += wk * src[i];
  }
  return out_;
}

}  // namespace unet
