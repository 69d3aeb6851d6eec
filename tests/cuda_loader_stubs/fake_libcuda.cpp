// A stand-in for the NVIDIA driver's libcuda.so.1, for test_cuda_loader: unet-train run with this folder on
// LD_LIBRARY_PATH sees two GPUs (compute capability 9.0 and 6.1) and the driver version in
// $UNET_FAKE_CUDA_DRIVER_VERSION (13000 when unset), so the checks after the driver's run on a machine
// without one. It implements only what the engine's probe and the CUDA module's listing call.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

namespace {
constexpr int kGpus = 2;
}

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  const char* text = std::getenv("UNET_FAKE_CUDA_DRIVER_VERSION");
  *version = text ? std::atoi(text) : 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = kGpus;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= kGpus) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int size, CUdevice device) {
  std::snprintf(name, static_cast<std::size_t>(size), "%s", device == 0 ? "Fake GPU A" : "Fake GPU B");
  return CUDA_SUCCESS;
}

// cuda.h maps cuDeviceTotalMem to cuDeviceTotalMem_v2, the symbol the module looks up.
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  *bytes = (device == 0 ? std::size_t{80} : std::size_t{8}) << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *value = device == 0 ? 9 : 6;
  else if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *value = device == 0 ? 0 : 1;
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* bus_id, int size, CUdevice device) {
  std::snprintf(bus_id, static_cast<std::size_t>(size), "0000:%02d:00.0", device + 1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult, const char** text) {
  *text = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

}  // extern "C"
