// The augment.* rows of the key table (AugmentConfig): each transform's probability, then its range.
#include <string>

#include "unet/config/schema_rows.h"
#include "unet/config/schema_rules.h"

namespace unet::schema_rows {

using config_detail::show;

namespace {

// A range key's own rule: exactly [low, high] with low <= high (each value's bounds are the key's min and
// max).
std::optional<std::string> check_range(const json& v) {
  if (v.size() != 2) return "must be [low, high], two numbers; got " + std::to_string(v.size());
  if (v[0].get<double>() > v[1].get<double>()) return "must be [low, high] with low <= high, got " + show(v);
  return std::nullopt;
}

}  // namespace

void add_augment_keys(SchemaRows& rows) {
  const auto add = [&rows](std::string path, ConfigType type, const char* label,
                           const char* help) -> ConfigKey& {
    return rows.add(std::move(path), type, "Augment", label, help);
  };
  const auto number = [&add](std::string path, const char* label, const char* help, double min,
                             double max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto probability = [&number](std::string path, const char* label, const char* what) -> ConfigKey& {
    ConfigKey& k = number(std::move(path), label, "", 0, 1);
    k.help = std::string("The share of training samples ") + what + ", in [0, 1]; 0 turns it off.";
    return k;
  };
  // Every value in [min, max]; min_exclusive for factors, which 0 would make meaningless.
  const auto range = [&add](std::string path, const char* label, const char* help, double min,
                            bool min_exclusive, double max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number_list, label, help);
    k.min = min;
    k.min_exclusive = min_exclusive;
    k.max = max;
    k.check = check_range;
    return k;
  };
  using A = AugmentConfig;
  bind(add("augment.flips", ConfigType::boolean, "Flips and quarter turns",
           "Flip each training sample left-right and top-bottom, each with probability 1/2, and turn it by a "
           "random number of quarter turns (odd ones on square images only): lossless. Like every augment.* "
           "key, read only when data.augment is true."),
       &Config::augment, &A::flips);
  bind(probability("augment.rotation_p", "Rotation probability",
                   "rotated by an angle up to augment.rotation_deg"),
       &Config::augment, &A::rotation_p);
  bind(number("augment.rotation_deg", "Rotation (degrees)",
              "The largest rotation: the angle is uniform in [-rotation_deg, rotation_deg] degrees "
              "(nnU-Net: 180).",
              0, 180),
       &Config::augment, &A::rotation_deg);
  bind(probability("augment.scale_p", "Scaling probability", "zoomed by a factor from augment.scale_range"),
       &Config::augment, &A::scale_p);
  bind(
      range("augment.scale_range", "Scale range",
            "[low, high] of the zoom factor, uniform; above 1 magnifies (nnU-Net: [0.7, 1.4]).", 0, true, 16),
      &Config::augment, &A::scale_range);
  bind(probability("augment.elastic_p", "Elastic probability", "deformed elastically"), &Config::augment,
       &A::elastic_p);
  {
    ConfigKey& k = add("augment.elastic_grid", ConfigType::integer, "Elastic grid",
                       "Points per side of the coarse grid of random displacements, interpolated bicubically "
                       "over the sample (the U-Net paper: 3).");
    k.min = 2;
    k.max = 64;
    bind(k, &Config::augment, &A::elastic_grid);
  }
  bind(number("augment.elastic_sigma", "Elastic sigma (pixels)",
              "The standard deviation of each grid point's displacement, in pixels (the U-Net paper: 10).", 0,
              1024),
       &Config::augment, &A::elastic_sigma);
  bind(probability("augment.brightness_p", "Brightness probability",
                   "whose values are multiplied by a factor from augment.brightness_range"),
       &Config::augment, &A::brightness_p);
  bind(range("augment.brightness_range", "Brightness range",
             "[low, high] of the factor the normalised values are multiplied by, uniform (nnU-Net: [0.75, "
             "1.25]).",
             0, true, 16),
       &Config::augment, &A::brightness_range);
  bind(probability("augment.contrast_p", "Contrast probability",
                   "whose contrast is scaled by a factor from augment.contrast_range"),
       &Config::augment, &A::contrast_p);
  bind(range(
           "augment.contrast_range", "Contrast range",
           "[low, high] of the factor each channel's values are scaled by around their mean, then clipped to "
           "the channel's own min and max (nnU-Net's rule and range: [0.75, 1.25]).",
           0, false, 16),
       &Config::augment, &A::contrast_range);
  bind(probability("augment.gamma_p", "Gamma probability", "given a gamma from augment.gamma_range"),
       &Config::augment, &A::gamma_p);
  bind(
      range("augment.gamma_range", "Gamma range",
            "[low, high] of the exponent applied to each channel rescaled to [0, 1] by its min and max, then "
            "scaled back (nnU-Net: [0.7, 1.5]).",
            0, true, 16),
      &Config::augment, &A::gamma_range);
  bind(probability("augment.noise_p", "Noise probability", "given Gaussian noise"), &Config::augment,
       &A::noise_p);
  bind(number(
           "augment.noise_sigma", "Noise sigma",
           "The largest standard deviation of the Gaussian noise added to the normalised values; each noisy "
           "sample's is uniform in [0, noise_sigma] (nnU-Net: 0.1).",
           0, 16),
       &Config::augment, &A::noise_sigma);
  bind(probability("augment.blur_p", "Blur probability", "blurred"), &Config::augment, &A::blur_p);
  bind(
      range("augment.blur_sigma", "Blur sigma range",
            "[low, high] of the Gaussian blur's sigma in pixels, uniform, each channel alike (nnU-Net: [0.5, "
            "1.0]).",
            0, true, 32),
      &Config::augment, &A::blur_sigma);
}

}  // namespace unet::schema_rows
