// Prepares the next training steps' batches on a background thread (decoding on demand, augmenting, copying
// into batch buffers) so that the trainer does not wait for its data while the data keeps pace with training.
// A bounded queue of `depth` steps; the producer walks the run's steps in order, the trainer pops them in the
// same order and measures how long it waited.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "unet/step/data_parallel.h"

namespace unet {

struct PreparedStep {
  std::int64_t epoch = 0, epoch_step = 0;
  std::int64_t accumulation = 1;  // the micro-batches the batches were split into
  StepBatches batches;
};

class BatchPrefetcher {
 public:
  // Builds one step's batches with the given accumulation; called on the prefetch thread.
  using Builder =
      std::function<StepBatches(std::int64_t epoch, std::int64_t epoch_step, std::int64_t accumulation)>;

  // Steps from (epoch, epoch_step) on, `count` of them, `steps_per_epoch` to an epoch.
  BatchPrefetcher(Builder build, std::int64_t depth, std::int64_t epoch, std::int64_t epoch_step,
                  std::int64_t steps_per_epoch, std::int64_t count, std::int64_t accumulation);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next step, waiting if it is not ready; rethrows what building it threw. `waited` gets the seconds
  // spent waiting.
  PreparedStep pop(double& waited);
  // Steps built from now on use this accumulation (after out-of-memory recovery).
  void set_accumulation(std::int64_t accumulation);

 private:
  void produce(const std::stop_token& stop);

  Builder build_;
  std::int64_t depth_;
  std::int64_t epoch_, epoch_step_, steps_per_epoch_, remaining_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<PreparedStep> ready_;
  std::exception_ptr error_;
  std::int64_t accumulation_;
  std::jthread thread_;  // last: started once everything above exists
};

}  // namespace unet
