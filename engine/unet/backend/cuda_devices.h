// CUDA as a kind of device (device_registry.h), the engine's side of it: the driver probed through
// libcuda.so.1 (dlopen), so that one build runs with and without an NVIDIA driver and says why CUDA is
// unavailable; then the CUDA module (cuda_loader.h) lists the GPUs and makes their backends.
#pragma once

#include "unet/backend/device_registry.h"

namespace unet {

DeviceKindEntry cuda_device_kind();

}  // namespace unet
