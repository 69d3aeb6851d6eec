// How a run that fails says so. Out of memory: what failed and where, with the planner's remedies ranked and
// marked by whether they fit, for a step that ran out, for replicas that could not be made, and for a run
// refused before anything was allocated because its memory plan cannot fit a device. Divergence: what went
// inf or NaN, the likely cause and the checkpoint to resume from.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/config/config.h"
#include "unet/core/error.h"
#include "unet/plan/memory_planner.h"
#include "unet/train/observer.h"

namespace unet {

// The observers' report of `e`, which ends the run when `fatal`.
ErrorReport error_report(const Error& e, bool fatal = true);
// The same for an exception that is not an Error (a defect): "internal", and fatal.
ErrorReport error_report(const std::exception& e);

// The error of a run that diverged at `step` (1-based): `what` went inf or NaN, `cause` says why no loss
// scaling absorbed it; `applied` false: the step was not applied. `last_saved`: the checkpoint that holds
// the last finite state, with its step, if any.
Error diverged_error(std::int64_t step, const std::string& what, const std::string& cause, bool applied,
                     double lr,
                     const std::optional<std::pair<std::filesystem::path, std::int64_t>>& last_saved);

// The report of `e` at `step` (the step that failed, 1-based), without remedies.
OutOfMemoryReport out_of_memory_report(const OutOfMemoryError& e, std::int64_t step);

// What a step that ran out of memory (`e`, after `step` steps, at `effective_batch` samples per step in
// `accumulation` micro-batches) leads to: its report, with the planner's remedies for the settings that
// failed, and its message. With memory.auto_recover_oom and a micro-batch above 1 it recovers
// (report.recovered): the accumulation doubles (report.accumulation, report.batch_size: the new
// micro-batch), the samples per step stay.
struct OutOfMemoryVerdict {
  OutOfMemoryReport report;
  std::string message;
  std::string device, where;
  ErrorReport error(bool fatal) const {
    return {.type = to_string(ErrorKind::out_of_memory),
            .device = device,
            .message = message,
            .fatal = fatal,
            .where = where,
            .out_of_memory = report};
  }
};
OutOfMemoryVerdict judge_out_of_memory(const OutOfMemoryError& e, const Config& config, std::int64_t step,
                                       std::int64_t effective_batch, std::int64_t accumulation,
                                       TrainerObserver& out);

// The planner's remedies for `failing`, ranked (under an address-space limit, those that fit what it leaves
// first); `fitting` gets the names of those that fit, for a message. A planning failure is logged to `out`
// and gives none.
std::vector<RemedyReport> remedies_for(const Config& failing, std::string& fitting, TrainerObserver& out);

// Returns when `plan` fits every device (or memory.auto_recover_oom will shrink the micro-batch, which it
// logs). Otherwise reports the out-of-memory error a failed step would give, before step `step` + 1 and
// offering `resume_from`, to `out` and, when `log_dir` is not empty, to its metrics.jsonl; sets `reported`
// and throws it.
void refuse_if_plan_cannot_fit(const MemoryPlan& plan, const Config& config, std::int64_t step,
                               const std::string& resume_from, const std::filesystem::path& log_dir,
                               ObserverFanout& out, bool& reported);

}  // namespace unet
