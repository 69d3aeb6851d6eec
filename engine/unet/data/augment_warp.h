// The geometric half of training-time augmentation: one training patch cut from a source image and its mask
// under a SpatialDraw (augment_draw.h), image and mask always with the same geometry. Resampling is OpenCV's
// (cv::remap, cv::resize), never our own; a draw of flips and quarter turns whose centre sits on the pixel
// grid resamples nothing at all, so that the patch holds the source's exact values (the fast path).
#pragma once

#include <cstdint>

#include "unet/data/augment_draw.h"

namespace unet {

// Writes an out_h x out_w patch whose centre ((out_h - 1) / 2, (out_w - 1) / 2) lands on source coordinate
// (centre_y, centre_x): output pixel (i, j), at offset d = (i, j) - centre_out, reads source centre + M d +
// e(i, j) (SpatialDraw says what M and e are; e is the draw's grid interpolated bicubically over the patch).
// `image`: float [height, width, channels] (HWC), read bilinearly, `image_fill` outside the source. `mask`
// (nullable, with `out_mask`): uint8 [height, width], read by nearest neighbour, `mask_fill` outside, so that
// it holds only source labels and mask_fill. The output buffers hold out_h x out_w (x channels) values and do
// not overlap the source. Results do not depend on OpenCV's thread count. Throws Error(ErrorKind::usage) for
// dimensions below 1, an elastic grid whose sizes disagree, a mask without its output (or the reverse), or a
// patch or the source region it reads that is 32767 pixels or more on a side (OpenCV's remap limit).
void warp_patch(const float* image, std::int64_t height, std::int64_t width, std::int64_t channels,
                const std::uint8_t* mask, double centre_y, double centre_x, const SpatialDraw& draw,
                float image_fill, std::uint8_t mask_fill, std::int64_t out_h, std::int64_t out_w,
                float* out_image, std::uint8_t* out_mask);

}  // namespace unet
