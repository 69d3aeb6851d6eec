// R replicas of the model, one per device, each with its own thread, kept identical. One training step: every
// replica runs forward and backward on its share of each micro-batch (gradients accumulate over the
// micro-batches), the replicas agree that all succeeded, the gradients are summed across replicas, and every
// replica applies the same optimizer step. Each replica's loss is scaled so that the summed gradient is
// exactly that of the mean loss over all the step's pixels (docs/MODEL.md, "Data parallelism"), however
// uneven the split.
//
// If any replica fails during forward/backward (out of memory, bad data), all of them skip the rest of the
// step: weights and optimizer state stay as they were, and the step can be retried.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "unet/backend/communicator.h"
#include "unet/backend/devices.h"
#include "unet/step/data_plan.h"
#include "unet/step/optimizer.h"

namespace unet {

// One optimizer step's data: [micro-batch][replica].
struct StepBatches {
  std::vector<std::vector<HostBatch>> micro;
  std::int64_t samples() const;
};

// The loss's sums over some images (a step, an epoch, the validation set) and how they make the loss
// (docs/MODEL.md, "Losses"): the cross-entropy/focal term is the weighted mean over the labelled pixels,
// sum(w_y v l) / sum(w_y v), w_y the class weight and v the pixel's weight (1 without pixel weights), and the
// Dice term the mean over the images.
struct LossTotals {
  double cross_entropy_sum = 0;  // sum over labelled pixels of w_y v times the cross-entropy or focal term
  double class_weight_sum = 0;   // sum over labelled pixels of w_y v: the term's denominator
  double dice_sum = 0;           // sum over images of 1 - their (weighted) mean Dice
  std::int64_t images = 0;
  std::int64_t labelled_pixels = 0;  // pixels whose mask value is not loss.ignore_index

