// The canonical U-Net of docs/MODEL.md on one device: its layers, its parameters and their gradients (one
// slab each), forward and backward passes. One instance per replica; the trainer keeps them in step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "unet/layers/layer.h"

namespace unet {

struct UNetSpec {
  int in_channels = 3;
  int classes = 1;
  int width = 16;
  int depth = 4;
  bool separable = false;

  std::int64_t channels(int level) const { return static_cast<std::int64_t>(width) << level; }
  // H and W must be divisible by this.
  std::int64_t size_multiple() const { return std::int64_t{1} << depth; }
  bool operator==(const UNetSpec&) const = default;
};

// Checks the spec's ranges; throws ConfigError naming the model.* key.
void validate(const UNetSpec& spec);

// One row of `unet-train summary`.
struct LayerSummary {
  std::string name;
  std::string kind;  // "conv3x3+relu", "separable3x3+relu", "maxpool2x2", "upconv2x2", "concat", ...
  ActShape output;
  std::int64_t parameters = 0;
  std::int64_t saved_bytes = 0;  // activation bytes this layer's output keeps alive for the backward pass
};

class UNet {
 public:
  // Allocates the parameter and gradient slabs from `allocator`; values are undefined until initialize() or
  // set_parameters().
  UNet(const UNetSpec& spec, Allocator& allocator);
  ~UNet();
  UNet(const UNet&) = delete;
  UNet& operator=(const UNet&) = delete;

  const UNetSpec& spec() const noexcept { return spec_; }
  // In module order: enc.0 ... enc.{depth-1}, mid, up.0, dec.0, ..., head.
  const std::vector<Param>& params() const noexcept { return params_; }
  std::int64_t parameter_count() const noexcept { return parameter_count_; }
  // The slabs: f32 [slab_elements]; parameters sit at 64-byte-aligned offsets, gaps are zero.
  Tensor& parameter_slab() noexcept { return param_slab_; }
  Tensor& gradient_slab() noexcept { return grad_slab_; }
  std::int64_t slab_elements() const noexcept { return slab_elements_; }
  // Element offset of each parameter in the slabs, in params() order.
  const std::vector<std::int64_t>& offsets() const noexcept { return offsets_; }
  // The slab range of each layer that has parameters, in slab order (ranges adjoin and cover the slab).
  // Backward finishes them from the last to the first, each when ExecContext::after_backward names its layer.
  struct LayerSlab {
    const Layer* layer = nullptr;
    std::int64_t begin = 0, end = 0;
  };
  const std::vector<LayerSlab>& layer_slabs() const noexcept { return layer_slabs_; }

  // He-normal weights (fan-in, ReLU gain), zero biases, from one seed; the same on every device.
  static std::vector<float> initial_slab(const UNetSpec& spec, std::uint64_t seed);
  void initialize(ExecContext& ctx, std::uint64_t seed);
  // Host copies of the whole slab. Setting the parameters also zeroes the gradient slab, gaps included.
  void set_parameters(ExecContext& ctx, const std::vector<float>& slab);
  std::vector<float> get_parameters(ExecContext& ctx);

  struct Activations;  // what a training forward keeps for backward
  struct Pass {
    Pass();
    Pass(Pass&&) noexcept;
    Pass& operator=(Pass&&) noexcept;
    ~Pass();
    Tensor logits;  // [n, classes, h, w]
    std::unique_ptr<Activations> saved;
  };

  // Activation checkpointing: a training forward keeps only block boundaries (each block's inputs and the
  // skips), and backward recomputes each block's inside before going through it. Same gradients, less memory.
  void set_checkpointing(bool on) noexcept { checkpointing_ = on; }
  bool checkpointing() const noexcept { return checkpointing_; }

  // pixels: u8 [n, h, w, in_channels] on this device. training: keep what backward needs.
  Pass forward(ExecContext& ctx, const Tensor& pixels, bool training);
  // Consumes the pass and dlogits; adds to the gradients when `accumulate`, else overwrites them.
  void backward(ExecContext& ctx, Pass& pass, Tensor dlogits, bool accumulate);

  std::vector<LayerSummary> summarize(const ActShape& input, DType dtype) const;

 private:
  struct Level {
    std::unique_ptr<Layer> c1, c2;
  };
  using State = std::unique_ptr<LayerState>;

  // The blocks, with states kept when the pointers are given.
  Tensor input(ExecContext& ctx, const Tensor& pixels, const ActShape& shape);
  // Takes x by value: it is released after the first convolution unless a state keeps it.
  Tensor conv_block(ExecContext& ctx, Level& block, Tensor x, State* s1, State* s2);
  Tensor up_block(ExecContext& ctx, int i, const Tensor& x, const Tensor& skip, State* up, State* s1,
                  State* s2);
  // Backward through a block whose states are given; returns the input's gradient.
  Tensor conv_block_backward(ExecContext& ctx, Level& block, State& s1, State& s2, Tensor dy, bool need_dx,
                             bool accumulate);
  // Returns the gradient of the block's first input; the skip's part goes to dskip (overwritten).
  Tensor up_block_backward(ExecContext& ctx, int i, State& up, State& s1, State& s2, Tensor dy, Tensor& dskip,
                           bool accumulate);
  void backward_checkpointed(ExecContext& ctx, Pass& pass, Tensor dlogits, bool accumulate);

  UNetSpec spec_;
  std::vector<Level> enc_;
  std::vector<std::unique_ptr<Layer>> pools_;
  Level mid_;
  std::vector<std::unique_ptr<Layer>> ups_;
  std::vector<Level> dec_;
  std::unique_ptr<Layer> head_;

  std::vector<Param> params_;
  std::vector<std::int64_t> offsets_;
  std::vector<LayerSlab> layer_slabs_;
  std::int64_t parameter_count_ = 0;
  std::int64_t slab_elements_ = 0;
  Tensor param_slab_, grad_slab_;
  bool checkpointing_ = false;
};

}  // namespace unet
