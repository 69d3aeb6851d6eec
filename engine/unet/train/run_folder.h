// The run folder (checkpoint.dir) belongs to one run at a time, and a run never destroys another's files
// unasked. RunLock is an flock() on <folder>/run.lock held for the run's life: a second run into the folder
// is refused with the holder's pid, host and start time, and a holder killed with SIGKILL releases it with
// its descriptors, so a lock is never stale. The file itself stays (removing it would race with the next
// run's open); only the flock counts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "unet/io/unique_fd.h"

namespace unet {

class RunLock {
 public:
  // Takes the lock of `folder` (which must exist), or throws Error(io) naming the folder and the run that
  // holds it.
  explicit RunLock(const std::filesystem::path& folder);
  RunLock(RunLock&&) noexcept = default;
  RunLock& operator=(RunLock&&) noexcept = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock() = default;  // closing the descriptor releases the lock

 private:
  UniqueFd fd_;
};

// The files of a run in `folder`: metrics.jsonl, last.safetensors, best.safetensors, requested checkpoints
// and the periodic files `checkpoint_template` names; sorted. Regular files only.
std::vector<std::filesystem::path> run_files_in(const std::filesystem::path& folder,
                                                const std::string& checkpoint_template);

// The periodic checkpoints in `folder` that `checkpoint_template` names, oldest first (by modification time,
// then name): what checkpoint.keep_last counts, whether or not metrics.jsonl recorded them.
std::vector<std::filesystem::path> periodic_checkpoints_in(const std::filesystem::path& folder,
                                                           const std::string& checkpoint_template);

}  // namespace unet
