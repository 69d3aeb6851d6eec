#include "unet/train/adam.h"

namespace unet {

Adam::Adam(ExecContext& ctx, UNet& model, const AdamOptions& options)
    : model_(model),
      options_(options),
      m_(Tensor::empty(ctx.allocator(), Shape{model.slab_elements()}, DType::f32,
                       MemoryCategory::optimizer_state)),
      v_(Tensor::empty(ctx.allocator(), Shape{model.slab_elements()}, DType::f32,
                       MemoryCategory::optimizer_state)) {
  ctx.backend.fill(ctx.stream, m_, 0.0);
  ctx.backend.fill(ctx.stream, v_, 0.0);
}

void Adam::step(ExecContext& ctx, float grad_scale) {
  ++steps_;
  const AdamStep step{.lr = options_.lr,
                      .beta1 = options_.beta1,
                      .beta2 = options_.beta2,
                      .eps = options_.eps,
                      .weight_decay = options_.weight_decay,
                      .step = steps_,
                      .grad_scale = grad_scale};
  ctx.backend.adam_step(ctx.stream, step, model_.parameter_slab(), model_.gradient_slab(), m_, v_);
}

}  // namespace unet
