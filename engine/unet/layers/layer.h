// The layer interface. forward() is public and non-virtual: it checks the input, then calls forward_impl(),
// and in training returns (through `state`) what backward() will consume. backward() consumes the state and
// dy (it may overwrite dy's memory) and returns dx when asked for it.
//
// Parameters are declared by each layer (name, canonical shape, fan-in) and bound later to views of the
// model's parameter and gradient slabs, so that a whole model's parameters are one buffer: one all-reduce,
// one optimizer call, one checkpoint write.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "unet/layers/exec_context.h"

namespace unet {

struct ParamSpec {
  std::string name;  // full name, as in checkpoints: "enc.0.c1.pw.weight"
  Shape shape;       // canonical layout (docs/MODEL.md)
  std::int64_t fan_in = 1;
  bool is_bias = false;
};

struct Param {
  ParamSpec spec;
  Tensor value;  // f32 view into the parameter slab
  Tensor grad;   // f32 view into the gradient slab
};

// What a layer's forward pass keeps for its backward pass.
struct LayerState {
  virtual ~LayerState() = default;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const noexcept { return name_; }
  virtual ActShape output_shape(const ActShape& input) const = 0;
  virtual std::int64_t input_channels() const = 0;

  // Declared parameters, in a fixed order. bind() gives each its value and gradient views, in that order.
  const std::vector<ParamSpec>& param_specs() const noexcept { return specs_; }
  virtual void bind(std::vector<Param*> params) = 0;

  // `state` null: inference, nothing kept.
  Tensor forward(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state);
  // Adds to the parameter gradients when `accumulate`, else overwrites them. Returns dx when need_dx.
  Tensor backward(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx, bool accumulate);

 protected:
  void declare(ParamSpec spec) { specs_.push_back(std::move(spec)); }
  virtual Tensor forward_impl(ExecContext& ctx, const Tensor& x, std::unique_ptr<LayerState>* state) = 0;
  virtual Tensor backward_impl(ExecContext& ctx, LayerState& state, Tensor dy, bool need_dx,
                               bool accumulate) = 0;

 private:
  std::string name_;
  std::vector<ParamSpec> specs_;
};

}  // namespace unet
