// `unet-train devices`: the devices found, the GPUs' details, why CUDA is unavailable, the CUDA versions and
// the launchers a run over several processes can use.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "unet/backend/devices.h"
#include "unet/core/memory.h"
#include "unet/distributed/mpi_group.h"

namespace unet::cli {
namespace {

// Bytes for the devices listing; "unknown" where the listing could not find out (-1).
std::string bytes_or_unknown(std::int64_t bytes) {
  return bytes < 0 ? "unknown" : format_bytes(bytes);
}

// Other processes' memory, or why it is not known: NVML may see it without telling ours apart.
std::string others_text(const DeviceInfo& d) {
  return d.others_not_attributable ? "not attributable" : bytes_or_unknown(d.used_by_others_bytes);
}

// JSON null where the listing has no value: an empty text, -1 bytes.
nlohmann::json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}
nlohmann::json bytes_or_null(std::int64_t bytes) {
  return bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(bytes);
}

nlohmann::json device_json(const DeviceInfo& d) {
  return {{"id", d.id},
          {"name", d.name},
          {"kind", to_string(d.kind)},
          {"total_bytes", d.total_bytes},
          {"free_bytes", bytes_or_null(d.free_bytes)},
          {"used_by_others_bytes", bytes_or_null(d.used_by_others_bytes)},
          {"used_by_others_not_attributable", d.others_not_attributable},
          {"compute_capability", text_or_null(d.compute_capability)},
          {"pci_bus_id", text_or_null(d.pci_bus_id)}};
}

}  // namespace

int devices(const Invocation& inv) {
  const DeviceListing listing = list_devices();
  const CudaVersions& v = listing.versions;
  if (inv.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const DeviceInfo& d : listing.devices) list.push_back(device_json(d));
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuInfo& g : listing.gpus) {
      nlohmann::json gpu = device_json(g.device);
      gpu["unusable_reason"] = text_or_null(g.unusable_reason);
      // NVML's reading (the workbench's Devices tab shows the same); null where NVML cannot say.
      const auto reading = [](double value) {
        return value < 0 ? nlohmann::json(nullptr) : nlohmann::json(value);
      };
      gpu["utilisation_percent"] = reading(g.reading.utilisation_percent);
      gpu["temperature_celsius"] = reading(g.reading.temperature_celsius);
      gpu["power_watts"] = reading(g.reading.power_watts);
      gpus.push_back(std::move(gpu));
    }
    std::cout << nlohmann::json{{"devices", list},
                                {"cuda_unavailable_reason", text_or_null(listing.cuda_unavailable_reason)},
                                {"cuda_requirement",
                                 text_or_null(std::string(cuda_requirement_text(listing.cuda_requirement)))},
                                {"gpus_seen", listing.gpus_seen},
                                {"gpus", gpus},
                                {"versions",
                                 {{"driver", text_or_null(v.driver)},
                                  {"runtime", text_or_null(v.runtime)},
                                  {"cudnn", text_or_null(v.cudnn)},
                                  {"nccl", text_or_null(v.nccl)}}},
                                {"gpu_communicator", text_or_null(gpu_communicator_text(v))},
                                {"launchers",
                                 {{"mpirun", mpi_problem().empty()},
                                  {"mpirun_problem", text_or_null(mpi_problem())},
                                  {"srun", true},
                                  {"torchrun_style", true}}}}
                     .dump(2)
              << "\n";
    return 0;
  }
  for (const DeviceInfo& d : listing.devices)
    std::printf("%-8s %-40s %s total, %s free\n", d.id.c_str(), d.name.c_str(),
                format_bytes(d.total_bytes).c_str(), bytes_or_unknown(d.free_bytes).c_str());
  if (!listing.cuda_unavailable_reason.empty())
    std::printf("CUDA: unavailable: %s\n", listing.cuda_unavailable_reason.c_str());
  if (const std::string_view what = cuda_requirement_text(listing.cuda_requirement); !what.empty())
    std::printf("To use a GPU: %.*s\n", static_cast<int>(what.size()), what.data());
  // The module's detailed view of the GPUs when it could list them, the driver's names otherwise.
  for (const GpuInfo& g : listing.gpus) {
    const DeviceInfo& d = g.device;
    std::printf(
        "  GPU %s: %s, compute capability %s, %s total, %s free, %s used by other processes, PCI %s%s%s\n",
        d.id.c_str(), d.name.c_str(), d.compute_capability.c_str(), format_bytes(d.total_bytes).c_str(),
        bytes_or_unknown(d.free_bytes).c_str(), others_text(d).c_str(), d.pci_bus_id.c_str(),
        g.unusable_reason.empty() ? "" : "; unusable: ", g.unusable_reason.c_str());
  }
  if (listing.gpus.empty())
    for (const std::string& g : listing.gpus_seen) std::printf("  GPU seen by the driver: %s\n", g.c_str());
  if (v.any()) {
    const auto known = [](const std::string& t) { return t.empty() ? std::string("unknown") : t; };
    std::printf("CUDA versions: driver %s, runtime %s, cuDNN %s, NCCL %s\n", known(v.driver).c_str(),
                known(v.runtime).c_str(), known(v.cudnn).c_str(), known(v.nccl).c_str());
  }
  if (const std::string comm = gpu_communicator_text(v); !comm.empty())
    std::printf("Several GPUs sum gradients through %s\n", comm.c_str());
  // Runs over several processes (docs/DISTRIBUTED.md): srun and torchrun's variables need nothing more.
  const std::string mpi = mpi_problem();
  std::printf("Several processes: launched by srun or with torchrun-style variables%s%s\n",
              mpi.empty() ? ", or by mpirun (Open MPI)" : "; not by mpirun: ", mpi.c_str());
  return 0;
}

}  // namespace unet::cli
