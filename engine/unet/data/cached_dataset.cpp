#include "unet/data/cached_dataset.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "unet/core/error.h"
#include "unet/core/parallel.h"

namespace unet {

CachedDataset::CachedDataset(std::unique_ptr<Dataset> source, int threads, std::stop_token stop)
    : source_(std::move(source)) {
  samples_.resize(source_->size());
  parallel_for(samples_.size(), threads, [&](std::size_t i) {
    if (stop.stop_requested())
      throw Error(ErrorKind::cancelled, "generating the samples of " + source_->describe() + " was stopped");
    samples_[i] = source_->get(i);
  });
}

Sample CachedDataset::get(std::size_t index) const {
  UNET_CHECK(index < samples_.size(), usage,
             "sample " + std::to_string(index) + " of " + std::to_string(samples_.size()));
  return samples_[index];
}

}  // namespace unet
