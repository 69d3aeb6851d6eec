// Stand-ins for libunet_cuda.so (and libunet_mpi.so) that fail (or half succeed) the ways a real one can, for
// test_cuda_loader. One source, built once per STUB_* kind (tests/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/cuda_module.h"
#include "unet/distributed/mpi/mpi_module_api.h"

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
UNET_MODULE_EXPORT int unet_cuda_module_version();
UNET_MODULE_EXPORT int unet_cuda_module_version() {
  return 1;
}
#else
namespace {

void* start_stub([[maybe_unused]] char* why, [[maybe_unused]] std::size_t why_size) {
#if defined(STUB_MISFIT)
  static MisfitModule module;
  return &module;
#elif defined(STUB_MPI_WRONG_ABI) || defined(STUB_WRONG_ABI)
  unet::write_reason("a module of another build was started", why, why_size);
  return nullptr;
#else  // STUB_REFUSES, and the stubs with a missing dependency (they never get this far)
  unet::write_reason("the stub refuses to start", why, why_size);
  return nullptr;
#endif
}

#if defined(STUB_WRONG_ABI)
// A CUDA module of another build: its ABI differs from this engine's.
constexpr UnetModuleEntry kEntry{UNET_CUDA_ABI + 1, "cuda", start_stub};
#elif defined(STUB_MPI_WRONG_ABI)
// An MPI module of another build.
constexpr UnetModuleEntry kEntry{kUnetMpiApiVersion + 1, "mpi", start_stub};
#elif defined(STUB_MPI)
// An MPI module of this build, where a CUDA one is asked for.
constexpr UnetModuleEntry kEntry{kUnetMpiApiVersion, "mpi", start_stub};
#else
constexpr UnetModuleEntry kEntry{UNET_CUDA_ABI, "cuda", start_stub};
#endif

}  // namespace

UNET_MODULE_EXPORT const UnetModuleEntry* unet_module_entry() {
  return &kEntry;
}
#endif
