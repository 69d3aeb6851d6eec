#include "unet/layers/max_pool.h"

namespace unet {
namespace {

struct PoolState final : LayerState {
  Tensor x, y;
  Buffer saved;  // the backend's record of each window's argmax
};

void route(ExecContext& ctx, const PoolDesc& d, PoolState& s, const Tensor& dy, Tensor& dx, bool accumulate) {
  const Buffer ws = ctx.workspace(ctx.backend.maxpool_workspace_bytes(d, ConvPass::backward_data));
  ctx.backend.maxpool_backward(ctx.stream, d, dy, s.x, s.y, s.saved.data(), dx, accumulate, as_workspace(ws));
  s = PoolState();
}

}  // namespace

Tensor MaxPool2x2::forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) {
  const ActShape in = x.act();
  UNET_CHECK(in.h % 2 == 0 && in.w % 2 == 0, usage,
             name() + ": height and width must be even, got " + in.str());
  const PoolDesc d = desc(ctx, in);
  Tensor y = ctx.activation(d.output());
  // The argmax record is needed by backward only, but the primitive writes it in training and inference
  // alike.
  Buffer saved = ctx.allocator().allocate(ctx.backend.maxpool_saved_bytes(d), MemoryCategory::activations);
  {
    const Buffer ws = ctx.workspace(ctx.backend.maxpool_workspace_bytes(d, ConvPass::forward));
    ctx.backend.maxpool_forward(ctx.stream, d, x, y, saved.data(), as_workspace(ws));
  }
  if (state) {
    auto s = std::make_unique<PoolState>();
    s->x = x;
    s->y = y;
    s->saved = std::move(saved);
    *state = std::move(s);
  }
  return y;
}

Tensor MaxPool2x2::backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx, bool) {
  auto& s = static_cast<PoolState&>(state);
  if (!need_dx) {
    s = PoolState();
    return {};
  }
  const PoolDesc d = desc(ctx, s.x.act());
  Tensor dx = ctx.activation(d.input());
  route(ctx, d, s, dy, dx, false);
  return dx;
}

// dy is taken by value on purpose: the caller moves its gradient in, and it is freed when routing is done.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
Tensor max_pool_backward_into(ExecContext& ctx, MaxPool2x2& pool, LayerState& state, Tensor dy, Tensor& dx) {
  auto& s = static_cast<PoolState&>(state);
  route(ctx, pool.desc(ctx, s.x.act()), s, dy, dx, true);
  return dx;
}

}  // namespace unet
