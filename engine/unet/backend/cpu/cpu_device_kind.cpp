#include "unet/backend/cpu/cpu_device_kind.h"

#include "unet/backend/cpu/async_cpu_backend.h"
#include "unet/backend/cpu/cpu_backend.h"

namespace unet {
namespace {

void list_cpu(DeviceListing& listing) {
  listing.devices.push_back(cpu_device_info(0, 0));
}

std::unique_ptr<Backend> create_cpu_backend(const DeviceId& id, const BackendOptions& options) {
  const CpuBackendOptions cpu{.index = id.index,
                              .threads = options.cpu_threads,
                              .cap_bytes = options.cap_bytes,
                              .reserve_bytes = options.reserve_bytes};
  // The asynchronous CPU backend runs the GPU's ordering rules on the CPU (tests and debugging).
  if (cpu_streams_asynchronous()) return std::make_unique<AsyncCpuBackend>(cpu);
  return std::make_unique<CpuBackend>(cpu);
}

bool cpu_supports(const DeviceId&, DType compute) {
  return compute == DType::f32 || (compute == DType::bf16 && cpu_has_native_bf16());
}

}  // namespace

DeviceKindEntry cpu_device_kind() {
  return {.kind = DeviceKind::cpu, .list = list_cpu, .create = create_cpu_backend, .supports = cpu_supports};
}

}  // namespace unet
