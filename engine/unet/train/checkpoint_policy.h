// Which checkpoints a run writes, and what became of them (docs/CONFIG.md, checkpoint.*): after each
// validation best.safetensors when checkpoint.monitor improved on the best so far (an absent metric, NaN,
// never does), at an epoch's end also the periodic file of checkpoint.template every checkpoint.every_epochs
// epochs (with save_best_only only improvements) and last.safetensors. The saves go to a CheckpointWriter;
// this object reports their outcomes to the observer, remembers the last last.safetensors written (what a
// diverged run points to), and the files whose latest save failed: a run that ends with any throws naming
// them (throw_unsaved).
//
// A resumed run continues the folder's record: the periodic files its metrics.jsonl names count toward
// keep_last, and best.safetensors's value is the best to beat. checkpoint.monitor with
// checkpoint.monitor_class is a Monitor (monitor.h); the reports of best.safetensors name it and the value
// the file was chosen for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/config/config.h"
#include "unet/train/checkpoint_writer.h"
#include "unet/train/monitor.h"
#include "unet/train/observer.h"

namespace unet {

// The config a run's checkpoints hold: its paths made absolute (the data, the validation split, `run_dir`),
// so that the checkpoint resumes from anywhere.
Config config_for_checkpoints(const Config& config, const std::filesystem::path& run_dir);

class CheckpointPolicy {
 public:
  // For the run folder `run_dir`, reporting to `out` (which must outlive this). `resumed`: the folder holds
  // this run's earlier files; `step`: where the run starts.
  CheckpointPolicy(const CheckpointConfig& config, std::filesystem::path run_dir, bool resumed,
                   std::int64_t step, TrainerObserver& out);
  ~CheckpointPolicy();  // waits for the saves in flight
  CheckpointPolicy(const CheckpointPolicy&) = delete;
  CheckpointPolicy& operator=(const CheckpointPolicy&) = delete;

  // The files a validation reported by `r` asks for (`epoch_end`: at an epoch's end, else within one).
  // Updates the best value. A periodic name the template cannot make of the metrics is skipped with a
  // warning.
  std::vector<CheckpointWriter::Target> targets_after(const EpochReport& r, bool epoch_end);
  const std::optional<double>& best() const noexcept { return best_; }
  const Monitor& monitor() const noexcept { return monitor_; }
  // What best.safetensors and last.safetensors held when the run began (a run continued in its folder), as
  // on_checkpoint reports a save of them; empty for a file that was not there or could not be read.
  const std::vector<CheckpointReport>& found_at_start() const noexcept { return found_at_start_; }
  // The file a checkpoint asked for during the run (Trainer::request_checkpoint) at `step` goes to.
  CheckpointWriter::Target requested_at(std::int64_t step) const;

  std::filesystem::path file(const std::string& name) const { return run_dir_ / name; }
  void submit(Checkpoint checkpoint, std::vector<CheckpointWriter::Target> targets);
  // Reports the saves finished since the last call.
  void report_saves();
  // Waits for every save asked for, then reports them.
  void finish_saves();

  // last.safetensors holds the state of `step` (an epoch's end wrote it): the run's end need not write it.
  void mark_last_written(std::int64_t step) noexcept { last_written_step_ = step; }
  bool last_written_at(std::int64_t step) const noexcept { return last_written_step_ == step; }
  // The last last.safetensors this run wrote (or resumed from the run folder), with its step.
  const std::optional<std::pair<std::filesystem::path, std::int64_t>>& last_saved() const noexcept {
    return last_saved_;
  }

  // The state best.safetensors holds when it is that of `step` (once the saves asked for are done); none
  // when it is not, or cannot be read (logged).
  std::optional<RunState> saved_best_at(std::int64_t step);

  bool has_unsaved() const noexcept { return !unsaved_.empty(); }
  // Error(io) naming each checkpoint whose latest save failed, for a run that reached `step`.
  [[noreturn]] void throw_unsaved(std::int64_t step) const;

 private:
  // The periodic files the run wrote before and the best value so far, from the folder.
  std::vector<std::filesystem::path> find_earlier_checkpoints();

  // The report of a save of `reason` into `path`, of the state at `step` and `epoch` with `metrics`.
  CheckpointReport report_of(const std::filesystem::path& path, const std::string& reason, std::int64_t step,
                             std::int64_t epoch, const nlohmann::json& metrics) const;

  CheckpointConfig config_;
  Monitor monitor_;
  std::vector<CheckpointReport> found_at_start_;
  std::filesystem::path run_dir_;
  TrainerObserver& out_;
  std::optional<double> best_;  // the best checkpoint.monitor value so far
  std::int64_t last_written_step_ = -1;
  // Checkpoints whose latest save failed, with the reason.
  std::map<std::filesystem::path, std::string> unsaved_;
  std::optional<std::pair<std::filesystem::path, std::int64_t>> last_saved_;
  std::unique_ptr<CheckpointWriter> writer_;  // last: its destructor finishes the saves first
};

}  // namespace unet
