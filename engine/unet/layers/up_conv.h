// Transposed convolution 2x2, stride 2, with bias: the U-Net's upsampling. Weights in PyTorch's
// ConvTranspose2d layout [in, out, 2, 2].
#pragma once

#include "unet/layers/layer.h"

namespace unet {

class UpConv2x2 final : public Layer {
 public:
  UpConv2x2(std::string name, std::int64_t c_in, std::int64_t c_out);

  ActShape output_shape(const ActShape& in) const override { return {in.n, c_out_, 2 * in.h, 2 * in.w}; }
  std::int64_t input_channels() const override { return c_in_; }
  void bind(std::vector<Param*> params) override;
  UpConvDesc desc(const ExecContext& ctx, const ActShape& in) const {
    return {in.n, c_in_, c_out_, in.h, in.w, ctx.dtype, ctx.layout};
  }

 protected:
  Tensor forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) override;
  Tensor backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                       bool accumulate) override;

 private:
  std::int64_t c_in_, c_out_;
  Param* weight_ = nullptr;  // [c_in, c_out, 2, 2]
  Param* bias_ = nullptr;    // [c_out]
};

}  // namespace unet
