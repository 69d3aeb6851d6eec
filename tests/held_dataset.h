// Samples held in memory as a Dataset, for tests that feed chosen samples (pixel weights, masks) to batch
// assembly (step/data_plan.h) or the step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "unet/data/dataset.h"

namespace unet::test {

class HeldDataset final : public Dataset {
 public:
  // Every sample of one size and channel count (resize mode's rule); `classes` as the model's.
  explicit HeldDataset(std::vector<Sample> samples, int classes = 1)
      : samples_(std::move(samples)), classes_(classes) {}
  std::size_t size() const override { return samples_.size(); }
  Sample get(std::size_t index) const override { return samples_.at(index); }
  std::int64_t height() const override { return samples_.front().height; }
  std::int64_t width() const override { return samples_.front().width; }
  std::int64_t channels() const override { return samples_.front().channels; }
  int classes() const override { return classes_; }
  std::string describe() const override { return std::to_string(samples_.size()) + " held samples"; }

 private:
  std::vector<Sample> samples_;
  int classes_;
};

}  // namespace unet::test
