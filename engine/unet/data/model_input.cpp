#include "unet/data/model_input.h"

#include <opencv2/imgproc.hpp>

#include "unet/config/config.h"
#include "unet/core/error.h"

namespace unet {

namespace {

// The image's channels: by index (data.channels), or by the conversion rules.
Image with_channels(const Image& image, const InputRecipe& recipe, const std::string& name) {
  if (recipe.channel_indices.empty()) return convert_channels(image, recipe.channels, name);
  for (const std::int64_t index : recipe.channel_indices)
    if (index < 0 || index >= image.channels)
      throw Error(ErrorKind::data, name + ": data.channels names channel " + std::to_string(index) +
                                       " but the image has " + std::to_string(image.channels) +
                                       " (indices 0.." + std::to_string(image.channels - 1) + ")");
  Image picked{image.height, image.width, static_cast<std::int64_t>(recipe.channel_indices.size()), {}};
  picked.pixels.reserve(static_cast<std::size_t>(picked.height * picked.width * picked.channels));
  for (std::int64_t p = 0; p < image.height * image.width; ++p)
    for (const std::int64_t index : recipe.channel_indices)
      picked.pixels.push_back(image.pixels[static_cast<std::size_t>(p * image.channels + index)]);
  return picked;
}

}  // namespace

InputRecipe input_recipe(const Config& config) {
  InputRecipe recipe;
  recipe.channels = config.model.in_channels;
  recipe.channel_indices = config.data.channels;
  recipe.normalize = config.data.normalize;
  return recipe;
}

ModelImage model_image(const Image& image, const InputRecipe& recipe, const std::string& name) {
  const Image chosen = with_channels(image, recipe, name);
  ModelImage out{chosen.height, chosen.width, chosen.channels, {chosen.pixels.begin(), chosen.pixels.end()}};
  if (!recipe.normalise) return out;
  const ChannelAffine affine = image_normalization(recipe.normalize, out.values, out.channels, 8, false, name);
  normalize_in_place(affine, out.values, out.channels);
  return out;
}

ModelImage resized(const ModelImage& image, std::int64_t height, std::int64_t width) {
  UNET_CHECK(height >= 1 && width >= 1 && image.channels >= 1 &&
                 image.values.size() == static_cast<std::size_t>(image.height * image.width * image.channels),
             usage, "resized: a " + std::to_string(height) + "x" + std::to_string(width) + " target of a " +
                        std::to_string(image.height) + "x" + std::to_string(image.width) + "x" +
                        std::to_string(image.channels) + " image of " + std::to_string(image.values.size()) +
                        " values");
  if (height == image.height && width == image.width) return image;
  ModelImage out{height, width, image.channels,
                 std::vector<float>(static_cast<std::size_t>(height * width * image.channels))};
  // One channel plane at a time: OpenCV's resize takes at most 4 (CV_CN_MAX is 512, but INTER_AREA's fast paths
  // are per channel count), and a plane keeps any count of channels alike.
  const int rows = static_cast<int>(image.height), cols = static_cast<int>(image.width);
  cv::Mat plane(rows, cols, CV_32FC1), scaled;
  for (std::int64_t c = 0; c < image.channels; ++c) {
    for (std::int64_t p = 0; p < image.height * image.width; ++p)
      plane.at<float>(static_cast<int>(p)) = image.values[static_cast<std::size_t>(p * image.channels + c)];
    // Shrinking on both axes averages areas; otherwise bilinear.
    const int interpolation = height <= image.height && width <= image.width ? cv::INTER_AREA : cv::INTER_LINEAR;
    cv::resize(plane, scaled, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0, interpolation);
    for (std::int64_t p = 0; p < height * width; ++p)
      out.values[static_cast<std::size_t>(p * image.channels + c)] = scaled.at<float>(static_cast<int>(p));
  }
  return out;
}

}  // namespace unet
