#include "unet/plan/batch_fit.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "unet/backend/device_monitor.h"
#include "unet/backend/devices.h"
#include "unet/core/memory.h"
#include "unet/plan/memory_planner.h"

namespace unet {

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kNoBound = std::numeric_limits<std::int64_t>::max();

std::vector<FitBounds::DeviceMemory> memory_now(const std::vector<DeviceId>& devices) {
  std::vector<FitBounds::DeviceMemory> memory;
  std::optional<DeviceListing> listing;  // GPUs only: listing them loads the driver
  for (const DeviceId& d : devices) {
    if (d.kind == DeviceKind::cpu) {
      const auto [total, available] = host_memory();
      memory.push_back({total, available});
      continue;
    }
    if (!listing) listing = list_devices();
    const DeviceInfo* info = listing->find(d.str());
    memory.push_back(info ? FitBounds::DeviceMemory{info->total_bytes, info->free_bytes}
                          : FitBounds::DeviceMemory{});
  }
  return memory;
}

std::string images(std::int64_t n) {
  return std::to_string(n) + (n == 1 ? " image" : " images");
}

// The search over one set of devices (the run's, or one of them alone).
class BatchSearch {
 public:
  BatchSearch(const Config& config, std::vector<FitBounds::DeviceMemory> memory, const FitBounds& bounds)
      : config_(config), check_(config, std::move(memory)), bounds_(bounds) {
    upper_ = bounds.search_limit;
    if (bounds.training_samples > 0) upper_ = std::min(upper_, bounds.training_samples);
  }

  FitCheck::Verdict probe(std::int64_t batch) const {
    Config trial = config_;
    trial.train.batch_size = batch;
    return check_.check(std::move(trial));
  }

  // The largest batch in [0, upper] that fits (fitting is monotone in the batch).
  std::int64_t largest() const {
    return largest_fitting(upper_, [&](std::int64_t b) { return probe(b).fits; });
  }

  // Which limit keeps the batch at `batch` (largest()'s answer), and its figures in words.
  std::pair<FitLimit, std::string> limit_at(std::int64_t batch) const {
    if (batch == upper_) {
      if (bounds_.training_samples > 0 && upper_ == bounds_.training_samples)
        return {FitLimit::training_set, "the training set has " + images(bounds_.training_samples)};
      return {FitLimit::search_limit, "the largest batch this search tries (" + std::to_string(upper_) + ")"};
    }
    const FitCheck::Verdict v = probe(batch + 1);
    return {v.limit, check_.limit_words(v, "a batch of " + std::to_string(batch + 1))};
  }

 private:
  const Config& config_;
  FitCheck check_;
  const FitBounds& bounds_;
  std::int64_t upper_ = 0;
};

}  // namespace

std::int64_t free_memory_margin(std::int64_t total_bytes) {
  return std::max(kGiB, total_bytes / 10);
}

