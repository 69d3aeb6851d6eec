// Adam (and AdamW with decoupled weight decay) with torch.optim.Adam's semantics, over a model's whole
// parameter slab: one kernel call per step. Its moments are the optimizer state a full checkpoint holds.
#pragma once

#include "unet/model/unet.h"

namespace unet {

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

class Adam {
 public:
  // Allocates m and v (optimizer state) on the context's device, zeroed.
  Adam(ExecContext& ctx, UNet& model, const AdamOptions& options);

  // One step from the gradients in the model's gradient slab, multiplied by grad_scale first.
  void step(ExecContext& ctx, float grad_scale);

  std::int64_t steps_taken() const noexcept { return steps_; }
  void set_steps_taken(std::int64_t steps) noexcept { steps_ = steps; }
  const AdamOptions& options() const noexcept { return options_; }
  void set_lr(float lr) noexcept { options_.lr = lr; }
  Tensor& m() noexcept { return m_; }  // f32 [slab_elements], first moments
  Tensor& v() noexcept { return v_; }  // f32 [slab_elements], second moments

 private:
  UNet& model_;
  AdamOptions options_;
  Tensor m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace unet
