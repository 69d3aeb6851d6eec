// libunet_cuda.so's entry point: report the versions of the CUDA stack it runs on, check that cuDNN fits this
// build, list the GPUs from the driver API and NVML without creating a CUDA context, and create CudaBackends.
//
// libcuda and NVML are dlopened (never linked): the module must load, and say what it sees, on machines where
// they are missing. NCCL is dlopened too (nccl_communicator.cpp): it is optional. The module also makes the
// communicators that join GPU replicas.
#include <cuda.h>  // the driver API's types and attribute names only; its functions are looked up in libcuda.so.1
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "unet/backend/communicator_choice.h"
#include "unet/backend/cuda/cuda_backend.h"
#include "unet/backend/cuda/device_communicator.h"
#include "unet/backend/cuda/nccl_communicator.h"
#include "unet/backend/cuda_module.h"
#include "unet/backend/memory_attribution.h"
#include "unet/core/error.h"

namespace unet {
namespace {

// Opens a library for the life of the process (the module is never unloaded, so neither is what it opened).
void* open_for_good(const char* soname) {
  return dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}

template <class Function>
Function symbol(void* library, const char* name) {
  return library ? reinterpret_cast<Function>(dlsym(library, name)) : nullptr;
}

// The driver API entry points the listing needs. decltype names the prototypes in cuda.h without referring to
// the symbols; the names looked up are the versioned ones cuda.h maps its macros to.
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_version = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device = nullptr;
  decltype(&::cuDeviceGetName) name = nullptr;
  decltype(&::cuDeviceTotalMem) total_memory = nullptr;
  decltype(&::cuDeviceGetAttribute) attribute = nullptr;
  decltype(&::cuDeviceGetPCIBusId) pci_bus_id = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_context_state = nullptr;
  bool ready = false;  // loaded, complete and initialised

  DriverApi() {
    void* lib = open_for_good("libcuda.so.1");
    init = symbol<decltype(init)>(lib, "cuInit");
    driver_version = symbol<decltype(driver_version)>(lib, "cuDriverGetVersion");
    device_count = symbol<decltype(device_count)>(lib, "cuDeviceGetCount");
    device = symbol<decltype(device)>(lib, "cuDeviceGet");
    name = symbol<decltype(name)>(lib, "cuDeviceGetName");
    total_memory = symbol<decltype(total_memory)>(lib, "cuDeviceTotalMem_v2");
    attribute = symbol<decltype(attribute)>(lib, "cuDeviceGetAttribute");
    pci_bus_id = symbol<decltype(pci_bus_id)>(lib, "cuDeviceGetPCIBusId");
    primary_context_state = symbol<decltype(primary_context_state)>(lib, "cuDevicePrimaryCtxGetState");
    // cuInit creates no context; it only makes the device queries answer.
    ready = init && driver_version && device_count && device && name && total_memory && attribute &&
            pci_bus_id && init(0) == CUDA_SUCCESS;
  }

  // Whether this process holds a context on the device (the runtime's contexts are the primary ones);
  // true when the driver cannot say, so that nothing is counted as others' that may be ours.
  bool holds_context(CUdevice gpu) const {
    unsigned flags = 0;
    int active = 0;
    if (!ready || !primary_context_state || primary_context_state(gpu, &flags, &active) != CUDA_SUCCESS)
      return true;
    return active != 0;
  }
};

// NVML, declared here (the toolkit ships no nvml.h): memory as the whole device sees it, and other processes'
// share. https://docs.nvidia.com/deploy/nvml-api/
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned gpu, memory;  // percent
};
constexpr int kNvmlTemperatureGpu = 0;
struct NvmlProcessInfo {  // nvmlProcessInfo_t as _v3 fills it
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};

