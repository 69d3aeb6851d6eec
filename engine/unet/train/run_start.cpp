#include "unet/train/run_start.h"

#include <utility>

#include "unet/core/checked_math.h"
#include "unet/train/run_rules.h"

namespace unet {

void RunStart::set(RunState state) {
  state_ = std::move(state);
  made_by_.reset();
  saved_batch_ = 0;
}

void RunStart::resume(const Checkpoint& c, const std::filesystem::path& file, const UNetSpec& model) {
  refuse_another_model(c.config.model, model);
  state_ = static_cast<const RunState&>(c);
  made_by_ = c.config.optimizer.kind;
  saved_batch_ =
      c.position.effective_batch > 0
          ? c.position.effective_batch
          : checked_mul(c.config.train.batch_size, c.config.train.accumulation, "the checkpoint's batch");
  resuming_ = true;
  checkpoint_file_ = file.empty() ? file : std::filesystem::absolute(file);
  run_dirs_.clear();
  run_dirs_.push_back(c.config.resolve(c.config.checkpoint.dir));
  if (!file.empty()) run_dirs_.push_back(std::filesystem::absolute(file).parent_path());
}

std::optional<ResumedRun> RunStart::resumed_run() const {
  if (!resuming_) return std::nullopt;
  return ResumedRun{run_dirs_, checkpoint_file_, state_.position.step};
}

std::vector<std::vector<float>> RunStart::optimizer_state(const OptimizerConfig& o,
                                                          TrainerObserver& out) const {
  if (state_.adam_m.empty() && state_.adam_v.empty() && state_.sgd_momentum.empty()) return {};
  const OptimizerKind made_by = made_by_.value_or(o.kind);
  // Adam's and AdamW's moments mean the same; SGD's buffer is another thing.
  if ((o.kind == OptimizerKind::sgd) == (made_by == OptimizerKind::sgd)) {
    if (auto kept = state_.optimizer_state(optimizer_slabs(o)); !kept.empty()) return kept;
  }
  out.on_log(LogLevel::warning,
             "the checkpoint's optimizer state (" + std::string(to_string(made_by)) +
                 ") does not apply to optimizer.kind " + to_string(o.kind) +
                 (o.kind == OptimizerKind::sgd && o.momentum == 0 ? " without momentum" : "") +
                 ": the optimizer starts afresh at step " + std::to_string(state_.position.step));
  return {};
}

}  // namespace unet
