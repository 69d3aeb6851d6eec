// The taps of one axis of a separable resize: for each output index, the first input index it reads and the
// weights of the inputs from there. image_resize.cpp filters whole images with them; predict's row resizer
// (infer/probability_rows.h) filters a probability map a row at a time with the same taps, so the two give
// the same values bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace unet {

struct AxisTaps {
  std::vector<std::int64_t> first;  // [out]: the first input index of each output index
  std::vector<int> count;           // [out]: how many taps it has (<= stride)
  std::vector<float> weights;       // [out, stride]
  int stride = 1;

  std::int64_t outputs() const { return static_cast<std::int64_t>(first.size()); }
};

// Pixel-centre aligned linear interpolation (output i samples input coordinate (i + 0.5) * in / out - 0.5,
// clamped to [0, in - 1]); an axis whose size does not change is an exact copy (one tap of weight 1).
AxisTaps linear_taps(std::int64_t in, std::int64_t out);

}  // namespace unet