struct Nvml {
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*compute_processes)(NvmlDevice, unsigned*, NvmlProcessInfo*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  // Optional: what the live charts show besides memory.
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_milliwatts)(NvmlDevice, unsigned*) = nullptr;
  bool ready = false;

  Nvml() {
    void* lib = open_for_good("libnvidia-ml.so.1");
    const auto init = symbol<NvmlReturn (*)()>(lib, "nvmlInit_v2");
    handle_by_pci_bus_id = symbol<decltype(handle_by_pci_bus_id)>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    memory_info = symbol<decltype(memory_info)>(lib, "nvmlDeviceGetMemoryInfo");
    compute_processes = symbol<decltype(compute_processes)>(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    driver_version = symbol<decltype(driver_version)>(lib, "nvmlSystemGetDriverVersion");
    utilization = symbol<decltype(utilization)>(lib, "nvmlDeviceGetUtilizationRates");
    temperature = symbol<decltype(temperature)>(lib, "nvmlDeviceGetTemperature");
    power_milliwatts = symbol<decltype(power_milliwatts)>(lib, "nvmlDeviceGetPowerUsage");
    ready = init && handle_by_pci_bus_id && memory_info && compute_processes && init() == kNvmlSuccess;
  }

  // NVML's compute processes on the device; nullopt when NVML cannot list them.
  std::optional<std::vector<ProcessMemory>> processes(NvmlDevice device) const {
    std::vector<NvmlProcessInfo> listed(16);
    for (;;) {
      auto count = static_cast<unsigned>(listed.size());
      const NvmlReturn r = compute_processes(device, &count, listed.data());
      if (r == kNvmlInsufficientSize) {
        listed.resize(static_cast<std::size_t>(count) + 8);
        continue;
      }
      if (r != kNvmlSuccess) return std::nullopt;
      std::vector<ProcessMemory> out;
      for (unsigned i = 0; i < count; ++i)
        out.push_back({.pid = listed[i].pid,
                       .bytes = listed[i].used_gpu_memory == kNvmlValueNotAvailable
                                    ? -1
                                    : static_cast<std::int64_t>(listed[i].used_gpu_memory)});
      return out;
    }
  }
};

