// task "instances": the object metrics of a validation pass (docs/METRICS.md, "Object metrics"). Each
// validation image's probabilities are kept as the two maps the post-processing reads, with the image's
// instance labels; at the pass's end the thresholds are chosen (searched over a grid when
// instances.tune_thresholds, the config's otherwise), the objects found at them and scored.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "unet/config/config.h"
#include "unet/objects/label_image.h"
#include "unet/objects/threshold_search.h"
#include "unet/train/observer.h"

namespace unet {

class ObjectValidation {
 public:
  explicit ObjectValidation(const InstancesConfig& instances) : instances_(instances) {}

  // One validation image: its probabilities as the predictor gives them ([height, width, channels]) and its
  // true objects.
  void add(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
           std::int64_t channels, LabelImage truth);
  std::size_t images() const noexcept { return images_.size(); }

  // Chooses the thresholds and writes the object metrics into `r` (r.objects true); forgets the images.
  void report(EpochReport& r);

 private:
  InstancesConfig instances_;
  std::vector<ObjectMaps> images_;
};

}  // namespace unet
