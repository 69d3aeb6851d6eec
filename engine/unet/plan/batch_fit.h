// Fit batch: the largest train.batch_size a run of a config can take, and which limit set it. Three bound
// it: the planner's capacity of each device (its memory, or memory.cap_mib), the memory free on each device
// now less a margin left for other programs (a run that takes all of what the machine has makes everything
// else on it swap or fail: issue 25 found batch 114 at 23.39 of 23.54 GiB), and the training set (a batch
// larger than the samples an epoch has only repeats them). The answer says which one applied, in words the
// CLI and the workbench show as they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "unet/config/config.h"

namespace unet {

// The memory a fit leaves free on a device of `total_bytes`: a tenth of it, and at least 1 GiB. Other
// programs' use moves while a run trains (up to 10 GiB beside it on the machine of issue 25) and the system
// needs room for its page cache; tied to the device's size rather than to what is free now, so that the
// margin does not shrink just when memory is tight. 1 GiB without a known size.
std::int64_t free_memory_margin(std::int64_t total_bytes);

struct FitBounds {
  // One device's memory now; <= 0: unknown (no free-memory bound on it).
  struct DeviceMemory {
    std::int64_t total_bytes = 0, free_bytes = 0;
  };
  // Each of config.devices' memory, in their order; empty: read now (a CPU: the host's MemTotal and
  // MemAvailable, /proc/meminfo; a GPU: what its driver reports). Tests inject their own figures.
  std::vector<DeviceMemory> memory;
  // The samples a run trains on, after the validation split (the whole batch is split across devices, so
  // this bounds the global batch); <= 0: not counted, and `not_counted` says why.
  std::int64_t training_samples = 0;
  std::string not_counted;
  std::int64_t search_limit = 1 << 16;  // the largest batch tried
};

enum class FitLimit {
  training_set,   // the batch is the training set's size
  free_memory,    // one more would exceed a device's free memory less the margin
  memory_cap,     // one more would exceed memory.cap_mib
  device_memory,  // one more would exceed a device's memory (its free memory unknown)
  search_limit,   // FitBounds::search_limit
};
std::string_view to_string(FitLimit limit);  // "training_set", "free_memory", ...

struct BatchFit {
  std::int64_t global_batch = 0;  // the largest train.batch_size that fits every device (0: not even 1)
  FitLimit limit = FitLimit::search_limit;
  // Which limit applied and its figures: "batch 24: the training set has 24 images"; "not even a batch of 1
  // fits: …" for 0.
  std::string reason;
  std::int64_t training_samples = 0;  // FitBounds::training_samples
  struct Device {
    std::string device;
    std::int64_t max_batch = 0;  // the largest batch this device holds on its own, under the same limits
  };
  std::vector<Device> devices;
};

// The largest batches that fit (a binary search over planned runs) within `bounds`.
BatchFit fit_batch(const Config& config, FitBounds bounds = {});

}  // namespace unet
