#include "unet/step/optimizer.h"

namespace unet {

namespace {
Tensor state_tensor(ExecContext& ctx, const UNet& model) {
  Tensor t = Tensor::empty(ctx.allocator(), Shape{model.slab_elements()}, DType::f32,
                           MemoryCategory::optimizer_state);
  ctx.backend.fill(ctx.stream, t, 0.0);
  return t;
}
}  // namespace

Optimizer::Optimizer(ExecContext& ctx, UNet& model, const OptimizerOptions& options)
    : model_(model), options_(options) {
  if (options_.kind != OptimizerKind::sgd) {
    m_ = state_tensor(ctx, model);
    v_ = state_tensor(ctx, model);
  } else if (options_.momentum != 0.0f) {
    m_ = state_tensor(ctx, model);
  }
}

std::vector<Tensor*> Optimizer::state() {
  if (options_.kind != OptimizerKind::sgd) return {&m_, &v_};
  if (options_.momentum != 0.0f) return {&m_};
  return {};
}

void Optimizer::step(ExecContext& ctx, const OptimizerStepValues& values) {
  ++steps_;
  if (options_.kind == OptimizerKind::sgd) {
    const SgdStep step{
        .lr = values.lr,
        // Plain SGD has no buffer: a cycled momentum (refused by the config) cannot add one.
        .momentum = options_.momentum != 0.0f ? values.momentum.value_or(options_.momentum) : 0.0f,
        .nesterov = options_.nesterov,
        .weight_decay = options_.weight_decay,
        .grad_scale = values.grad_scale};
    ctx.backend.sgd_step(ctx.stream, step, model_.parameter_slab(), model_.gradient_slab(), m_);
    return;
  }
  const AdamStep step{.lr = values.lr,
                      .beta1 = values.momentum.value_or(options_.beta1),
                      .beta2 = options_.beta2,
                      .eps = options_.eps,
                      .weight_decay = options_.weight_decay,
                      .decoupled_weight_decay = options_.kind == OptimizerKind::adamw,
                      .step = steps_,
                      .grad_scale = values.grad_scale};
  ctx.backend.adam_step(ctx.stream, step, model_.parameter_slab(), model_.gradient_slab(), m_, v_);
}

}  // namespace unet
