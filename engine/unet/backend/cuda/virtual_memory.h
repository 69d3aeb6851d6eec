// The expandable arena's use of the driver's virtual memory calls (cuMemCreate, cuMemMap, cuMemSetAccess and
// their inverses), behind an interface so that its decisions run, and are tested, on a machine without a GPU:
// CudaAllocator implements it over the driver's entry points; the tests implement it over a fake that fails
// any call with any status (tests/test_core.cpp).
//
// The one rule here: only CUDA_ERROR_OUT_OF_MEMORY is an out-of-memory. Any other status (a sandbox that does
// not pass the calls through answers CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_NOT_PERMITTED) is a failure of
// the backend, reported as what it is: at construction it keeps the allocator on cudaMalloc (probe_arena),
// later it is an Error(backend) naming the call (map_pages).
//
// No CUDA header is included: statuses are CUresult values held as ints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "unet/core/error.h"
#include "unet/core/memory.h"

namespace unet::cuda {

using DriverStatus = int;                                // a CUresult
inline constexpr DriverStatus driver_success = 0;        // CUDA_SUCCESS
inline constexpr DriverStatus driver_out_of_memory = 2;  // CUDA_ERROR_OUT_OF_MEMORY

// The calls, for one device. Addresses and allocation handles are the driver's 64-bit values
// (CUdeviceptr, CUmemGenericAllocationHandle).
class VirtualMemoryDriver {
 public:
  virtual ~VirtualMemoryDriver() = default;
  // cuMemGetAllocationGranularity(MINIMUM) for pinned memory on the device.
  virtual DriverStatus page_size(std::size_t& page) noexcept = 0;
  virtual DriverStatus reserve(std::uint64_t& address, std::size_t bytes,
                               std::size_t alignment) noexcept = 0;  // cuMemAddressReserve
  virtual DriverStatus free_address(std::uint64_t address,
                                    std::size_t bytes) noexcept = 0;                   // cuMemAddressFree
  virtual DriverStatus create(std::uint64_t& handle, std::size_t bytes) noexcept = 0;  // cuMemCreate
  virtual DriverStatus release(std::uint64_t handle) noexcept = 0;                     // cuMemRelease
  virtual DriverStatus map(std::uint64_t address, std::size_t bytes,
                           std::uint64_t handle) noexcept = 0;                        // cuMemMap
  virtual DriverStatus unmap(std::uint64_t address, std::size_t bytes) noexcept = 0;  // cuMemUnmap
  // cuMemSetAccess: read and write for this device only.
  virtual DriverStatus set_access(std::uint64_t address, std::size_t bytes) noexcept = 0;
  // "CUDA_ERROR_NOT_PERMITTED" (cuGetErrorName); null when the driver does not know the status.
  virtual const char* status_name(DriverStatus status) const noexcept = 0;
};

// "cuMemMap failed: CUDA_ERROR_NOT_PERMITTED (800)"
inline std::string driver_failure(const VirtualMemoryDriver& driver, const char* call, DriverStatus status) {
  const char* name = driver.status_name(status);
  return std::string(call) + " failed: " + (name ? name : "CUresult") + " (" + std::to_string(status) + ")";
}

// Whether the arena can work on this device, found by doing once, on one page, all it will do: reserve an
// address range, create a physical page, map it, open it to the device, then unmap, release and free it.
// `page` is the driver's page (> 0) when every call succeeded; else 0, with the first failure in `problem`.
// Whatever the probe took is given back, also on failure.
struct ArenaProbe {
  std::size_t page = 0;
  std::string problem;
};

inline ArenaProbe probe_arena(VirtualMemoryDriver& d) {
  const auto failed = [&](const char* call, DriverStatus status) {
    return ArenaProbe{.page = 0, .problem = driver_failure(d, call, status)};
  };
  std::size_t page = 0;
  if (const DriverStatus s = d.page_size(page); s != driver_success)
    return failed("cuMemGetAllocationGranularity", s);
  if (page == 0 || page % Allocator::granularity != 0)
    return {.page = 0,
            .problem = "the driver's page of " + std::to_string(page) + " bytes is not a multiple of " +
                       std::to_string(Allocator::granularity) + " bytes"};
  std::uint64_t address = 0, handle = 0;
  if (const DriverStatus s = d.reserve(address, page, page); s != driver_success)
    return failed("cuMemAddressReserve", s);
  // From here each failure gives back, newest first, what the steps before it took.
  if (const DriverStatus s = d.create(handle, page); s != driver_success) {
    d.free_address(address, page);
    return failed("cuMemCreate", s);
  }
  if (const DriverStatus s = d.map(address, page, handle); s != driver_success) {
    d.release(handle);
    d.free_address(address, page);
    return failed("cuMemMap", s);
  }
  if (const DriverStatus s = d.set_access(address, page); s != driver_success) {
    d.unmap(address, page);
    d.release(handle);
    d.free_address(address, page);
    return failed("cuMemSetAccess", s);
  }
  // The way back is the arena's too (every shrink of its top): a driver that cannot take it is as unusable.
  if (const DriverStatus s = d.unmap(address, page); s != driver_success) {
    d.release(handle);
    d.free_address(address, page);
    return failed("cuMemUnmap", s);
  }
  if (const DriverStatus s = d.release(handle); s != driver_success) {
    d.free_address(address, page);
    return failed("cuMemRelease", s);
  }
  if (const DriverStatus s = d.free_address(address, page); s != driver_success)
    return failed("cuMemAddressFree", s);
  return {.page = page, .problem = {}};
}

// Unmaps pages [first, last) of the range at `base`, highest first, and releases each page's physical
// allocation (handles[p], then 0). Failures are logged: this runs where nothing may throw.
inline void unmap_pages(VirtualMemoryDriver& d, std::uint64_t base, std::size_t page, std::size_t first,
                        std::size_t last, std::vector<std::uint64_t>& handles) noexcept {
  for (std::size_t p = last; p-- > first;) {
    if (const DriverStatus s = d.unmap(base + p * page, page); s != driver_success)
      log_noexcept("cuda", driver_failure(d, "cuMemUnmap", s));
    if (const DriverStatus s = d.release(handles[p]); s != driver_success)
      log_noexcept("cuda", driver_failure(d, "cuMemRelease", s));
    handles[p] = 0;
  }
}

// Maps pages [first, last) of the range at `base`, one physical allocation a page (kept in handles[p]) so
// that any whole page of the tail can be unmapped later (cuMemUnmap takes whole mappings only), then opens
// them to the device. Returns false when the device is out of memory; throws Error(backend) on `device`,
// naming the call and its status, for any other failure. Having failed either way it holds none of these
// pages (Allocator::device_map's contract).
inline bool map_pages(VirtualMemoryDriver& d, std::uint64_t base, std::size_t page, std::size_t first,
                      std::size_t last, std::vector<std::uint64_t>& handles, const std::string& device) {
  const auto give_up = [&](std::size_t mapped, const char* call, DriverStatus status) {
    unmap_pages(d, base, page, first, mapped, handles);
    if (status == driver_out_of_memory) return false;
    throw Error(ErrorKind::backend, driver_failure(d, call, status) + " while growing the memory arena",
                device, "set cuda.expandable_arena to false to allocate with cudaMalloc instead");
  };
  for (std::size_t p = first; p < last; ++p) {
    std::uint64_t handle = 0;
    if (const DriverStatus s = d.create(handle, page); s != driver_success)
      return give_up(p, "cuMemCreate", s);
    if (const DriverStatus s = d.map(base + p * page, page, handle); s != driver_success) {
      if (const DriverStatus r = d.release(handle); r != driver_success)
        log_noexcept("cuda", driver_failure(d, "cuMemRelease", r));
      return give_up(p, "cuMemMap", s);
    }
    handles[p] = handle;
  }
  // cudaDeviceEnablePeerAccess does not reach memory mapped this way: only this device gets access.
  if (const DriverStatus s = d.set_access(base + first * page, (last - first) * page); s != driver_success)
    return give_up(last, "cuMemSetAccess", s);
  return true;
}

}  // namespace unet::cuda
