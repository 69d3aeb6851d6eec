#include "unet/backend/cuda/cuda_allocator.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "unet/backend/cuda/cuda_raii.h"

namespace unet::cuda {

struct CudaAllocator::Driver {
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  CUmemAllocationProp prop{};
  CUmemAccessDesc access{};
};

namespace {

std::int64_t device_total_bytes(int device) {
  const DeviceGuard guard(device);
  std::size_t free = 0, total = 0;
  UNET_CUDA_CHECK(cudaMemGetInfo(&free, &total), device);
  return static_cast<std::int64_t>(total);
}

// The ABI of each entry point is the one CUDA 12.0 defined (the _v2000/_v10020 typedefs above).
template <typename Function>
bool entry_point(const char* name, Function& function) noexcept {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !address) {
    (void)cudaGetLastError();
    return false;
  }
  function = reinterpret_cast<Function>(address);
  return true;
}

void log_driver(CUresult status, const char* call) noexcept {
  if (status != CUDA_SUCCESS)
    log_noexcept("cuda",
                 std::string(call) + " failed with CUresult " + std::to_string(static_cast<int>(status)));
}

}  // namespace

CudaAllocator::CudaAllocator(int device, bool expandable)
    : Allocator("cuda:" + std::to_string(device), device_total_bytes(device)), device_index_(device) {
  if (!expandable) return;
  auto driver = std::make_unique<Driver>();
  Driver& d = *driver;
  const bool found =
      entry_point("cuDeviceGet", d.device_get) && entry_point("cuDeviceGetAttribute", d.device_attribute) &&
      entry_point("cuMemGetAllocationGranularity", d.granularity) &&
      entry_point("cuMemAddressReserve", d.address_reserve) &&
      entry_point("cuMemAddressFree", d.address_free) && entry_point("cuMemCreate", d.create) &&
      entry_point("cuMemRelease", d.release) && entry_point("cuMemMap", d.map) &&
      entry_point("cuMemUnmap", d.unmap) && entry_point("cuMemSetAccess", d.set_access);
  CUdevice handle = 0;
  int supported = 0;
  if (!found || d.device_get(&handle, device) != CUDA_SUCCESS ||
      d.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, handle) !=
          CUDA_SUCCESS ||
      supported == 0)
    return;  // cudaMalloc for every cache miss
  d.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  d.prop.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = handle};
  d.access.location = d.prop.location;
  d.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::size_t page = 0;
  if (d.granularity(&page, &d.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || page == 0 ||
      page % granularity != 0)
    return;
  driver_ = std::move(driver);
  page_ = page;
  // As much address space as the GPU has memory: the arena can never need more.
  const auto total = static_cast<std::size_t>(stats().capacity);
  use_expandable_arena((total + page - 1) / page * page, page);
}

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

void* CudaAllocator::device_reserve_address_space(std::size_t bytes) noexcept {
  if (!driver_) return nullptr;
  CUdeviceptr base = 0;
  if (driver_->address_reserve(&base, bytes, page_, 0, 0) != CUDA_SUCCESS) return nullptr;
  pages_.assign(bytes / page_, 0);
  return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr)
}

void CudaAllocator::device_release_address_space(void* base, std::size_t bytes) noexcept {
  log_driver(driver_->address_free(reinterpret_cast<CUdeviceptr>(base), bytes), "cuMemAddressFree");
  pages_.clear();
}

bool CudaAllocator::device_map(char* base, std::size_t offset, std::size_t bytes) noexcept {
  const Driver& d = *driver_;
  const std::size_t first = offset / page_, last = (offset + bytes) / page_;
  // One physical allocation a page, so that the arena can unmap any whole page of its tail later.
  for (std::size_t p = first; p < last; ++p) {
    CUmemGenericAllocationHandle handle = 0;
    if (d.create(&handle, page_, &d.prop, 0) != CUDA_SUCCESS) {
      unmap_pages(base, first, p);  // the device is full: give back this call's pages, hold nothing
      return false;
    }
    const auto address = reinterpret_cast<CUdeviceptr>(base + p * page_);
    if (d.map(address, page_, 0, handle, 0) != CUDA_SUCCESS) {
      log_driver(d.release(handle), "cuMemRelease");
      unmap_pages(base, first, p);
      return false;
    }
    pages_[p] = handle;
  }
  // cudaDeviceEnablePeerAccess does not reach memory mapped this way: only this device gets access.
  if (d.set_access(reinterpret_cast<CUdeviceptr>(base + offset), bytes, &d.access, 1) != CUDA_SUCCESS) {
    unmap_pages(base, first, last);
    return false;
  }
  return true;
}

void CudaAllocator::device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept {
  // cuMemUnmap does not wait for queued work as cudaFree does: after an out-of-memory, kernels may still be
  // using the blocks just given back.
  {
    const QuietDeviceGuard guard(device_index_);
    if (guard.ok()) UNET_CUDA_LOG(cudaDeviceSynchronize());
  }
  unmap_pages(base, offset / page_, (offset + bytes) / page_);
}

void CudaAllocator::unmap_pages(char* base, std::size_t first, std::size_t last) noexcept {
  for (std::size_t p = last; p-- > first;) {
    log_driver(driver_->unmap(reinterpret_cast<CUdeviceptr>(base + p * page_), page_), "cuMemUnmap");
    log_driver(driver_->release(pages_[p]), "cuMemRelease");
    pages_[p] = 0;
  }
}

}  // namespace unet::cuda
