// The terminal's view of a training run: the run's setup, then a progress line that updates in place on a
// terminal (a line every few seconds otherwise), each epoch's metrics, the checkpoints saved, the warnings on
// stderr, and what would fit after running out of memory. The trainer's observer for `unet-train train` (rank
// 0 of a run over several processes; the others write a RankLog).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "unet/train/observer.h"

namespace unet::cli {

class ProgressPrinter final : public TrainerObserver {
 public:
  ProgressPrinter();

  void on_start(const RunInfo& i) override;
  void on_step(const StepReport& r) override;
  void on_epoch(const EpochReport& r) override;
  void on_checkpoint(const CheckpointReport& r) override;
  void on_log(LogLevel level, const std::string& message) override;
  void on_error(const ErrorReport& e) override;
  void on_state(TrainerState s) override;

  // Whether training began (on_start): a run stopped before has nothing to show for it.
  bool started() const { return started_; }

 private:
  bool tty_;
  std::int64_t epochs_ = 0;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace unet::cli
