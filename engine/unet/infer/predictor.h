// Inference with a trained model: images of any size in, per-pixel probabilities at each image's own size
// out. An image is converted to the model's channels and resized to the size the model was trained at
// (data.image_size), as training prepared its inputs; the probabilities are resized back. Used by `unet-train
// predict` and the workbench's predictions.
#pragma once

#include <memory>
#include <vector>

#include "unet/backend/devices.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

namespace unet {

struct Prediction {
  std::int64_t height = 0, width = 0;
  std::int64_t channels = 1;         // 1: the foreground probability of a binary model; else one per class
  std::vector<float> probabilities;  // [height, width, channels]
};

class Predictor {
 public:
  // The model of `config` with `parameters` (its slab layout) on `device`.
  Predictor(const Config& config, const std::vector<float>& parameters, const DeviceId& device);
  explicit Predictor(const Checkpoint& checkpoint, const DeviceId& device = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // `names` are used in error messages. Images are run in batches of up to `batch` at a time.
  std::vector<Prediction> predict(const std::vector<Image>& images, const std::vector<std::string>& names,
                                  std::int64_t batch = 8);
  const Config& config() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A probability map as an 8-bit grayscale PNG image of one of its channels: round(255 p).
Image probability_image(const Prediction& p, std::int64_t channel);

// The segmentation a prediction makes, one class index per pixel ([height, width]): a binary model's
// foreground (1) where its probability is at least `threshold`, else 0; a model of several classes, the most
// probable class (the lowest index on a tie; `threshold` unused).
std::vector<std::uint8_t> class_mask(const Prediction& p, double threshold = 0.5);

}  // namespace unet
