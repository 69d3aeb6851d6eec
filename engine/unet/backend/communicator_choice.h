// Which communicator joins a run's replicas (docs/CUDA_BACKEND.md §5), as one table that the engine's
// create_communicator and the CUDA module both consult: only the module knows whether NCCL loads, and it
// links no engine code, so the table is inline here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unet/backend/cuda_options.h"
#include "unet/core/device_id.h"
#include "unet/core/error.h"

namespace unet {

enum class CommunicatorKind : std::uint8_t {
  shared_memory,  // CPU replicas: SharedMemoryCommunicator
  alone,          // one GPU replica: nothing to sum, SharedMemoryCommunicator(1, false) keeps the protocol
  nccl,           // GPUs, each its own device: NcclCommunicator
  device,         // GPUs that share a device, or no NCCL: DeviceCommunicator
};

inline const char* to_string(CommunicatorKind kind) {
  switch (kind) {
    case CommunicatorKind::shared_memory:
      return "shared memory";
    case CommunicatorKind::alone:
      return "none (one replica)";
    case CommunicatorKind::nccl:
      return "NCCL";
    case CommunicatorKind::device:
      return "device";
  }
  return "?";
}

// cuda.communicator's values.
inline const char* to_string(CommunicatorChoice choice) {
  switch (choice) {
    case CommunicatorChoice::automatic:
      return "auto";
    case CommunicatorChoice::nccl:
      return "nccl";
    case CommunicatorChoice::device:
      return "device";
  }
  return "?";
}

inline std::optional<CommunicatorChoice> parse_communicator_choice(std::string_view text) {
  for (const CommunicatorChoice c :
       {CommunicatorChoice::automatic, CommunicatorChoice::nccl, CommunicatorChoice::device})
    if (text == to_string(c)) return c;
  return std::nullopt;
}

// The communicator for replicas on `devices` (rank r on devices[r]). `choice` is cuda.communicator (CPU
// replicas ignore it); `nccl_problem` says why NCCL cannot be used here, empty when it loads. An explicit
// "nccl" or "device" is honoured for a single GPU replica too (so that one GPU can exercise either). Throws
// Error(unsupported) for CPU and GPU replicas together, and for "nccl" where NCCL cannot serve.
inline CommunicatorKind choose_communicator(const std::vector<DeviceId>& devices, CommunicatorChoice choice,
                                            const std::string& nccl_problem) {
  UNET_CHECK(!devices.empty(), usage, "a communicator needs at least one replica");
  const auto is_cpu = [](const DeviceId& d) { return d.kind == DeviceKind::cpu; };
  const auto cpus = std::count_if(devices.begin(), devices.end(), is_cpu);
  if (cpus == static_cast<std::ptrdiff_t>(devices.size())) return CommunicatorKind::shared_memory;
  if (cpus > 0) {
    const auto cpu = std::find_if(devices.begin(), devices.end(), is_cpu);
    const auto gpu = std::find_if_not(devices.begin(), devices.end(), is_cpu);
    throw Error(ErrorKind::unsupported,
                "replicas on " + cpu->str() + " and " + gpu->str() +
                    ": no communicator sums gradients between CPU and GPU replicas",
                {}, "train on the GPUs alone, or on CPU replicas alone (cpu:0, cpu:1, ...)");
  }
  // A GPU listed twice: NCCL refuses two ranks on one device.
  std::string twice;
  for (std::size_t i = 0; i < devices.size() && twice.empty(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (devices[j].index == devices[i].index) {
        twice = devices[i].str();
        break;
      }
  switch (choice) {
    case CommunicatorChoice::device:
      return CommunicatorKind::device;
    case CommunicatorChoice::nccl:
      if (!twice.empty())
        throw Error(ErrorKind::unsupported,
                    "cuda.communicator is \"nccl\", but replicas share " + twice +
                        ": NCCL cannot put two ranks on one GPU",
                    twice, "set cuda.communicator to \"auto\" or \"device\"");
      if (!nccl_problem.empty())
        throw Error(
            ErrorKind::unsupported, "cuda.communicator is \"nccl\", but NCCL cannot be used: " + nccl_problem,
            {},
            "install NCCL 2 for CUDA 13 (libnccl2, or pip nvidia-nccl-cu13 and UNET_CUDA_LIBRARY_PATH), or "
            "set cuda.communicator to \"auto\"");
      return CommunicatorKind::nccl;
    case CommunicatorChoice::automatic:
      break;
  }
  if (devices.size() == 1) return CommunicatorKind::alone;
  return twice.empty() && nccl_problem.empty() ? CommunicatorKind::nccl : CommunicatorKind::device;
}

}  // namespace unet
