// What every layer call needs, passed explicitly: the device's backend, the stream to run on, and the compute
// dtype and layout of activations. There is no global device state anywhere in the engine.
#pragma once

#include <functional>
#include <string>

#include "unet/backend/backend.h"

namespace unet {

class Layer;

struct ExecContext {
  Backend& backend;
  Stream& stream;
  DType dtype = DType::f32;
  Layout layout = Layout::nhwc;
  // Called with a layer's name after its forward pass (the memory planner's per-layer view); may be empty.
  std::function<void(const std::string&)> after_layer = {};
  // Called after a layer's backward pass has queued its parameter gradients on the stream (data-parallel
  // training starts summing them while backward goes on); may be empty.
  std::function<void(const Layer&)> after_backward = {};

  Allocator& allocator() const { return backend.allocator(); }
  Tensor activation(const ActShape& shape) const {
    return Tensor::empty(backend.allocator(), shape, dtype, MemoryCategory::activations, layout);
  }
  Buffer workspace(std::size_t bytes) const {
    return backend.allocator().allocate(bytes, MemoryCategory::workspace);
  }
};

inline Workspace as_workspace(const Buffer& b) {
  return {b.data(), b.bytes()};
}

}  // namespace unet
