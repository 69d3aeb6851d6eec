// The value half of training-time augmentation: an IntensityDraw (augment_draw.h) applied in place to a
// normalised float image, in nnU-Net's order (its training transforms: Gaussian noise, Gaussian blur,
// multiplicative brightness, contrast, gamma). The mask is never touched.
#pragma once

#include <cstdint>

#include "unet/data/augment_draw.h"

namespace unet {

// On `image`, float [height, width, channels] (HWC), in place:
// - noise: + N(0, noise_sigma) per value, from Rng(noise_seed): the same draw adds the same noise;
// - blur: cv::GaussianBlur with sigma blur_sigma on each channel (kernel size OpenCV's for float images,
//   borders reflected without repeating the edge, BORDER_REFLECT_101);
// - brightness: each value x brightness;
// - contrast: per channel, (v - mean) x contrast + mean, clipped to the channel's min and max before it;
// - gamma: per channel, min + (max - min) x ((v - min) / (max - min))^gamma; a constant channel stays as is.
// Results do not depend on OpenCV's thread count. Throws Error(ErrorKind::usage) for dimensions below 1.
void apply_intensity(const IntensityDraw& draw, float* image, std::int64_t height, std::int64_t width,
                     std::int64_t channels);

}  // namespace unet
