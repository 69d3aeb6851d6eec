// Move-only owners of CUDA and cuDNN objects, and a guard that makes a device current for a scope. Creation
// throws through UNET_CUDA_CHECK / UNET_CUDNN_CHECK; destruction logs what fails (destructors never throw).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <utility>

#include "unet/backend/cuda/cuda_check.h"

namespace unet::cuda {

// Whether `device`'s primary context is active in this process (cuDevicePrimaryCtxGetState, fetched once
// through cudaGetDriverEntryPointByVersion); false when the driver cannot say. Creates no context.
bool primary_context_active(int device) noexcept;

// The guards' one rule: the previous device is restored only when its primary context is already active.
// cudaGetDevice answers 0 on a thread that never chose a device, and cudaSetDevice(0) would create GPU 0's
// context (hundreds of MiB, pre-flight M3) just to "restore" a device that thread never used: every
// replica, communication and constructor thread of cuda:1..7 would hold one. When the context is active,
// restoring costs nothing, and a thread that had chosen that device (cudaSetDevice creates its context)
// gets it back. Otherwise the thread stays on the guard's device, which no one relied on (PyTorch's
// MaybeSetDevice follows the same idea). Every engine call makes its own device current with a guard.

// Makes `device` current and restores the previous device at the end of the scope (the rule above).
// Neither copied nor moved: it belongs to the scope that made it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    int current = -1;
    UNET_CUDA_CHECK(cudaGetDevice(&current), device);
    if (current == device) return;  // nothing to restore
    UNET_CUDA_CHECK(cudaSetDevice(device), device);
    if (primary_context_active(current)) previous_ = current;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) UNET_CUDA_LOG(cudaSetDevice(previous_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// DeviceGuard without exceptions, for the allocator's noexcept hooks: false when the device cannot be made
// current. The same rule for restoring.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    if (current != device) {
      if (cudaSetDevice(device) != cudaSuccess) return;
      if (primary_context_active(current)) previous_ = current;
    }
    ok_ = true;
  }
  ~QuietDeviceGuard() {
    if (previous_ >= 0) UNET_CUDA_LOG(cudaSetDevice(previous_));
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = false;
};

inline void log_status(cudaError_t status, const char* what) noexcept {
  if (status != cudaSuccess) log_cuda_error(status, what);
}
inline void log_status(cudnnStatus_t status, const char* what) noexcept {
  if (status != CUDNN_STATUS_SUCCESS) log_cudnn_error(status, what);
}

// Owns a handle that `destroy` releases; null means empty.
template <class Handle, auto destroy>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle handle) noexcept : handle_(handle) {}
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  Handle get() const noexcept { return handle_; }
  void reset() noexcept {
    if (handle_) log_status(destroy(std::exchange(handle_, Handle{})), "destroying a CUDA/cuDNN object");
  }

 private:
  Handle handle_{};
};

using StreamHandle = Owned<cudaStream_t, &cudaStreamDestroy>;
using EventHandle = Owned<cudaEvent_t, &cudaEventDestroy>;
using CudnnHandle = Owned<cudnnHandle_t, &cudnnDestroy>;
using TensorDescriptor = Owned<cudnnTensorDescriptor_t, &cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Owned<cudnnFilterDescriptor_t, &cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = Owned<cudnnConvolutionDescriptor_t, &cudnnDestroyConvolutionDescriptor>;
using PinnedHostBuffer = Owned<void*, &cudaFreeHost>;

// Each on the current device (make it current with a DeviceGuard first); `device` names it in errors.
inline StreamHandle make_stream(int device) {
  cudaStream_t stream = nullptr;
  UNET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), device);
  return StreamHandle(stream);
}
inline EventHandle make_event(int device) {
  cudaEvent_t event = nullptr;
  UNET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), device);
  return EventHandle(event);
}
// Page-locked host memory that every device's copies may use (portable); `device` names it in errors.
inline PinnedHostBuffer make_pinned_host(std::size_t bytes, int device) {
  void* ptr = nullptr;
  UNET_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable), device);
  return PinnedHostBuffer(ptr);
}
inline CudnnHandle make_cudnn(int device) {
  cudnnHandle_t handle = nullptr;
  UNET_CUDNN_CHECK(cudnnCreate(&handle), device);
  return CudnnHandle(handle);
}
inline TensorDescriptor make_tensor_descriptor(int device) {
  cudnnTensorDescriptor_t d = nullptr;
  UNET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d), device);
  return TensorDescriptor(d);
}
inline FilterDescriptor make_filter_descriptor(int device) {
  cudnnFilterDescriptor_t d = nullptr;
  UNET_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d), device);
  return FilterDescriptor(d);
}
inline ConvolutionDescriptor make_convolution_descriptor(int device) {
  cudnnConvolutionDescriptor_t d = nullptr;
  UNET_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d), device);
  return ConvolutionDescriptor(d);
}

}  // namespace unet::cuda
