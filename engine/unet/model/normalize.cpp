#include "unet/model/normalize.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "unet/core/error.h"

namespace unet {

namespace {

// Below this spread a channel is treated as constant: its values are only moved by the offset.
constexpr double kFlat = 1e-12;

float inverse_or_one(double spread) {
  return spread > kFlat ? static_cast<float>(1.0 / spread) : 1.0f;
}

std::vector<float> channel_values(std::span<const float> values, std::int64_t channels, std::int64_t c) {
  std::vector<float> out;
  out.reserve(values.size() / static_cast<std::size_t>(channels));
  for (std::size_t i = static_cast<std::size_t>(c); i < values.size();
       i += static_cast<std::size_t>(channels))
    out.push_back(values[i]);
  return out;
}

}  // namespace

double percentile(std::vector<float> values, double p) {
  UNET_CHECK(!values.empty(), usage, "percentile of no values");
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const double t = rank - static_cast<double>(below);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(below), values.end());
  const double low = values[below];
  if (t == 0 || below + 1 >= values.size()) return low;
  // The next order statistic is the smallest value above position `below`.
  const double high =
      *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(below) + 1, values.end());
  return low + t * (high - low);
}

ChannelMoments::ChannelMoments(std::int64_t channels)
    : sum_(static_cast<std::size_t>(channels), 0.0), sum_squares_(static_cast<std::size_t>(channels), 0.0) {}

// sum_ holds the running means and sum_squares_ the running sums of squared deviations (Chan et al.'s
// pairwise update), which keeps 16-bit data with a large mean and a small spread exact enough.
void ChannelMoments::add(std::span<const float> values) {
  const auto channels = static_cast<std::int64_t>(sum_.size());
  if (channels == 0 || values.empty()) return;
  const auto pixels = static_cast<std::int64_t>(values.size()) / channels;
  ChannelMoments image(channels);
  image.pixels_ = pixels;
  for (std::int64_t c = 0; c < channels; ++c) {
    double total = 0;
    for (std::int64_t i = 0; i < pixels; ++i) total += values[static_cast<std::size_t>(i * channels + c)];
    const double mean = total / static_cast<double>(pixels);
    double squares = 0;
    for (std::int64_t i = 0; i < pixels; ++i) {
      const double d = values[static_cast<std::size_t>(i * channels + c)] - mean;
      squares += d * d;
    }
    image.sum_[static_cast<std::size_t>(c)] = mean;
    image.sum_squares_[static_cast<std::size_t>(c)] = squares;
  }
  merge(image);
}

void ChannelMoments::merge(const ChannelMoments& other) {
  UNET_CHECK(other.sum_.size() == sum_.size(), usage, "ChannelMoments: channel counts differ");
  if (other.pixels_ == 0) return;
  const auto n = static_cast<double>(pixels_), m = static_cast<double>(other.pixels_);
  for (std::size_t c = 0; c < sum_.size(); ++c) {
    const double delta = other.sum_[c] - sum_[c];
    sum_[c] += delta * m / (n + m);
    sum_squares_[c] += other.sum_squares_[c] + delta * delta * n * m / (n + m);
  }
  pixels_ += other.pixels_;
}

std::vector<double> ChannelMoments::mean() const {
  return sum_;
}

std::vector<double> ChannelMoments::std() const {
  std::vector<double> out(sum_squares_.size(), 0.0);
  if (pixels_ == 0) return out;
  for (std::size_t c = 0; c < out.size(); ++c)
    out[c] = std::sqrt(sum_squares_[c] / static_cast<double>(pixels_));
  return out;
}

bool fixed_normalization(const NormalizeDesc& desc, std::int64_t channels, ChannelAffine& out) {
  const auto n = static_cast<std::size_t>(channels);
  out = ChannelAffine{};
  switch (desc.mode) {
    case NormalizeMode::scale_255:
      out.offset.assign(n, 0.0f);
      out.scale.assign(n, 1.0f / 255.0f);
      return true;
    case NormalizeMode::range:
      out.offset.assign(n, static_cast<float>(desc.range_min));
      out.scale.assign(n, inverse_or_one(desc.range_max - desc.range_min));
      out.clip = desc.clip;
      return true;
    case NormalizeMode::zscore:
      if (desc.scope != NormalizeScope::dataset || desc.mean.size() != n || desc.std.size() != n)
        return false;
      for (std::size_t c = 0; c < n; ++c) {
        out.offset.push_back(static_cast<float>(desc.mean[c]));
        out.scale.push_back(inverse_or_one(desc.std[c]));
      }
      return true;
    case NormalizeMode::percentile:
      return false;
  }
  return false;
}

