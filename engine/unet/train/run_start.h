// Where a run starts (Trainer::set_start, Trainer::resume_from): a fresh model (parameters empty: from
// train.seed) or a checkpoint's state; the optimizer.kind that made its optimizer state (state another
// optimizer made is not used: the config's starts afresh); the samples per step of the run that reached its
// position (a run resumed with another batch maps its position by samples, not steps); and, for a resume, the
// file and folders it came from (a run folder moved or copied elsewhere is still the run's).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/io/checkpoint.h"
#include "unet/train/observer.h"
#include "unet/train/run_folder_claim.h"

namespace unet {

class RunStart {
 public:
  // Starts at `state`, made by the config's optimizer at the config's batch.
  void set(RunState state);
  // Continues the run of checkpoint `c`, read from `file` (empty: unknown), with a model `model`: refused
  // when the checkpoint's model is another.
  void resume(const Checkpoint& c, const std::filesystem::path& file, const UNetSpec& model);

  const RunState& state() const noexcept { return state_; }
  const TrainingPosition& position() const noexcept { return state_.position; }
  bool resuming() const noexcept { return resuming_; }  // resume() was called: the run continues its folder's
  // The run continues one in its folder: resumed, or set to start past step 0.
  bool continues() const noexcept { return resuming_ || state_.position.step > 0; }
  std::int64_t saved_batch() const noexcept { return saved_batch_; }  // 0: the effective batch of this run
  // The optimizer.kind that made the state ("": the config's).
  std::string optimizer_name() const { return made_by_ ? to_string(*made_by_) : ""; }
  const std::filesystem::path& checkpoint_file() const noexcept { return checkpoint_file_; }
  // The run a resume expects to find in its folder (claim_run_folder()); none for a run that was not resumed.
  std::optional<ResumedRun> resumed_run() const;

  // The state's optimizer state, one slab per Optimizer::state() tensor; empty (with a log line to `out`)
  // when it was made by an optimizer whose state `optimizer`'s cannot use.
  std::vector<std::vector<float>> optimizer_state(const OptimizerConfig& optimizer,
                                                  TrainerObserver& out) const;

 private:
  RunState state_;
  std::optional<OptimizerKind> made_by_;  // none: the config's
  std::int64_t saved_batch_ = 0;
  bool resuming_ = false;
  // The checkpoint's own checkpoint.dir and the checkpoint file's folder.
  std::vector<std::filesystem::path> run_dirs_;
  std::filesystem::path checkpoint_file_;  // absolute; empty: unknown
};

}  // namespace unet
