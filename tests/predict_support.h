// A test image predict's suites share (test_predict, test_reliability_predict).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "unet/io/image.h"

namespace unet::test {

// A smooth, asymmetric test image: gradients and a disc, no mirror symmetry.
inline Image structured_image(std::int64_t h, std::int64_t w, std::int64_t channels) {
  Image image{h, w, channels, std::vector<std::uint8_t>(static_cast<std::size_t>(h * w * channels))};
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t ch = 0; ch < channels; ++ch) {
        double v = 40 + 120.0 * x / w + 50.0 * y / h + 30 * std::sin(0.37 * x + 0.11 * y * (ch + 1));
        if ((x - w / 3) * (x - w / 3) + (y - h / 4) * (y - h / 4) < 64) v += 60;
        image.pixels[static_cast<std::size_t>((y * w + x) * channels + ch)] =
            static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return image;
}

}  // namespace unet::test
