// Stand-ins for libunet_cuda.so that fail (or half succeed) the ways a real one can, for test_cuda_loader.
// One source, built once per STUB_* kind (tests/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/cuda_module.h"

namespace {

// Loads, and has CUDA libraries that do not fit: cuDNN 9.1.0 built for CUDA 12.8.
class MisfitModule final : public unet::CudaModule {
 public:
  unet::CudaVersions versions() const override {
    unet::CudaVersions v;
    v.cudnn = "9.1.0 (built for CUDA 12.8)";
    return v;
  }
  std::string library_problem() const override { return unet::cudnn_problem(90100, 12080); }
  std::vector<unet::GpuInfo> list_gpus() const override { return {}; }
  std::unique_ptr<unet::Backend> create_backend(int, const unet::BackendOptions&) override { return nullptr; }
  std::unique_ptr<unet::Communicator> create_communicator(std::span<unet::Backend* const>) override {
    return nullptr;
  }
  std::string nccl_problem(std::span<unet::Backend* const>) const override { return "a stub has no NCCL"; }
  unet::NcclUniqueId nccl_unique_id() override { return {}; }
  std::unique_ptr<unet::Communicator> create_nccl_world(std::span<unet::Backend* const>, int, int,
                                                        const unet::NcclUniqueId&) override {
    return nullptr;
  }
};

}  // namespace

#if defined(STUB_NO_ENTRY)
// Exports a function, but not the entry point.
extern "C" UNET_CUDA_MODULE_EXPORT int unet_cuda_module_version();
extern "C" UNET_CUDA_MODULE_EXPORT int unet_cuda_module_version() {
  return 1;
}
#else
extern "C" UNET_CUDA_MODULE_EXPORT unet::CudaModule* unet_cuda_module_create(std::uint32_t abi, char* why,
                                                                             std::size_t why_size) {
#if defined(STUB_WRONG_ABI)
  // A module of another build: its own ABI differs from this engine's.
  unet::cuda_abi_matches(abi, UNET_CUDA_ABI + 1, why, why_size);
  return nullptr;
#elif defined(STUB_MISFIT)
  if (!unet::cuda_abi_matches(abi, UNET_CUDA_ABI, why, why_size)) return nullptr;
  static MisfitModule module;
  return &module;
#else  // STUB_REFUSES, and the stubs with a missing dependency (they never get this far)
  if (!unet::cuda_abi_matches(abi, UNET_CUDA_ABI, why, why_size)) return nullptr;
  unet::write_reason("the stub refuses to start", why, why_size);
  return nullptr;
#endif
}
#endif
