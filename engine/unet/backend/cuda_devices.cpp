#include "unet/backend/cuda_devices.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "unet/backend/cuda_loader.h"

namespace unet {
namespace {

// The few CUDA driver API entry points the probe needs, declared here: the driver's header is not required to
// build, and the library may be missing at run time.
using CuResult = int;
using CuInit = CuResult (*)(unsigned);
using CuDeviceGetCount = CuResult (*)(int*);
using CuDeviceGet = CuResult (*)(int*, int);
using CuDeviceGetName = CuResult (*)(char*, int, int);
using CuGetErrorName = CuResult (*)(CuResult, const char**);
using CuDriverGetVersion = CuResult (*)(int*);

// CUDA 13 needs a driver that supports it: R580 or newer reports 13000 or more.
constexpr int kMinimumDriverCudaVersion = 13000;

// Owns a dlopen handle the probe closes when done (the driver stays loaded in the process anyway).
class DlHandle {
 public:
  explicit DlHandle(void* handle) noexcept : handle_(handle) {}
  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;
  ~DlHandle() {
    if (handle_) dlclose(handle_);
  }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  template <class Function>
  Function symbol(const char* name) const noexcept {
    return reinterpret_cast<Function>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

struct CudaProbe {
  std::string reason;                                   // why CUDA cannot be used; empty if it can
  CudaRequirement requirement = CudaRequirement::none;  // what the reason asks for
  std::vector<std::string> gpus;                        // names the driver reports
  int driver_version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0; 0 when unknown
};

// The driver alone, before the CUDA module is loaded: no driver, a driver that does not start or sees no GPU,
// or one too old for CUDA 13, each said as such rather than as the errors cudart and cuDNN would give.
CudaProbe probe_cuda() {
  CudaProbe probe;
  const DlHandle lib(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    probe.reason = "no NVIDIA driver: libcuda.so.1 could not be loaded";
    probe.requirement = CudaRequirement::driver;
    return probe;
  }
  auto init = lib.symbol<CuInit>("cuInit");
  auto count = lib.symbol<CuDeviceGetCount>("cuDeviceGetCount");
  auto get = lib.symbol<CuDeviceGet>("cuDeviceGet");
  auto name = lib.symbol<CuDeviceGetName>("cuDeviceGetName");
  auto error_name = lib.symbol<CuGetErrorName>("cuGetErrorName");
  auto driver_version = lib.symbol<CuDriverGetVersion>("cuDriverGetVersion");
  if (!init || !count || !get || !name || !driver_version) {
    probe.reason = "the NVIDIA driver library lacks the CUDA driver API";
    probe.requirement = CudaRequirement::driver;
    return probe;
  }
  auto describe = [&](CuResult r) {
    const char* text = nullptr;
    if (error_name && error_name(r, &text) == 0 && text) return std::string(text);
    return "error " + std::to_string(r);
  };
  if (const CuResult r = init(0); r != 0) {
    probe.reason = "the NVIDIA driver did not initialise (" + describe(r) + ")";
  } else {
    int n = 0;
    if (const CuResult c = count(&n); c != 0) {
      probe.reason = "the NVIDIA driver cannot count devices (" + describe(c) + ")";
    } else if (n == 0) {
      probe.reason = "the NVIDIA driver reports no GPU";
    } else {
      for (int i = 0; i < n; ++i) {
        int dev = 0;
        char text[256] = {};
        if (get(&dev, i) == 0 && name(text, sizeof text, dev) == 0) probe.gpus.push_back(text);
      }
      if (driver_version(&probe.driver_version) != 0) probe.driver_version = 0;
      if (probe.driver_version < kMinimumDriverCudaVersion) {
        probe.reason = "the driver supports CUDA " + cuda_version_text(probe.driver_version) +
                       "; this build needs CUDA 13 (driver R580 or newer)";
        probe.requirement = CudaRequirement::newer_driver;
      }
    }
  }
  // The driver's own failures (it did not start, cannot count, sees no GPU).
  if (!probe.reason.empty() && probe.requirement == CudaRequirement::none)
    probe.requirement = CudaRequirement::working_driver;
  return probe;
}

// The driver's answer, then the module's: its versions, its GPUs, and why CUDA cannot train here.
void list_cuda(DeviceListing& listing) {
  CudaProbe probe = probe_cuda();
  listing.gpus_seen = std::move(probe.gpus);
  if (probe.driver_version > 0) listing.versions.driver = cuda_version_text(probe.driver_version);
  if (!probe.reason.empty()) {
    listing.cuda_unavailable_reason = probe.reason;
    listing.cuda_requirement = probe.requirement;
    return;
  }
  const CudaModuleLoad& load = cuda_module();
  if (!load.module) {
    listing.cuda_unavailable_reason = load.reason;
    // The loader says which: a build without CUDA, the libraries the module needs (cuDNN first), or the
    // module itself.
    listing.cuda_requirement = !load.built      ? CudaRequirement::cuda_build
                               : load.libraries ? CudaRequirement::cuda_libraries
                                                : CudaRequirement::cuda_module;
    return;
  }
  listing.versions = load.module->versions();
  listing.gpus = load.module->list_gpus();
  if (!load.reason.empty()) {
    listing.cuda_unavailable_reason = load.reason;
    listing.cuda_requirement = CudaRequirement::cuda_libraries;  // the module's library_problem()
    return;
  }
  std::string unusable;
  for (const GpuInfo& gpu : listing.gpus) {
    if (gpu.unusable_reason.empty())
      listing.devices.push_back(gpu.device);
    else
      unusable += (unusable.empty() ? "" : "; ") + gpu.device.id + ": " + gpu.unusable_reason;
  }
  if (listing.devices.size() == 1)  // the CPU only
    listing.cuda_requirement = CudaRequirement::capable_gpu;
  if (listing.devices.size() == 1)
    listing.cuda_unavailable_reason = unusable.empty()
                                          ? "the CUDA module lists no GPU"
                                          : "no GPU here can be used by this build (" + unusable + ")";
}

std::unique_ptr<Backend> create_cuda_backend(const DeviceId& id, const BackendOptions& options) {
  const DeviceListing listing = list_devices();
  // The module decides (and says why not) once the driver and its libraries are fit for CUDA 13.
  const CudaModuleLoad& load = cuda_module();
  if (listing.cuda_unavailable_reason.empty() && load.module)
    return load.module->create_backend(id.index, options);
  throw Error(ErrorKind::unsupported, "CUDA is unavailable: " + listing.cuda_unavailable_reason, id.str(),
              "use \"devices\": [\"cpu\"] (or cpu:0, cpu:1, ... for CPU replicas)");
}

// A GPU this machine lists as usable: f32 and f16 from compute capability 7.5 (CUDA 13's floor), bf16 from
// 8.0.
bool cuda_supports(const DeviceId& id, DType compute) {
  const DeviceListing listing = list_devices();
  const DeviceInfo* gpu = listing.find(id.str());
  if (!gpu) return false;
  int major = 0, minor = 0;
  if (std::sscanf(gpu->compute_capability.c_str(), "%d.%d", &major, &minor) != 2) return false;
  const int cc = 10 * major + minor;
  return compute == DType::bf16 ? cc >= 80 : cc >= 75;
}

std::unique_ptr<Communicator> join_cuda_replicas(std::span<Backend* const> ranks) {
  const CudaModuleLoad& load = cuda_module();
  if (load.module) return load.module->create_communicator(ranks);
  // No module, so no GPU backend either: a lone replica on a stand-in (a planning backend) needs no sum.
  if (ranks.size() == 1) return std::make_unique<SharedMemoryCommunicator>(1, false);
  throw Error(ErrorKind::unsupported, "GPU replicas cannot be joined: " + load.reason,
              DeviceId{ranks[0]->info().kind, ranks[0]->info().index}.str(),
              "use \"devices\": [\"cpu\"] (or cpu:0, cpu:1, ... for CPU replicas)");
}

}  // namespace

DeviceKindEntry cuda_device_kind() {
  return {.kind = DeviceKind::cuda,
          .list = list_cuda,
          .create = create_cuda_backend,
          .supports = cuda_supports,
          .join = join_cuda_replicas};
}

}  // namespace unet
