#include "unet/train/prefetcher.h"

#include <chrono>

namespace unet {

BatchPrefetcher::BatchPrefetcher(Builder build, std::int64_t depth, std::int64_t epoch,
                                 std::int64_t epoch_step, std::int64_t steps_per_epoch, std::int64_t count,
                                 std::int64_t accumulation)
    : build_(std::move(build)),
      depth_(std::max<std::int64_t>(1, depth)),
      epoch_(epoch),
      epoch_step_(epoch_step),
      steps_per_epoch_(steps_per_epoch),
      remaining_(count),
      accumulation_(accumulation),
      thread_([this](const std::stop_token& stop) { produce(stop); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  thread_.request_stop();
  changed_.notify_all();
}

void BatchPrefetcher::produce(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    std::int64_t epoch = 0, epoch_step = 0, accumulation = 1;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, stop,
                    [&] { return static_cast<std::int64_t>(ready_.size()) < depth_ || remaining_ == 0; });
      if (stop.stop_requested() || remaining_ == 0 || error_) return;
      epoch = epoch_;
      epoch_step = epoch_step_;
      accumulation = accumulation_;
      --remaining_;
      if (++epoch_step_ >= steps_per_epoch_) {
        epoch_step_ = 0;
        ++epoch_;
      }
    }
    PreparedStep step{epoch, epoch_step, accumulation, {}};
    try {
      step.batches = build_(epoch, epoch_step, accumulation);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    std::lock_guard lock(mutex_);
    ready_.push_back(std::move(step));
    changed_.notify_all();
  }
}

PreparedStep BatchPrefetcher::pop(double& waited) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (ready_.empty()) std::rethrow_exception(error_);
  PreparedStep step = std::move(ready_.front());
  ready_.pop_front();
  changed_.notify_all();
  return step;
}

void BatchPrefetcher::set_accumulation(std::int64_t accumulation) {
  std::lock_guard lock(mutex_);
  accumulation_ = accumulation;
}

}  // namespace unet
