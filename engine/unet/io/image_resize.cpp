// Resizing images (area / bilinear), masks (nearest) and probability maps (bilinear). The one non-obvious
// rule: the filters are separable, so each axis gets a table of taps (first input index, weights) computed
// once, and the image is filtered along x, then along y; the cost is the output size times the taps, and an
// axis whose size does not change is an exact copy (one tap of weight 1).
#include <algorithm>
#include <cmath>
#include <string>

#include "unet/core/error.h"
#include "unet/io/image.h"
#include "unet/io/resize_taps.h"

namespace unet {
namespace {

AxisTaps identity_taps(std::int64_t n) {
  AxisTaps taps;
  taps.first.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) taps.first[static_cast<std::size_t>(i)] = i;
  taps.count.assign(static_cast<std::size_t>(n), 1);
  taps.weights.assign(static_cast<std::size_t>(n), 1.0f);
  return taps;
}

// Pixel-centre aligned linear interpolation: output i samples input coordinate (i + 0.5) * in / out - 0.5,
// clamped to [0, in - 1].
AxisTaps bilinear_taps(std::int64_t in, std::int64_t out) {
  AxisTaps taps;
  taps.stride = 2;
  taps.first.resize(static_cast<std::size_t>(out));
  taps.count.resize(static_cast<std::size_t>(out));
  taps.weights.assign(static_cast<std::size_t>(out) * 2, 0.0f);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    const auto o = static_cast<std::size_t>(i);
    const double x = std::max(0.0, (static_cast<double>(i) + 0.5) * scale - 0.5);
    const auto left = static_cast<std::int64_t>(std::floor(x));
    if (left >= in - 1) {
      taps.first[o] = in - 1;
      taps.count[o] = 1;
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

// Area averaging for out < in: output i is the mean over the input interval [i * in / out, (i + 1) * in /
// out). In units of 1 / out, that interval is [i * in, (i + 1) * in) and input pixel j is [j * out, (j + 1) *
// out), so the overlaps are exact integers.
AxisTaps area_taps(std::int64_t in, std::int64_t out) {
  AxisTaps taps;
  taps.stride = static_cast<int>((in + out - 1) / out) + 1;
  const auto stride = static_cast<std::size_t>(taps.stride);
  taps.first.resize(static_cast<std::size_t>(out));
  taps.count.resize(static_cast<std::size_t>(out));
  taps.weights.assign(static_cast<std::size_t>(out) * stride, 0.0f);
  for (std::int64_t i = 0; i < out; ++i) {
    const auto o = static_cast<std::size_t>(i);
    const std::int64_t lo = i * in, hi = (i + 1) * in;
    const std::int64_t first = lo / out, last = (hi - 1) / out;
    taps.first[o] = first;
    taps.count[o] = static_cast<int>(last - first + 1);
    for (std::int64_t j = first; j <= last; ++j) {
      const std::int64_t overlap = std::min(hi, (j + 1) * out) - std::max(lo, j * out);
      taps.weights[o * stride + static_cast<std::size_t>(j - first)] =
          static_cast<float>(static_cast<double>(overlap) / static_cast<double>(in));
    }
  }
  return taps;
}

// Filters in[h, w, c] along x with `across`, then along y with `down`, and hands each finished output row (as
// floats, new_w * c of them) to emit(y, row).
template <class T, class Emit>
void resample(const T* in, std::int64_t h, std::int64_t w, std::int64_t c, const AxisTaps& down,
              const AxisTaps& across, Emit emit) {
  const std::int64_t new_w = across.outputs(), new_h = down.outputs();
  const auto row_out = static_cast<std::size_t>(new_w * c);
  const auto cs = static_cast<std::size_t>(c);
  std::vector<float> along_x(static_cast<std::size_t>(h) * row_out);
  for (std::int64_t y = 0; y < h; ++y) {
    const T* src = in + static_cast<std::size_t>(y * w * c);
    float* dst = along_x.data() + static_cast<std::size_t>(y) * row_out;
    for (std::size_t x = 0; x < static_cast<std::size_t>(new_w); ++x) {
      const T* base = src + static_cast<std::size_t>(across.first[x]) * cs;
      const float* weight = across.weights.data() + x * static_cast<std::size_t>(across.stride);
      const int taps = across.count[x];
      for (std::size_t ch = 0; ch < cs; ++ch) {
        float sum = 0.0f;
        for (int k = 0; k < taps; ++k)
          sum += weight[k] * static_cast<float>(base[static_cast<std::size_t>(k) * cs + ch]);
        dst[x * cs + ch] = sum;
      }
    }
  }
  std::vector<float> row(row_out);
  for (std::size_t y = 0; y < static_cast<std::size_t>(new_h); ++y) {
    std::fill(row.begin(), row.end(), 0.0f);
    const float* weight = down.weights.data() + y * static_cast<std::size_t>(down.stride);
    for (int k = 0; k < down.count[y]; ++k) {
      const float* src = along_x.data() + static_cast<std::size_t>(down.first[y] + k) * row_out;
      const float wk = weight[k];
      for (std::size_t i = 0; i < row_out; ++i) row[i] += wk * src[i];
    }
    emit(y, row.data());
  }
}

std::size_t checked_size(const char* what, std::int64_t h, std::int64_t w, std::int64_t c) {
  std::int64_t hw = 0, hwc = 0;
  if (h < 1 || w < 1 || c < 1 || __builtin_mul_overflow(h, w, &hw) || __builtin_mul_overflow(hw, c, &hwc)) {
    throw Error(ErrorKind::usage, std::string(what) + ": invalid size " + std::to_string(h) + "x" +
                                      std::to_string(w) + "x" + std::to_string(c));
  }
  return static_cast<std::size_t>(hwc);
}

void check_data_size(const char* what, std::size_t actual, std::size_t expected) {
  if (actual != expected) {
    throw Error(ErrorKind::usage, std::string(what) + ": " + std::to_string(actual) +
                                      " values for a shape of " + std::to_string(expected));
  }
}

AxisTaps image_taps(std::int64_t in, std::int64_t out) {
  if (out == in) return identity_taps(in);
  return out < in ? area_taps(in, out) : bilinear_taps(in, out);
}

}  // namespace

AxisTaps linear_taps(std::int64_t in, std::int64_t out) {
  return out == in ? identity_taps(in) : bilinear_taps(in, out);
}

Image resize_image(const Image& image, std::int64_t height, std::int64_t width) {
  const std::size_t in_size = checked_size("resize_image", image.height, image.width, image.channels);
  check_data_size("resize_image", image.pixels.size(), in_size);
  const std::size_t out_size = checked_size("resize_image", height, width, image.channels);
  if (height == image.height && width == image.width) return image;

  Image out;
  out.height = height;
  out.width = width;
  out.channels = image.channels;
  out.pixels.resize(out_size);
  const auto row_out = static_cast<std::size_t>(width * image.channels);
  resample(image.pixels.data(), image.height, image.width, image.channels, image_taps(image.height, height),
           image_taps(image.width, width), [&](std::size_t y, const float* row) {
             std::uint8_t* dst = out.pixels.data() + y * row_out;
             for (std::size_t i = 0; i < row_out; ++i) {
               // Half up; the slack absorbs float error where the exact mean is a half (e.g. 1/3 + 1/6).
               const float v = std::floor(row[i] + 0.5f + 1e-3f);
               dst[i] = static_cast<std::uint8_t>(std::clamp(v, 0.0f, 255.0f));
             }
           });
  return out;
}

namespace {

// resize_mask's nearest neighbour, for class indices and instance labels alike.
template <class Label>
std::vector<Label> resize_nearest(const char* what, const std::vector<Label>& mask, std::int64_t height,
                                  std::int64_t width, std::int64_t new_height, std::int64_t new_width) {
  check_data_size(what, mask.size(), checked_size(what, height, width, 1));
  const std::size_t out_size = checked_size(what, new_height, new_width, 1);
  if (new_height == height && new_width == width) return mask;

  // floor((i + 0.5) * in / out), in integers: ((2i + 1) * in) / (2 * out).
  const auto nearest = [](std::int64_t in, std::int64_t out) {
    std::vector<std::size_t> index(static_cast<std::size_t>(out));
    for (std::int64_t i = 0; i < out; ++i) {
      index[static_cast<std::size_t>(i)] =
          static_cast<std::size_t>(std::min(in - 1, ((2 * i + 1) * in) / (2 * out)));
    }
    return index;
  };
  const std::vector<std::size_t> rows = nearest(height, new_height), cols = nearest(width, new_width);
  std::vector<Label> out(out_size);
  const auto w = static_cast<std::size_t>(width), nw = static_cast<std::size_t>(new_width);
  for (std::size_t y = 0; y < rows.size(); ++y) {
    const Label* src = mask.data() + rows[y] * w;
    Label* dst = out.data() + y * nw;
    for (std::size_t x = 0; x < nw; ++x) dst[x] = src[cols[x]];
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> resize_mask(const std::vector<std::uint8_t>& mask, std::int64_t height,
                                      std::int64_t width, std::int64_t new_height, std::int64_t new_width) {
  return resize_nearest("resize_mask", mask, height, width, new_height, new_width);
}

std::vector<std::uint32_t> resize_labels(const std::vector<std::uint32_t>& labels, std::int64_t height,
                                         std::int64_t width, std::int64_t new_height,
                                         std::int64_t new_width) {
  return resize_nearest("resize_labels", labels, height, width, new_height, new_width);
}

std::vector<float> resize_probabilities(const std::vector<float>& map, std::int64_t height,
                                        std::int64_t width, std::int64_t channels, std::int64_t new_height,
                                        std::int64_t new_width) {
  check_data_size("resize_probabilities", map.size(),
                  checked_size("resize_probabilities", height, width, channels));
  const std::size_t out_size = checked_size("resize_probabilities", new_height, new_width, channels);
  if (new_height == height && new_width == width) return map;

  std::vector<float> out(out_size);
  const auto row_out = static_cast<std::size_t>(new_width * channels);
  resample(map.data(), height, width, channels, linear_taps(height, new_height),
           linear_taps(width, new_width),
           [&](std::size_t y, const float* row) { std::copy(row, row + row_out, out.data() + y * row_out); });
  return out;
}

}  // namespace unet
