// Where a training patch is cut from an image in patch mode (data.mode "patch"): a share of the patches
// (data.foreground_oversample, nnU-Net's 0.33) is centred on a labelled foreground pixel, so that thin or
// rare structures are seen although most of an image is background; the rest lie anywhere in the image.
// Patches larger than the image, or over its border, are padded: the image with 0 (the normalised mean of
// nothing), the mask with the fill the options name (loss.ignore_index where there is one, so padding adds no
// loss), per-pixel loss weights with kPaddingWeight.
#pragma once

#include <cstdint>

#include "unet/core/rng.h"
#include "unet/data/dataset.h"

namespace unet {

struct PatchOptions {
  std::int64_t height = 256, width = 256;
  double foreground_oversample = 0.33;
  int ignore_index = -1;  // a mask value that is not foreground; also the padding's mask value when >= 0
  std::uint8_t mask_fill() const noexcept {
    return ignore_index >= 0 ? static_cast<std::uint8_t>(ignore_index) : 0;
  }
};

// The loss weight of a pixel a patch or a warp brings in from outside the image (Sample::weights). 1: where
// the mask's padding is labelled (background, no ignore_index) the pixel weighs as it would without weights;
// where it is ignore_index the pixel adds nothing whatever its weight; a warp's bilinear reads near the
// image's edge mix the edge's weights with 1, the neutral weight, not with 0, which would halve them; and
// weights of 1 stay 1 through every crop and warp, so that they give exactly the loss of no weights.
inline constexpr float kPaddingWeight = 1.0f;

// The patch's top-left corner in the image (negative, or beyond it, where the patch is padded).
struct PatchPlace {
  std::int64_t top = 0, left = 0;
  bool on_foreground = false;  // centred on a foreground pixel
};

// Draws the place from `rng` (the draw's first numbers): with probability foreground_oversample, and when the
// mask has a foreground pixel (non-zero, not ignore_index), centred on one chosen uniformly; otherwise
// anywhere such that the patch lies inside the image, or centred on an axis where the image is smaller than
// the patch.
PatchPlace place_patch(const Sample& sample, const PatchOptions& options, Rng& rng);

// Copies the patch at `place` exactly (no resampling), padded as the header says: image [h, w, c] floats,
// mask [h, w] (nullable), the sample's weights [h, w] (nullable; the sample must have weights when given).
void crop_patch(const Sample& sample, const PatchPlace& place, const PatchOptions& options, float* image,
                std::uint8_t* mask, float* weights = nullptr);

// Patches an epoch of patch mode holds: `patches_per_epoch`, or when 0, the training images' pixels over the
// patch's, rounded up (an epoch then covers about every pixel once).
std::int64_t patches_in_epoch(std::int64_t patches_per_epoch, std::int64_t training_pixels,
                              const PatchOptions& options);

}  // namespace unet
