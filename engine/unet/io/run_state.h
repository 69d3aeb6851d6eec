// The state of a training run at a step boundary: the base model's parameters, the optimizer's state in the
// same slab layout, and where training stands. One struct for what a checkpoint holds (Checkpoint adds the
// config it was trained with, io/checkpoint.h), what a run starts from (Trainer::resume_from, set_start) and
// what it hands back (Trainer::snapshot), so that none of them copies another field by field.
//
// Which optimizer slabs a state holds follows from optimizer.kind (optimizer_slabs()): Adam's and AdamW's two
// moments, SGD's momentum buffer when its momentum is not 0, none for plain SGD. That rule lives here only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "unet/config/config.h"

namespace unet {

// Where training stands, for an exact resume. The data order and augmentation are pure functions of
// (data.seed, train.seed, epoch, position), so the position is enough to restore them.
struct TrainingPosition {
  std::int64_t step = 0;         // optimizer steps taken
  std::int64_t epoch = 0;        // epochs completed
  std::int64_t epoch_step = 0;   // optimizer steps taken in the current (unfinished) epoch
  double loss_scale = 1.0;       // dynamic loss scale (mixed-fp16), 1 otherwise
  std::int64_t clean_steps = 0;  // steps since the loss scale last changed
  // Of `step`, those skipped for inf/NaN gradients (dynamic loss scaling): Adam has taken step - skipped.
  std::int64_t skipped_steps = 0;
  // Samples per optimizer step when it is not the config's batch_size x accumulation (after out-of-memory
  // recovery split an odd batch into uneven micro-batches); 0: it is.
  std::int64_t effective_batch = 0;
  // The last epoch's metrics, {"val_loss": ..., ...}. Kept as JSON text: a NaN reads back as null.
  nlohmann::json metrics = nlohmann::json::object();
  // The plateau schedule's and early stopping's state ({"schedule": ..., "early_stopping": ...}), saved under
  // its own metadata key.
  nlohmann::json training_state = nlohmann::json::object();

  bool operator==(const TrainingPosition&) const = default;
};

// The optimizer state an optimizer.kind keeps, one slab each.
enum class OptimizerSlabs : std::uint8_t {
  none,          // sgd without momentum
  sgd_momentum,  // sgd with momentum: the momentum buffer
  adam_moments,  // adam, adamw: the first and second moments
};
OptimizerSlabs optimizer_slabs(const OptimizerConfig& optimizer);

struct RunState;

// The state a run of `config` starts from afresh: the model initialised from train.seed and the optimizer's
// slabs (those its optimizer.kind keeps) at zero, at step 0. A checkpoint of it resumes as a fresh start.
RunState initial_run_state(const Config& config);

struct RunState {
  std::vector<float> parameters;      // f32 [slab_elements]: the slab of UNet(config.model), at its offsets()
  std::vector<float> adam_m, adam_v;  // the same layout; adam and adamw, empty without optimizer state
  std::vector<float> sgd_momentum;    // the same layout; sgd with momentum, empty without optimizer state
  TrainingPosition position;
  // The run's time up to this state, over all its starts and resumes: from each start of training (the
  // preparation and pauses included). A record of the run, not part of where it stands: two runs at the same
  // position differ in it. 0 in checkpoints saved before it was recorded.
  double training_seconds = 0;

  // The optimizer's slabs in the order Optimizer::state() keeps them, for `slabs` (empty when this state
  // does not hold them all), and the reverse.
  std::vector<std::vector<float>> optimizer_state(OptimizerSlabs slabs) const;
  void set_optimizer_state(OptimizerSlabs slabs, std::vector<std::vector<float>> state);
  // Whether it holds the optimizer state `slabs` names (trivially for none).
  bool holds_optimizer_state(OptimizerSlabs slabs) const;
};

// Whether `state` lacks the optimizer state `optimizer` keeps (a weights-only export): a run resumed from it
// starts its optimizer afresh. Plain SGD keeps none, so a state for it never lacks any.
inline bool lacks_optimizer_state(const RunState& state, const OptimizerConfig& optimizer) {
  return !state.holds_optimizer_state(optimizer_slabs(optimizer));
}

}  // namespace unet
