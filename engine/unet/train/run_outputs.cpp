#include "unet/train/run_outputs.h"

#include <algorithm>
#include <string>

#include "unet/io/atomic_file.h"
#include "unet/train/run_folder.h"

namespace unet {

void RunOutputs::open(const Config& config, const std::filesystem::path& run_dir, bool write_metrics,
                      bool write_checkpoints, bool resumed, std::int64_t step, std::int64_t epoch,
                      ObserverFanout& out) {
  out_ = &out;
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
  lock_.reset();
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
