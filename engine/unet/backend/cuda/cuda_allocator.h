// Device memory of one GPU behind the engine's Allocator: the base class's exact-size cache, accounting and
// cap over an expandable arena (docs/CUDA_BACKEND.md §4.1). The arena reserves one virtual address range as
// large as the GPU and backs it page by page (cuMemCreate + cuMemMap, the granularity the driver reports,
// 2 MiB on current GPUs) as its top grows; the memory planner runs the same arena over a counting allocator,
// so planned reserved bytes are the mapped pages exactly. Where cuda.expandable_arena is false, or the driver
// cannot do what the arena does (no virtual memory management, or a sandbox that refuses the calls: the
// constructor tries them on one page first, probe_arena), each cache miss is a cudaMalloc, and the reason is
// logged.
//
// The driver API comes through cudaGetDriverEntryPointByVersion, so the module links no libcuda. Only
// CUDA_ERROR_OUT_OF_MEMORY counts as out of memory; any other failure to grow the arena is an
// Error(backend) naming the call (virtual_memory.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "unet/backend/cuda/virtual_memory.h"
#include "unet/core/memory.h"

namespace unet::cuda {

class CudaAllocator final : public Allocator {
 public:
  // Asks the device its total memory (cudaMemGetInfo: this creates the device's context when none exists).
  // `expandable`: use the arena where the driver can (else cudaMalloc, saying why on stderr).
  CudaAllocator(int device, bool expandable);
  ~CudaAllocator() override;

  // The arena's page, or 0 when cache misses are cudaMalloc calls.
  std::size_t page() const noexcept { return page_; }

 protected:
  void* device_malloc(std::size_t bytes) noexcept override;
  void device_free(void* ptr, std::size_t bytes) noexcept override;
  void* device_reserve_address_space(std::size_t bytes) noexcept override;
  void device_release_address_space(void* base, std::size_t bytes) noexcept override;
  // false: the device is out of memory; Error(backend) for any other failure (map_pages).
  bool device_map(char* base, std::size_t offset, std::size_t bytes) override;
  void device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept override;

 private:
  class Driver;  // VirtualMemoryDriver over the driver's entry points

  int device_index_;
  std::unique_ptr<VirtualMemoryDriver> driver_;  // null: no arena
  std::size_t page_ = 0;
  std::vector<std::uint64_t> pages_;  // the physical allocation behind each mapped page, by page index
};

}  // namespace unet::cuda
