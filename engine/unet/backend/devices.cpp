#include "unet/backend/devices.h"

#include <dlfcn.h>

#include <charconv>

#include "unet/backend/cpu/cpu_backend.h"

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

struct CudaProbe {
  std::string reason;             // why CUDA cannot be used; empty if it can
  std::vector<std::string> gpus;  // names the driver reports
};

CudaProbe probe_cuda() {
  CudaProbe probe;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    probe.reason = "no NVIDIA driver: libcuda.so.1 could not be loaded";
    return probe;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
  auto error_name = reinterpret_cast<CuGetErrorName>(dlsym(lib, "cuGetErrorName"));
  if (!init || !count || !get || !name) {
    probe.reason = "the NVIDIA driver library lacks the CUDA driver API";
    dlclose(lib);
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
      probe.reason = "this build has no CUDA backend yet (" + std::to_string(n) + " GPU" +
                     (n == 1 ? "" : "s") + " found); training runs on the CPU";
    }
  }
  dlclose(lib);
  return probe;
}

}  // namespace

DeviceId parse_device_id(const std::string& text, const std::string& key) {
  if (text == "cpu") return {DeviceKind::cpu, 0};
  for (const DeviceKind kind : {DeviceKind::cpu, DeviceKind::cuda}) {
    const std::string prefix = std::string(to_string(kind)) + ":";
    if (text.rfind(prefix, 0) != 0) continue;
    int index = -1;
    const char* first = text.data() + prefix.size();
    const char* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(first, last, index);
    if (ec == std::errc{} && ptr == last && first != last && index >= 0) return {kind, index};
  }
  throw ConfigError(key, "\"" + text + "\" is not a device; use cpu, cpu:N or cuda:N");
}

DeviceListing list_devices() {
  DeviceListing listing;
  listing.devices.push_back(cpu_device_info(0, 0));
  CudaProbe probe = probe_cuda();
  listing.cuda_unavailable_reason = probe.reason;
  listing.gpus_seen = std::move(probe.gpus);
  return listing;
}

std::unique_ptr<Backend> create_backend(const DeviceId& id, const BackendOptions& options) {
  if (id.kind == DeviceKind::cpu)
    return std::make_unique<CpuBackend>(
        CpuBackendOptions{.index = id.index, .threads = options.cpu_threads, .cap_bytes = options.cap_bytes});
  throw Error(ErrorKind::unsupported, "CUDA is unavailable: " + probe_cuda().reason, id.str(),
              "use \"devices\": [\"cpu\"] (or cpu:0, cpu:1, ... for CPU replicas)");
}

bool device_supports(const DeviceId& id, DType compute) {
  if (id.kind == DeviceKind::cpu)
    return compute == DType::f32 || (compute == DType::bf16 && cpu_has_native_bf16());
  // A GPU this machine lists as usable (CUDA devices appear in the listing once the CUDA module is loaded).
  const DeviceListing listing = list_devices();
  return std::any_of(listing.devices.begin(), listing.devices.end(),
                     [&](const DeviceInfo& d) { return d.id == id.str(); });
}

std::unique_ptr<Communicator> create_communicator(std::span<Backend* const> ranks) {
  for (Backend* b : ranks)
    if (b->info().kind != DeviceKind::cpu)
      throw Error(ErrorKind::unsupported, "no communicator in this build joins replicas on this device",
                  b->info().id);
  return std::make_unique<SharedMemoryCommunicator>(static_cast<int>(ranks.size()));
}

}  // namespace unet
