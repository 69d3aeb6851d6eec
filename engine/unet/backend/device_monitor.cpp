#include "unet/backend/device_monitor.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "unet/backend/devices.h"

namespace unet {

namespace {

// The "cpu" line of /proc/stat: jiffies busy and in all; {-1, -1} when it cannot be read.
std::pair<std::int64_t, std::int64_t> cpu_counters() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || !line.starts_with("cpu ")) return {-1, -1};
  std::istringstream fields(line.substr(4));
  std::int64_t value = 0, total = 0, idle = 0;
  for (int i = 0; fields >> value; ++i) {
    if (i >= 8) break;  // guest time is counted in user time already
    total += value;
    if (i == 3 || i == 4) idle += value;  // idle, iowait
  }
  return {total - idle, total};
}

}  // namespace

std::pair<std::int64_t, std::int64_t> host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t value = 0;
  std::string unit;
  std::int64_t total = 0, available = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = value * 1024;
    if (key == "MemAvailable:") available = value * 1024;
  }
  if (total == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    total = static_cast<std::int64_t>(pages) * size;
    available = total;
  }
  return {total, available};
}

std::vector<DeviceReading> DeviceMonitor::read() {
  const DeviceListing listing = list_devices();
  std::vector<DeviceReading> readings;
  DeviceReading host;
  host.id = "cpu";
  host.kind = DeviceKind::cpu;
  if (const DeviceInfo* cpu = listing.find("cpu:0")) host.name = cpu->name;
  const auto [total, available] = host_memory();
  host.sample.total_bytes = total;
  host.sample.free_bytes = available;
  const auto [busy, all] = cpu_counters();
  if (busy >= 0 && busy_ >= 0 && all > total_)
    host.sample.utilisation_percent =
        100.0 * static_cast<double>(busy - busy_) / static_cast<double>(all - total_);
  busy_ = busy;
  total_ = all;
  readings.push_back(std::move(host));
  for (const GpuInfo& gpu : listing.gpus) {
    DeviceReading r;
    r.id = gpu.device.id;
    r.name = gpu.device.name;
    r.kind = gpu.device.kind;
    r.sample = gpu.reading;
    readings.push_back(std::move(r));
  }
  return readings;
}

}  // namespace unet
