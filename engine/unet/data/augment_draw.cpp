// Drawing one sample's augmentation. Each transform takes its numbers from the Rng whether it happens or not
// (a uniform for "does it happen", then its value), so that changing one transform's probability or range
// leaves every other transform's draw as it was; the elastic field comes from a seed of its own, drawn
// always, because the number of its displacements depends on the grid.
#include "unet/data/augment_draw.h"

#include <array>
#include <cstddef>
#include <numbers>

#include <fmt/format.h>

#include "unet/config/config.h"
#include "unet/data/augment.h"

namespace unet {

namespace {

// Draws "does it happen" (probability p) and a value uniform in [range[0], range[1]]; the value if it does.
std::optional<double> maybe(Rng& rng, double p, const std::array<double, 2>& range) {
  const bool happens = rng.uniform() < p;
  const double value = rng.uniform(range[0], range[1]);
  return happens ? std::optional<double>(value) : std::nullopt;
}

}  // namespace

AugmentDraw draw_augmentation(const AugmentConfig& config, bool square, Rng& rng) {
  AugmentDraw draw;
  SpatialDraw& spatial = draw.spatial;
  const Augmentation turns = random_augmentation(rng, square);
  if (config.flips) {
    spatial.flip_h = turns.flip_horizontal;
    spatial.flip_v = turns.flip_vertical;
    spatial.rotate90 = turns.rotate90;
  }
  const double degrees = config.rotation_deg;
  if (const auto angle = maybe(rng, config.rotation_p, {-degrees, degrees}))
    spatial.angle_rad = *angle * std::numbers::pi / 180;
  if (const auto scale = maybe(rng, config.scale_p, config.scale_range)) spatial.scale = *scale;
  const bool elastic = rng.uniform() < config.elastic_p;
  const std::uint64_t elastic_seed = rng.next_u64();
  if (elastic) {
    Rng field(elastic_seed);
    spatial.grid = static_cast<int>(config.elastic_grid);
    const auto points = static_cast<std::size_t>(spatial.grid) * static_cast<std::size_t>(spatial.grid);
    for (std::vector<float>* displacements : {&spatial.elastic_dy, &spatial.elastic_dx}) {
      displacements->resize(points);
      for (float& d : *displacements) d = static_cast<float>(field.normal() * config.elastic_sigma);
    }
  }

  IntensityDraw& intensity = draw.intensity;
  intensity.brightness = maybe(rng, config.brightness_p, config.brightness_range);
  intensity.contrast = maybe(rng, config.contrast_p, config.contrast_range);
  intensity.gamma = maybe(rng, config.gamma_p, config.gamma_range);
  const auto noise = maybe(rng, config.noise_p, {0, config.noise_sigma});
  const std::uint64_t noise_seed = rng.next_u64();
  if (noise) {
    intensity.noise_sigma = *noise;
    intensity.noise_seed = noise_seed;
  }
  intensity.blur_sigma = maybe(rng, config.blur_p, config.blur_sigma);
  return draw;
}

std::string describe(const AugmentDraw& draw) {
  std::string text;
  const auto add = [&text](const std::string& part) {
    if (!text.empty()) text += ' ';
    text += part;
  };
  const SpatialDraw& s = draw.spatial;
  if (s.angle_rad != 0) add(fmt::format("rot {:.1f}°", s.angle_rad * 180 / std::numbers::pi));
  if (s.scale != 1) add(fmt::format("scale {:.2f}", s.scale));
  if (!s.elastic_dy.empty()) add("elastic");
  const Augmentation turns{s.flip_h, s.flip_v, s.rotate90};
  if (turns != Augmentation{}) add(to_string(turns));
  const IntensityDraw& i = draw.intensity;
  if (i.brightness) add(fmt::format("brightness {:.2f}", *i.brightness));
  if (i.contrast) add(fmt::format("contrast {:.2f}", *i.contrast));
  if (i.gamma) add(fmt::format("gamma {:.2f}", *i.gamma));
  if (i.noise_sigma > 0) add(fmt::format("noise {:.3f}", i.noise_sigma));
  if (i.blur_sigma) add(fmt::format("blur {:.2f}", *i.blur_sigma));
  return text.empty() ? "identity" : text;
}

}  // namespace unet
