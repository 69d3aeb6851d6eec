// A typed view of device memory with shared ownership of its buffer: activations are shared by the layer that
// made them and the layers that read them, and their memory returns to the allocator when the last user lets
// go. Parameter tensors are views carved from one slab per device.
#pragma once

#include <cstddef>
#include <memory>

#include "unet/core/dtype.h"
#include "unet/core/error.h"
#include "unet/core/memory.h"
#include "unet/core/shape.h"

namespace unet {

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Allocator& allocator, const Shape& shape, DType dtype, MemoryCategory category,
                      Layout layout = Layout::nhwc) {
    const auto bytes = static_cast<std::size_t>(
        checked_mul(shape.numel(), static_cast<std::int64_t>(dtype_size(dtype)), "a tensor's bytes"));
    auto storage = std::make_shared<Buffer>(allocator.allocate(bytes, category));
    return Tensor(std::move(storage), 0, shape, dtype, layout);
  }
  static Tensor empty(Allocator& allocator, const ActShape& shape, DType dtype, MemoryCategory category,
                      Layout layout) {
    return empty(allocator, shape.shape(), dtype, category, layout);
  }

  // A view of `shape` elements starting `byte_offset` bytes into `storage`.
  static Tensor view(std::shared_ptr<Buffer> storage, std::size_t byte_offset, const Shape& shape,
                     DType dtype, Layout layout = Layout::nhwc) {
    const auto bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
    UNET_CHECK(storage && byte_offset + bytes <= storage->bytes(), usage,
               "tensor view out of its buffer's range");
    return Tensor(std::move(storage), byte_offset, shape, dtype, layout);
  }

  // The same memory seen with another shape of as many elements.
  Tensor reshaped(const Shape& shape) const {
    UNET_CHECK(shape.numel() == shape_.numel(), usage,
               "cannot reshape " + shape_.str() + " to " + shape.str());
    return Tensor(storage_, offset_, shape, dtype_, layout_);
  }

  // The same memory, without a share in its ownership: what work queued on an asynchronous stream holds, so
  // that, as on a GPU, the memory goes back to the allocator when the caller lets go of it, queued work or
  // not (the allocator hands it out again in stream order; see TaskStream).
  Tensor unowned() const {
    if (!storage_) return {};
    return Tensor(std::make_shared<Buffer>(Buffer::borrowed(storage_->data(), storage_->bytes())), offset_,
                  shape_, dtype_, layout_);
  }

  bool defined() const noexcept { return storage_ != nullptr; }
  void* data() const noexcept {
    return storage_ && storage_->data() ? static_cast<char*>(storage_->data()) + offset_ : nullptr;
  }
  template <class T>
  T* data_as() const noexcept {
    return static_cast<T*>(data());
  }
  const Shape& shape() const noexcept { return shape_; }
  DType dtype() const noexcept { return dtype_; }
  Layout layout() const noexcept { return layout_; }
  // Not noexcept: Shape::numel checks its product (a tensor's own shape was checked when it was made).
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Buffer>& storage() const noexcept { return storage_; }
  std::size_t byte_offset() const noexcept { return offset_; }

  // The logical [N, C, H, W] of a 4-D activation.
  ActShape act() const {
    UNET_CHECK(shape_.rank == 4, usage, "expected a 4-D activation, got " + shape_.str());
    return {shape_[0], shape_[1], shape_[2], shape_[3]};
  }

 private:
  Tensor(std::shared_ptr<Buffer> storage, std::size_t offset, const Shape& shape, DType dtype, Layout layout)
      : storage_(std::move(storage)), offset_(offset), shape_(shape), dtype_(dtype), layout_(layout) {}

  std::shared_ptr<Buffer> storage_;
  std::size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::nhwc;
};

}  // namespace unet
