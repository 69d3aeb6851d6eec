// How a run walks its data: its length in steps and epochs, where a resumed run starts in its epoch, and the
// samples of each step. A checkpoint's position is a count of steps into its epoch at the samples per step of
// the run that saved it; a run resumed with another batch continues at the same sample of the epoch's order
// (docs/CLI.md, --resume).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/io/run_state.h"
#include "unet/step/data_parallel.h"
#include "unet/train/observer.h"

namespace unet {

struct RunLength {
  std::int64_t effective_batch = 0;  // samples per step
  std::int64_t steps_per_epoch = 0, epochs = 0, total_steps = 0;
  std::int64_t epoch = 0, epoch_step = 0;  // where the run starts, mapped to this run's steps
};

// The length of a run of `config` over `train_samples` training samples from `start`, whose position was
// reached at `saved_batch` samples per step (0: this run's). Warns (to `out`) about a batch larger than the
// data, a moved position, and a start already at the end.
RunLength plan_run_length(const Config& config, std::size_t train_samples, const TrainingPosition& start,
                          std::int64_t saved_batch, TrainerObserver& out);

// The replicas of a run a process drives: `local` of the `world`, from `first`.
struct ReplicaSlice {
  int world = 1, first = 0, local = 1;
};

// The samples an epoch takes: the training samples (resize mode), or patch mode's patches
// (data.patches_per_epoch, or the training images' pixels over the patch's).
std::int64_t samples_per_epoch(const Config& config, const Dataset& dataset,
                               const std::vector<std::size_t>& train);

// The order epoch `epoch` takes its samples in: the training samples shuffled (data.shuffle), repeated in new
// orders up to `samples` (patch mode's patches).
std::vector<std::size_t> training_order(const Config& config, const std::vector<std::size_t>& train,
                                        std::int64_t epoch, std::int64_t samples);

// The batches of step `at_step` of epoch `at_epoch`, whose sample order is `order`: the next
// `effective_batch` samples, split into `micro_batches` micro-batches (as evenly as they go), each split over
// the run's replicas; this process builds its own replicas' shares, as `recipe` makes them.
StepBatches build_step(const Dataset& dataset, const BatchRecipe& recipe,
                       const std::vector<std::size_t>& order, std::int64_t at_epoch, std::int64_t at_step,
                       std::int64_t effective_batch, std::int64_t micro_batches,
                       const ReplicaSlice& replicas);

// The steps of a run built from any number of threads at once (the loader's workers): each epoch's order is
// made once, the latest epoch's kept, and shared by the steps that take it.
class TrainingSteps {
 public:
  // `config`, `dataset` and `recipe` must outlive this.
  TrainingSteps(const Config& config, const Dataset& dataset, const BatchRecipe& recipe,
                std::vector<std::size_t> train, std::int64_t epoch_samples, std::int64_t effective_batch,
                const ReplicaSlice& replicas);
  // build_step() of step `at_step` of epoch `at_epoch`, in `micro` micro-batches; thread-safe.
  StepBatches build(std::int64_t at_epoch, std::int64_t at_step, std::int64_t micro) const;

 private:
  std::shared_ptr<const std::vector<std::size_t>> order_of(std::int64_t epoch) const;

  const Config& config_;
  const Dataset& dataset_;
  const BatchRecipe& recipe_;
  std::vector<std::size_t> train_;
  std::int64_t epoch_samples_, effective_batch_;
  ReplicaSlice replicas_;
  mutable std::mutex mutex_;
  mutable std::int64_t cached_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<std::size_t>> cached_order_;
};

}  // namespace unet
