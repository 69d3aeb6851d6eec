// Move-only owners of CUDA and cuDNN objects, and a guard that makes a device current for a scope. Creation
// throws through UNET_CUDA_CHECK / UNET_CUDNN_CHECK; destruction logs what fails (destructors never throw).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <utility>

#include "unet/backend/cuda/cuda_check.h"

namespace unet::cuda {

// Makes `device` current and restores the previous device at the end of the scope. Neither copied nor moved:
// it belongs to the scope that made it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    UNET_CUDA_CHECK(cudaGetDevice(&previous_), device);
    if (previous_ == device)
      previous_ = -1;  // nothing to restore
    else
      UNET_CUDA_CHECK(cudaSetDevice(device), device);
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
// current.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    if (current != device && cudaSetDevice(device) != cudaSuccess) return;
    previous_ = current == device ? -1 : current;
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
