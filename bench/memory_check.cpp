// Predicted against measured peak memory, one JSON line per device per config: the memory planner
// (plan_memory) beside the same schedule run for real (measure_memory), with the planning time. Without
// arguments, a spread of configs; with --set key=value... arguments, that one config.
//
//   unet-memory-check
//   unet-memory-check --set model.width=64 --set train.batch_size=4
#include <cmath>
#include <cstdio>
#include <iostream>

#include "unet/plan/memory_planner.h"

using namespace unet;

namespace {

void check(const Config& c, const std::string& label) {
  const MemoryPlan plan = plan_memory(c);
  const std::vector<MemoryStats> measured = measure_memory(c);
  for (std::size_t r = 0; r < measured.size(); ++r) {
    const DevicePlan& d = plan.devices[r];
    const double error = 100.0 * std::fabs(static_cast<double>(d.peak - measured[r].peak_in_use)) /
                         static_cast<double>(measured[r].peak_in_use);
    std::cout << nlohmann::json{{"config", label},
                                {"device", d.device},
                                {"batch", d.batch},
                                {"predicted_peak_bytes", d.peak},
                                {"measured_peak_bytes", measured[r].peak_in_use},
                                {"error_percent", error},
                                {"predicted_reserved_bytes", d.peak_reserved},
                                {"measured_reserved_bytes", measured[r].peak_reserved},
                                {"plan_ms", plan.seconds * 1e3}}
                     .dump()
              << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1) {
      nlohmann::json doc = nlohmann::json::object();
      std::string label;
      for (int i = 1; i + 1 < argc; i += 2) {
        if (std::string(argv[i]) != "--set")
          throw ConfigError("", std::string("unknown argument ") + argv[i]);
        apply_override(doc, argv[i + 1]);
        label += (label.empty() ? "" : " ") + std::string(argv[i + 1]);
      }
      check(config_from_json(doc), label);
      return 0;
    }
    const char* configs[][2] = {
        {"width 8, depth 3, batch 1", R"({"model":{"width":8,"depth":3},"train":{"batch_size":1}})"},
        {"width 16, depth 4, batch 8 (the demo)", "{}"},
        {"width 16, depth 4, batch 8, checkpointing", R"({"memory":{"checkpointing":true}})"},
        {"width 32, depth 5, batch 4, separable",
         R"({"model":{"width":32,"depth":5,"separable":true},"train":{"batch_size":4}})"},
        {"width 8, depth 5, batch 16, separable, checkpointing",
         R"({"model":{"width":8,"depth":5,"separable":true},"train":{"batch_size":16},"memory":{"checkpointing":true}})"},
        {"width 32, depth 3, batch 6, 2 replicas",
         R"({"model":{"width":32,"depth":3},"train":{"batch_size":6},"devices":["cpu:0","cpu:1"]})"},
        {"width 64, depth 4, batch 2 (classic)", R"({"model":{"width":64},"train":{"batch_size":2}})"},
    };
    for (const auto& [label, json] : configs) check(config_from_json(nlohmann::json::parse(json)), label);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unet-memory-check: %s\n", e.what());
    return 1;
  }
}
