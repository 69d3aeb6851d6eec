// The remedies that need a search rather than one plan, and what the planner's longer answers share: raising
// the memory cap the user set (to what the run needs, when the device has it), the largest smaller
// data.image_size (in patch mode data.patch_size) that fits, how far a plan misses its devices, and the
// progress and cancellation of rank_remedies. Apart from memory_planner.cpp so that each search is one
// function with its own rule: a remedy offered as fitting is one whose changes were planned and fit.
#pragma once

#include <functional>
#include <optional>
#include <stop_token>
#include <string>

#include "unet/plan/memory_planner.h"

namespace unet {

// What rank_remedies is doing, for a user waiting on it, and a way to stop it. `report`, when set, is called
// on the caller's thread before each plan with what is planned, in words ("remedy: mixed-bf16"). Once `stop`
// is requested, the next plan is not begun: the call throws Error(ErrorKind::cancelled).
struct PlanningProgress {
  std::function<void(const std::string& what)> report;
  std::stop_token stop;

  // Says `what` is next, or throws when stopped.
  void next(const std::string& what) const;
};

// How many bytes `plan` misses by: over its devices that do not fit, the largest excess of what must fit
// (the peak in use; the peak reserved where an address-space limit set the capacity) over the capacity. 0
// when it fits, or when a device fails only by the caching allocator's blocks under a cap.
std::int64_t shortfall(const MemoryPlan& plan);

// The cap that holds the run: when memory.cap_mib is set and every device has the bytes the run needs
// (planned without the cap), memory.cap_mib raised to that peak rounded up to a whole MiB (or, when the
// allocator's blocks do not fit that, to the peak reserved). Planned; nullopt when no cap is set, when a
// device lacks the bytes, or when neither figure fits.
std::optional<Remedy> raise_cap_remedy(const Config& config, const PlanningProgress& progress);

// The largest data.image_size smaller than the config's that fits (in patch mode, data.patch_size: the
// size a training step takes, DataConfig::input_height/width): the longer side a multiple of
// 2^model.depth, the shorter one scaled with it (the aspect ratio kept as the multiples allow, at least one
// multiple), found by bisection over the multiples (the peak grows with the pixels). Planned; nullopt when
// not even the smallest (2^depth on the longer side) fits.
std::optional<Remedy> smaller_image_remedy(const Config& config, const PlanningProgress& progress);

// The input size (image, or patch in patch mode) the search tries for `multiples` of 2^depth on the longer
// side: exposed for tests.
std::pair<std::int64_t, std::int64_t> scaled_image_size(const Config& config, std::int64_t multiples);

}  // namespace unet
