// A process of a run over several processes other than rank 0 keeps the terminal for errors: its progress,
// warnings and errors go to <checkpoint.dir>/rank-N.log (rank 0 prints and writes metrics.jsonl), a
// time-stamped line each.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "unet/train/observer.h"

namespace unet::cli {

class RankLog final : public TrainerObserver {
 public:
  // Opens `file` for appending (creating its folder); unet::Error(io) when it cannot be written.
  RankLog(const std::filesystem::path& file, int rank);

  void on_start(const RunInfo& i) override;
  void on_step(const StepReport& r) override;
  void on_epoch(const EpochReport& r) override;
  void on_log(LogLevel level, const std::string& message) override;
  void on_error(const ErrorReport& e) override { line("error: " + e.message); }
  void on_state(TrainerState s) override;

  // Whether training began (on_start), as ProgressPrinter::started().
  bool started() const { return started_; }

 private:
  void line(const std::string& text);

  int rank_;
  std::ofstream out_;
  bool started_ = false;
};

}  // namespace unet::cli
