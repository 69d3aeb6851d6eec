// The run folder while a run holds it: its lock (run_folder_claim.h), taken first in the preparation, and the
// files the run writes into it: metrics.jsonl, an observer among the run's others, and the checkpoints with
// the policy that chooses them and the config they hold. Those are opened at the end of the preparation, the
// last point a run may stop at before writing; when the run ends, however it ends, they are closed and then
// the lock is released. A start that ends before that point (refused by the preflight, a rule, the memory
// plan, or stopped) in a folder its claim made takes the folder back, with what it wrote there (the lock,
// validation.json, the planner's report): a refused start leaves no folder holding only a lock. A folder that
// was there before keeps everything it held.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "unet/config/config.h"
#include "unet/train/checkpoint_policy.h"
#include "unet/train/metrics_log.h"
#include "unet/train/observer.h"
#include "unet/train/run_folder_claim.h"

namespace unet {

class RunOutputs {
 public:
  RunOutputs() = default;
  ~RunOutputs() { close(); }
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // Claims `run_dir` for the run (claim_run_folder(), whose arguments these are). `out` must outlive this.
  void claim(const Config& config, const std::filesystem::path& run_dir, bool check_previous_run,
             const std::optional<ResumedRun>& resumed_run, bool replace_previous_run, TrainerObserver& out);
  // Opens what the run writes into `run_dir`: with `write_metrics` the log (its lines added to `out`'s
  // targets; `out` must outlive this), with `write_checkpoints` the checkpoints, after removing the temp
  // files an interrupted save left. `resumed`: the folder holds this run's earlier files; it continues at
  // `step`.
  void open(const Config& config, const std::filesystem::path& run_dir, bool write_metrics,
            bool write_checkpoints, bool resumed, std::int64_t step, std::int64_t epoch, ObserverFanout& out);
  // Waits for the saves in flight, closes the log and unlocks the folder; before open(), takes back the
  // folders the claim made (above).
  void close() noexcept;

  // Null when the run writes no checkpoint.
  CheckpointPolicy* checkpoints() noexcept { return checkpoints_.get(); }
  // The config the checkpoints hold (paths made absolute; out-of-memory recovery records its batch here).
  Config& saved_config() noexcept { return saved_config_; }
  // Saves `state` as the checkpoints `targets` name (checkpoints() must not be null).
  void save(RunState state, std::vector<CheckpointWriter::Target> targets);
  void report_saves() {
    if (checkpoints_) checkpoints_->report_saves();
  }
  void finish_saves() {
    if (checkpoints_) checkpoints_->finish_saves();
  }
  // The last last.safetensors written, with its step (none: none, or the run writes no checkpoint).
  const std::optional<std::pair<std::filesystem::path, std::int64_t>>& last_saved() const;

 private:
  // Before open(): removes what the start wrote into the folder its claim made, then that folder and those
  // the claim made above it, each only when nothing else is in it.
  void take_back_made_folders() noexcept;

  std::optional<RunLock> lock_;  // released after what writes into the folder
  std::filesystem::path run_dir_;
  std::vector<std::filesystem::path> made_folders_;  // by the claim (RunFolderClaim::made)
  TrainerObserver* claimed_for_ = nullptr;           // the claim's observer, for the take-back's log lines
  bool opened_ = false;
  ObserverFanout* out_ = nullptr;
  std::unique_ptr<MetricsLog> metrics_log_;
  std::unique_ptr<CheckpointPolicy> checkpoints_;
  Config saved_config_;
};

}  // namespace unet
