// The interface between the engine and libunet_cuda.so, the CUDA backend module the engine loads at run time
// (cuda_loader.h). Engine side, no CUDA headers: the engine includes it to call the module, the module to
// implement it. Both must come from one build: the loader refuses a module of another ABI (UNET_CUDA_ABI).
//
// The module follows every module's convention (module_abi.h): it exports unet_module_entry alone, whose
// entry is named "cuda", carries UNET_CUDA_ABI and starts a CudaModule. The module owns that object, which
// lives as long as the process (the module is never unloaded: cudart and cuDNN register exit handlers).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/backend/communicator.h"
#include "unet/backend/cuda_abi_version.h"  // generated at configure time: UNET_CUDA_ABI_VERSION_HASH
#include "unet/backend/devices.h"
#include "unet/backend/module_abi.h"

namespace unet {

// NCCL's ncclUniqueId (NCCL_UNIQUE_ID_BYTES), as bytes: the engine sees no NCCL header.
using NcclUniqueId = std::array<char, 128>;

class CudaModule {
 public:
  virtual ~CudaModule() = default;

  // What the module runs on; no CUDA context is created to find out.
  virtual CudaVersions versions() const = 0;
  // Why the CUDA libraries the module loaded cannot be used (a cuDNN of another major version or built for
  // another CUDA), in words for the user; empty when they can.
  virtual std::string library_problem() const = 0;
  // Every GPU the driver reports, from the driver API and NVML: no CUDA context is created.
  virtual std::vector<GpuInfo> list_gpus() const = 0;
  // Throws unet::Error naming "cuda:<index>" when the device cannot be used.
  virtual std::unique_ptr<Backend> create_backend(int index, const BackendOptions& options) = 0;
  // The communicator joining replicas on these GPU backends (rank r on ranks[r]), as choose_communicator
  // (communicator_choice.h) decides from cuda.communicator and whether NCCL loads: NCCL, the device
  // communicator, or none for one replica. Throws unet::Error saying why it cannot.
  virtual std::unique_ptr<Communicator> create_communicator(std::span<Backend* const> ranks) = 0;

  // Runs over several processes (engine/unet/distributed/): why NCCL cannot sum these replicas' gradients
  // with other processes' (NCCL missing, a backend that is not this module's), empty when it can.
  virtual std::string nccl_problem(std::span<Backend* const> ranks) const = 0;
  // NCCL's rendezvous id for one communicator over every process's GPUs: the run's rank 0 makes it and the
  // process group carries it to the others. Throws Error(unsupported) when NCCL cannot be used.
  virtual NcclUniqueId nccl_unique_id() = 0;
  // This process's GPU replicas `ranks` (distinct GPUs) as the ranks first.. of `world` GPUs of every
  // process, summing through NCCL; its all_reduce_host is not used (the process communicator carries host
  // values).
  virtual std::unique_ptr<Communicator> create_nccl_world(std::span<Backend* const> ranks, int world,
                                                          int first, const NcclUniqueId& id) = 0;
};

namespace cuda_abi_detail {
constexpr std::uint32_t mix(std::uint32_t hash, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) {  // FNV-1a over the value's bytes
    hash ^= static_cast<std::uint32_t>((value >> (8 * i)) & 0xffu);
    hash *= 16777619u;
  }
  return hash;
}
}  // namespace cuda_abi_detail

// The project version (hashed at configure time) and the sizes of everything that crosses the boundary: an
// engine and a module of different versions, or built against different headers or standard libraries,
// differ.
inline constexpr std::uint32_t kCudaModuleAbi = [] {
  std::uint32_t h = UNET_CUDA_ABI_VERSION_HASH;
  for (const std::size_t size :
       {sizeof(DeviceInfo), sizeof(GpuInfo), sizeof(CudaVersions), sizeof(DeviceListing),
        sizeof(BackendOptions), sizeof(std::string), sizeof(std::vector<GpuInfo>), sizeof(NcclUniqueId),
        sizeof(std::unique_ptr<Backend>), sizeof(LossDesc), sizeof(LossGradScales), sizeof(CudaOptions),
        sizeof(std::span<Backend* const>), sizeof(std::unique_ptr<Communicator>)})
    h = cuda_abi_detail::mix(h, size);
  return h;
}();
#define UNET_CUDA_ABI (::unet::kCudaModuleAbi)

// cuDNN's cudnnGetVersion() as "9.19.0": major*10000 + minor*100 + patch since 9.0, major*1000 + minor*100 +
// patch before.
inline std::string cudnn_version_text(std::size_t version) {
  if (version < 10000)
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 100) + "." +
           std::to_string(version % 100);
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

// Why a cuDNN cannot be used by this build, from cudnnGetVersion() and cudnnGetCudartVersion() (13010 for
// CUDA 13.1); empty when it is cuDNN 9 built for CUDA 13.
inline std::string cudnn_problem(std::size_t version, std::size_t cudart_version) {
  const std::string found = "cuDNN " + cudnn_version_text(version);
  if (version < 90000 || version >= 100000)
    return found + " was loaded; this build needs cuDNN 9 for CUDA 13 (install libcudnn9-cuda-13)";
  if (cudart_version / 1000 != 13)
    return found + " is built for CUDA " + std::to_string(cudart_version / 1000) +
           "; install its CUDA 13 build (libcudnn9-cuda-13, or pip nvidia-cudnn-cu13)";
  return {};
}

// CUDA 13 compiles for compute capability 7.5 and newer only; empty when the GPU qualifies.
inline std::string compute_capability_problem(int major, int minor) {
  if (major * 10 + minor >= 75) return {};
  return "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         ": CUDA 13 supports 7.5 and newer";
}

}  // namespace unet
