// Flips and quarter turns as one integer affine map from source to destination pixel, found by composing the
// steps on a pixel's coordinates; the buffers are then permuted in a single pass.
#include "unet/data/augment.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "unet/core/error.h"

namespace unet {

namespace {

int quarter_turns(const Augmentation& augmentation) {
  return ((augmentation.rotate90 % 4) + 4) % 4;
}

struct Point {
  std::int64_t y = 0, x = 0;
};

// Where source pixel `p` of a height x width grid lands.
Point transform(const Augmentation& augmentation, std::int64_t height, std::int64_t width, Point p) {
  if (augmentation.flip_horizontal) p.x = width - 1 - p.x;
  if (augmentation.flip_vertical) p.y = height - 1 - p.y;
  for (int turn = 0; turn < quarter_turns(augmentation); ++turn) {
    // Counter-clockwise: the right column becomes the top row.
    p = Point{width - 1 - p.x, p.y};
    std::swap(height, width);
  }
  return p;
}

// Moves every pixel of a [height, width, depth] buffer to its destination under the map
// (y, x) -> (origin + y * step_y + x * step_x), in a grid whose rows hold `out_width` pixels.
template <class T>
std::vector<T> permute(const std::vector<T>& in, std::int64_t height, std::int64_t width, std::int64_t depth,
                       std::int64_t out_width, Point origin, Point step_y, Point step_x) {
  std::vector<T> out(in.size());
  const T* src = in.data();
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x, src += depth) {
      const std::int64_t to_y = origin.y + y * step_y.y + x * step_x.y;
      const std::int64_t to_x = origin.x + y * step_y.x + x * step_x.x;
      T* dst = out.data() + (to_y * out_width + to_x) * depth;
      for (std::int64_t k = 0; k < depth; ++k) dst[k] = src[k];
    }
  }
  return out;
}

}  // namespace

Augmentation random_augmentation(Rng& rng, bool square) {
  Augmentation augmentation;
  augmentation.flip_horizontal = rng.below(2) == 1;
  augmentation.flip_vertical = rng.below(2) == 1;
  augmentation.rotate90 = square ? static_cast<int>(rng.below(4)) : 2 * static_cast<int>(rng.below(2));
  return augmentation;
}

void apply(const Augmentation& augmentation, Sample& sample) {
  const std::int64_t height = sample.height, width = sample.width, channels = sample.channels;
  const auto pixels = static_cast<std::size_t>(height * width);
  if (height < 1 || width < 1 || channels < 1 ||
      sample.image.size() != pixels * static_cast<std::size_t>(channels) ||
      (!sample.mask.empty() && sample.mask.size() != pixels) ||
      (!sample.weights.empty() && sample.weights.size() != pixels) ||
      (!sample.instances.ids.empty() &&
       (sample.instances.ids.size() != pixels || sample.instances.height != height ||
        sample.instances.width != width))) {
    throw Error(
        ErrorKind::usage,
        "augment: " + sample.source + ": buffers do not match " + std::to_string(height) + "x" +
            std::to_string(width) + "x" + std::to_string(channels) + " (image " +
            std::to_string(sample.image.size()) + " values, mask " + std::to_string(sample.mask.size()) +
            ", weights " + std::to_string(sample.weights.size()) + ", instances " +
            std::to_string(sample.instances.height) + "x" + std::to_string(sample.instances.width) + ")");
  }
  if (!augmentation.flip_horizontal && !augmentation.flip_vertical && quarter_turns(augmentation) == 0)
    return;

  // The map is affine in (y, x): read it off the images of the origin and the two unit steps.
  const Point origin = transform(augmentation, height, width, {0, 0});
  const Point at_y = transform(augmentation, height, width, {1, 0});
  const Point at_x = transform(augmentation, height, width, {0, 1});
  const Point step_y{at_y.y - origin.y, at_y.x - origin.x};
  const Point step_x{at_x.y - origin.y, at_x.x - origin.x};
  const bool swaps = quarter_turns(augmentation) % 2 == 1;
  const std::int64_t out_height = swaps ? width : height, out_width = swaps ? height : width;

  sample.image = permute(sample.image, height, width, channels, out_width, origin, step_y, step_x);
  if (!sample.mask.empty())
    sample.mask = permute(sample.mask, height, width, 1, out_width, origin, step_y, step_x);
  if (!sample.weights.empty())
    sample.weights = permute(sample.weights, height, width, 1, out_width, origin, step_y, step_x);
  if (!sample.instances.ids.empty()) {
    sample.instances.ids = permute(sample.instances.ids, height, width, 1, out_width, origin, step_y, step_x);
    sample.instances.height = out_height;
    sample.instances.width = out_width;
  }
  sample.height = out_height;
  sample.width = out_width;
}

std::string to_string(const Augmentation& augmentation) {
  std::string text;
  const auto add = [&text](const char* step) {
    if (!text.empty()) text += '+';
    text += step;
  };
  if (augmentation.flip_horizontal) add("flip_h");
  if (augmentation.flip_vertical) add("flip_v");
  static const char* const kTurns[] = {nullptr, "rot90", "rot180", "rot270"};
  if (const int turns = quarter_turns(augmentation); turns > 0) add(kTurns[turns]);
  return text.empty() ? "identity" : text;
}

}  // namespace unet
