// Resizing a probability map row by row: what resize_probabilities (io/image.h) computes, bit for bit, one
// output row at a time, so that predict's resize mode hands on an image's rows without ever holding the
// resized map (classes x height x width floats). The source map (the model's size) is read through a function
// that returns its rows; two of them, filtered along x, are kept at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "unet/io/resize_taps.h"

namespace unet {

class ProbabilityRowResizer {
 public:
  // `source_row(y)` gives row y of the source map, [width, channels] floats; it must stay valid while the
  // resizer is used.
  ProbabilityRowResizer(std::function<const float*(std::int64_t)> source_row, std::int64_t height,
                        std::int64_t width, std::int64_t channels, std::int64_t new_height,
                        std::int64_t new_width);

  // Output row y, [new_width, channels]: valid until the next call. Rows asked in increasing order reuse
  // the rows filtered along x; any order gives the same values.
  std::span<const float> row(std::int64_t y);

 private:
  const float* along_x(std::int64_t source_y);  // source row filtered along x, [new_width, channels]

  std::function<const float*(std::int64_t)> source_row_;
  std::int64_t channels_, new_width_;
  AxisTaps down_, across_;  // resize_probabilities' own taps (io/resize_taps.h)
  std::int64_t cached_y_[2] = {-1, -1};
  std::vector<float> cached_[2];  // [new_width, channels] each
  int last_used_ = 1;
  std::vector<float> out_;  // [new_width, channels]
};

}  // namespace unet
