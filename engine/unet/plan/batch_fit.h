// Fit batch: the largest train.batch_size a run of a config can take, and which limit set it. Three bound
// it: the planner's capacity of each device (its memory, or memory.cap_mib), the memory free on each device
// now less a margin left for other programs (a run that takes all of what the machine has makes everything
// else on it swap or fail: issue 25 found batch 114 at 23.39 of 23.54 GiB), and the training set (a batch
// larger than the samples an epoch has only repeats them). The answer says which one applied, in words the
// CLI and the workbench show as they are.
#pragma once

#include <cstdint>
#include <functional>
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
  search_limit,   // FitBounds::search_limit (Fit patch: PatchBounds::search_limit)
  largest_image,  // Fit patch: the patch covers the largest training image
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

// The largest n in [1, upper] for which `fits` holds, 0 when none, for a `fits` that holds up to some n and
// not beyond: doubling from 1 (or from `known`, a value that fits already), then bisection, so that a search
// makes about 2 log2(answer) calls (each one a plan in the fits).
std::int64_t largest_fitting(std::int64_t upper, const std::function<bool(std::int64_t)>& fits,
                             std::int64_t known = 0);

// The test each candidate of a fit passes or not: a config planned on its devices, held against each one's
// capacity and its free memory less the margin. Fit batch varies the batch through it, Fit patch
// (plan/patch_fit.h) the patch and the batch; it counts the plans it made.
class FitCheck {
 public:
  // `memory`: each of config.devices' memory (FitBounds::memory); empty: read now. Throws Error(usage) when
  // the figures are not one per device.
  FitCheck(const Config& config, std::vector<FitBounds::DeviceMemory> memory);

  struct Verdict {
    bool fits = true;
    FitLimit limit =
        FitLimit::search_limit;  // when it does not fit: memory_cap, device_memory or free_memory
    std::size_t device = 0;      // the first device over its limit
    std::int64_t need = 0;       // what it needs there
    std::int64_t capacity = 0;   // its capacity in the plan (its memory, or the cap)
  };
  // Plans `trial` (a variant of the config: same devices) without accumulation.
  Verdict check(Config trial) const;
  // Which limit `v` (a check that did not fit) met and its figures, then `next` needs v.need: "the memory
  // cap you set (256.0 MiB); a batch of 35 would need 268.7 MiB" for next "a batch of 35".
  std::string limit_words(const Verdict& v, const std::string& next) const;
  int plans() const { return plans_; }

 private:
  // What the run may use on device r: its free memory less the margin, shared by the CPU replicas.
  std::int64_t budget(std::size_t r) const;

  Config config_;
  std::vector<FitBounds::DeviceMemory> memory_;
  std::int64_t cpu_replicas_ = 1;
  mutable int plans_ = 0;
};

}  // namespace unet
