// The registry of device kinds (device_registry.h): the one place that names every backend the engine
// links. A new kind of device adds its entry here, one line.
#include <array>

#include "unet/backend/cpu/cpu_device_kind.h"
#include "unet/backend/cuda_devices.h"
#include "unet/backend/device_registry.h"

namespace unet {

std::span<const DeviceKindEntry> device_kinds() {
  static const std::array kinds{cpu_device_kind(), cuda_device_kind()};
  return kinds;
}

}  // namespace unet
