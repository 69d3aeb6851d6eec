#include "unet/layers/conv.h"

namespace unet {
namespace {

struct ConvState final : LayerState {
  Tensor x;  // input, for the weight gradient
  Tensor y;  // output after ReLU, for the ReLU's backward (only with relu)
};

}  // namespace

Conv2d::Conv2d(std::string name, const ConvOptions& options) : Layer(std::move(name)), options_(options) {
  UNET_CHECK(options.kernel == 1 || options.kernel == 3, usage, this->name() + ": kernel must be 1 or 3");
  UNET_CHECK(!options.depthwise || (options.c_in == options.c_out && !options.bias), usage,
             this->name() + ": a depthwise conv keeps its channel count and has no bias");
  const std::int64_t k = options.kernel;
  const std::int64_t fan_in = (options.depthwise ? 1 : options.c_in) * k * k;
  declare({this->name() + ".weight",
           options.depthwise ? Shape{options.c_out, 1, k, k} : Shape{options.c_out, options.c_in, k, k},
           fan_in, false});
  if (options.bias) declare({this->name() + ".bias", Shape{options.c_out}, fan_in, true});
}

void Conv2d::bind(std::vector<Param*> params) {
  UNET_CHECK(params.size() == param_specs().size(), usage, name() + ": wrong number of parameters to bind");
  weight_ = params[0];
  bias_ = options_.bias ? params[1] : nullptr;
}

ConvDesc Conv2d::desc(const ExecContext& ctx, const ActShape& in) const {
  ConvDesc d;
  d.n = in.n;
  d.c_in = options_.c_in;
  d.c_out = options_.c_out;
  d.h = in.h;
  d.w = in.w;
  d.kernel = options_.kernel;
  d.depthwise = options_.depthwise;
  d.bias = options_.bias;
  d.relu = options_.relu;
  d.dtype = ctx.dtype;
  d.layout = ctx.layout;
  return d;
}

Tensor Conv2d::forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) {
  const ConvDesc d = desc(ctx, x.act());
  Tensor y = ctx.activation(d.output());
  {
    const Buffer ws = ctx.workspace(ctx.backend.conv_workspace_bytes(d, ConvPass::forward));
    ctx.backend.conv_forward(ctx.stream, d, x, weight_->value, bias_ ? &bias_->value : nullptr, y,
                             as_workspace(ws));
  }
  if (state) {
    auto s = std::make_unique<ConvState>();
    s->x = x;
    if (options_.relu) s->y = y;
    *state = std::move(s);
  }
  return y;
}

Tensor Conv2d::backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx, bool accumulate) {
  auto& s = static_cast<ConvState&>(state);
  const ConvDesc d = desc(ctx, s.x.act());
  Tensor dz = std::move(dy);
  if (options_.relu) {
    ctx.backend.relu_backward(ctx.stream, s.y, dz, dz);
    s.y = Tensor();
  }
  {
    const Buffer ws = ctx.workspace(ctx.backend.conv_workspace_bytes(d, ConvPass::backward_weights));
    ctx.backend.conv_backward_weights(ctx.stream, d, s.x, dz, weight_->grad, bias_ ? &bias_->grad : nullptr,
                                      accumulate, as_workspace(ws));
  }
  s.x = Tensor();
  if (!need_dx) return {};
  Tensor dx = ctx.activation(d.input());
  const Buffer ws = ctx.workspace(ctx.backend.conv_workspace_bytes(d, ConvPass::backward_data));
  ctx.backend.conv_backward_data(ctx.stream, d, dz, weight_->value, dx, as_workspace(ws));
  return dx;
}

namespace {

struct SeparableState final : LayerState {
  std::unique_ptr<LayerState> depthwise, pointwise;
};

class SeparableConv3x3 final : public Layer {
 public:
  SeparableConv3x3(const std::string& name, std::int64_t c_in, std::int64_t c_out)
      : Layer(name),
        depthwise_(name + ".dw",
                   {.c_in = c_in, .c_out = c_in, .kernel = 3, .depthwise = true, .bias = false}),
        pointwise_(name + ".pw", {.c_in = c_in, .c_out = c_out, .kernel = 1, .bias = true, .relu = true}) {
    for (const auto& spec : depthwise_.param_specs()) declare(spec);
    for (const auto& spec : pointwise_.param_specs()) declare(spec);
  }

  ActShape output_shape(const ActShape& in) const override { return pointwise_.output_shape(in); }
  std::int64_t input_channels() const override { return depthwise_.input_channels(); }
  void bind(std::vector<Param*> params) override {
    UNET_CHECK(params.size() == 3, usage, name() + ": wrong number of parameters to bind");
    depthwise_.bind({params[0]});
    pointwise_.bind({params[1], params[2]});
  }

 protected:
  Tensor forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) override {
    std::unique_ptr<SeparableState> s = state ? std::make_unique<SeparableState>() : nullptr;
    Tensor t = depthwise_.forward(ctx, x, s ? &s->depthwise : nullptr);
    Tensor y = pointwise_.forward(ctx, t, s ? &s->pointwise : nullptr);
    if (state) *state = std::move(s);
    return y;
  }
  Tensor backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                       bool accumulate) override {
    auto& s = static_cast<SeparableState&>(state);
    Tensor dt = pointwise_.backward(ctx, *s.pointwise, std::move(dy), true, accumulate);
    s.pointwise.reset();
    Tensor dx = depthwise_.backward(ctx, *s.depthwise, std::move(dt), need_dx, accumulate);
    s.depthwise.reset();
    return dx;
  }

 private:
  Conv2d depthwise_, pointwise_;
};

}  // namespace

std::unique_ptr<Layer> make_conv3x3_relu(const std::string& name, std::int64_t c_in, std::int64_t c_out,
                                         bool separable) {
  if (separable) return std::make_unique<SeparableConv3x3>(name, c_in, c_out);
  return std::make_unique<Conv2d>(
      name + ".pw", ConvOptions{.c_in = c_in, .c_out = c_out, .kernel = 3, .bias = true, .relu = true});
}

}  // namespace unet
