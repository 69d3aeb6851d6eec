#include "unet/backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include "unet/backend/cuda/cuda_raii.h"

namespace unet::cuda {
namespace {

std::int64_t device_total_bytes(int device) {
  const DeviceGuard guard(device);
  std::size_t free = 0, total = 0;
  UNET_CUDA_CHECK(cudaMemGetInfo(&free, &total), device);
  return static_cast<std::int64_t>(total);
}

}  // namespace

CudaAllocator::CudaAllocator(int device)
    : Allocator("cuda:" + std::to_string(device), device_total_bytes(device)), device_index_(device) {}

CudaAllocator::~CudaAllocator() {
  release_all_cached();
}

void* CudaAllocator::device_malloc(std::size_t bytes) noexcept {
  const QuietDeviceGuard guard(device_index_);
  if (!guard.ok()) return nullptr;
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // an out-of-memory is not sticky; clear it so that no later check reports it
    return nullptr;
  }
  return ptr;
}

void CudaAllocator::device_free(void* ptr, std::size_t) noexcept {
  const QuietDeviceGuard guard(device_index_);
  UNET_CUDA_LOG(cudaFree(ptr));
}

}  // namespace unet::cuda
