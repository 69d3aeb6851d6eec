#include "unet/layers/layer.h"

namespace unet {

Tensor Layer::forward(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) {
  UNET_CHECK(x.defined() && x.shape().rank == 4, usage, name_ + ": expected a 4-D activation");
  const ActShape in = x.act();
  UNET_CHECK(in.c == input_channels(), usage,
             name_ + ": expected " + std::to_string(input_channels()) + " input channels, got " + in.str());
  UNET_CHECK(x.dtype() == ctx.dtype && x.layout() == ctx.layout, usage,
             name_ + ": input dtype/layout differ from the execution context's");
  Tensor y = forward_impl(ctx, x, state);
  UNET_CHECK(y.act() == output_shape(in), usage, name_ + ": produced " + y.act().str());
  if (ctx.after_layer) ctx.after_layer(name_);
  return y;
}

Tensor Layer::backward(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx, bool accumulate) {
  UNET_CHECK(dy.defined() && dy.dtype() == ctx.dtype, usage,
             name_ + ": backward needs dy in the compute dtype");
  Tensor dx = backward_impl(ctx, state, std::move(dy), need_dx, accumulate);
  if (ctx.after_backward) ctx.after_backward(*this);
  return dx;
}

}  // namespace unet
