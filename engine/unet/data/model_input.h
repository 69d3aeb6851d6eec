// An image file's pixels as the model takes them, the one path training (the file datasets), validation and
// prediction (unet-train predict, the workbench's Predict window) all take: the model's channels
// (data.channels picks them by index, else gray and colour are converted as convert_channels says), then
// normalised with data.normalize, the statistics taken over the whole image as stored, then (resize mode)
// resized. The rule to keep: nothing normalises pixels anywhere else, so that a model sees at prediction what
// it saw in training.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "unet/io/image.h"
#include "unet/model/normalize.h"

namespace unet {

struct Config;

struct ModelImage {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<float> values;  // [height, width, channels], normalised

  bool operator==(const ModelImage&) const = default;
};

// What decides an image's model input: the config's model.in_channels, data.channels and data.normalize.
struct InputRecipe {
  std::int64_t channels = 3;
  std::vector<std::int64_t> channel_indices{};
  NormalizeDesc normalize{};
  // False leaves the values as stored (after the channels): a dataset zscore whose values are not measured
  // yet (the data scan normalises once it has them).
  bool normalise = true;
};
InputRecipe input_recipe(const Config& config);

// The image's channels and normalisation; Error(data) naming `name` for a channel index past the image's, for
// data the normalisation cannot take (16-bit or float data under scale_255). Values as stored (16-bit, float:
// read_image_values) have their channels converted by the same rules in float (luma not rounded); 8-bit
// values take the 8-bit path, so that they give exactly what an Image of them gives.
ModelImage model_image(const Image& image, const InputRecipe& recipe, const std::string& name);
ModelImage model_image(const ValueImage& image, const InputRecipe& recipe, const std::string& name);

// A file's page as the model takes it: read_image_values, then model_image.
ModelImage read_model_image(const std::filesystem::path& path, const InputRecipe& recipe,
                            std::int64_t page = 0, const ImageLimits& limits = {});

// Resized to height x width: area averaging when shrinking, bilinear when enlarging (OpenCV's INTER_AREA and
// INTER_LINEAR, pixel-centre aligned), each axis as its own factor; the same size is a copy.
ModelImage resized(const ModelImage& image, std::int64_t height, std::int64_t width);

}  // namespace unet
