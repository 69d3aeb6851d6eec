// Prepares the next training steps' batches on background worker threads (decoding on demand, cropping,
// augmenting, copying into batch buffers) so that the trainer does not wait for its data while the data keeps
// pace with training. Each worker claims the next step of the run, builds it whole and leaves it in that
// step's slot; the trainer pops the slots in the run's order and measures how long it waited. A step's
// batches depend only on (seed, epoch, position), so they are the same bit for bit whatever the worker count.
//
// The steps held (being built or built and not yet popped) are bounded in number (data.prefetch) and in bytes
// (data.prefetch_mib): a worker claims another step only when one more of the largest step seen so far fits,
// and a step larger than the byte bound still goes through, alone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "unet/config/config.h"
#include "unet/step/data_parallel.h"

namespace unet {

struct PreparedStep {
  std::int64_t epoch = 0, epoch_step = 0;
  std::int64_t accumulation = 1;  // the micro-batches the batches were split into
  StepBatches batches;
};

// How many steps may be held at once, in number and in bytes, and how many threads build them.
struct PrefetchLimits {
  std::int64_t steps = 4;
  std::int64_t bytes = 0;  // 0: no byte bound
  int workers = 1;         // at most `steps` of them run (more could never have a step to build)
};

// The limits of data.prefetch, data.prefetch_mib and data.workers (0: one per hardware thread, at most 8).
PrefetchLimits prefetch_limits(const DataConfig& data);

// The bytes of a step's images and masks.
std::int64_t step_bytes(const StepBatches& step);

class BatchPrefetcher {
 public:
  // Builds one step's batches with the given accumulation; called on the worker threads, several at once.
  using Builder =
      std::function<StepBatches(std::int64_t epoch, std::int64_t epoch_step, std::int64_t accumulation)>;

  // Steps from (epoch, epoch_step) on, `count` of them, `steps_per_epoch` to an epoch.
  BatchPrefetcher(Builder build, const PrefetchLimits& limits, std::int64_t epoch, std::int64_t epoch_step,
                  std::int64_t steps_per_epoch, std::int64_t count, std::int64_t accumulation);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next step in the run's order, waiting if it is not ready; rethrows what building it threw (the
  // steps before it come out first). `waited` gets the seconds spent waiting.
  PreparedStep pop(double& waited);
  // Steps claimed from now on use this accumulation (after out-of-memory recovery).
  void set_accumulation(std::int64_t accumulation);

  int workers() const noexcept { return static_cast<int>(threads_.size()); }
  // Steps held now (being built or built and not popped), and the most held at once, in steps and in bytes
  // (of the built ones), since the start.
  std::int64_t held_steps() const;
  std::int64_t most_held_steps() const;
  std::int64_t most_held_bytes() const;

 private:
  struct Slot {
    PreparedStep step;
    bool built = false;
    std::int64_t bytes = 0;
    std::exception_ptr error;
  };

  void work(const std::stop_token& stop);
  bool may_claim() const;               // under mutex_
  std::int64_t reserved_bytes() const;  // under mutex_: built steps' bytes, the estimate for the others

  Builder build_;
  PrefetchLimits limits_;
  std::int64_t epoch_, epoch_step_, steps_per_epoch_, remaining_;
  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<Slot> held_;                // the claimed steps, in the run's order; the front is popped next
  std::int64_t front_sequence_ = 0;      // the run's index (from this start) of held_.front()
  std::int64_t next_sequence_ = 0;       // the index the next claim takes
  std::int64_t largest_step_bytes_ = 0;  // the estimate of a step not built yet; 0: none built yet
  std::int64_t most_steps_ = 0, most_bytes_ = 0;
  bool failed_ = false;  // a step's build threw: no more are claimed
  std::int64_t accumulation_;
  std::vector<std::jthread> threads_;  // last: started once everything above exists
};

}  // namespace unet
