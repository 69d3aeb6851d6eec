#include "unet/backend/devices.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "unet/backend/communicator_choice.h"
#include "unet/backend/device_registry.h"

namespace unet {
namespace {

// The entry of this kind of device; every kind has one.
const DeviceKindEntry& entry_of(DeviceKind kind) {
  for (const DeviceKindEntry& entry : device_kinds())
    if (entry.kind == kind) return entry;
  throw Error(ErrorKind::unsupported, std::string("no backend is registered for ") + to_string(kind) +
                                          " devices (backend/registry/device_kinds.cpp)");
}

}  // namespace

DeviceListing list_devices() {
  DeviceListing listing;
  for (const DeviceKindEntry& entry : device_kinds()) entry.list(listing);
  return listing;
}

bool cpu_streams_asynchronous() {
  const char* v = std::getenv("UNET_CPU_STREAMS");
  if (!v || !*v || std::string_view(v) == "immediate") return false;
  if (std::string_view(v) == "async") return true;
  throw Error(ErrorKind::usage, std::string("UNET_CPU_STREAMS is \"") + v + "\"", "UNET_CPU_STREAMS",
              "set it to async (CPU operations queued on their streams' threads, as on a GPU) or immediate");
}

std::unique_ptr<Backend> create_backend(const DeviceId& id, const BackendOptions& options) {
  return entry_of(id.kind).create(id, options);
}

bool device_supports(const DeviceId& id, DType compute) {
  return entry_of(id.kind).supports(id, compute);
}

std::unique_ptr<Communicator> create_communicator(std::span<Backend* const> ranks) {
  std::vector<DeviceId> devices;
  for (const Backend* b : ranks) devices.push_back({b->info().kind, b->info().index});
  // The CPU rows of the table, and the refusal of CPU and GPU replicas together, need no backend's help; for
  // GPUs, only their kind knows its options (cuda.communicator) and what its libraries offer (NCCL).
  switch (choose_communicator(devices, CommunicatorChoice::automatic, {})) {
    case CommunicatorKind::shared_memory:
      return std::make_unique<SharedMemoryCommunicator>(static_cast<int>(ranks.size()));
    case CommunicatorKind::alone:
    case CommunicatorKind::nccl:
    case CommunicatorKind::device:
      break;
  }
  const DeviceKindEntry& entry = entry_of(devices[0].kind);
  UNET_CHECK(entry.join != nullptr, unsupported,
             std::string(to_string(devices[0].kind)) + " replicas have no communicator");
  return entry.join(ranks);
}

std::string gpu_communicator_text(const CudaVersions& versions) {
  if (versions.nccl.empty()) return {};
  if (versions.nccl.find(' ') == std::string::npos) return "NCCL " + versions.nccl;
  return "NCCL " + versions.nccl + ": GPUs sum through the device communicator";
}

}  // namespace unet
