#include "unet/backend/cuda/cuda_check.h"

#include <array>
#include <string>

#include "unet/core/error.h"
#include "unet/core/memory.h"

namespace unet::cuda {
namespace {

std::string device_name(int device) {
  return "cuda:" + std::to_string(device);
}

}  // namespace

// Errors after which the CUDA context is unusable: every later call in this process fails the same way.
bool is_sticky_error(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

namespace {

std::string hint_for(cudaError_t status) {
  if (is_sticky_error(status))
    return "the GPU's context is now unusable: restart the program; to report it, rerun with "
           "CUDA_LAUNCH_BLOCKING=1 so that the failing operation is the one named";
  if (status == cudaErrorInsufficientDriver)
    return "update the NVIDIA driver to R580 or newer (this build needs CUDA 13)";
  if (status == cudaErrorNoDevice || status == cudaErrorInvalidDevice)
    return "check CUDA_VISIBLE_DEVICES and the \"devices\" setting";
  if (status == cudaErrorDevicesUnavailable)
    return "the GPU is in exclusive mode and another process holds it";
  return "";
}

}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, int device, std::source_location where) {
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so that later calls do not report it again
    throw OutOfMemoryError(device_name(device), 0, MemoryCategory::other, MemoryStats{});
  }
  throw Error(
      ErrorKind::backend,
      std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")",
      device_name(device), hint_for(status), where);
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, int device, std::source_location where) {
  std::array<char, 512> detail{};
  cudnnGetLastErrorString(detail.data(), detail.size());
  // CUDNN_STATUS_ALLOC_FAILED is the deprecated name of the host case; cuDNN 9 says which memory ran out.
  if (status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    (void)cudaGetLastError();
    throw OutOfMemoryError(device_name(device), 0, MemoryCategory::workspace, MemoryStats{});
  }
  std::string message = std::string(call) + " failed: " + cudnnGetErrorString(status);
  if (detail[0] != '\0') message += std::string(" (") + detail.data() + ")";
  std::string hint;
  if (status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM)
    hint = "this shape, data type or layout is not supported by cuDNN here: try another precision or layout";
  else if (status == CUDNN_STATUS_EXECUTION_FAILED)
    hint =
        "the GPU's context may be unusable: restart the program; to report it, rerun with "
        "CUDA_LAUNCH_BLOCKING=1";
  else if (status == CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH ||
           status == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    hint = "cuDNN is incomplete or mixed: install one cuDNN 9 for CUDA 13 (and cuBLASLt, NVRTC)";
  throw Error(ErrorKind::backend, message, device_name(device), hint, where);
}

void log_cuda_error(cudaError_t status, const char* call) noexcept {
  log_noexcept(call, std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
}

void log_cudnn_error(cudnnStatus_t status, const char* call) noexcept {
  log_noexcept(call, cudnnGetErrorString(status));
}

}  // namespace unet::cuda
