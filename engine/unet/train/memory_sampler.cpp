#include "unet/train/memory_sampler.h"

#include <condition_variable>

#include "unet/step/data_parallel.h"

namespace unet {

MemorySampler::MemorySampler(DataParallel& replicas, std::chrono::steady_clock::time_point started)
    : replicas_(replicas), started_(started) {}

void MemorySampler::start(double period_seconds) {
  thread_ = std::jthread([this, period_seconds](const std::stop_token& stop) {
    std::mutex wait_mutex;
    std::condition_variable_any wake;
    const auto period = std::chrono::duration<double>(period_seconds);
    for (;;) {
      std::unique_lock lock(wait_mutex);
      if (wake.wait_for(lock, stop, period, [] { return false; })) return;
      if (stop.stop_requested()) return;
      sample();
    }
  });
}

void MemorySampler::sample() {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::vector<MemoryReport> taken;
  for (int r = 0; r < replicas_.replicas(); ++r) {
    Backend& be = replicas_.backend(r);
    // Both calls are safe from this thread while the replica works (Backend's thread contract).
    const DeviceSample now = be.sample_device();
    taken.push_back({.t = t,
                     .device = be.info().id,
                     .stats = be.allocator().stats(),
                     .device_used = now.total_bytes - now.free_bytes,
                     .device_total = now.total_bytes,
                     .used_by_others = now.used_by_others_bytes,
                     .others_not_attributable = now.others_not_attributable,
                     .utilisation_percent = now.utilisation_percent,
                     .temperature_celsius = now.temperature_celsius,
                     .power_watts = now.power_watts});
  }
  std::lock_guard lock(mutex_);
  samples_.insert(samples_.end(), taken.begin(), taken.end());
}

void MemorySampler::report(TrainerObserver& out) {
  std::vector<MemoryReport> taken;
  {
    std::lock_guard lock(mutex_);
    taken.swap(samples_);
  }
  for (const MemoryReport& r : taken) out.on_memory(r);
}

}  // namespace unet
