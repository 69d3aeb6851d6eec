// `unet-train summary`: the model's layers with their output shapes, parameters and activation memory.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/core/memory.h"
#include "unet/plan/memory_planner.h"

namespace unet::cli {

int summary(const Invocation& inv) {
  const Config config = load_config(inv);
  const ModelSummary summary = summarize_model(config);
  const auto& rows = summary.layers;
  const std::int64_t per_device = summary.batch_per_device;
  if (inv.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& r : rows)
      layers.push_back({{"name", r.name},
                        {"kind", r.kind},
                        {"output_shape", {r.output.n, r.output.c, r.output.h, r.output.w}},
                        {"parameters", r.parameters},
                        {"activation_bytes", r.saved_bytes}});
    std::cout << nlohmann::json{{"layers", layers},
                                {"parameters", summary.parameters},
                                {"activation_bytes", summary.kept_bytes},
                                {"activation_peak_bytes", summary.peak_bytes},
                                {"batch_per_device", per_device}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%-14s %-18s %-22s %12s %12s\n", "layer", "kind", "output (n,c,h,w)", "parameters",
              "activations");
  for (const auto& r : rows) {
    const std::string shape = std::to_string(r.output.n) + "x" + std::to_string(r.output.c) + "x" +
                              std::to_string(r.output.h) + "x" + std::to_string(r.output.w);
    std::printf("%-14s %-18s %-22s %12s %12s\n", r.name.c_str(), r.kind.c_str(), shape.c_str(),
                with_commas(r.parameters).c_str(), format_bytes(r.saved_bytes).c_str());
  }
  std::printf(
      "total: %s parameters (%s as f32); at %lld images per device the forward pass keeps %s of activations "
      "for backward, and they peak at %s%s\n",
      with_commas(summary.parameters).c_str(), format_bytes(summary.parameters * 4).c_str(),
      static_cast<long long>(per_device), format_bytes(summary.kept_bytes).c_str(),
      format_bytes(summary.peak_bytes).c_str(), config.memory.checkpointing ? " (with checkpointing)" : "");
  return 0;
}

}  // namespace unet::cli
