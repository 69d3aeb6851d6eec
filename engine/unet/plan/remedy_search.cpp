// The searched remedies (a raised cap, a smaller image), a plan's shortfall and rank_remedies' progress: see
// remedy_search.h.
#include "unet/plan/remedy_search.h"

#include <algorithm>

#include "unet/core/error.h"

namespace unet {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

std::int64_t worst_device(const MemoryPlan& plan, std::int64_t DevicePlan::*figure) {
  std::int64_t worst = 0;
  for (const DevicePlan& d : plan.devices) worst = std::max(worst, d.*figure);
  return worst;
}

}  // namespace

void PlanningProgress::next(const std::string& what) const {
  if (stop.stop_requested()) throw Error(ErrorKind::cancelled, "planning stopped: the settings changed");
  if (report) report(what);
}

std::int64_t shortfall(const MemoryPlan& plan) {
  std::int64_t worst = 0;
  for (const DevicePlan& d : plan.devices) {
    if (d.fits) continue;
    // Under an address-space limit every reserved byte is mapped, so the reserved peak is what must fit.
    const std::int64_t need = d.capacity_note.empty() ? d.peak : d.peak_reserved;
    worst = std::max(worst, need - d.capacity);
  }
  return worst;
}

std::optional<Remedy> raise_cap_remedy(const Config& config, const PlanningProgress& progress) {
  if (config.memory.cap_mib <= 0) return std::nullopt;
  progress.next("remedy: a higher memory cap");
  Config uncapped = config;
  uncapped.memory.cap_mib = 0;
  const MemoryPlan needed = plan_memory(uncapped);
  if (!needed.fits) return std::nullopt;  // a device lacks the bytes: no cap helps
  std::int64_t room = needed.devices.empty() ? 0 : needed.devices.front().capacity;
  for (const DevicePlan& d : needed.devices) room = std::min(room, d.capacity);
  // The peak in use is what a cap must hold; where the caching allocator's blocks need more under it, the
  // peak reserved surely fits.
  for (const std::int64_t bytes :
       {worst_device(needed, &DevicePlan::peak), worst_device(needed, &DevicePlan::peak_reserved)}) {
    const std::int64_t mib = (bytes + kMiB - 1) / kMiB;
    if (mib <= config.memory.cap_mib) continue;
    Remedy r{"memory cap " + std::to_string(mib) + " MiB",
             "raise the memory cap from " + std::to_string(config.memory.cap_mib) + " to " +
                 std::to_string(mib) + " MiB, what the run needs (the device has " + format_bytes(room) + ")",
             {{"memory.cap_mib", mib}},
             false,
             {}};
    progress.next("remedy: " + r.name);
    r.plan = plan_memory(apply_changes(config, r.changes));
    if (r.plan.fits) return r;
  }
  return std::nullopt;
}

std::pair<std::int64_t, std::int64_t> scaled_image_size(const Config& config, std::int64_t multiples) {
  const std::int64_t m = std::int64_t{1} << config.model.depth;
  const std::int64_t h = config.data.input_height(), w = config.data.input_width();
  const std::int64_t longer = std::max(h, w), shorter = std::min(h, w);
  const std::int64_t side = multiples * m;
  const std::int64_t scaled = std::max(m, shorter * side / longer / m * m);
  return h >= w ? std::pair{side, scaled} : std::pair{scaled, side};
}

std::optional<Remedy> smaller_image_remedy(const Config& config, const PlanningProgress& progress) {
  const std::int64_t m = std::int64_t{1} << config.model.depth;
  const std::int64_t now = std::max(config.data.input_height(), config.data.input_width()) / m;
  // Patch mode trains on data.patch_size crops and never reads data.image_size: the patch is what shrinks.
  const bool patches = config.data.mode == DataMode::patch;
  const std::string was =
      std::to_string(config.data.input_height()) + "x" + std::to_string(config.data.input_width());
  std::optional<Remedy> best;
  auto fits = [&](std::int64_t multiples) {
    const auto [h, w] = scaled_image_size(config, multiples);
    const std::string size = std::to_string(h) + "x" + std::to_string(w);
    Remedy r{(patches ? "patch size " : "image size ") + size,
             patches ? "train on patches of " + size + " (was " + was +
                           "), the largest that fits: less context around each pixel"
                     : "resize the images to " + size + " (was " + was +
                           "), the largest that fits: less detail per image",
             {{patches ? "data.patch_size" : "data.image_size", {h, w}}},
             false,
             {}};
    progress.next("remedy: " + r.name);
    r.plan = plan_memory(apply_changes(config, r.changes));
    if (!r.plan.fits) return false;
    best = std::move(r);
    return true;
  };
  // The largest n in [1, now) that fits, for a peak that grows with n: `best` is always good's plan.
  if (now <= 1 || !fits(1)) return std::nullopt;
  std::int64_t good = 1, bad = now;
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return best;
}

}  // namespace unet
