// metrics.jsonl: one JSON object per line for each start or resume, step, epoch, memory sample, checkpoint
// and error, in the fields docs/METRICS.md lists. The one rule: the file holds whole records only. Each
// record goes to the file in one write() of the whole line, a write that fails part-way (a full disk) is cut
// back off, and a log opened to append whose last line was cut short (a crash, a disk that filled) loses that
// partial line first, so that the next record starts a line of its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "unet/core/unique_fd.h"
#include "unet/train/observer.h"

namespace unet {

class MetricsLog final : public TrainerObserver {
 public:
  // append: keep what the file holds (a resumed run), cutting off a partial last line; else start it anew.
  MetricsLog(const std::filesystem::path& file, bool append);

  // Bytes of a partial last record cut off when the file was opened (0: none).
  std::int64_t cut_bytes() const noexcept { return cut_bytes_; }

  // The record that opens a run's lines: {"kind": "start"} for a new run, "resume" for one resumed at
  // `step`, with the epoch, the process and the time.
  void write_start(bool resumed, std::int64_t step, std::int64_t epoch);

  void on_step(const StepReport& r) override;
  void on_epoch(const EpochReport& r) override;
  void on_memory(const MemoryReport& r) override;
  void on_checkpoint(const CheckpointReport& r) override;
  void on_error(const ErrorReport& r) override;

 private:
  void write(const std::string& line);
  std::filesystem::path path_;
  UniqueFd fd_;
  std::int64_t size_ = 0;  // the file's length: where the next record starts
  std::int64_t cut_bytes_ = 0;
  bool failed_ = false;  // a write failed (and threw): later records are dropped, not thrown again
};

// The training curves a metrics.jsonl holds, as the trainer reported them: for the workbench to show a run's
// history when it resumes it (or opens it). Steps that a later resume took again replace those of the run
// before: a `resume` record at step S drops the earlier records past S, so that the history is the line the
// model actually followed. Records past `up_to_step` are left out (a resume from an earlier checkpoint).
// Lines that are not whole records of these kinds (memory samples, a partial or hand-edited line) are
// skipped; img_per_s_avg is the mean throughput of the last 20 steps read. A file that cannot be read, or is
// not a regular file, gives an empty history: there is nothing to show, which is no reason to stop a run.
// A line longer than kMaxMetricsRecordBytes (unet/core/json_limits.h) is skipped without being held, with a
// warning that names the file and the line's number.
struct RunHistory {
  std::vector<StepReport> steps;
  std::vector<EpochReport> epochs;
  std::vector<std::string> warnings;  // lines skipped for their length, one message each
};
RunHistory read_run_history(const std::filesystem::path& file,
                            std::int64_t up_to_step = std::numeric_limits<std::int64_t>::max());

}  // namespace unet
