// What a prediction may be asked for: the names of predict's modes, paddings and augmentations and their
// parsing, and the check of PredictOptions against the model (predictor.h). Apart from the predictor, which
// only reads options that have passed validate().
#include <cstdint>
#include <cstdio>
#include <string>

#include "unet/infer/choice_names.h"
#include "unet/infer/predictor.h"

namespace unet {

namespace {

constexpr std::int64_t kMaxTile = 16384;  // ImageLimits' largest side
constexpr std::int64_t kMaxBatch = 4096;

}  // namespace

const char* to_string(PredictMode mode) noexcept {
  switch (mode) {
    case PredictMode::automatic:
      return "auto";
    case PredictMode::resize:
      return "resize";
    case PredictMode::tiled:
      return "tiled";
    case PredictMode::whole:
      return "whole";
  }
  return "?";
}

const char* to_string(PredictPadding padding) noexcept {
  return padding == PredictPadding::reflect ? "reflect" : "zero";
}

const char* to_string(PredictAugmentation augmentation) noexcept {
  return augmentation == PredictAugmentation::none ? "none" : "flips";
}

PredictMode predict_mode_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictMode kModes[] = {PredictMode::automatic, PredictMode::resize, PredictMode::tiled,
                                           PredictMode::whole};
  return choice_from_name(text, key, kModes);
}

PredictPadding predict_padding_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictPadding kPaddings[] = {PredictPadding::reflect, PredictPadding::zero};
  return choice_from_name(text, key, kPaddings);
}

PredictAugmentation predict_augmentation_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictAugmentation kAugmentations[] = {PredictAugmentation::none,
                                                           PredictAugmentation::flips};
  return choice_from_name(text, key, kAugmentations);
}

void validate(const PredictOptions& options, const UNetSpec& model) {
  const std::int64_t multiple = model.size_multiple();
  for (const std::int64_t side : {options.tile_height, options.tile_width}) {
    if (side == 0) continue;
    if (side < multiple || side > kMaxTile || side % multiple != 0)
      throw ConfigError("tile", "each side must be a multiple of 2^depth = " + std::to_string(multiple) +
                                    " (model.depth " + std::to_string(model.depth) + ") in " +
                                    std::to_string(multiple) + ".." + std::to_string(kMaxTile) + ", got " +
                                    std::to_string(side));
  }
  if ((options.tile_height == 0) != (options.tile_width == 0))
    throw ConfigError("tile", "give both sides or neither (0 x 0: the training size), got " +
                                  std::to_string(options.tile_height) + "x" +
                                  std::to_string(options.tile_width));
  if (!(options.overlap >= 0 && options.overlap <= PredictOptions::max_overlap)) {
    char text[64];
    std::snprintf(text, sizeof text, "must be in 0..%.1f, got %g", PredictOptions::max_overlap,
                  options.overlap);
    throw ConfigError("overlap", text);
  }
  if (options.batch < 1 || options.batch > kMaxBatch)
    throw ConfigError(
        "batch", "must be in 1.." + std::to_string(kMaxBatch) + ", got " + std::to_string(options.batch));
}

}  // namespace unet