std::int64_t largest_fitting(std::int64_t upper, const std::function<bool(std::int64_t)>& fits,
                             std::int64_t known) {
  if (upper < 1) return 0;
  std::int64_t good = std::min(known, upper);
  if (good < 1) {
    if (!fits(1)) return 0;
    good = 1;
  }
  std::int64_t bad = good * 2;
  while (bad <= upper && fits(bad)) {
    good = bad;
    bad *= 2;
  }
  if (bad > upper) {
    if (good == upper || fits(upper)) return upper;  // probe the bound itself
    bad = upper;
  }
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

std::string_view to_string(FitLimit limit) {
  switch (limit) {
    case FitLimit::training_set:
      return "training_set";
    case FitLimit::free_memory:
      return "free_memory";
    case FitLimit::memory_cap:
      return "memory_cap";
    case FitLimit::device_memory:
      return "device_memory";
    case FitLimit::search_limit:
      return "search_limit";
    case FitLimit::largest_image:
      return "largest_image";
  }
  return "";
}

FitCheck::FitCheck(const Config& config, std::vector<FitBounds::DeviceMemory> memory)
    : config_(config), memory_(memory.empty() ? memory_now(config.devices) : std::move(memory)) {
  if (memory_.size() != config.devices.size())
    throw Error(ErrorKind::usage, "fit: " + std::to_string(memory_.size()) + " memory figures for " +
                                      std::to_string(config.devices.size()) + " devices");
  cpu_replicas_ = std::count_if(config.devices.begin(), config.devices.end(),
                                [](const DeviceId& d) { return d.kind == DeviceKind::cpu; });
}

FitCheck::Verdict FitCheck::check(Config trial) const {
  trial.train.accumulation = 1;
  ++plans_;
  const MemoryPlan plan = plan_memory(trial);
  const std::int64_t cap = trial.memory.cap_bytes();
  for (std::size_t r = 0; r < plan.devices.size(); ++r) {
    const DevicePlan& d = plan.devices[r];
    if (!d.fits)
      return {false, cap > 0 && d.capacity == cap ? FitLimit::memory_cap : FitLimit::device_memory, r, d.peak,
              d.capacity};
    // What the device will show: the allocator's reservation, and on a GPU its context and libraries.
    const std::int64_t need = d.device_peak >= 0 ? d.device_peak : d.peak_reserved;
    if (need > budget(r)) return {false, FitLimit::free_memory, r, need, d.capacity};
  }
  return {};
}

std::string FitCheck::limit_words(const Verdict& v, const std::string& next) const {
  const std::string id = config_.devices[v.device].str();
  const std::string needs = next + " would need " + format_bytes(v.need);
  if (v.limit == FitLimit::free_memory) {
    const FitBounds::DeviceMemory& m = memory_[v.device];
    const bool shared = config_.devices[v.device].kind == DeviceKind::cpu && cpu_replicas_ > 1;
    return "the free memory less a margin: " + id + " has " + format_bytes(m.free_bytes) + " free; less " +
           format_bytes(free_memory_margin(m.total_bytes)) + " kept for other programs (a tenth of its " +
           format_bytes(m.total_bytes) + ", at least 1 GiB), " + format_bytes(budget(v.device)) +
           " are usable" + (shared ? " by each of its " + std::to_string(cpu_replicas_) + " replicas" : "") +
           "; " + needs;
  }
  if (v.limit == FitLimit::memory_cap)
    return "the memory cap you set (" + format_bytes(config_.memory.cap_bytes()) + "); " + needs;
  return "the memory of " + id + " (" + format_bytes(v.capacity) + "); " + needs;
}

// Free memory less the margin, shared by the CPU replicas (threads of one process on one host); no bound
// where the free memory is unknown.
std::int64_t FitCheck::budget(std::size_t r) const {
  const FitBounds::DeviceMemory& m = memory_[r];
  if (m.free_bytes <= 0) return kNoBound;
  const std::int64_t usable = std::max<std::int64_t>(0, m.free_bytes - free_memory_margin(m.total_bytes));
  return config_.devices[r].kind == DeviceKind::cpu ? usable / std::max<std::int64_t>(1, cpu_replicas_)
                                                    : usable;
}

BatchFit fit_batch(const Config& config, FitBounds bounds) {
  if (bounds.memory.empty()) bounds.memory = memory_now(config.devices);
  if (bounds.memory.size() != config.devices.size())  // FitCheck would say so, once per search
    throw Error(ErrorKind::usage, "fit_batch: " + std::to_string(bounds.memory.size()) +
                                      " memory figures for " + std::to_string(config.devices.size()) +
                                      " devices");
  BatchFit result;
  result.training_samples = bounds.training_samples;
  const BatchSearch run(config, bounds.memory, bounds);
  result.global_batch = run.largest();
  const auto [limit, words] = run.limit_at(result.global_batch);
  result.limit = limit;
  result.reason = (result.global_batch > 0 ? "batch " + std::to_string(result.global_batch) + ": "
                                           : std::string("not even a batch of 1 fits: ")) +
                  words;
  if (bounds.training_samples <= 0 && !bounds.not_counted.empty())
    result.reason += "; the training set was not counted (" + bounds.not_counted + ")";
  for (std::size_t i = 0; i < config.devices.size(); ++i) {
    Config single = config;
    single.devices = {config.devices[i]};
    result.devices.push_back(
        {config.devices[i].str(), BatchSearch(single, {bounds.memory[i]}, bounds).largest()});
  }
  return result;
}

}  // namespace unet