  void add(const LossTotals& o);
  // cross_entropy_weight * cross_entropy_sum / class_weight_sum + dice_weight * dice_sum / images, for the
  // terms the kind has; a term with a zero denominator (every pixel ignored) is 0.
  double mean(const LossDesc& d) const;
};

// The denominators a batch adds (images, labelled pixels, the sum of their class weights times their pixel
// weights), from its host masks and weights: known before the step runs, so that every replica can scale its
// gradients for the whole step up front. Throws Error(data) for a pixel weight that is negative or not
// finite (the backends take the weights as they are).
LossTotals loss_denominators(const LossDesc& d, int classes, const HostBatch& batch);

struct StepOutcome {
  bool ok = true;
  LossTotals loss;           // over the step (all replicas, all micro-batches)
  double loss_value = 0;     // loss.mean(): the step's loss
  std::int64_t pixels = 0;   // pixels of the step's images, labelled or not
  std::exception_ptr error;  // the first failure, when !ok
  int failed_rank = -1;      // the run's replica (of any process) whose failure is `error`
  // inf/NaN values in the summed gradients (the most any replica counts in its copy of the sum); a step with
  // any must not be applied.
  std::int64_t non_finite_gradients = 0;
  // The global L2 norm of the summed gradients, loss scale divided out (inf/NaN when any gradient is).
  double gradient_norm = 0;
  double mean_loss() const { return loss_value; }
};

struct EvalOutcome {
  LossTotals loss;
  double loss_value = 0;  // loss.mean(): the loss over the whole set, as training defines it
  std::int64_t pixels = 0;
  std::vector<std::int64_t> counts;  // segmentation counts, summed (see segmentation_counts_size)
};

struct DataParallelOptions {
  UNetSpec spec;
  LossDesc loss;
  std::vector<DeviceId> devices;
  DType compute = DType::f32;
  Layout layout = Layout::nhwc;
  OptimizerOptions optimizer;
  std::int64_t cap_bytes = 0;  // per device; 0: none
  // Several replicas: gradients are summed in buckets of about this many bytes as backward finishes them (on
  // the last micro-batch of a step), by a communication thread per replica, overlapping the rest of backward;
  // 0: one sum of the whole gradient slab after backward. Every gradient is summed the same way either way.
  std::int64_t bucket_bytes = 0;
  // CPU replicas that share this machine's cores, in this process and in others of the run on this host; 0:
  // this process's CPU replicas.
  int cpu_replicas_on_host = 0;
  CudaOptions cuda;            // for GPU devices
  bool checkpointing = false;  // activation checkpointing (UNet::set_checkpointing)
  // The run's batches carry per-pixel loss weights (instances.target weight_map): every loss call gets a
  // weights tensor, the batch's own or, for a batch without them, ones, so that the memory planner, whose
  // batches hold shapes only, counts it. Without: a batch's own weights are still used when it has them.
  bool pixel_weights = false;
  // Per device (index as in `devices`): bytes to reserve up front before anything is allocated (memory.growth
  // false); empty or 0: grow on demand.
  std::vector<std::int64_t> reserve_bytes;
  // Makes each replica's backend; empty: create_backend(). The memory planner passes PlanningBackends.
  std::function<std::unique_ptr<Backend>(const DeviceId&, const BackendOptions&)> make_backend;
  // Joins the replicas; empty: create_communicator(). The memory planner passes one that only synchronises.
  CommunicatorFactory make_communicator;
};

class DataParallel {
 public:
  explicit DataParallel(const DataParallelOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // This process's replicas; in a run over several processes (dist/process_communicator.h) they are the run's
  // replicas first_replica().. of world_replicas(), and the steps, sums and outcomes are the whole run's.
  int replicas() const noexcept { return static_cast<int>(replicas_.size()); }
  int world_replicas() const noexcept;
  int first_replica() const noexcept;
  const DataParallelOptions& options() const noexcept { return options_; }
  Backend& backend(int rank);
  UNet& model(int rank);
  Optimizer& optimizer(int rank);

  // The same values on every replica.
  void set_parameters(const std::vector<float>& slab);
  // One host slab per state tensor of the optimizer (Optimizer::state(): Adam's m and v, SGD's momentum), and
  // the steps it has applied.
  void set_optimizer_state(const std::vector<std::vector<float>>& state, std::int64_t steps);

  // Forward and backward over the step's micro-batches; on success every replica holds the gradient of the
  // step's loss (times loss_scale), the loss over all its labelled pixels and images whatever the split, and
  // the outcome counts its inf/NaN values.
  StepOutcome compute_gradients(const StepBatches& step, float loss_scale = 1.0f);
  // Every replica: the optimizer on its summed gradients, multiplied by values.grad_scale first (1 / loss
  // scale, times a clipping factor).
  void apply_optimizer(const OptimizerStepValues& values);
  // The same at learning rate `lr`, with the options' momentum, on unscaled gradients.
  void apply_optimizer(float lr) {
    apply_optimizer({.lr = lr, .momentum = std::nullopt, .grad_scale = 1.0f});
  }
  // The inf/NaN values in replica 0's parameters and optimizer state (every replica holds the same): a step
  // whose gradients were finite can still overflow them when the learning rate is far too high.
  std::int64_t non_finite_state();

  // For benchmarks: with false, gradients are summed once after backward even where buckets are planned
  // (DataParallelOptions::bucket_bytes), so that one run can time both ways, step by step.
  void set_bucketing(bool on) noexcept { bucketing_ = on; }

  // For benchmarks: the seconds one sum of the whole gradient slab across the replicas takes (the replicas
  // meet first, so that it times the sum, not their arrival). Leaves the gradients summed once more.
  double time_gradient_sum();

  // Whether any replica of the run (of any process) passed true: for decisions every process must make
  // together, such as stopping.
  bool any_replica(bool flag);

  // Loss and counts over batches (per replica, of the whole run), forward only.
  EvalOutcome evaluate(const std::vector<std::vector<HostBatch>>& batches);

  // Per-pixel probabilities of replica 0's model for a batch: [n, h, w, classes] (1 channel for a binary
  // model).
  std::vector<float> probabilities(const HostBatch& batch);

  // Host copies of replica `rank`'s slabs, made on the replica's own thread.
  std::vector<float> parameters(int rank = 0);
  std::vector<float> gradients(int rank = 0);
  // Host copies of the optimizer's state tensors (Optimizer::state()).
  std::vector<std::vector<float>> optimizer_state(int rank = 0);

 private:
  struct Replica;
  // Runs fn(replica) on every replica's thread and waits; rethrows the first failure.
  template <class Fn>
  void on_all(Fn&& fn);
  // Runs fn(replica) on that replica's thread (where its device is current) and waits; rethrows a failure.
  template <class Fn>
  void on_rank(int rank, Fn&& fn);
  std::vector<float> download(int rank, const Tensor& (*pick)(Replica&));
  std::vector<float> download(Replica& rep, const Tensor& t);
  // Gradient buckets: a layer's backward is done; hands over, in order, the buckets backward has finished.
  void layer_finished(Replica& rep, const Layer& layer);
  void release_ready_buckets(Replica& rep);

  DataParallelOptions options_;
  bool bucketing_ = true;
  std::vector<std::unique_ptr<Replica>> replicas_;
  // After the replicas, so that it goes first: a communicator may hold memory of their backends (NCCL's bf16
  // copies of the gradients).
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace unet
