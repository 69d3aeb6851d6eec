// The random part of training-time augmentation: every choice for one sample (which transforms happen, their
// angle, factor, field or seed) drawn up front into plain values, which augment_warp.h and
// augment_intensity.h then apply without drawing anything. The one rule: a draw takes the same numbers from
// its Rng in the same order whatever the config says, so that a sample's draw depends only on its own Rng
// (not on threads, other samples or the other transforms' settings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unet/core/rng.h"

namespace unet {

// unet/config/config.h; declared here so that the warp and intensity files, which include OpenCV, see nothing
// of the engine beyond these values (OpenCV declares a cv::cuda::Stream and Event of its own).
struct AugmentConfig;

// The geometry of one sample: source offset = M d + e for an output offset d from the patch's centre, where M
// undoes (in this order) the scaling by `scale`, the counter-clockwise rotation by `angle_rad` (as seen on
// screen, row 0 at the top) and the flips and quarter turns (as data/augment.h applies them), and e is the
// elastic field: `grid` x `grid` displacements in source pixels, interpolated over the patch.
struct SpatialDraw {
  bool flip_h = false, flip_v = false;
  int rotate90 = 0;  // counter-clockwise quarter turns, 0..3
  double angle_rad = 0;
  double scale = 1;  // > 1 magnifies
  int grid = 0;
  std::vector<float> elastic_dy, elastic_dx;  // [grid, grid], row-major, pixels; empty: no elastic field
  bool operator==(const SpatialDraw&) const = default;
};

// The value transforms of one sample; an empty optional is a transform that does not happen.
struct IntensityDraw {
  std::optional<double> brightness;  // factor the values are multiplied by
  std::optional<double> contrast;    // factor around each channel's mean
  std::optional<double> gamma;       // exponent on each channel rescaled to [0, 1]
  double noise_sigma = 0;            // standard deviation of the Gaussian noise; 0: none
  std::uint64_t noise_seed = 0;      // the noise's own Rng seed: the same draw gives the same noise
  std::optional<double> blur_sigma;  // Gaussian blur's sigma in pixels
  bool operator==(const IntensityDraw&) const = default;
};

struct AugmentDraw {
  SpatialDraw spatial;
  IntensityDraw intensity;
  bool operator==(const AugmentDraw&) const = default;
};

// Every random choice for one sample under `config` (each transform with its probability, its value uniform
// in its range, the elastic displacements normal with std augment.elastic_sigma). `square`: the patch's
// height equals its width, so odd quarter turns are allowed. The caller does not call this with data.augment
// off.
AugmentDraw draw_augmentation(const AugmentConfig& config, bool square, Rng& rng);

// What a draw does, for captions and logs: "rot 37.2° scale 1.12 elastic flip_h gamma 0.81"; "identity" when
// it does nothing.
std::string describe(const AugmentDraw& draw);

}  // namespace unet
