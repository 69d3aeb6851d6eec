// metrics.jsonl: one JSON object per line for each step, epoch, memory sample, checkpoint and error, in the
// fields docs/METRICS.md lists. Lines are flushed as they are written, so a crashed run keeps its history.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>

#include "unet/train/observer.h"

namespace unet {

class MetricsLog final : public TrainerObserver {
 public:
  // append: keep what the file holds (a resumed run); else start it anew.
  MetricsLog(const std::filesystem::path& file, bool append);

  void on_step(const StepReport& r) override;
  void on_epoch(const EpochReport& r) override;
  void on_memory(const MemoryReport& r) override;
  void on_checkpoint(const CheckpointReport& r) override;
  void on_error(const ErrorReport& r) override;

 private:
  void write(const std::string& line);
  struct Closer {
    // The deleter of the unique_ptr that owns the FILE.
    // NOLINTNEXTLINE(cppcoreguidelines-owning-memory)
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace unet
