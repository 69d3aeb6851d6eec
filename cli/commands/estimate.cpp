// `unet-train estimate`: the memory plan's peak per device and category, and when it does not fit, the
// remedies that would, best first, then apart those that would not, each with how far it misses.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/core/memory.h"
#include "unet/plan/memory_planner.h"
#include "unet/plan/remedy_search.h"

namespace unet::cli {
namespace {

nlohmann::json by_category_json(const CategoryBytes& bytes) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < memory_category_count; ++k)
    j[std::string(to_string(static_cast<MemoryCategory>(k)))] = bytes[static_cast<std::size_t>(k)];
  return j;
}

}  // namespace

int estimate(const Invocation& inv) {
  const Config config = load_config(inv);
  const MemoryPlan plan = plan_memory(config);
  const std::vector<Remedy> remedies = plan.fits ? std::vector<Remedy>{} : rank_remedies(config, &plan);
  if (inv.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DevicePlan& d : plan.devices)
      devices.push_back(
          {{"device", d.device},
           {"name", d.name},
           {"batch", d.batch},
           {"capacity_bytes", d.capacity},
           {"peak_bytes", d.peak},
           {"peak_reserved_bytes", d.peak_reserved},
           // null until a run on this GPU (model, versions, precision) measured it
           {"overhead_bytes", d.overhead >= 0 ? nlohmann::json(d.overhead) : nlohmann::json()},
           {"device_peak_bytes", d.device_peak >= 0 ? nlohmann::json(d.device_peak) : nlohmann::json()},
           {"by_category", by_category_json(d.at_peak)},
           {"fits", d.fits}});
    nlohmann::json list = nlohmann::json::array();
    for (const Remedy& r : remedies) {
      nlohmann::json peaks = nlohmann::json::array();
      for (const DevicePlan& d : r.plan.devices)
        peaks.push_back({{"device", d.device}, {"peak_bytes", d.peak}, {"fits", d.fits}});
      list.push_back({{"name", r.name},
                      {"description", r.description},
                      {"changes", r.changes},
                      {"changes_model", r.changes_model},
                      {"fits", r.plan.fits},
                      {"shortfall_bytes", shortfall(r.plan)},
                      {"devices", peaks}});
    }
    std::cout << nlohmann::json{{"devices", devices},
                                {"fits", plan.fits},
                                {"remedies", list},
                                {"seconds", plan.seconds}}
                     .dump(2)
              << "\n";
    return 0;
  }
  // Patch mode plans a step at data.patch_size, not data.image_size: which one is planned is said.
  if (config.data.mode == DataMode::patch)
    std::printf("patch %lldx%lld (data.mode patch: each step trains on data.patch_size crops)\n",
                static_cast<long long>(config.data.patch_height),
                static_cast<long long>(config.data.patch_width));
  std::printf("%-8s %-28s %6s %12s %12s %12s  %s\n", "device", "name", "batch", "capacity", "peak",
              "reserved", "fits");
  for (const DevicePlan& d : plan.devices) {
    std::printf("%-8s %-28.28s %6lld %12s %12s %12s  %s\n", d.device.c_str(), d.name.c_str(),
                static_cast<long long>(d.batch), format_bytes(d.capacity).c_str(),
                format_bytes(d.peak).c_str(), format_bytes(d.peak_reserved).c_str(), d.fits ? "yes" : "NO");
    std::string parts;
    for (int k = 0; k < memory_category_count; ++k) {
      const std::int64_t b = d.at_peak[static_cast<std::size_t>(k)];
      if (b == 0) continue;
      parts += (parts.empty() ? "" : ", ") + std::string(to_string(static_cast<MemoryCategory>(k))) + " " +
               format_bytes(b);
    }
    std::printf("         at the peak: %s\n", parts.c_str());
    if (d.overhead > 0)
      std::printf("         on the device: %s (reserved + runtime overhead %s, measured %s)\n",
                  format_bytes(d.device_peak).c_str(), format_bytes(d.overhead).c_str(),
                  d.overhead_measured.c_str());
    else if (d.overhead < 0)
      std::printf(
          "         runtime overhead: not measured yet (CUDA context, cuDNN: the first run on this GPU "
          "measures it; the device will show more than reserved)\n");
  }
  std::printf("planned in %.0f ms\n", plan.seconds * 1e3);
  if (plan.fits) return 0;
  // The ones that fit (the planner ranks them first), then apart, closest first, the ones that would not.
  const auto first_miss =
      std::find_if(remedies.begin(), remedies.end(), [](const Remedy& r) { return !r.plan.fits; });
  std::printf(first_miss == remedies.begin() ? "\ndoes not fit; no remedy alone fits\n"
                                             : "\ndoes not fit; what would, best first:\n");
  for (auto r = remedies.begin(); r != remedies.end(); ++r) {
    if (r == first_miss) std::printf("would not fit, closest first:\n");
    std::int64_t worst = 0;
    for (const DevicePlan& d : r->plan.devices) worst = std::max(worst, d.peak);
    const std::string miss = r->plan.fits ? "" : ", misses by " + format_bytes(shortfall(r->plan));
    std::printf("  %-26s peak %-11s%s  %s\n      %s\n", r->name.c_str(), format_bytes(worst).c_str(),
                miss.c_str(), r->description.c_str(), set_flags(r->changes).c_str());
  }
  return 0;
}

}  // namespace unet::cli
