// Device memory of one GPU behind the engine's Allocator: cudaMalloc/cudaFree under the base class's
// exact-size cache, accounting and cap.
//
// Not built yet (issue 10 item 2 left it out): the design's expandable arena (docs/CUDA_BACKEND.md §3: one
// virtual address reservation mapped with cuMemCreate/cuMemMap as it grows), which makes the planner's
// prediction of reserved bytes exact. Until then each cache miss is a cudaMalloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "unet/core/memory.h"

namespace unet::cuda {

class CudaAllocator final : public Allocator {
 public:
  // Asks the device its total memory (cudaMemGetInfo: this creates the device's context when none exists).
  explicit CudaAllocator(int device);
  ~CudaAllocator() override;

 protected:
  void* device_malloc(std::size_t bytes) noexcept override;
  void device_free(void* ptr, std::size_t bytes) noexcept override;

 private:
  int device_index_;
};

}  // namespace unet::cuda
