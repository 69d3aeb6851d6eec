#include "unet/train/run_failures.h"

#include <algorithm>

#include "unet/backend/address_space.h"
#include "unet/core/number_text.h"
#include "unet/plan/remedy_search.h"
#include "unet/train/metrics_log.h"
#include "unet/train/run_folder.h"

namespace unet {

ErrorReport error_report(const std::exception& e) {
  return {
      .type = "internal", .device = {}, .message = e.what(), .fatal = true, .where = {}, .out_of_memory = {}};
}

ErrorReport error_report(const Error& e, bool fatal) {
  return {.type = to_string(e.kind()),
          .device = e.device(),
          .message = e.what(),
          .fatal = fatal,
          .where = e.location(),
          .out_of_memory = {}};
}

Error diverged_error(std::int64_t step, const std::string& what, const std::string& cause, bool applied,
                     double lr,
                     const std::optional<std::pair<std::filesystem::path, std::int64_t>>& last_saved) {
  const std::string resume_from =
      last_saved ? last_saved->first.string() + " (step " + std::to_string(last_saved->second) +
                       ") holds the last finite state"
                 : std::string(
                       "no checkpoint of this run was saved before it diverged, so there is none to "
                       "resume: start again");
  return Error(ErrorKind::diverged,
               "training diverged at step " + std::to_string(step) + ": " + what + " " + cause +
                   (applied ? "" : "; the step was not applied") +
                   "; the likely cause is a learning rate too high for this model (train.lr " +
                   number_text(lr) + "); " + resume_from,
               {},
               "lower train.lr (now " + number_text(lr) + ", try " + number_text(lr / 10) + " or less)" +
                   (last_saved ? " and resume from " + last_saved->first.string() : ""));
}

OutOfMemoryReport out_of_memory_report(const OutOfMemoryError& e, std::int64_t step) {
  const MemoryStats& s = e.stats();
  return {.step = step,
          .requested_bytes = e.requested(),
          .category = e.category(),
          .capacity_bytes = s.capacity,
          .in_use_bytes = s.in_use,
          .in_use_by = s.in_use_by,
          .remedies = {},
          .recovered = false,
          .batch_size = 0,
          .accumulation = 0,
          .planned = false,
          .resume_from = {}};
}

std::vector<RemedyReport> remedies_for(const Config& failing, std::string& fitting, TrainerObserver& out) {
  std::vector<RemedyReport> remedies;
  try {
    std::vector<Remedy> ranked = rank_remedies(failing);
    // Under an address-space limit, a remedy fits only what the limit leaves, as the plan did.
    if (const AddressSpace space = read_address_space(); space.limited()) {
      for (Remedy& r : ranked) fit_address_space_limit(r.plan, failing, space);
      std::stable_partition(ranked.begin(), ranked.end(), [](const Remedy& r) { return r.plan.fits; });
    }
    for (const Remedy& r : ranked) {
      std::int64_t peak = 0;
      for (const DevicePlan& d : r.plan.devices) peak = std::max(peak, d.peak);
      remedies.push_back(
          {r.name, r.description, r.changes, r.changes_model, peak, r.plan.fits, shortfall(r.plan)});
      if (r.plan.fits && fitting.size() < 200) fitting += (fitting.empty() ? "" : "; ") + r.name;
    }
  } catch (const Error& planning) {
    out.on_log(LogLevel::warning, std::string("could not rank remedies: ") + planning.what());
  }
  return remedies;
}

OutOfMemoryVerdict judge_out_of_memory(const OutOfMemoryError& e, const Config& config, std::int64_t step,
                                       std::int64_t effective_batch, std::int64_t accumulation,
                                       TrainerObserver& out) {
  OutOfMemoryVerdict v{out_of_memory_report(e, step + 1), {}, e.device(), e.location()};
  // The planner's remedies for the settings that just failed.
  const std::int64_t micro = (effective_batch + accumulation - 1) / accumulation;
  Config failing = config;
  failing.train.batch_size = micro;
  failing.train.accumulation = accumulation;
  std::string remedy_names;
  v.report.remedies = remedies_for(failing, remedy_names, out);
  v.report.recovered = config.memory.auto_recover_oom && micro > 1;
  v.message = std::string(e.what()) + (remedy_names.empty() ? "" : "; what fits: " + remedy_names);
  if (v.report.recovered) {
    const std::int64_t doubled = accumulation * 2;
    const std::int64_t new_micro = (effective_batch + doubled - 1) / doubled;
    v.report.batch_size = new_micro;
    v.report.accumulation = doubled;
    v.message += "; recovering: micro-batch " + std::to_string(micro) + " -> " + std::to_string(new_micro) +
                 ", accumulation " + std::to_string(accumulation) + " -> " + std::to_string(doubled) +
                 ", the same " + std::to_string(effective_batch) + " samples per step";
  }
  return v;
}

void refuse_if_plan_cannot_fit(const MemoryPlan& plan, const Config& config, std::int64_t step,
                               const std::string& resume_from, const std::filesystem::path& log_dir,
                               ObserverFanout& out, bool& reported) {
  for (const DevicePlan& d : plan.devices) {
    // The planner replays the engine's allocations block for block, so on a CPU its peak is exact; on a GPU
    // the library's own workspaces may differ a little, so only a clear excess is refused there.
    const double margin = d.device.starts_with("cpu") ? 1.0 : 1.1;
    // Under an address-space limit what the allocator reserves is mapped, and must fit.
    const std::int64_t need = d.capacity_note.empty() ? d.peak : d.peak_reserved;
    if (d.fits || static_cast<double>(need) <= margin * static_cast<double>(d.capacity)) continue;
    if (config.memory.auto_recover_oom) {
      out.on_log(LogLevel::info, d.device + ": the planned peak " + format_bytes(d.peak) + " is over the " +
                                     format_bytes(d.capacity) +
                                     " there is; memory.auto_recover_oom will shrink the micro-batch");
      return;
    }
    std::string fitting;
    OutOfMemoryReport report{.step = step + 1,
                             .requested_bytes = need,
                             .category = MemoryCategory::other,
                             .capacity_bytes = d.capacity,
                             .in_use_bytes = 0,
                             .in_use_by = d.at_peak,
                             .remedies = remedies_for(config, fitting, out),
                             .recovered = false,
                             .batch_size = 0,
                             .accumulation = 0,
                             .planned = true,
                             .resume_from = {}};
    // The category that holds the most at the peak is the one to name.
    for (int k = 0; k < memory_category_count; ++k)
      if (d.at_peak[static_cast<std::size_t>(k)] > d.at_peak[static_cast<std::size_t>(report.category)])
        report.category = static_cast<MemoryCategory>(k);
    report.resume_from = resume_from;
    MemoryStats stats;
    stats.capacity = d.capacity;
    stats.cap = config.memory.cap_bytes();
    stats.at_peak_by = d.at_peak;
    const OutOfMemoryError error(
        d.device,
        "out of memory: refused before training: the memory plan for this run peaks at " +
            format_bytes(need) + (d.capacity_note.empty() ? "" : " reserved") + " on " + d.device +
            (!d.capacity_note.empty() ? ", over the " + format_bytes(d.capacity) + " " + d.capacity_note
             : stats.cap > 0          ? ", over its cap of " + format_bytes(d.capacity) + " (memory.cap_mib)"
                                      : ", over its " + format_bytes(d.capacity)) +
            "; nothing was allocated" + (fitting.empty() ? "" : "; what fits: " + fitting),
        d.peak, report.category, stats);
    // The report goes to metrics.jsonl as well, although the run never got as far as opening it.
    std::unique_ptr<MetricsLog> log;
    if (!log_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(log_dir, ec);
      if (!ec) {
        log = std::make_unique<MetricsLog>(log_dir / kMetricsFileName, true);
        out.targets.push_back(log.get());
      }
    }
    out.on_error({.type = to_string(ErrorKind::out_of_memory),
                  .device = d.device,
                  .message = error.what(),
                  .fatal = true,
                  .where = error.location(),
                  .out_of_memory = report});
    if (log) out.targets.pop_back();
    reported = true;
    throw error;
  }
}

}  // namespace unet
