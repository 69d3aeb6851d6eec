// What the trainer reads images from: a random-access set of image/mask pairs kept on the host, each image
// already normalised as the model takes it (data.normalize, unet/model/normalize.h), its mask as class
// indices. Every source (the synthetic demo, folders of files, the Data Science Bowl 2018 layout) implements
// Dataset; the rule they all keep is that get() is const and thread-safe, because a prefetch thread calls it
// while the trainer runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unet/model/normalize.h"
#include "unet/objects/label_image.h"

namespace unet {

// One image and its mask, as stored on the host.
struct Sample {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<float> image;  // [height, width, channels], row-major (HWC), normalised (the model's input)
  std::vector<std::uint8_t>
      mask;            // [height, width]: class index per pixel (binary: 0 background, 1 foreground)
  std::string source;  // where it came from, for error messages ("synthetic #12", a file path...)
  // task "instances" only (empty otherwise): each pixel's object (0: background), the truth the object
  // metrics score against; the mask then holds the training target made from it (instances.target).
  LabelImage instances;
  // instances.target "weight_map" only (empty otherwise): [height, width], each pixel's loss weight.
  std::vector<float> weights;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::size_t size() const = 0;
  // Sample `index` (< size()); the same sample every time it is asked for, from any thread.
  virtual Sample get(std::size_t index) const = 0;

  // Every sample has these dimensions; 0 when samples keep their own (patch mode: files at their resolution).
  virtual std::int64_t height() const = 0;
  virtual std::int64_t width() const = 0;
  virtual std::int64_t channels() const = 0;
  // As in the model spec: 1 for binary masks (values 0 and 1), otherwise masks hold 0..classes-1.
  virtual int classes() const = 0;

  // One line for logs and the GUI, e.g. "synthetic cells: 512 images 128x128x3, seed 0".
  virtual std::string describe() const = 0;

  // What names sample `index` across runs, without loading it: a file dataset's image file name, so that a
  // run's validation split (validation.json) still names the same images after files are added or removed.
  virtual std::string sample_name(std::size_t index) const { return "#" + std::to_string(index); }

  // Pixels of sample `index` (height x width): the dataset's size, or when samples keep their own, the
  // sample's (FileDataset reads it from the file's header).
  virtual std::int64_t sample_area(std::size_t index) const {
    if (height() > 0 && width() > 0) return height() * width();
    const Sample s = get(index);
    return s.height * s.width;
  }

  // The normalisation the samples were given, when the dataset measured part of it (a zscore over the
  // dataset: its mean and std), so that the run saves it with the model; nothing otherwise.
  virtual std::optional<NormalizeDesc> measured_normalization() const { return std::nullopt; }
};

}  // namespace unet
