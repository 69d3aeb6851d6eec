// Turning CUDA runtime and cuDNN status codes into the engine's errors. Every call that can fail goes through
// UNET_CUDA_CHECK / UNET_CUDNN_CHECK, which throw unet::Error(backend) naming the call, the device and what
// to do; an allocation failure becomes OutOfMemoryError. Destructors use the *_LOG variants (log_noexcept).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <source_location>

namespace unet::cuda {

// `device` is the CUDA device index (named "cuda:<device>" in the message).
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, int device,
                                   std::source_location where = std::source_location::current());
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, int device,
                                    std::source_location where = std::source_location::current());
void log_cuda_error(cudaError_t status, const char* call) noexcept;
// Whether `status` leaves the CUDA context unusable (every later call fails the same way).
bool is_sticky_error(cudaError_t status) noexcept;
void log_cudnn_error(cudnnStatus_t status, const char* call) noexcept;

}  // namespace unet::cuda

#define UNET_CUDA_CHECK(call, device)                                     \
  do {                                                                    \
    const cudaError_t unet_cuda_status_ = (call);                         \
    if (unet_cuda_status_ != cudaSuccess)                                 \
      ::unet::cuda::throw_cuda_error(unet_cuda_status_, #call, (device)); \
  } while (false)

#define UNET_CUDNN_CHECK(call, device)                                      \
  do {                                                                      \
    const cudnnStatus_t unet_cudnn_status_ = (call);                        \
    if (unet_cudnn_status_ != CUDNN_STATUS_SUCCESS)                         \
      ::unet::cuda::throw_cudnn_error(unet_cudnn_status_, #call, (device)); \
  } while (false)

#define UNET_CUDA_LOG(call)                                                                       \
  do {                                                                                            \
    const cudaError_t unet_cuda_status_ = (call);                                                 \
    if (unet_cuda_status_ != cudaSuccess) ::unet::cuda::log_cuda_error(unet_cuda_status_, #call); \
  } while (false)

#define UNET_CUDNN_LOG(call)                                    \
  do {                                                          \
    const cudnnStatus_t unet_cudnn_status_ = (call);            \
    if (unet_cudnn_status_ != CUDNN_STATUS_SUCCESS)             \
      ::unet::cuda::log_cudnn_error(unet_cudnn_status_, #call); \
  } while (false)
