// Fit patch: in patch mode (data.mode patch) the largest training patch, and a batch, that fit every device
// with Fit batch's margin (plan/batch_fit.h: each device's memory or memory.cap_mib, its free memory less
// the margin). A patch larger than the training images only pads them, so their largest size bounds it;
// unmeasured, a search limit does. The batch is yours (train.batch_size) when it fits at that patch;
// otherwise the patch is the largest at which a batch of 2 fits (a U-Net learns poorly from single-image
// batches: batch statistics and gradients too noisy), with the largest batch up to yours that fits there.
// Each candidate is a plan, so the search doubles then bisects over multiples of 2^model.depth and says how
// many plans it made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/plan/batch_fit.h"

namespace unet {

struct PatchBounds {
  // Each of config.devices' memory, as FitBounds::memory (empty: read now).
  std::vector<FitBounds::DeviceMemory> memory;
  // The largest training image: the tallest image's height and the widest one's width; <= 0 when not known,
  // and `not_measured` says why.
  std::int64_t image_height = 0, image_width = 0;
  std::string not_measured;
  std::int64_t search_limit = 4096;  // the longest patch side tried when the images' size is not known
};

// The smallest batch Fit patch settles for when yours does not fit (yours when it is smaller).
inline constexpr std::int64_t kMinimumPatchBatch = 2;

struct PatchFit {
  // The proposal: data.patch_size and train.batch_size; 0 x 0 and batch 0 when not even the smallest patch
  // (2^depth) with the minimum batch fits.
  std::int64_t patch_height = 0, patch_width = 0, batch = 0;
  bool batch_kept = false;  // the batch is train.batch_size as it was
  // What stopped the patch growing: largest_image, search_limit, or a memory limit (free_memory,
  // memory_cap, device_memory).
  FitLimit limit = FitLimit::search_limit;
  // The proposal, which limit set it and its figures, in words the CLI and the workbench show as they are:
  // "patch 384x384, batch 8 (yours): the memory cap you set (256.0 MiB); a patch of 448x448 with batch 8
  // would need 270.1 MiB".
  std::string reason;
  int plans = 0;  // how many plans the search made
};

// The patch and batch that fit `config` (data.mode patch; Error(config) otherwise) within `bounds`.
PatchFit fit_patch(const Config& config, PatchBounds bounds = {});

// The patch the search tries at `multiples` of 2^depth on the config's patch's longer side: the shorter
// side scaled with it (at least one multiple), each side at most `max_height` / `max_width`. Exposed for
// tests.
std::pair<std::int64_t, std::int64_t> scaled_patch_size(const Config& config, std::int64_t multiples,
                                                        std::int64_t max_height, std::int64_t max_width);

}  // namespace unet
