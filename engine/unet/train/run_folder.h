// The run folder (checkpoint.dir) belongs to one run at a time, and a run never destroys another's files
// unasked. RunLock is an flock() on <folder>/run.lock held for the run's life: a second run into the folder
// is refused with the holder's pid, host and start time, and a holder killed with SIGKILL releases it with
// its descriptors, so a lock is never stale. The file itself stays (removing it would race with the next
// run's open); only the flock counts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "unet/core/error.h"
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

// Why a run may not go on in its folder as it stands: it would replace files of another run, or this run's
// own later state. The trainer refuses such a start (RunFolderTaken) unless told to replace them; the CLI and
// the workbench check first, to offer their own ways on.
struct RunFolderConflict {
  enum class Kind {
    previous_run,  // a new run into a folder that holds a run's files
    other_run,     // a resumed run into a folder that holds another run than the checkpoint's
    later_state,   // a resumed run into its own folder, whose last.safetensors is further along
  };
  Kind kind = Kind::previous_run;
  std::filesystem::path folder;
  std::vector<std::filesystem::path> files;  // previous_run, other_run: that run's files (run_files_in)
  std::filesystem::path checkpoint_run;      // other_run: the folder of the checkpoint's own run
  std::filesystem::path checkpoint;          // later_state: the checkpoint resumed
  std::int64_t resumed_step = 0;             // later_state: its step
  std::int64_t later_step = 0;               // later_state: the step of the folder's last.safetensors

  // The facts and the ways on in words, without command-line flags, for any front end.
  std::string message() const;
  // "a, b, c and N more": up to four of `files` by name.
  std::string file_names() const;
};

// What a run starting in `folder` would meet. `resumed`: for a resumed run, the folders its run lives in
// (the checkpoint's checkpoint.dir and the folder of the checkpoint file), the checkpoint and its step.
struct ResumedRun {
  std::vector<std::filesystem::path> run_folders;
  std::filesystem::path checkpoint;
  std::int64_t step = 0;
};
std::optional<RunFolderConflict> run_folder_conflict(const std::filesystem::path& folder,
                                                     const std::string& checkpoint_template,
                                                     const std::optional<ResumedRun>& resumed);

// The trainer's refusal of a RunFolderConflict: a ConfigError of checkpoint.dir with its message.
class RunFolderTaken : public ConfigError {
 public:
  explicit RunFolderTaken(RunFolderConflict conflict);
  const RunFolderConflict& conflict() const noexcept { return conflict_; }

 private:
  RunFolderConflict conflict_;
};

// The periodic checkpoints in `folder` that `checkpoint_template` names, oldest first (by modification time,
// then name): what checkpoint.keep_last counts, whether or not metrics.jsonl recorded them.
std::vector<std::filesystem::path> periodic_checkpoints_in(const std::filesystem::path& folder,
                                                           const std::string& checkpoint_template);

}  // namespace unet