// The device now, from NVML only (thread-safe, no CUDA context, no current device): -1 where NVML cannot say.
// `holds_context`: whether this process has a context on it (DriverApi::holds_context), which decides
// whose the memory NVML cannot attribute is (memory_attribution.h).
DeviceSample sample_with_nvml(const Nvml& nvml, NvmlDevice device, std::int64_t total_bytes,
                              bool holds_context) {
  DeviceSample s;
  s.total_bytes = total_bytes;
  s.free_bytes = -1;
  if (!nvml.ready || !device) return s;
  NvmlMemory memory{};
  if (nvml.memory_info(device, &memory) == kNvmlSuccess) {
    s.total_bytes = static_cast<std::int64_t>(memory.total);
    s.free_bytes = static_cast<std::int64_t>(memory.free);
  }
  const OthersShare others =
      others_share(nvml.processes(device), static_cast<unsigned>(getpid()), holds_context,
                   s.free_bytes < 0 ? -1 : s.total_bytes - s.free_bytes);
  s.used_by_others_bytes = others.bytes;
  s.others_not_attributable = others.not_attributable;
  NvmlUtilization utilization{};
  if (nvml.utilization && nvml.utilization(device, &utilization) == kNvmlSuccess)
    s.utilisation_percent = utilization.gpu;
  unsigned value = 0;
  if (nvml.temperature && nvml.temperature(device, kNvmlTemperatureGpu, &value) == kNvmlSuccess)
    s.temperature_celsius = value;
  if (nvml.power_milliwatts && nvml.power_milliwatts(device, &value) == kNvmlSuccess)
    s.power_watts = value / 1000.0;
  return s;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

class CudaModuleImpl final : public CudaModule {
 public:
  CudaVersions versions() const override {
    CudaVersions v;
    int driver = 0;
    if (driver_.ready && driver_.driver_version(&driver) == CUDA_SUCCESS)
      v.driver = cuda_version_text(driver);
    std::array<char, 96> nvml_driver{};
    if (nvml_.ready && nvml_.driver_version &&
        nvml_.driver_version(nvml_driver.data(), static_cast<unsigned>(nvml_driver.size())) == kNvmlSuccess)
      v.driver +=
          (v.driver.empty() ? "" : " (") + std::string(nvml_driver.data()) + (v.driver.empty() ? "" : ")");
    int runtime = 0;
    // The runtime version is the statically linked cudart's own: no driver is asked, no context made.
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) v.runtime = cuda_version_text(runtime);
    v.cudnn = cudnn_version_text(cudnnGetVersion()) + " (built for CUDA " +
              cuda_version_text(static_cast<int>(cudnnGetCudartVersion())) + ")";
    // A library that loaded but cannot serve says so, so that the listing can tell what several GPUs get.
    const cuda::NcclApi& nccl = cuda::nccl();
    v.nccl = nccl.version_text();
    if (nccl.version > 0 && !nccl.problem.empty()) v.nccl += " (unusable: " + nccl.problem + ")";
    return v;
  }

  std::string library_problem() const override {
    return cudnn_problem(cudnnGetVersion(), cudnnGetCudartVersion());
  }

  std::vector<GpuInfo> list_gpus() const override {
    std::vector<GpuInfo> gpus;
    int count = 0;
    if (!driver_.ready || driver_.device_count(&count) != CUDA_SUCCESS) return gpus;
    for (int i = 0; i < count; ++i) {
      CUdevice device = 0;
      if (driver_.device(&device, i) != CUDA_SUCCESS) continue;
      GpuInfo gpu;
      DeviceInfo& d = gpu.device;
      d.id = "cuda:" + std::to_string(i);
      d.kind = DeviceKind::cuda;
      d.index = i;
      std::array<char, 256> name{};
      if (driver_.name(name.data(), static_cast<int>(name.size()), device) == CUDA_SUCCESS)
        d.name = name.data();
      std::size_t total = 0;
      if (driver_.total_memory(&total, device) == CUDA_SUCCESS)
        d.total_bytes = static_cast<std::int64_t>(total);
      d.free_bytes = -1;
      int major = 0, minor = 0;
      driver_.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
      driver_.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
      d.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      gpu.unusable_reason = compute_capability_problem(major, minor);
      std::array<char, 32> bus{};
      if (driver_.pci_bus_id(bus.data(), static_cast<int>(bus.size()), device) == CUDA_SUCCESS)
        d.pci_bus_id = bus.data();
      // NVML numbers devices its own way; the PCI bus id names the same device for both.
      NvmlDevice handle = nullptr;
      if (nvml_.ready && !d.pci_bus_id.empty() &&
          nvml_.handle_by_pci_bus_id(d.pci_bus_id.c_str(), &handle) != kNvmlSuccess)
        handle = nullptr;
      gpu.reading = sample_with_nvml(nvml_, handle, d.total_bytes, driver_.holds_context(device));
      if (handle) {
        d.free_bytes = gpu.reading.free_bytes;
        d.used_by_others_bytes = gpu.reading.used_by_others_bytes;
        d.others_not_attributable = gpu.reading.others_not_attributable;
      }
      gpus.push_back(std::move(gpu));
    }
    return gpus;
  }

  std::unique_ptr<Communicator> create_communicator(std::span<Backend* const> ranks) override {
    std::vector<cuda::CudaBackend*> backends;
    std::vector<DeviceId> devices;
    for (Backend* b : ranks) {
      auto* cuda = dynamic_cast<cuda::CudaBackend*>(b);
      if (!cuda) {
        // A lone replica sums nothing, whatever stands in for its GPU (tests use planning backends).
        if (ranks.size() == 1) return std::make_unique<SharedMemoryCommunicator>(1, false);
        throw Error(ErrorKind::usage,
                    "the CUDA module joins CUDA backends only; " + b->info().id + " is not one",
                    b->info().id);
      }
      backends.push_back(cuda);
      devices.push_back({DeviceKind::cuda, cuda->device()});
    }
    UNET_CHECK(!backends.empty(), usage, "a communicator needs at least one rank");
    // cuda.communicator is a run's setting: every replica's backend has the same.
    const CudaOptions& options = backends[0]->options();
    const CommunicatorKind kind = choose_communicator(devices, options.communicator, cuda::nccl().problem);
    switch (kind) {
      case CommunicatorKind::alone:
        return std::make_unique<SharedMemoryCommunicator>(1, false);
      case CommunicatorKind::nccl:
        return std::make_unique<cuda::NcclCommunicator>(backends);
      case CommunicatorKind::device:
        if (options.bf16_sums)
          throw Error(
              ErrorKind::unsupported,
              "cuda.comm_dtype is \"bf16\", but these GPUs sum through the device communicator, which "
              "sums in f32" +
                  (cuda::nccl().problem.empty() ? std::string() : " (" + cuda::nccl().problem + ")"),
              backends[0]->info().id, "set cuda.comm_dtype to \"f32\", or sum through NCCL");
        return std::make_unique<cuda::DeviceCommunicator>(backends);
      case CommunicatorKind::shared_memory:
        break;
    }
    throw Error(ErrorKind::usage, "CUDA replicas cannot share host memory");
  }

  std::string nccl_problem(std::span<Backend* const> ranks) const override {
    for (Backend* b : ranks)
      if (!dynamic_cast<cuda::CudaBackend*>(b)) return b->info().id + " is not a GPU backend of this module";
    return cuda::nccl().problem;
  }

  NcclUniqueId nccl_unique_id() override {
    const cuda::NcclApi& api = cuda::nccl();
    if (!api.problem.empty()) throw Error(ErrorKind::unsupported, "NCCL cannot be used: " + api.problem);
    ncclUniqueId id;
    if (const ncclResult_t r = api.get_unique_id(&id); r != ncclSuccess)
      throw Error(ErrorKind::backend, std::string("ncclGetUniqueId failed: ") + api.error_string(r));
    static_assert(sizeof id == sizeof(NcclUniqueId), "ncclUniqueId is NCCL_UNIQUE_ID_BYTES");
    NcclUniqueId bytes;
    std::memcpy(bytes.data(), &id, sizeof id);
    return bytes;
  }

  std::unique_ptr<Communicator> create_nccl_world(std::span<Backend* const> ranks, int world, int first,
                                                  const NcclUniqueId& id) override {
    std::vector<cuda::CudaBackend*> backends;
    for (Backend* b : ranks) {
      auto* cuda = dynamic_cast<cuda::CudaBackend*>(b);
      UNET_CHECK(cuda, usage, "NCCL joins CUDA backends only; " + b->info().id + " is not one");
      backends.push_back(cuda);
    }
    ncclUniqueId nccl_id;
    std::memcpy(&nccl_id, id.data(), sizeof nccl_id);
    return std::make_unique<cuda::NcclCommunicator>(backends, world, first, nccl_id);
  }

  std::unique_ptr<Backend> create_backend(int index, const BackendOptions& options) override {
    const std::string id = "cuda:" + std::to_string(index);
    const std::vector<GpuInfo> gpus = list_gpus();
    const auto gpu =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.device.index == index; });
    if (gpu == gpus.end())
      throw Error(ErrorKind::unsupported, "the NVIDIA driver reports no GPU " + id, id,
                  "list the devices with `unet-train devices`");
    if (!gpu->unusable_reason.empty())
      throw Error(ErrorKind::unsupported, "CUDA is unavailable: " + gpu->unusable_reason, id,
                  "use \"devices\": [\"cpu\"] (or cpu:0, cpu:1, ... for CPU replicas)");
    NvmlDevice handle = nullptr;
    if (nvml_.ready && !gpu->device.pci_bus_id.empty() &&
        nvml_.handle_by_pci_bus_id(gpu->device.pci_bus_id.c_str(), &handle) != kNvmlSuccess)
      handle = nullptr;
    // The module lives as long as the process, so the sampler may keep pointers to its NVML and driver
    // tables.
    const Nvml* nvml = &nvml_;
    const DriverApi* driver = &driver_;
    CUdevice cu_device = 0;
    if (driver_.device(&cu_device, index) != CUDA_SUCCESS) cu_device = -1;
    const std::int64_t total = gpu->device.total_bytes;
    return std::make_unique<cuda::CudaBackend>(
        gpu->device, options, [nvml, driver, cu_device, handle, total] {
          return sample_with_nvml(*nvml, handle, total, cu_device < 0 || driver->holds_context(cu_device));
        });
  }

 private:
  DriverApi driver_;
  Nvml nvml_;
};

}  // namespace
}  // namespace unet

namespace {

// The module's start (module_abi.h): the one CudaModule, or why it cannot be made.
void* start_cuda_module(char* why, std::size_t why_size) {
  try {
    static unet::CudaModuleImpl module;
    return &module;
  } catch (const std::exception& e) {
    unet::write_reason(e.what(), why, why_size);
    return nullptr;
  }
}

constexpr UnetModuleEntry kEntry{UNET_CUDA_ABI, "cuda", start_cuda_module};

}  // namespace

UNET_MODULE_EXPORT const UnetModuleEntry* unet_module_entry() {
  return &kEntry;
}
