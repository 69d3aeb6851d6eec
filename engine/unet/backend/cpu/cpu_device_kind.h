// The CPU as a kind of device (device_registry.h): one device listed per host, backed by CpuBackend, or by
// AsyncCpuBackend when UNET_CPU_STREAMS=async.
#pragma once

#include "unet/backend/device_registry.h"

namespace unet {

DeviceKindEntry cpu_device_kind();

}  // namespace unet
