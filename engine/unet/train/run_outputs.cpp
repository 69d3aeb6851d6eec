#include "unet/train/run_outputs.h"

#include <algorithm>
#include <string>

#include "unet/io/atomic_file.h"
#include "unet/train/run_folder.h"

namespace unet {

void RunOutputs::claim(const Config& config, const std::filesystem::path& run_dir, bool check_previous_run,
                       const std::optional<ResumedRun>& resumed_run, bool replace_previous_run,
                       TrainerObserver& out) {
  RunFolderClaim claim =
      claim_run_folder(config, run_dir, check_previous_run, resumed_run, replace_previous_run, out);
  lock_ = std::move(claim.lock);
  run_dir_ = run_dir;
  made_folders_ = std::move(claim.made);
  claimed_for_ = &out;
}

void RunOutputs::open(const Config& config, const std::filesystem::path& run_dir, bool write_metrics,
                      bool write_checkpoints, bool resumed, std::int64_t step, std::int64_t epoch,
                      ObserverFanout& out) {
  out_ = &out;
  opened_ = true;
  if (write_metrics) {
    metrics_log_ = std::make_unique<MetricsLog>(run_dir / kMetricsFileName, resumed);
    if (metrics_log_->cut_bytes() > 0)
      out.on_log(LogLevel::info, "cut " + std::to_string(metrics_log_->cut_bytes()) +
                                     " bytes of a partial last record off " +
                                     (run_dir / kMetricsFileName).string());
    metrics_log_->write_start(resumed, step, epoch);
    out.targets.push_back(metrics_log_.get());
  }
  if (write_checkpoints) {
    // A crash during a save leaves a temp file beside the checkpoints (the checkpoint itself stays whole).
    // Only this run writes into the folder now (its lock), so any temp file here is a leftover.
    for (const auto& stale : remove_stale_temp_files(run_dir))
      out.on_log(LogLevel::info, "removed " + stale.string() + ", left by an interrupted save");
    saved_config_ = config_for_checkpoints(config, run_dir);
    checkpoints_ = std::make_unique<CheckpointPolicy>(config.checkpoint, run_dir, resumed, step, out);
  }
}

void RunOutputs::close() noexcept {
  checkpoints_.reset();  // waits for the saves in flight
  if (out_) std::erase(out_->targets, metrics_log_.get());
  metrics_log_.reset();
  if (!opened_ && lock_ && !made_folders_.empty()) take_back_made_folders();
  lock_.reset();
  made_folders_.clear();
}

void RunOutputs::take_back_made_folders() noexcept {
  const auto log = [this](LogLevel level, const std::string& message) noexcept {
    try {
      if (claimed_for_) claimed_for_->on_log(level, message);
    } catch (...) {
      log_noexcept("a refused start's folder", message);
    }
  };
  // The folder is new, so the files of these names in it are this start's own; the lock file goes last,
  // still locked (RunLock checks that the file it locks is still the folder's).
  try {
    for (const std::string_view name : {kMetricsFileName, kValidationSplitName, kRunLockName})
      remove_run_file(run_dir_, name);
  } catch (const std::exception& e) {
    log(LogLevel::warning, std::string(e.what()) + "; the run folder " + run_dir_.string() + " stays");
    return;
  }
  lock_.reset();
  std::size_t removed = 0;
  for (const std::filesystem::path& folder : made_folders_) {
    std::error_code ec;
    // remove() takes a folder away only when it is empty: anything another program put there keeps it.
    if (!std::filesystem::remove(folder, ec) || ec) break;
    ++removed;
  }
  if (removed > 0)
    log(LogLevel::info,
        "removed the run folder " + run_dir_.string() +
            (removed > 1 ? " (and the folders above it up to " + made_folders_[removed - 1].string() + ")"
                         : std::string()) +
            ": this start made it and trained nothing");
}

void RunOutputs::save(RunState state, std::vector<CheckpointWriter::Target> targets) {
  Checkpoint cp;
  static_cast<RunState&>(cp) = std::move(state);
  cp.config = saved_config_;
  // The checkpoint names the samples per step only when they are not its config's.
  if (cp.position.effective_batch == saved_config_.train.batch_size * saved_config_.train.accumulation)
    cp.position.effective_batch = 0;
  checkpoints_->submit(std::move(cp), std::move(targets));
}

const std::optional<std::pair<std::filesystem::path, std::int64_t>>& RunOutputs::last_saved() const {
  static const std::optional<std::pair<std::filesystem::path, std::int64_t>> none;
  return checkpoints_ ? checkpoints_->last_saved() : none;
}

}  // namespace unet
