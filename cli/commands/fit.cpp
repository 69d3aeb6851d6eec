// `unet-train fit`: the largest global batch that fits the selected devices, and each device's alone, within
// their free memory less a margin and the training set (plan/batch_fit.h), and which limit applied. In patch
// mode (data.mode patch) the largest patch and a batch that fit instead (plan/patch_fit.h), with the --set
// flags that take them.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/plan/batch_fit.h"
#include "unet/plan/patch_fit.h"
#include "unet/train/training_set.h"

namespace unet::cli {
namespace {

int fit_patch_size(const Invocation& inv, const Config& config) {
  const PatchFit result = fit_patch(config, patch_bounds_for_run(config));
  const nlohmann::json changes = {{"data.patch_size", {result.patch_height, result.patch_width}},
                                  {"train.batch_size", result.batch}};
  if (inv.json) {
    std::cout << nlohmann::json{{"patch_size", {result.patch_height, result.patch_width}},
                                {"batch_size", result.batch},
                                {"batch_kept", result.batch_kept},
                                {"limit", to_string(result.limit)},
                                {"reason", result.reason},
                                {"plans", result.plans}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("largest patch that fits: %lldx%lld with batch %lld (data.patch_size, train.batch_size)\n",
                static_cast<long long>(result.patch_height), static_cast<long long>(result.patch_width),
                static_cast<long long>(result.batch));
    std::printf("%s\n", printable(result.reason).c_str());
    if (result.batch > 0) std::printf("  %s\n", set_flags(changes).c_str());
    std::printf("searched in %d plan%s\n", result.plans, result.plans == 1 ? "" : "s");
  }
  if (result.batch == 0) {
    std::fprintf(stderr,
                 "unet-train: not even the smallest patch fits; `unet-train estimate` shows what would (a "
                 "smaller model, mixed precision, activation checkpointing, more memory)\n");
    return 1;
  }
  return 0;
}

}  // namespace

int fit(const Invocation& inv) {
  const Config config = load_config(inv);
  if (config.data.mode == DataMode::patch) return fit_patch_size(inv, config);
  const BatchFit result = fit_batch(config, fit_bounds_for_run(config));
  if (inv.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : result.devices)
      devices.push_back({{"device", d.device}, {"max_batch", d.max_batch}});
    std::cout << nlohmann::json{{"global_batch", result.global_batch},
                                {"limit", to_string(result.limit)},
                                {"reason", result.reason},
                                {"training_samples", result.training_samples},
                                {"devices", devices}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("largest global batch that fits: %lld (train.batch_size, without accumulation)\n",
                static_cast<long long>(result.global_batch));
    std::printf("%s\n", printable(result.reason).c_str());
    for (const auto& d : result.devices)
      std::printf("  %-8s alone: %lld\n", d.device.c_str(), static_cast<long long>(d.max_batch));
  }
  // Nothing fits: a failure a script must not take for an answer.
  if (result.global_batch == 0) {
    std::fprintf(
        stderr,
        "unet-train: not even a batch of 1 fits; `unet-train estimate --set train.batch_size=1` shows "
        "what would (a smaller model, mixed precision, activation checkpointing, more memory)\n");
    return 1;
  }
  return 0;
}

}  // namespace unet::cli
