// The words of cuda_requirements.h.
#include "unet/backend/cuda_requirements.h"

namespace unet {

std::string_view cuda_requirement_text(CudaRequirement requirement) {
  switch (requirement) {
    case CudaRequirement::none:
      return {};
    case CudaRequirement::driver:
      return "install the NVIDIA driver, R580 or newer (CUDA 13), for a GPU of compute capability 7.5 or "
             "newer";
    case CudaRequirement::working_driver:
      return "check the NVIDIA driver: nvidia-smi should list the GPU";
    case CudaRequirement::newer_driver:
      return "update the NVIDIA driver to R580 or newer (CUDA 13)";
    case CudaRequirement::cuda_build:
      return "use a build with CUDA: the CUDA 13 toolkit and cuDNN 9 present when it is configured";
    case CudaRequirement::cuda_module:
      return "reinstall, or set UNET_CUDA_MODULE to the libunet_cuda.so built with this program";
    case CudaRequirement::cuda_libraries:
      return "install cuDNN 9 built for CUDA 13 (libcudnn9-cuda-13 from NVIDIA's repository, or pip install "
             "nvidia-cudnn-cu13 and set UNET_CUDA_LIBRARY_PATH to its lib folder)";
    case CudaRequirement::capable_gpu:
      return "a GPU of compute capability 7.5 or newer (mixed-bf16: 8.0 or newer)";
  }
  return {};
}

}  // namespace unet
