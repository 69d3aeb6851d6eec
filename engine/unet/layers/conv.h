// conv3x3 / conv1x1 / depthwise conv3x3 with optional bias and an optional ReLU fused into the forward pass.
#pragma once

#include "unet/layers/layer.h"

namespace unet {

struct ConvOptions {
  std::int64_t c_in = 0, c_out = 0;
  int kernel = 3;
  bool depthwise = false;  // c_out == c_in, one 3x3 filter per channel, no bias
  bool bias = true;
  bool relu = false;
};

class Conv2d final : public Layer {
 public:
  // `name` is the module path ("enc.0.c1.pw"); parameters are "<name>.weight" and "<name>.bias".
  Conv2d(std::string name, const ConvOptions& options);

  ActShape output_shape(const ActShape& in) const override { return {in.n, options_.c_out, in.h, in.w}; }
  std::int64_t input_channels() const override { return options_.c_in; }
  void bind(std::vector<Param*> params) override;
  const ConvOptions& options() const noexcept { return options_; }
  ConvDesc desc(const ExecContext& ctx, const ActShape& in) const;

 protected:
  Tensor forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) override;
  Tensor backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                       bool accumulate) override;

 private:
  ConvOptions options_;
  Param* weight_ = nullptr;  // [c_out, c_in, k, k], depthwise [c, 1, 3, 3]
  Param* bias_ = nullptr;    // [c_out]
};

// A 3x3 convolution of the U-Net's blocks followed by ReLU: plain (one conv named "<name>.pw"), or separable
// (a depthwise 3x3 "<name>.dw" without bias, then a pointwise 1x1 "<name>.pw" with bias), as docs/MODEL.md
// says.
std::unique_ptr<Layer> make_conv3x3_relu(const std::string& name, std::int64_t c_in, std::int64_t c_out,
                                         bool separable);

}  // namespace unet
