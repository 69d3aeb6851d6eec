#include "unet/data/cached_dataset.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "unet/core/error.h"

namespace unet {

CachedDataset::CachedDataset(std::unique_ptr<Dataset> source, int threads) : source_(std::move(source)) {
  samples_.resize(source_->size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t workers = std::min<std::size_t>(threads > 0 ? static_cast<unsigned>(threads) : hw, samples_.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < workers; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (std::size_t i = next++; i < samples_.size(); i = next++) samples_[i] = source_->get(i);
      } catch (...) {
        errors[t] = std::current_exception();
        next = samples_.size();
      }
    });
  }
  for (auto& thread : pool) thread.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

Sample CachedDataset::get(std::size_t index) const {
  UNET_CHECK(index < samples_.size(), usage, "sample " + std::to_string(index) + " of " +
                                                 std::to_string(samples_.size()));
  return samples_[index];
}

}  // namespace unet
