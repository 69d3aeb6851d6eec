#include "unet/model/unet.h"

#include <cmath>

#include "unet/core/rng.h"
#include "unet/layers/conv.h"
#include "unet/layers/max_pool.h"
#include "unet/layers/up_conv.h"

namespace unet {

void validate(const UNetSpec& s) {
  auto range = [](const char* key, int v, int lo, int hi) {
    if (v < lo || v > hi)
      throw ConfigError(
          key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(v));
  };
  range("model.in_channels", s.in_channels, 1, 64);
  range("model.classes", s.classes, 1, 255);
  range("model.width", s.width, 1, 1024);
  range("model.depth", s.depth, 1, 6);
}

struct UNet::Activations {
  std::vector<std::unique_ptr<LayerState>> enc1, enc2, pool, up, dec1, dec2;
  std::unique_ptr<LayerState> mid1, mid2, head;
  // With checkpointing, only block boundaries: the input of each encoder block and of the middle one, the
  // skips, and the output of the middle block and of each decoder block (the next block's input).
  bool checkpointed = false;
  std::vector<Tensor> enc_in, skips, dec_in;  // dec_in[i]: decoder block i's first input
  Tensor mid_in;
};

UNet::Pass::Pass() = default;
UNet::Pass::Pass(Pass&&) noexcept = default;
UNet::Pass& UNet::Pass::operator=(Pass&&) noexcept = default;
UNet::Pass::~Pass() = default;

UNet::UNet(const UNetSpec& spec, Allocator& allocator) : spec_(spec) {
  validate(spec);
  const int depth = spec.depth;
  std::int64_t c_prev = spec.in_channels;
  for (int l = 0; l < depth; ++l) {
    const std::string prefix = "enc." + std::to_string(l);
    const std::int64_t c = spec.channels(l);
    enc_.push_back({make_conv3x3_relu(prefix + ".c1", c_prev, c, spec.separable),
                    make_conv3x3_relu(prefix + ".c2", c, c, spec.separable)});
    pools_.push_back(std::make_unique<MaxPool2x2>(prefix + ".pool", c));
    c_prev = c;
  }
  const std::int64_t c_mid = spec.channels(depth);
  mid_ = {make_conv3x3_relu("mid.c1", c_prev, c_mid, spec.separable),
          make_conv3x3_relu("mid.c2", c_mid, c_mid, spec.separable)};
  c_prev = c_mid;
  for (int i = 0; i < depth; ++i) {
    const std::int64_t c = spec.channels(depth - 1 - i);
    ups_.push_back(std::make_unique<UpConv2x2>("up." + std::to_string(i), c_prev, c));
    const std::string prefix = "dec." + std::to_string(i);
    dec_.push_back({make_conv3x3_relu(prefix + ".c1", 2 * c, c, spec.separable),
                    make_conv3x3_relu(prefix + ".c2", c, c, spec.separable)});
    c_prev = c;
  }
  head_ = std::make_unique<Conv2d>(
      "head", ConvOptions{.c_in = c_prev, .c_out = spec.classes, .kernel = 1, .bias = true, .relu = false});

  // Module order, which is also the slab order.
  std::vector<Layer*> order;
  for (int l = 0; l < depth; ++l) order.insert(order.end(), {enc_[l].c1.get(), enc_[l].c2.get()});
  order.insert(order.end(), {mid_.c1.get(), mid_.c2.get()});
  for (int i = 0; i < depth; ++i)
    order.insert(order.end(), {ups_[i].get(), dec_[i].c1.get(), dec_[i].c2.get()});
  order.push_back(head_.get());

  for (Layer* layer : order) {
    const std::int64_t begin = slab_elements_;
    for (const ParamSpec& ps : layer->param_specs()) {
      offsets_.push_back(slab_elements_);
      params_.push_back({ps, {}, {}});
      parameter_count_ += ps.shape.numel();
      slab_elements_ += (ps.shape.numel() + 15) / 16 * 16;  // 64-byte aligned views
    }
    if (slab_elements_ > begin) layer_slabs_.push_back({layer, begin, slab_elements_});
  }
  param_slab_ = Tensor::empty(allocator, Shape{slab_elements_}, DType::f32, MemoryCategory::parameters);
  grad_slab_ = Tensor::empty(allocator, Shape{slab_elements_}, DType::f32, MemoryCategory::gradients);
  std::size_t index = 0;
  for (Layer* layer : order) {
    std::vector<Param*> bound;
    for (std::size_t k = 0; k < layer->param_specs().size(); ++k, ++index) {
      Param& p = params_[index];
      const auto offset = static_cast<std::size_t>(offsets_[index]) * sizeof(float);
      p.value = Tensor::view(param_slab_.storage(), offset, p.spec.shape, DType::f32);
      p.grad = Tensor::view(grad_slab_.storage(), offset, p.spec.shape, DType::f32);
      bound.push_back(&p);
    }
    layer->bind(std::move(bound));
  }
}

UNet::~UNet() = default;

std::vector<float> UNet::initial_slab(const UNetSpec& spec, std::uint64_t seed) {
  // Built from a model description on a counting allocator: no device memory is touched.
  CountingAllocator shapes_only("init", 0);
  const UNet layout(spec, shapes_only);
  std::vector<float> slab(static_cast<std::size_t>(layout.slab_elements_), 0.0f);
  for (std::size_t i = 0; i < layout.params_.size(); ++i) {
    const ParamSpec& ps = layout.params_[i].spec;
    if (ps.is_bias) continue;
    Rng rng(seed, 1000 + i);  // one stream per parameter: independent of the slab layout
    const double stddev = std::sqrt(2.0 / static_cast<double>(ps.fan_in));
    float* dst = slab.data() + layout.offsets_[i];
    for (std::int64_t k = 0; k < ps.shape.numel(); ++k) dst[k] = static_cast<float>(stddev * rng.normal());
  }
  return slab;
}

void UNet::initialize(ExecContext& ctx, std::uint64_t seed) {
  set_parameters(ctx, initial_slab(spec_, seed));
}

void UNet::set_parameters(ExecContext& ctx, const std::vector<float>& slab) {
  UNET_CHECK(static_cast<std::int64_t>(slab.size()) == slab_elements_, usage,
             "set_parameters: wrong slab size");
  ctx.backend.copy_from_host(ctx.stream, slab.data(), param_slab_);
  // Backward never writes the gaps between gradients: they must not hold whatever the memory held before
  // (slab-wide sums and non-finite checks read them).
  ctx.backend.fill(ctx.stream, grad_slab_, 0.0);
  ctx.stream.synchronize();
}

std::vector<float> UNet::get_parameters(ExecContext& ctx) {
  std::vector<float> slab(static_cast<std::size_t>(slab_elements_));
  ctx.backend.copy_to_host(ctx.stream, param_slab_, slab.data());
  ctx.stream.synchronize();
  return slab;
}

namespace {

Tensor concat(ExecContext& ctx, const Tensor& up, const Tensor& skip) {
  const ActShape u = up.act(), s = skip.act();
  Tensor out = ctx.activation({u.n, u.c + s.c, u.h, u.w});
  ctx.backend.concat_channels(ctx.stream, up, skip, out);
  return out;
}

}  // namespace

Tensor UNet::input(ExecContext& ctx, const Tensor& pixels, const ActShape& shape) {
  Tensor x = ctx.activation(shape);
  // Normalised f32 pixels go in as they are; u8 pixels (0..255) are scaled to 0..1.
  const float scale = pixels.dtype() == DType::u8 ? 1.0f / 255.0f : 1.0f;
  ctx.backend.input_from_pixels(ctx.stream, pixels, x, scale);
  if (ctx.after_layer) ctx.after_layer("input");
  return x;
}

Tensor UNet::conv_block(ExecContext& ctx, Level& block, Tensor x, State* s1, State* s2) {
  Tensor h = block.c1->forward(ctx, x, s1);
  x = Tensor();
  return block.c2->forward(ctx, h, s2);
}

Tensor UNet::up_block(ExecContext& ctx, int i, const Tensor& x, const Tensor& skip, State* up, State* s1,
                      State* s2) {
  Tensor cat;
  {
    const Tensor u = ups_[i]->forward(ctx, x, up);
    cat = concat(ctx, u, skip);
  }
  if (ctx.after_layer) ctx.after_layer("dec." + std::to_string(i) + ".cat");
  return conv_block(ctx, dec_[i], std::move(cat), s1, s2);
}

Tensor UNet::conv_block_backward(ExecContext& ctx, Level& block, State& s1, State& s2, Tensor dy,
                                 bool need_dx, bool accumulate) {
  Tensor dh = block.c2->backward(ctx, *s2, std::move(dy), true, accumulate);
  s2.reset();
  Tensor dx = block.c1->backward(ctx, *s1, std::move(dh), need_dx, accumulate);
  s1.reset();
  return dx;
}

Tensor UNet::up_block_backward(ExecContext& ctx, int i, State& up, State& s1, State& s2, Tensor dy,
                               Tensor& dskip, bool accumulate) {
  Tensor dup;
  {
    const Tensor dcat = conv_block_backward(ctx, dec_[i], s1, s2, std::move(dy), true, accumulate);
    const ActShape cat = dcat.act();
    const std::int64_t c_skip = spec_.channels(spec_.depth - 1 - i);
    dup = ctx.activation({cat.n, cat.c - c_skip, cat.h, cat.w});
    dskip = ctx.activation({cat.n, c_skip, cat.h, cat.w});
    ctx.backend.split_channels(ctx.stream, dcat, dup, dskip, false);
  }
  Tensor dx = ups_[i]->backward(ctx, *up, std::move(dup), true, accumulate);
  up.reset();
  return dx;
}

UNet::Pass UNet::forward(ExecContext& ctx, const Tensor& pixels, bool training) {
  UNET_CHECK((pixels.dtype() == DType::u8 || pixels.dtype() == DType::f32) && pixels.shape().rank == 4 &&
                 pixels.shape()[3] == spec_.in_channels,
             usage,
             "UNet::forward: pixels must be u8 or f32 [n, h, w, " + std::to_string(spec_.in_channels) +
                 "], got " + pixels.shape().str());
  const ActShape in{pixels.shape()[0], spec_.in_channels, pixels.shape()[1], pixels.shape()[2]};
  UNET_CHECK(in.h % spec_.size_multiple() == 0 && in.w % spec_.size_multiple() == 0, usage,
             "UNet::forward: height and width must be multiples of 2^depth = " +
                 std::to_string(spec_.size_multiple()) + ", got " + std::to_string(in.h) + "x" +
                 std::to_string(in.w));
  const int depth = spec_.depth;
  const auto d = static_cast<std::size_t>(depth);
  Pass pass;
  // What to keep: every layer's state in a plain training pass; with checkpointing, the block boundaries plus
  // the pooling states (their argmax records are small, their outputs are the next blocks' inputs anyway) and
  // the head's.
  Activations* a = nullptr;
  bool all = false, boundaries = false;
  if (training) {
    pass.saved = std::make_unique<Activations>();
    a = pass.saved.get();
    a->checkpointed = boundaries = checkpointing_;
    all = !checkpointing_;
    for (auto* v : {&a->enc1, &a->enc2, &a->pool, &a->up, &a->dec1, &a->dec2}) v->resize(d);
    if (boundaries) {
      a->enc_in.resize(d);
      a->dec_in.resize(d);
    }
  }
  // The state slot of layer list `v` at `i` when everything is kept; else none.
  auto slot = [&](std::vector<State> Activations::*v, int i) {
    return all ? &((a->*v)[static_cast<std::size_t>(i)]) : nullptr;
  };

  Tensor x = input(ctx, pixels, in);
  std::vector<Tensor> skips(d);
  for (int l = 0; l < depth; ++l) {
    if (boundaries) a->enc_in[static_cast<std::size_t>(l)] = x;
    skips[l] =
        conv_block(ctx, enc_[l], std::move(x), slot(&Activations::enc1, l), slot(&Activations::enc2, l));
    x = pools_[l]->forward(ctx, skips[l], a ? &a->pool[l] : nullptr);
  }
  if (boundaries) {
    a->mid_in = x;
    a->skips = skips;
  }
  x = conv_block(ctx, mid_, std::move(x), all ? &a->mid1 : nullptr, all ? &a->mid2 : nullptr);
  for (int i = 0; i < depth; ++i) {
    const int l = depth - 1 - i;
    if (boundaries) a->dec_in[static_cast<std::size_t>(i)] = x;
    x = up_block(ctx, i, x, skips[l], slot(&Activations::up, i), slot(&Activations::dec1, i),
                 slot(&Activations::dec2, i));
    skips[l] = Tensor();
  }
  // With checkpointing the head is recomputed with the last decoder block: its input is not kept twice.
  pass.logits = head_->forward(ctx, x, a && !boundaries ? &a->head : nullptr);
  return pass;
}

void UNet::backward(ExecContext& ctx, Pass& pass, Tensor dlogits, bool accumulate) {
  UNET_CHECK(pass.saved != nullptr, usage, "UNet::backward needs a training forward pass");
  if (pass.saved->checkpointed) {
    backward_checkpointed(ctx, pass, std::move(dlogits), accumulate);
    return;
  }
  Activations& a = *pass.saved;
  const int depth = spec_.depth;
  pass.logits = Tensor();

  Tensor dx = head_->backward(ctx, *a.head, std::move(dlogits), true, accumulate);
  a.head.reset();
  std::vector<Tensor> dskips(static_cast<std::size_t>(depth));
  for (int i = depth - 1; i >= 0; --i)
    dx = up_block_backward(ctx, i, a.up[i], a.dec1[i], a.dec2[i], std::move(dx), dskips[depth - 1 - i],
                           accumulate);
  dx = conv_block_backward(ctx, mid_, a.mid1, a.mid2, std::move(dx), true, accumulate);
  for (int l = depth - 1; l >= 0; --l) {
    // The skip's gradient: from the concat (in dskips) plus what the pooling routes back.
    max_pool_backward_into(ctx, static_cast<MaxPool2x2&>(*pools_[l]), *a.pool[l], std::move(dx), dskips[l]);
    a.pool[l].reset();
    dx = conv_block_backward(ctx, enc_[l], a.enc1[l], a.enc2[l], std::move(dskips[l]), l > 0, accumulate);
  }
  pass.saved.reset();
}

void UNet::backward_checkpointed(ExecContext& ctx, Pass& pass, Tensor dlogits, bool accumulate) {
  Activations& a = *pass.saved;
  const int depth = spec_.depth;
  pass.logits = Tensor();

  // Decoder blocks, last first, each recomputed in two stages so that its largest tensor (the concatenation)
  // is not alive while the second convolution and the head run backward: first the second convolution (and
  // the head) with their states, from a first convolution recomputed without state; then the upsampling and
  // the first convolution with theirs.
  Tensor dx = std::move(dlogits);
  std::vector<Tensor> dskips(static_cast<std::size_t>(depth));
  for (int i = depth - 1; i >= 0; --i) {
    const auto l = static_cast<std::size_t>(depth - 1 - i);
    Tensor& block_in = a.dec_in[static_cast<std::size_t>(i)];
    Tensor dh;
    {
      Tensor h;
      {
        Tensor cat;
        {
          const Tensor u = ups_[i]->forward(ctx, block_in, nullptr);
          cat = concat(ctx, u, a.skips[l]);
        }
        h = dec_[i].c1->forward(ctx, cat, nullptr);
      }
      State s2;
      Tensor m = dec_[i].c2->forward(ctx, h, &s2);
      h = Tensor();
      if (i == depth - 1) {
        State head;
        (void)head_->forward(ctx, m, &head);
        m = Tensor();
        dx = head_->backward(ctx, *head, std::move(dx), true, accumulate);
      }
      m = Tensor();
      dh = dec_[i].c2->backward(ctx, *s2, std::move(dx), true, accumulate);
    }
    State up, s1;
    {
      Tensor cat;
      {
        const Tensor u = ups_[i]->forward(ctx, block_in, &up);
        cat = concat(ctx, u, a.skips[l]);
      }
      (void)dec_[i].c1->forward(ctx, cat, &s1);
    }
    block_in = Tensor();
    Tensor dup;
    {
      const Tensor dcat = dec_[i].c1->backward(ctx, *s1, std::move(dh), true, accumulate);
      s1.reset();
      const ActShape cat = dcat.act();
      const std::int64_t c_skip = spec_.channels(static_cast<int>(l));
      dup = ctx.activation({cat.n, cat.c - c_skip, cat.h, cat.w});
      dskips[l] = ctx.activation({cat.n, c_skip, cat.h, cat.w});
      ctx.backend.split_channels(ctx.stream, dcat, dup, dskips[l], false);
    }
    dx = ups_[i]->backward(ctx, *up, std::move(dup), true, accumulate);
  }
  {
    State s1, s2;
    (void)conv_block(ctx, mid_, a.mid_in, &s1, &s2);
    a.mid_in = Tensor();
    dx = conv_block_backward(ctx, mid_, s1, s2, std::move(dx), true, accumulate);
  }
  for (int l = depth - 1; l >= 0; --l) {
    max_pool_backward_into(ctx, static_cast<MaxPool2x2&>(*pools_[l]), *a.pool[l], std::move(dx), dskips[l]);
    a.pool[l].reset();
    a.skips[static_cast<std::size_t>(l)] = Tensor();
    State s1, s2;
    (void)conv_block(ctx, enc_[l], a.enc_in[static_cast<std::size_t>(l)], &s1, &s2);
    a.enc_in[static_cast<std::size_t>(l)] = Tensor();
    dx = conv_block_backward(ctx, enc_[l], s1, s2, std::move(dskips[l]), l > 0, accumulate);
  }
  pass.saved.reset();
}

std::vector<LayerSummary> UNet::summarize(const ActShape& input, DType dtype) const {
  std::vector<LayerSummary> rows;
  const auto es = static_cast<std::int64_t>(dtype_size(dtype));
  auto count = [](const Layer& layer) {
    std::int64_t n = 0;
    for (const auto& ps : layer.param_specs()) n += ps.shape.numel();
    return n;
  };
  const char* conv_kind = spec_.separable ? "separable3x3+relu" : "conv3x3+relu";
  auto add = [&](const Layer& layer, const char* kind, const ActShape& out) {
    rows.push_back({layer.name(), kind, out, count(layer), out.numel() * es});
  };
  rows.push_back({"input", "u8 -> scale 1/255", input, 0, input.numel() * es});
  ActShape x = input;
  std::vector<ActShape> skips;
  for (int l = 0; l < spec_.depth; ++l) {
    x = enc_[l].c1->output_shape(x);
    add(*enc_[l].c1, conv_kind, x);
    x = enc_[l].c2->output_shape(x);
    add(*enc_[l].c2, conv_kind, x);
    skips.push_back(x);
    x = pools_[l]->output_shape(x);
    add(*pools_[l], "maxpool2x2", x);
  }
  x = mid_.c1->output_shape(x);
  add(*mid_.c1, conv_kind, x);
  x = mid_.c2->output_shape(x);
  add(*mid_.c2, conv_kind, x);
  for (int i = 0; i < spec_.depth; ++i) {
    x = ups_[i]->output_shape(x);
    rows.push_back({ups_[i]->name(), "upconv2x2", x, count(*ups_[i]), 0});  // freed once concatenated
    const ActShape& skip = skips[static_cast<std::size_t>(spec_.depth - 1 - i)];
    x = {x.n, x.c + skip.c, x.h, x.w};
    rows.push_back({"dec." + std::to_string(i) + ".cat", "concat", x, 0, x.numel() * es});
    x = dec_[i].c1->output_shape(x);
    add(*dec_[i].c1, conv_kind, x);
    x = dec_[i].c2->output_shape(x);
    add(*dec_[i].c2, conv_kind, x);
  }
  x = head_->output_shape(x);
  add(*head_, "conv1x1", x);
  return rows;
}

}  // namespace unet
