// The kinds of device the engine trains on, each described by one entry that the kind's own code defines
// (backend/cpu/cpu_device_kind.cpp, backend/cuda_devices.cpp): how its devices are listed, made and asked
// about. devices.cpp answers list_devices, create_backend and device_supports by asking these entries, so it
// names no backend (the device grammar itself is core/device_id.h's).
//
// The one non-obvious rule: device_kinds() is declared here and defined in backend/registry/, the one place
// above every backend folder that names them all. backend/ itself never includes a backend folder, and no
// backend folder includes backend/registry/: the folders include each other in one direction only.
#pragma once

#include <memory>
#include <span>

#include "unet/backend/backend.h"
#include "unet/backend/communicator.h"
#include "unet/backend/devices.h"

namespace unet {

struct DeviceKindEntry {
  DeviceKind kind = DeviceKind::cpu;
  // Adds this kind's devices to the listing; a kind that can be missing says why in the listing.
  void (*list)(DeviceListing& listing) = nullptr;
  // A backend for one of its devices; throws Error(unsupported) naming the device and why not.
  std::unique_ptr<Backend> (*create)(const DeviceId& id, const BackendOptions& options) = nullptr;
  // Whether the device computes in `compute`, without creating a backend (a GPU's costs a context); false
  // for a device this machine does not offer.
  bool (*supports)(const DeviceId& id, DType compute) = nullptr;
  // The communicator joining replicas on several of its devices (or one), where communicator_choice.h does
  // not join them through shared memory as it does CPU replicas (null for the CPU). Throws Error(unsupported)
  // saying why they cannot be joined.
  std::unique_ptr<Communicator> (*join)(std::span<Backend* const> ranks) = nullptr;
};

// Every kind of device this build knows, in listing order (the CPU first).
std::span<const DeviceKindEntry> device_kinds();

}  // namespace unet
