// What to install (or do) so that this machine's GPUs can train, for each of list_devices' CUDA checks that
// can fail: the one source of these words. `unet-train devices`, the workbench's Devices tab and its device
// list show them beside the reason; docs/CLI.md's table quotes them, and test_docs checks that it does.
#pragma once

#include <array>
#include <string_view>

namespace unet {

// The check that failed, in the order list_devices makes them.
enum class CudaRequirement {
  none,            // CUDA devices are listed
  driver,          // no NVIDIA driver, or one without the CUDA driver API
  working_driver,  // the driver does not start, cannot count its GPUs or sees none
  newer_driver,    // the driver predates CUDA 13
  cuda_build,      // this build has no CUDA backend
  cuda_module,     // the CUDA module is missing or from another build
  cuda_libraries,  // cuDNN, cuBLASLt or NVRTC missing or built for another CUDA
  capable_gpu,     // no GPU of compute capability 7.5 or newer
};

// What to install or do, in a sentence; empty for `none`.
std::string_view cuda_requirement_text(CudaRequirement requirement);

// Every requirement but `none`, for the docs test.
inline constexpr std::array kCudaRequirements{
    CudaRequirement::driver,      CudaRequirement::working_driver, CudaRequirement::newer_driver,
    CudaRequirement::cuda_build,  CudaRequirement::cuda_module,    CudaRequirement::cuda_libraries,
    CudaRequirement::capable_gpu,
};

}  // namespace unet
