#include "unet/backend/cuda/cuda_raii.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace unet::cuda {
namespace {

// The two driver calls the guards need, looked up once for the process (the module links no libcuda).
struct PrimaryContextApi {
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDevicePrimaryCtxGetState_v7000 state = nullptr;

  PrimaryContextApi() noexcept {
    void* get = nullptr;
    void* state_of = nullptr;
    cudaDriverEntryPointQueryResult found_get = cudaDriverEntryPointSymbolNotFound;
    cudaDriverEntryPointQueryResult found_state = cudaDriverEntryPointSymbolNotFound;
    // The ABI is the one CUDA 12.0 defined, as for the allocator's entry points.
    if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &found_get) !=
            cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state_of, 12000, cudaEnableDefault,
                                         &found_state) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (found_get != cudaDriverEntryPointSuccess || found_state != cudaDriverEntryPointSuccess) return;
    device_get = reinterpret_cast<PFN_cuDeviceGet_v2000>(get);
    state = reinterpret_cast<PFN_cuDevicePrimaryCtxGetState_v7000>(state_of);
  }
};

}  // namespace

bool primary_context_active(int device) noexcept {
  static const PrimaryContextApi api;
  if (!api.device_get || !api.state || device < 0) return false;
  CUdevice handle = 0;
  unsigned flags = 0;
  int active = 0;
  return api.device_get(&handle, device) == CUDA_SUCCESS &&
         api.state(handle, &flags, &active) == CUDA_SUCCESS && active != 0;
}

}  // namespace unet::cuda
