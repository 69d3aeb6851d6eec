// Training-time augmentation: the lossless geometric transforms of the pixel grid (flips and quarter turns),
// so that no pixel is resampled and the mask stays exact. The one rule: image and mask always get the same
// transform.
#pragma once

#include <string>

#include "unet/core/rng.h"
#include "unet/data/dataset.h"

namespace unet {

// Applied in this order: flip left-right, flip top-bottom, then `rotate90` counter-clockwise quarter turns as
// the image is seen on screen (row 0 at the top), so one quarter turn moves the top-right corner to the
// top-left.
struct Augmentation {
  bool flip_horizontal = false;
  bool flip_vertical = false;
  int rotate90 = 0;  // 0..3; other values are taken modulo 4

  bool operator==(const Augmentation&) const = default;
};

// Each flip with probability 1/2 and a uniform number of quarter turns; when the images are not `square`,
// only 0 or 2 quarter turns, so that height and width stay as they are.
Augmentation random_augmentation(Rng& rng, bool square);

// Transforms the image (all channels), the mask, the pixel weights and the instance labels (each if it has
// them) alike; an odd number of quarter turns swaps height and width. Throws Error(ErrorKind::usage) when
// the buffers do not match the sample's dimensions.
void apply(const Augmentation& augmentation, Sample& sample);

// "identity", or the steps joined by '+', e.g. "flip_h+rot90".
std::string to_string(const Augmentation& augmentation);

}  // namespace unet
