// Keeps every sample of a dataset in memory (normalised floats, as get() gives them), decoded once up front
// by several threads: for datasets small enough that re-generating or re-decoding them each epoch would be
// wasted work.
#pragma once

#include <memory>
#include <stop_token>

#include "unet/data/dataset.h"

namespace unet {

class CachedDataset final : public Dataset {
 public:
  // Generates every sample of `source` on `threads` threads (0: one per hardware thread); a stop requested on
  // `stop` ends that with Error(cancelled).
  explicit CachedDataset(std::unique_ptr<Dataset> source, int threads = 0, std::stop_token stop = {});

  std::size_t size() const override { return samples_.size(); }
  Sample get(std::size_t index) const override;
  std::int64_t height() const override { return source_->height(); }
  std::int64_t width() const override { return source_->width(); }
  std::int64_t channels() const override { return source_->channels(); }
  int classes() const override { return source_->classes(); }
  std::string describe() const override { return source_->describe(); }
  std::string sample_name(std::size_t index) const override { return source_->sample_name(index); }
  std::optional<NormalizeDesc> measured_normalization() const override {
    return source_->measured_normalization();
  }

 private:
  std::unique_ptr<Dataset> source_;
  std::vector<Sample> samples_;
};

}  // namespace unet
