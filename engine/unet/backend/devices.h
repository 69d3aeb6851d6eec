// Which devices this machine offers the engine, and backends for them, from every kind of device the build
// registers (device_registry.h). CUDA is probed at run time through the driver library (dlopen), so one build
// runs on machines with and without an NVIDIA driver and can always say why CUDA is unavailable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/backend/communicator.h"
#include "unet/backend/cuda_options.h"
#include "unet/backend/cuda_requirements.h"
#include "unet/core/device_id.h"

namespace unet {

// Versions of the CUDA stack as the driver and libunet_cuda.so report them, "" where unknown (no driver, no
// module) and "not found" for a library the module looked for and could not load (NCCL).
struct CudaVersions {
  std::string driver;   // the CUDA version the driver supports, and NVML's driver version: "13.0 (580.65.06)"
  std::string runtime;  // the CUDA runtime linked into the module: "13.0"
  std::string cudnn;    // "9.19.0 (built for CUDA 13.1)"
  std::string nccl;     // "2.28.9" or "not found"
  bool any() const { return !driver.empty() || !runtime.empty() || !cudnn.empty() || !nccl.empty(); }
};

// A GPU the driver reports, with what the module found out about it; `unusable_reason` says why this build
// could never train on it (compute capability below 7.5), empty otherwise.
struct GpuInfo {
  DeviceInfo device;
  std::string unusable_reason;
  DeviceSample reading;  // NVML's at listing time: memory, utilisation, temperature, power (-1: unknown)
};

struct DeviceListing {
  std::vector<DeviceInfo> devices;      // what the engine can train on (the CPU always)
  std::string cuda_unavailable_reason;  // empty when CUDA devices are listed
  // The check that failed, and so what to install (cuda_requirement_text); none when CUDA devices are listed.
  CudaRequirement cuda_requirement = CudaRequirement::none;
  std::vector<std::string> gpus_seen;  // NVIDIA GPUs the driver reports, usable or not: their names
  std::vector<GpuInfo> gpus;           // the same GPUs in detail when libunet_cuda.so could list them
  CudaVersions versions;

  // The device the engine can train on with this id ("cuda:0"), or nullptr.
  const DeviceInfo* find(const std::string& id) const {
    for (const DeviceInfo& d : devices)
      if (d.id == id) return &d;
    return nullptr;
  }
};

DeviceListing list_devices();

struct BackendOptions {
  int cpu_threads = 0;         // threads for a CPU device; 0: every hardware thread
  std::int64_t cap_bytes = 0;  // act as a device of this many bytes; 0: no cap
  // Bytes the allocator reserves up front (memory.growth false), before the backend allocates anything of its
  // own; 0: grow on demand.
  std::int64_t reserve_bytes = 0;
  CudaOptions cuda;
};

// Whether CPU devices get the asynchronous CPU backend (cpu/async_cpu_backend.h): UNET_CPU_STREAMS=async in
// the environment; unset, empty or "immediate": the immediate one. Throws Error(usage) for another value.
bool cpu_streams_asynchronous();

// Throws Error(unsupported) naming the device and the reason when it cannot be used.
std::unique_ptr<Backend> create_backend(const DeviceId& id, const BackendOptions& options);

// Whether the device can compute in `compute` (f32, or a mixed precision's half type), without creating a
// backend for it: a GPU backend costs a context. False for a device this machine does not offer.
bool device_supports(const DeviceId& id, DType compute);

// The communicator that joins these backends' replicas, as choose_communicator (communicator_choice.h) says:
// shared memory between CPU replicas; for GPUs the CUDA module's (NCCL, the device communicator, or none for
// one replica). Throws Error(unsupported) for CPU and GPU replicas together, and where no communicator can
// join the GPUs (no CUDA module; cuda.communicator "nccl" without NCCL).
std::unique_ptr<Communicator> create_communicator(std::span<Backend* const> ranks);

// What several GPUs of this machine sum their gradients through, for device listings: "NCCL 2.28.9", or
// "NCCL not found: GPUs sum through the device communicator"; empty when the CUDA module did not say.
std::string gpu_communicator_text(const CudaVersions& versions);

}  // namespace unet
