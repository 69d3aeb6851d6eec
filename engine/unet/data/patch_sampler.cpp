#include "unet/data/patch_sampler.h"

#include <algorithm>
#include <cstring>

#include "unet/core/error.h"

namespace unet {

namespace {

bool is_foreground(std::uint8_t value, int ignore_index) {
  return value != 0 && static_cast<int>(value) != ignore_index;
}

// The top coordinate of a patch of `patch` along an axis of `size`, uniformly where it fits inside, or
// centred (padding split evenly) where the image is smaller.
std::int64_t anywhere(std::int64_t size, std::int64_t patch, Rng& rng) {
  if (size <= patch) return -(patch - size) / 2;
  return static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(size - patch + 1)));
}

}  // namespace

PatchPlace place_patch(const Sample& sample, const PatchOptions& options, Rng& rng) {
  UNET_CHECK(options.height >= 1 && options.width >= 1 && sample.height >= 1 && sample.width >= 1 &&
                 sample.mask.size() == static_cast<std::size_t>(sample.height * sample.width),
             usage, "place_patch: " + sample.source + ": no mask of its size, or an empty patch");
  PatchPlace place;
  // Always the same number of draws before the choice, so that the rest of the sample's draw (its
  // augmentation) does not depend on which kind of place it got.
  const bool want_foreground = rng.uniform() < options.foreground_oversample;
  const std::uint64_t pick = rng.next_u64();
  const std::int64_t top = anywhere(sample.height, options.height, rng);
  const std::int64_t left = anywhere(sample.width, options.width, rng);
  if (want_foreground) {
    std::uint64_t count = 0;
    for (const std::uint8_t v : sample.mask) count += is_foreground(v, options.ignore_index) ? 1 : 0;
    if (count > 0) {
      std::uint64_t wanted = pick % count;
      for (std::size_t i = 0; i < sample.mask.size(); ++i) {
        if (!is_foreground(sample.mask[i], options.ignore_index)) continue;
        if (wanted-- > 0) continue;
        const auto y = static_cast<std::int64_t>(i) / sample.width,
                   x = static_cast<std::int64_t>(i) % sample.width;
        place.top = y - options.height / 2;
        place.left = x - options.width / 2;
        place.on_foreground = true;
        return place;
      }
    }
  }
  place.top = top;
  place.left = left;
  return place;
}

void crop_patch(const Sample& sample, const PatchPlace& place, const PatchOptions& options, float* image,
                std::uint8_t* mask, float* weights) {
  const std::int64_t c = sample.channels;
  UNET_CHECK(!weights || static_cast<std::int64_t>(sample.weights.size()) == sample.height * sample.width,
             usage,
             "crop_patch: " + sample.source + " has " + std::to_string(sample.weights.size()) +
                 " pixel weights for " + std::to_string(sample.height * sample.width) + " pixels");
  std::fill(image, image + options.height * options.width * c, 0.0f);
  if (mask) std::fill(mask, mask + options.height * options.width, options.mask_fill());
  if (weights) std::fill(weights, weights + options.height * options.width, kPaddingWeight);
  const std::int64_t y0 = std::max<std::int64_t>(0, place.top),
                     y1 = std::min(sample.height, place.top + options.height);
  const std::int64_t x0 = std::max<std::int64_t>(0, place.left),
                     x1 = std::min(sample.width, place.left + options.width);
  if (y0 >= y1 || x0 >= x1) return;
  for (std::int64_t y = y0; y < y1; ++y) {
    const std::int64_t out_row = (y - place.top) * options.width + (x0 - place.left);
    std::memcpy(image + out_row * c, sample.image.data() + (y * sample.width + x0) * c,
                static_cast<std::size_t>((x1 - x0) * c) * sizeof(float));
    if (mask)
      std::memcpy(mask + out_row, sample.mask.data() + y * sample.width + x0,
                  static_cast<std::size_t>(x1 - x0));
    if (weights)
      std::memcpy(weights + out_row, sample.weights.data() + y * sample.width + x0,
                  static_cast<std::size_t>(x1 - x0) * sizeof(float));
  }
}

std::int64_t patches_in_epoch(std::int64_t patches_per_epoch, std::int64_t training_pixels,
                              const PatchOptions& options) {
  if (patches_per_epoch > 0) return patches_per_epoch;
  const std::int64_t patch = options.height * options.width;
  return std::max<std::int64_t>(1, (training_pixels + patch - 1) / patch);
}

}  // namespace unet
