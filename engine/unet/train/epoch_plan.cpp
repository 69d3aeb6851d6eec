#include "unet/train/epoch_plan.h"

#include <algorithm>
#include <string>

#include "unet/core/checked_math.h"

namespace unet {

namespace {

// A checkpoint's position is a count of steps into its epoch, each of the samples per step its run took. A
// run resumed with another batch (or accumulation) continues at the same sample of the epoch's order, rounded
// up to its own next step, so that no sample is taken twice in an epoch; a position at or past the end of the
// epoch (a larger batch, a training set that shrank) continues at the start of the next epoch.
void map_start_position(RunLength& r, std::size_t train_samples, std::int64_t was_batch,
                        TrainerObserver& out) {
  const std::int64_t spe = r.steps_per_epoch, effective_batch = r.effective_batch;
  std::int64_t& epoch = r.epoch;
  std::int64_t& epoch_step = r.epoch_step;
  if (epoch_step == 0) return;
  if (was_batch == effective_batch && epoch_step < spe) return;
  const std::int64_t samples = checked_mul(epoch_step, was_batch, "the checkpoint's position");
  const std::int64_t mapped = samples / effective_batch + (samples % effective_batch ? 1 : 0);
  const std::string from = "the checkpoint's position, step " + std::to_string(epoch_step) + " of epoch " +
                           std::to_string(epoch + 1) + " at " + std::to_string(was_batch) +
                           " samples per step (" + std::to_string(samples) + " samples into the epoch),";
  const std::string now = std::to_string(train_samples) + " training samples at " +
                          std::to_string(effective_batch) + " per step (" + std::to_string(spe) +
                          " steps per epoch)";
  if (mapped >= spe) {
    out.on_log(LogLevel::warning, from + " is at or past the end of an epoch of " + now +
                                      ": the run continues at the start of epoch " +
                                      std::to_string(epoch + 2));
    ++epoch;
    epoch_step = 0;
    return;
  }
  out.on_log(LogLevel::warning,
             from + " continues at step " + std::to_string(mapped + 1) + " of an epoch of " + now);
  epoch_step = mapped;
}

}  // namespace

RunLength plan_run_length(const Config& c, std::size_t train_samples, const TrainingPosition& start,
                          std::int64_t saved_batch, TrainerObserver& out) {
  RunLength r;
  r.effective_batch =
      start.effective_batch > 0 ? start.effective_batch : c.train.batch_size * c.train.accumulation;
  const std::int64_t effective_batch = r.effective_batch, step = start.step;
  r.epoch = start.epoch;
  r.epoch_step = start.epoch_step;
  r.steps_per_epoch = steps_per_epoch(train_samples, effective_batch, 1);
  if (effective_batch > static_cast<std::int64_t>(train_samples))
    out.on_log(LogLevel::warning,
               "train.batch_size " + std::to_string(c.train.batch_size) +
                   (c.train.accumulation > 1 ? " x train.accumulation " + std::to_string(c.train.accumulation)
                                             : std::string()) +
                   " is more than the " + std::to_string(train_samples) +
                   " training samples: each step takes all " + std::to_string(train_samples) +
                   " (one step per epoch)");
  map_start_position(r, train_samples, saved_batch > 0 ? saved_batch : effective_batch, out);
  const std::int64_t spe = r.steps_per_epoch, epoch = r.epoch, epoch_step = r.epoch_step;
  r.epochs = c.train.steps > 0 ? c.train.steps / spe + (c.train.steps % spe ? 1 : 0) : c.train.epochs;
  if (c.train.steps > 0) {
    r.total_steps = c.train.steps;
  } else {
    // To the end of epoch train.epochs: for a fresh or unchanged run epochs x steps per epoch; a resumed run
    // whose steps per epoch changed finishes its epochs at the new size.
    const std::int64_t left = checked_mul(std::max<std::int64_t>(0, c.train.epochs - epoch), spe,
                                          "train.epochs x steps per epoch") -
                              epoch_step;
    r.total_steps = checked_add(step, std::max<std::int64_t>(0, left), "the run's steps");
  }
  if (step > 0 && step >= r.total_steps)
    out.on_log(LogLevel::warning, "the checkpoint is at step " + std::to_string(step) + " (epoch " +
                                      std::to_string(epoch) + "), already at the end this config sets (" +
                                      (c.train.steps > 0 ? "train.steps " + std::to_string(c.train.steps)
                                                         : "train.epochs " + std::to_string(c.train.epochs)) +
                                      "): nothing is trained; raise it to train on");
  return r;
}

std::int64_t samples_per_epoch(const Config& config, const Dataset& dataset,
                               const std::vector<std::size_t>& train) {
  if (config.data.mode != DataMode::patch) return static_cast<std::int64_t>(train.size());
  std::int64_t pixels = 0;
  for (const std::size_t i : train)
    pixels = checked_add(pixels, dataset.sample_area(i), "the training pixels");
  return patches_in_epoch(config.data.patches_per_epoch, pixels, *training_recipe(config).patch);
}

std::vector<std::size_t> training_order(const Config& config, const std::vector<std::size_t>& train,
                                        std::int64_t epoch, std::int64_t samples) {
  if (config.data.mode != DataMode::patch)
    return epoch_order(train, config.data.seed, epoch, config.data.shuffle);
  return patch_epoch_order(train, config.data.seed, epoch, config.data.shuffle, samples);
}

StepBatches build_step(const Dataset& dataset, const BatchRecipe& recipe,
                       const std::vector<std::size_t>& order, std::int64_t at_epoch, std::int64_t at_step,
                       std::int64_t effective_batch, std::int64_t micro_batches,
                       const ReplicaSlice& replicas) {
  // The step's samples are the next `effective_batch` of the epoch's order, split into `micro_batches`
  // micro-batches (as evenly as they go), each split over the replicas.
  // Each micro-batch is split over the run's replicas (of every process); this process builds its own
  // replicas' shares.
  const auto n = static_cast<std::int64_t>(order.size());
  const int world = replicas.world, first_replica = replicas.first, local = replicas.local;
  const std::int64_t first = at_step * effective_batch;
  const std::int64_t count = std::min(n, first + effective_batch) - first;
  StepBatches step_batches;
  std::int64_t at = first;
  for (const std::int64_t micro : replica_split(count, static_cast<int>(micro_batches))) {
    if (micro == 0) break;
    std::vector<HostBatch> shares(static_cast<std::size_t>(local));
    const std::vector<std::int64_t> split_sizes = replica_split(micro, world);
    for (int r = 0; r < world; ++r) {
      const std::int64_t share = split_sizes[static_cast<std::size_t>(r)];
      if (r >= first_replica && r < first_replica + local) {
        std::vector<std::size_t> samples;
        std::vector<std::int64_t> positions;
        for (std::int64_t p = at; p < at + share; ++p) {
          samples.push_back(order[static_cast<std::size_t>(p)]);
          positions.push_back(p);
        }
        assemble_batch(dataset, samples, positions, at_epoch, recipe,
                       shares[static_cast<std::size_t>(r - first_replica)]);
      }
      at += share;
    }
    step_batches.micro.push_back(std::move(shares));
  }
  return step_batches;
}

TrainingSteps::TrainingSteps(const Config& config, const Dataset& dataset, const BatchRecipe& recipe,
                             std::vector<std::size_t> train, std::int64_t epoch_samples,
                             std::int64_t effective_batch, const ReplicaSlice& replicas)
    : config_(config),
      dataset_(dataset),
      recipe_(recipe),
      train_(std::move(train)),
      epoch_samples_(epoch_samples),
      effective_batch_(effective_batch),
      replicas_(replicas) {}

std::shared_ptr<const std::vector<std::size_t>> TrainingSteps::order_of(std::int64_t epoch) const {
  std::lock_guard lock(mutex_);
  if (epoch != cached_epoch_) {
    cached_order_ = std::make_shared<const std::vector<std::size_t>>(
        training_order(config_, train_, epoch, epoch_samples_));
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

StepBatches TrainingSteps::build(std::int64_t at_epoch, std::int64_t at_step, std::int64_t micro) const {
  const auto order = order_of(at_epoch);  // kept alive here though another epoch's may replace it
  return build_step(dataset_, recipe_, *order, at_epoch, at_step, effective_batch_, micro, replicas_);
}

}  // namespace unet
