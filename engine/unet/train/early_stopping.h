// Early stopping (docs/CONFIG.md, early_stopping.*), as Keras's EarlyStopping: after each validation the
// monitored metric either improves on the best so far by more than min_delta (an absent metric, NaN, never
// does), or one more validation is counted without improvement; `patience` of those in a row end the run.
// With restore_best the run ends with the best validation's state, which this object keeps while it is the
// best. Its counts travel in checkpoints (TrainingPosition::training_state, "early_stopping") so that a
// resumed run goes on counting; a state kept for another monitor (another metric, or another class of
// checkpoint.monitor_class) starts the count over.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "unet/config/config.h"
#include "unet/io/run_state.h"
#include "unet/train/monitor.h"

namespace unet {

class EarlyStopping {
 public:
  // `monitor_class`: checkpoint.monitor_class, the class val_iou and val_dice follow (monitor.h).
  explicit EarlyStopping(EarlyStoppingConfig config, const std::string& monitor_class = "mean");

  bool active() const noexcept { return config_.patience > 0; }
  const std::optional<double>& best() const noexcept { return best_; }
  std::int64_t best_epoch() const noexcept { return best_epoch_; }
  std::int64_t best_step() const noexcept { return best_step_; }
  std::int64_t wait() const noexcept { return wait_; }

  enum class Verdict : std::uint8_t { off, improved, waiting, stop };
  // A validation at `epoch` (1-based) and `step` measured `value` of the monitor. `improved`: a new best,
  // whose state the caller hands to keep_best_state() when restores_best(); `stop`: patience ran out, and
  // stop_reason() says why.
  Verdict update(double value, std::int64_t epoch, std::int64_t step);
  std::string stop_reason(std::int64_t epoch) const;

  bool restores_best() const noexcept { return config_.restore_best; }
  void keep_best_state(RunState state) { best_state_ = std::move(state); }
  // The kept best state, handed over (empty: none was kept since this process began).
  std::optional<RunState> take_best_state() { return std::exchange(best_state_, std::nullopt); }

  // What a checkpoint keeps: {"monitor" (Monitor::key()), "best" (null: none yet), "best_epoch", "best_step",
  // "wait"}; null when early stopping is off.
  nlohmann::json state() const;
  // Continues from state() of a checkpoint; ignored unless it watched the same monitor.
  void restore(const nlohmann::json& saved);

 private:
  EarlyStoppingConfig config_;
  Monitor monitor_;
  std::optional<double> best_;
  std::int64_t best_epoch_ = 0, best_step_ = 0, wait_ = 0;
  std::optional<RunState> best_state_;
};

}  // namespace unet
