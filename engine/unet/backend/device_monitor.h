// Every device's memory and health now, training or not, for the workbench's device monitor (as nvitop
// shows GPUs): GPUs through NVML (the CUDA module's listing, no CUDA context), the host from /proc (its
// memory, and its CPU load between two readings).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "unet/backend/backend.h"

namespace unet {

// MemTotal and MemAvailable of the host, in bytes (from /proc/meminfo; the physical pages when it cannot be
// read, all of them counted available).
std::pair<std::int64_t, std::int64_t> host_memory();

struct DeviceReading {
  std::string id;    // "cpu", "cuda:0"
  std::string name;  // "AMD EPYC (2 threads)", "NVIDIA H200"
  DeviceKind kind = DeviceKind::cpu;
  // -1 where the device cannot say. For the host: utilisation is the CPU load since the previous reading.
  DeviceSample sample;
};

class DeviceMonitor {
 public:
  // The host first, then every GPU the driver reports.
  std::vector<DeviceReading> read();

 private:
  std::int64_t busy_ = -1, total_ = -1;  // /proc/stat's counters at the previous reading
};

}  // namespace unet
