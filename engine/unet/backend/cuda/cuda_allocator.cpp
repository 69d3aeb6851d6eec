#include "unet/backend/cuda/cuda_allocator.h"

#include <cuda.h>
#include <cudaTypedefs.h>
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

// The ABI of each entry point is the one CUDA 12.0 defined (the _v2000/_v10020 typedefs below).
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

static_assert(driver_success == CUDA_SUCCESS && driver_out_of_memory == CUDA_ERROR_OUT_OF_MEMORY,
              "virtual_memory.h holds CUresult values as ints");
static_assert(sizeof(CUdeviceptr) == sizeof(std::uint64_t) &&
                  sizeof(CUmemGenericAllocationHandle) == sizeof(std::uint64_t),
              "virtual_memory.h holds addresses and handles as 64-bit values");

}  // namespace

class CudaAllocator::Driver final : public VirtualMemoryDriver {
 public:
  // The entry points and the device's handle; null, with the reason in `why`, when the driver lacks them or
  // says the device has no virtual memory management.
  static std::unique_ptr<Driver> open(int device, std::string& why) {
    auto driver = std::make_unique<Driver>();
    Driver& d = *driver;
    const bool found = entry_point("cuDeviceGet", d.device_get_) &&
                       entry_point("cuDeviceGetAttribute", d.device_attribute_) &&
                       entry_point("cuGetErrorName", d.error_name_) &&
                       entry_point("cuMemGetAllocationGranularity", d.granularity_) &&
                       entry_point("cuMemAddressReserve", d.address_reserve_) &&
                       entry_point("cuMemAddressFree", d.address_free_) &&
                       entry_point("cuMemCreate", d.create_) && entry_point("cuMemRelease", d.release_) &&
                       entry_point("cuMemMap", d.map_) && entry_point("cuMemUnmap", d.unmap_) &&
                       entry_point("cuMemSetAccess", d.set_access_);
    if (!found) {
      why = "the driver lacks its virtual memory functions";
      return nullptr;
    }
    CUdevice handle = 0;
    if (const CUresult r = d.device_get_(&handle, device); r != CUDA_SUCCESS) {
      why = driver_failure(d, "cuDeviceGet", r);
      return nullptr;
    }
    int supported = 0;
    if (const CUresult r =
            d.device_attribute_(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, handle);
        r != CUDA_SUCCESS) {
      why = driver_failure(d, "cuDeviceGetAttribute", r);
      return nullptr;
    }
    if (supported == 0) {
      why = "the device has no virtual memory management";
      return nullptr;
    }
    d.prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    d.prop_.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = handle};
    d.access_.location = d.prop_.location;
    d.access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return driver;
  }

  DriverStatus page_size(std::size_t& page) noexcept override {
    return granularity_(&page, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  }
  DriverStatus reserve(std::uint64_t& address, std::size_t bytes, std::size_t alignment) noexcept override {
    CUdeviceptr base = 0;
    const CUresult r = address_reserve_(&base, bytes, alignment, 0, 0);
    address = base;
    return r;
  }
  DriverStatus free_address(std::uint64_t address, std::size_t bytes) noexcept override {
    return address_free_(address, bytes);
  }
  DriverStatus create(std::uint64_t& handle, std::size_t bytes) noexcept override {
    CUmemGenericAllocationHandle h = 0;
    const CUresult r = create_(&h, bytes, &prop_, 0);
    handle = h;
    return r;
  }
  DriverStatus release(std::uint64_t handle) noexcept override { return release_(handle); }
  DriverStatus map(std::uint64_t address, std::size_t bytes, std::uint64_t handle) noexcept override {
    return map_(address, bytes, 0, handle, 0);
  }
  DriverStatus unmap(std::uint64_t address, std::size_t bytes) noexcept override {
    return unmap_(address, bytes);
  }
  DriverStatus set_access(std::uint64_t address, std::size_t bytes) noexcept override {
    return set_access_(address, bytes, &access_, 1);
  }
  const char* status_name(DriverStatus status) const noexcept override {
    const char* name = nullptr;
    return error_name_(static_cast<CUresult>(status), &name) == CUDA_SUCCESS ? name : nullptr;
  }

 private:
  PFN_cuDeviceGet_v2000 device_get_ = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute_ = nullptr;
  PFN_cuGetErrorName_v6000 error_name_ = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity_ = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve_ = nullptr;
  PFN_cuMemAddressFree_v10020 address_free_ = nullptr;
  PFN_cuMemCreate_v10020 create_ = nullptr;
  PFN_cuMemRelease_v10020 release_ = nullptr;
  PFN_cuMemMap_v10020 map_ = nullptr;
  PFN_cuMemUnmap_v10020 unmap_ = nullptr;
  PFN_cuMemSetAccess_v10020 set_access_ = nullptr;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
};

CudaAllocator::CudaAllocator(int device, bool expandable)
    : Allocator("cuda:" + std::to_string(device), device_total_bytes(device)), device_index_(device) {
  if (!expandable) return;  // the user's choice: nothing to say
  std::string why;
  std::unique_ptr<Driver> driver = Driver::open(device, why);
  if (driver) {
    // The attribute says what the GPU can do, not what this process may do (a sandboxed container can
    // refuse the calls): try them once, as the arena will use them, before relying on them.
    const ArenaProbe probe = probe_arena(*driver);
    why = probe.problem;
    page_ = probe.page;
  }
  if (page_ == 0) {
    log_noexcept("cuda", this->device() + ": the expandable memory arena cannot be used (" + why +
                             "); each new block is a cudaMalloc instead");
    return;
  }
  driver_ = std::move(driver);
  // As much address space as the GPU has memory: the arena can never need more.
  const auto total = static_cast<std::size_t>(stats().capacity);
  try {
    use_expandable_arena((total + page_ - 1) / page_ * page_, page_);
  } catch (const OutOfMemoryError&) {  // no address range that large (device_reserve_address_space said why)
    log_noexcept("cuda", this->device() + ": each new block is a cudaMalloc instead of the memory arena");
    driver_.reset();
    page_ = 0;
  }
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
  std::uint64_t base = 0;
  if (const DriverStatus s = driver_->reserve(base, bytes, page_); s != driver_success) {
    log_noexcept("cuda", device() + ": " + driver_failure(*driver_, "cuMemAddressReserve", s));
    return nullptr;
  }
  pages_.assign(bytes / page_, 0);
  return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr)
}

void CudaAllocator::device_release_address_space(void* base, std::size_t bytes) noexcept {
  if (const DriverStatus s = driver_->free_address(reinterpret_cast<std::uint64_t>(base), bytes);
      s != driver_success)
    log_noexcept("cuda", device() + ": " + driver_failure(*driver_, "cuMemAddressFree", s));
  pages_.clear();
}

bool CudaAllocator::device_map(char* base, std::size_t offset, std::size_t bytes) {
  return map_pages(*driver_, reinterpret_cast<std::uint64_t>(base), page_, offset / page_,
                   (offset + bytes) / page_, pages_, device());
}

void CudaAllocator::device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept {
  // cuMemUnmap does not wait for queued work as cudaFree does: after an out-of-memory, kernels may still be
  // using the blocks just given back.
  {
    const QuietDeviceGuard guard(device_index_);
    if (guard.ok()) UNET_CUDA_LOG(cudaDeviceSynchronize());
  }
  unmap_pages(*driver_, reinterpret_cast<std::uint64_t>(base), page_, offset / page_,
              (offset + bytes) / page_, pages_);
}

}  // namespace unet::cuda
