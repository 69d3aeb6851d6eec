// Max pooling 2x2, stride 2.
#pragma once

#include "unet/layers/layer.h"

namespace unet {

class MaxPool2x2 final : public Layer {
 public:
  MaxPool2x2(std::string name, std::int64_t channels) : Layer(std::move(name)), channels_(channels) {}

  ActShape output_shape(const ActShape& in) const override { return {in.n, in.c, in.h / 2, in.w / 2}; }
  std::int64_t input_channels() const override { return channels_; }
  void bind(std::vector<Param*>) override {}
  PoolDesc desc(const ExecContext& ctx, const ActShape& in) const {
    return {in.n, in.c, in.h, in.w, ctx.dtype, ctx.layout};
  }

 protected:
  Tensor forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) override;
  Tensor backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                       bool accumulate) override;

 private:
  std::int64_t channels_;
};

// The backward pass of a pooling layer whose input gradient already holds another contribution (a U-Net
// skip): adds the routed gradient to dx.
Tensor max_pool_backward_into(ExecContext& ctx, MaxPool2x2& pool, LayerState& state, Tensor dy, Tensor& dx);

}  // namespace unet
