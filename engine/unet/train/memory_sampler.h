// Memory samples of a run's replicas: taken by a thread of its own at a fixed period, so that they see the
// inside of a step and not only its boundaries, and handed to the observers on the run's thread (report()).
// Backend allows sample_device() and allocator().stats() from any thread while the replica works.
#pragma once

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "unet/train/observer.h"

namespace unet {

class DataParallel;

class MemorySampler {
 public:
  // Samples the replicas of `replicas`, which must outlive this; times are seconds since `started`.
  MemorySampler(DataParallel& replicas, std::chrono::steady_clock::time_point started);
  ~MemorySampler() = default;  // the sampling thread stops and is joined
  MemorySampler(const MemorySampler&) = delete;
  MemorySampler& operator=(const MemorySampler&) = delete;

  // Samples every `period_seconds` from now on, until stop().
  void start(double period_seconds);
  void stop() noexcept { thread_ = {}; }
  // One sample of each replica now.
  void sample();
  // Hands the samples taken since the last call to `out`, on the calling thread.
  void report(TrainerObserver& out);

 private:
  DataParallel& replicas_;
  std::chrono::steady_clock::time_point started_;
  std::mutex mutex_;
  std::vector<MemoryReport> samples_;
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

}  // namespace unet