ChannelAffine image_normalization(const NormalizeDesc& desc, std::span<const float> values,
                                  std::int64_t channels, int bit_depth, bool floating,
                                  const std::string& name) {
  UNET_CHECK(channels >= 1 && (!desc.per_image() || !values.empty()) &&
                 values.size() % static_cast<std::size_t>(channels) == 0,
             usage,
             name + ": " + std::to_string(values.size()) + " values for " + std::to_string(channels) +
                 " channel(s)");
  if (desc.mode == NormalizeMode::scale_255 && (bit_depth > 16 || floating))
    throw Error(
        ErrorKind::data,
        name + ": " + (floating ? std::string("floating-point") : std::to_string(bit_depth) + "-bit") +
            " samples, but data.normalize scale_255 is for 8 and 16-bit images; use percentile, zscore "
            "or range");
  ChannelAffine affine;
  if (desc.mode == NormalizeMode::scale_255 && bit_depth == 16) {
    // What the 8-bit pipeline always made of 16-bit images (v * 255 / 65535, then / 255), without its
    // rounding.
    affine.offset.assign(static_cast<std::size_t>(channels), 0.0f);
    affine.scale.assign(static_cast<std::size_t>(channels), 1.0f / 65535.0f);
    return affine;
  }
  if (fixed_normalization(desc, channels, affine)) return affine;
  if (desc.mode == NormalizeMode::zscore && desc.scope == NormalizeScope::dataset)
    throw ConfigError("data.normalize_mean",
                      "zscore over the dataset needs one mean and one std per channel (" +
                          std::to_string(channels) + "), measured by the data scan; got " +
                          std::to_string(desc.mean.size()) + " and " + std::to_string(desc.std.size()));
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::vector<float> v = channel_values(values, channels, c);
    if (desc.mode == NormalizeMode::percentile) {
      const double low = percentile(v, desc.low_percentile), high = percentile(v, desc.high_percentile);
      affine.offset.push_back(static_cast<float>(low));
      affine.scale.push_back(inverse_or_one(high - low));
    } else {
      ChannelMoments moments(1);
      moments.add(v);
      affine.offset.push_back(static_cast<float>(moments.mean()[0]));
      affine.scale.push_back(inverse_or_one(moments.std()[0]));
    }
  }
  affine.clip = desc.mode == NormalizeMode::percentile && desc.clip;
  return affine;
}

void normalize_in_place(const ChannelAffine& affine, std::span<float> values, std::int64_t channels) {
  const auto n = static_cast<std::size_t>(channels);
  UNET_CHECK(affine.offset.size() == n && affine.scale.size() == n && values.size() % n == 0, usage,
             "normalize: an affine of " + std::to_string(affine.offset.size()) + " channels for " +
                 std::to_string(channels));
  for (std::size_t i = 0; i < values.size(); i += n) {
    for (std::size_t c = 0; c < n; ++c) {
      float y = (values[i + c] - affine.offset[c]) * affine.scale[c];
      if (affine.clip) y = std::clamp(y, 0.0f, 1.0f);
      values[i + c] = y;
    }
  }
}

std::vector<std::uint8_t> display_pixels(std::span<const float> values, const NormalizeDesc& desc) {
  const bool centred = desc.mode == NormalizeMode::zscore;
  std::vector<std::uint8_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float unit = centred ? (values[i] + 2.5f) / 5.0f : values[i];
    out[i] = static_cast<std::uint8_t>(std::lround(std::clamp(unit, 0.0f, 1.0f) * 255.0f));
  }
  return out;
}

std::string describe(const NormalizeDesc& desc) {
  std::ostringstream out;
  switch (desc.mode) {
    case NormalizeMode::scale_255:
      out << "scale_255 (value / 255)";
      break;
    case NormalizeMode::percentile:
      out << "percentile " << desc.low_percentile << "-" << desc.high_percentile << " per image"
          << (desc.clip ? ", clipped to [0, 1]" : "");
      break;
    case NormalizeMode::zscore:
      out << "zscore " << (desc.scope == NormalizeScope::image ? "per image" : "over the dataset");
      if (desc.scope == NormalizeScope::dataset && !desc.mean.empty()) {
        out << " (mean";
        for (const double m : desc.mean) out << ' ' << m;
        out << ", std";
        for (const double s : desc.std) out << ' ' << s;
        out << ')';
      }
      break;
    case NormalizeMode::range:
      out << "range [" << desc.range_min << ", " << desc.range_max << "]" << (desc.clip ? ", clipped" : "");
      break;
  }
  return out.str();
}

}  // namespace unet
