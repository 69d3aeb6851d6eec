#include "unet/train/prefetcher.h"

#include <algorithm>
#include <chrono>

namespace unet {

// OpenCV's own threads (the warps' parallel regions) are left as they are inside the workers rather than set
// to 1 per worker: cv::setNumThreads is global to the process (with every backend but OpenMP), so calling it
// in a worker would also make the one-worker loader and every other user of OpenCV single-threaded. Nested
// regions do not multiply threads: Debian's OpenCV runs them on TBB, whose one pool every caller shares (and
// OpenCV's own pthreads pool runs a region that arrives while another is running serially in its caller).
// The results do not depend on OpenCV's thread count (test_augment).
PrefetchLimits prefetch_limits(const DataConfig& data) {
  constexpr unsigned kMostDefaultWorkers = 8;  // beyond this the decoding rarely keeps more than a GPU busy
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const auto workers = data.workers > 0 ? static_cast<int>(data.workers)
                                        : static_cast<int>(std::min(hardware, kMostDefaultWorkers));
  return {data.prefetch, data.prefetch_mib << 20, workers};
}

std::int64_t step_bytes(const StepBatches& step) {
  std::int64_t bytes = 0;
  for (const auto& micro : step.micro)
    for (const HostBatch& b : micro)
      bytes +=
          static_cast<std::int64_t>((b.pixels.size() + b.weights.size()) * sizeof(float) + b.masks.size());
  return bytes;
}

BatchPrefetcher::BatchPrefetcher(Builder build, const PrefetchLimits& limits, std::int64_t epoch,
                                 std::int64_t epoch_step, std::int64_t steps_per_epoch, std::int64_t count,
                                 std::int64_t accumulation)
    : build_(std::move(build)),
      limits_{std::max<std::int64_t>(1, limits.steps), std::max<std::int64_t>(0, limits.bytes),
              std::max(1, limits.workers)},
      epoch_(epoch),
      epoch_step_(epoch_step),
      steps_per_epoch_(steps_per_epoch),
      remaining_(count),
      accumulation_(accumulation) {
  const auto workers = static_cast<int>(std::min<std::int64_t>(limits_.workers, limits_.steps));
  threads_.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i)
    threads_.emplace_back([this](const std::stop_token& stop) { work(stop); });
}

BatchPrefetcher::~BatchPrefetcher() {
  for (auto& t : threads_) t.request_stop();
  changed_.notify_all();
  // The jthreads join as they are destroyed: a worker finishes the step it is building, then returns.
}

std::int64_t BatchPrefetcher::reserved_bytes() const {
  std::int64_t bytes = 0;
  for (const Slot& s : held_) bytes += s.built ? s.bytes : largest_step_bytes_;
  return bytes;
}

bool BatchPrefetcher::may_claim() const {
  if (held_.empty()) return true;  // a step larger than the byte bound still goes through, alone
  if (static_cast<std::int64_t>(held_.size()) >= limits_.steps) return false;
  if (limits_.bytes == 0) return true;
  // Until a step is built its size is unknown: the first goes alone.
  return largest_step_bytes_ > 0 && reserved_bytes() + largest_step_bytes_ <= limits_.bytes;
}

void BatchPrefetcher::work(const std::stop_token& stop) {
  while (true) {
    std::int64_t sequence = 0;
    PreparedStep step;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, stop, [&] { return remaining_ == 0 || failed_ || may_claim(); });
      if (stop.stop_requested() || remaining_ == 0 || failed_) return;
      step = {epoch_, epoch_step_, accumulation_, {}};
      sequence = next_sequence_++;
      held_.emplace_back();
      most_steps_ = std::max(most_steps_, static_cast<std::int64_t>(held_.size()));
      --remaining_;
      if (++epoch_step_ >= steps_per_epoch_) {
        epoch_step_ = 0;
        ++epoch_;
      }
    }
    std::exception_ptr error;
    try {
      step.batches = build_(step.epoch, step.epoch_step, step.accumulation);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    // Slots leave only from the front, after they are built, so this step's slot is still held.
    Slot& slot = held_[static_cast<std::size_t>(sequence - front_sequence_)];
    slot.built = true;
    slot.error = error;
    if (error) {
      failed_ = true;
    } else {
      slot.bytes = step_bytes(step.batches);
      slot.step = std::move(step);
      largest_step_bytes_ = std::max(largest_step_bytes_, slot.bytes);
      std::int64_t built_bytes = 0;
      for (const Slot& s : held_) built_bytes += s.built ? s.bytes : 0;
      most_bytes_ = std::max(most_bytes_, built_bytes);
    }
    changed_.notify_all();
    if (error) return;
  }
}

PreparedStep BatchPrefetcher::pop(double& waited) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !held_.empty() && held_.front().built; });
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Slot slot = std::move(held_.front());
  held_.pop_front();
  ++front_sequence_;
  changed_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.step);
}

void BatchPrefetcher::set_accumulation(std::int64_t accumulation) {
  std::lock_guard lock(mutex_);
  accumulation_ = accumulation;
}

std::int64_t BatchPrefetcher::held_steps() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(held_.size());
}

std::int64_t BatchPrefetcher::most_held_steps() const {
  std::lock_guard lock(mutex_);
  return most_steps_;
}

std::int64_t BatchPrefetcher::most_held_bytes() const {
  std::lock_guard lock(mutex_);
  return most_bytes_;
}

}  // namespace unet
