#include "unet/layers/up_conv.h"

namespace unet {
namespace {

struct UpConvState final : LayerState {
  Tensor x;
};

}  // namespace

UpConv2x2::UpConv2x2(std::string name, std::int64_t c_in, std::int64_t c_out)
    : Layer(std::move(name)), c_in_(c_in), c_out_(c_out) {
  // fan-in as PyTorch's kaiming_normal_ computes it for a ConvTranspose2d weight (dim 1 x kernel area), which
  // is also what Keras uses for Conv2DTranspose.
  const std::int64_t fan_in = c_out * 4;
  declare({this->name() + ".weight", Shape{c_in, c_out, 2, 2}, fan_in, false});
  declare({this->name() + ".bias", Shape{c_out}, fan_in, true});
}

void UpConv2x2::bind(std::vector<Param*> params) {
  UNET_CHECK(params.size() == 2, usage, name() + ": wrong number of parameters to bind");
  weight_ = params[0];
  bias_ = params[1];
}

Tensor UpConv2x2::forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) {
  const UpConvDesc d = desc(ctx, x.act());
  Tensor y = ctx.activation(d.output());
  {
    const Buffer ws = ctx.workspace(ctx.backend.upconv_workspace_bytes(d, ConvPass::forward));
    ctx.backend.upconv_forward(ctx.stream, d, x, weight_->value, bias_->value, y, as_workspace(ws));
  }
  if (state) {
    auto s = std::make_unique<UpConvState>();
    s->x = x;
    *state = std::move(s);
  }
  return y;
}

Tensor UpConv2x2::backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                                bool accumulate) {
  auto& s = static_cast<UpConvState&>(state);
  const UpConvDesc d = desc(ctx, s.x.act());
  {
    const Buffer ws = ctx.workspace(ctx.backend.upconv_workspace_bytes(d, ConvPass::backward_weights));
    ctx.backend.upconv_backward_weights(ctx.stream, d, s.x, dy, weight_->grad, bias_->grad, accumulate,
                                        as_workspace(ws));
  }
  s.x = Tensor();
  if (!need_dx) return {};
  Tensor dx = ctx.activation(d.input());
  const Buffer ws = ctx.workspace(ctx.backend.upconv_workspace_bytes(d, ConvPass::backward_data));
  ctx.backend.upconv_backward_data(ctx.stream, d, dy, weight_->value, dx, as_workspace(ws));
  return dx;
}

}  // namespace unet
