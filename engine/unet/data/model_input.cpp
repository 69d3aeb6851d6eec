#include "unet/data/model_input.h"

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

namespace {

// The same choice of channels on values as stored (convert_channels' rules, in float).
std::vector<float> values_with_channels(const ValueImage& image, const InputRecipe& recipe,
                                        const std::string& name) {
  const std::int64_t from = image.channels, pixels = image.height * image.width;
  std::vector<std::int64_t> picks = recipe.channel_indices;
  for (const std::int64_t index : picks)
    if (index < 0 || index >= from)
      throw Error(ErrorKind::data, name + ": data.channels names channel " + std::to_string(index) +
                                       " but the image has " + std::to_string(from) + " (indices 0.." +
                                       std::to_string(from - 1) + ")");
  const std::int64_t to = picks.empty() ? recipe.channels : static_cast<std::int64_t>(picks.size());
  std::vector<float> out(static_cast<std::size_t>(pixels * to));
  const auto at = [&](std::int64_t p, std::int64_t c) {
    return image.values[static_cast<std::size_t>(p * from + c)];
  };
  if (picks.empty()) {
    const bool colour = from >= 3;
    const bool known = from >= 1 && from <= 4 && (to == from || to == 1 || to == 3 || to == 4);
    if (!known)
      throw Error(ErrorKind::data, name + ": " + std::to_string(from) + " channels cannot become " +
                                       std::to_string(to) +
                                       " (model.in_channels); name them with data.channels");
    for (std::int64_t p = 0; p < pixels; ++p) {
      float* dst = out.data() + p * to;
      if (to == from) {
        for (std::int64_t c = 0; c < to; ++c) dst[c] = at(p, c);
      } else if (to == 1) {
        dst[0] = colour ? 0.299f * at(p, 0) + 0.587f * at(p, 1) + 0.114f * at(p, 2) : at(p, 0);
      } else {
        for (std::int64_t c = 0; c < 3; ++c) dst[c] = colour ? at(p, c) : at(p, 0);
        if (to == 4) {
          const bool has_alpha = from == 2 || from == 4;
          const float opaque =
              image.floating ? 1.0f : static_cast<float>((std::int64_t{1} << image.bit_depth) - 1);
          dst[3] = has_alpha ? at(p, from - 1) : opaque;
        }
      }
    }
    return out;
  }
  for (std::int64_t p = 0; p < pixels; ++p)
    for (std::size_t k = 0; k < picks.size(); ++k)
      out[static_cast<std::size_t>(p * to) + k] = at(p, picks[k]);
  return out;
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
  const ChannelAffine affine =
      image_normalization(recipe.normalize, out.values, out.channels, 8, false, name);
  normalize_in_place(affine, out.values, out.channels);
  return out;
}

ModelImage model_image(const ValueImage& image, const InputRecipe& recipe, const std::string& name) {
  if (image.bit_depth == 8 && !image.floating && !image.is_signed) {
    Image bytes{image.height, image.width, image.channels, {}};
    bytes.pixels.reserve(image.values.size());
    for (const float v : image.values) bytes.pixels.push_back(static_cast<std::uint8_t>(v));
    return model_image(bytes, recipe, name);
  }
  ModelImage out;
  out.height = image.height;
  out.width = image.width;
  out.values = values_with_channels(image, recipe, name);
  out.channels = out.height * out.width > 0
                     ? static_cast<std::int64_t>(out.values.size()) / (out.height * out.width)
                     : 0;
  if (!recipe.normalise) return out;
  const ChannelAffine affine =
      image_normalization(recipe.normalize, out.values, out.channels, image.bit_depth, image.floating, name);
  normalize_in_place(affine, out.values, out.channels);
  return out;
}

ModelImage read_model_image(const std::filesystem::path& path, const InputRecipe& recipe, std::int64_t page,
                            const ImageLimits& limits) {
  const std::string name =
      page > 0 ? path.string() + " (page " + std::to_string(page + 1) + ")" : path.string();
  return model_image(read_image_values(path, page, limits), recipe, name);
}

}  // namespace unet
