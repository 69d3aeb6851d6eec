// The optimizer over a model's whole parameter slab, one kernel call per step, with torch.optim's semantics:
// Adam (L2 weight decay), AdamW (decoupled weight decay) or SGD with momentum and Nesterov (docs/MODEL.md,
// "Optimizers"). Its state (Adam's moments, SGD's momentum buffer) is what a full checkpoint holds.
#pragma once

#include <optional>

#include "unet/config/config_enums.h"  // OptimizerKind, the config's optimizer.kind
#include "unet/model/unet.h"

namespace unet {

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::adamw;
  float lr = 1e-3f;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
  float momentum = 0.9f;                            // sgd; 0: no buffer
  bool nesterov = false;                            // sgd
};

// What a step may change: the schedule's rate, one-cycle's momentum (Adam's beta1 or SGD's momentum), and the
// factor the gradients are multiplied by first (1 / loss scale, times the clipping factor).
struct OptimizerStepValues {
  float lr = 1e-3f;
  std::optional<float> momentum;
  float grad_scale = 1.0f;
};

class Optimizer {
 public:
  // Allocates the state on the context's device, zeroed: m and v for Adam and AdamW, the momentum buffer for
  // SGD with momentum, nothing for plain SGD.
  Optimizer(ExecContext& ctx, UNet& model, const OptimizerOptions& options);

  void step(ExecContext& ctx, const OptimizerStepValues& values);

  const OptimizerOptions& options() const noexcept { return options_; }
  // Steps applied (Adam's bias correction counts them).
  std::int64_t steps_taken() const noexcept { return steps_; }
  void set_steps_taken(std::int64_t steps) noexcept { steps_ = steps; }

  // The state tensors, f32 [slab_elements] each: Adam's first and second moments, or SGD's momentum buffer
  // alone; none for plain SGD.
  std::vector<Tensor*> state();

 private:
  UNet& model_;
  OptimizerOptions options_;
  Tensor m_, v_;  // Adam: the moments; SGD: m_ is the momentum buffer
  std::int64_t steps_ = 0;
};

}  // namespace unet
