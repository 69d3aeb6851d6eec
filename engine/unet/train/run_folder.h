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
#include <string_view>
#include <vector>

#include "unet/core/error.h"
#include "unet/core/unique_fd.h"

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

// --- What a run may touch in its folder (docs/CLI.md, "The run folder") ------------------------------------
// Every deletion, truncation and creation of a run's file goes through the functions below, and they enforce
// one rule: a run deletes or truncates only regular files directly inside its folder that it can show it
// wrote (its fixed names, and the names its metrics.jsonl records, each the exact file name, never a
// pattern); it opens what it creates without following a link and never in place of something that is not a
// regular file; and it refuses a folder that is plainly not a run folder.

// Throws ConfigError(checkpoint.dir) naming `folder` (absolute) when it is plainly not a place for a run: the
// root of the file system, the user's home folder ($HOME) or a folder above it, or one of the system's own
// top-level folders (/bin, /boot, /dev, /etc, /lib, /lib64, /opt, /proc, /root, /run, /sbin, /srv, /sys,
// /tmp, /usr, /var). The root of a mounted disk of its own is a fine run folder, and so is a sub-folder of
// any of these.
void check_run_folder_location(const std::filesystem::path& folder);

// Whether `name` is one file name, directly inside a folder: not empty, no '/', not "." or "..".
bool is_plain_file_name(std::string_view name) noexcept;

// Opens `folder`/`name` with `flags` (O_CREAT allowed; O_NOFOLLOW and O_NONBLOCK are added, so that a link
// is never followed and a FIFO never waited on), and refuses with Error(io) naming the path anything that is
// not a regular file: a symbolic link, a FIFO, a device, a folder. `what` says what the file is for.
UniqueFd open_run_file(const std::filesystem::path& folder, std::string_view name, int flags,
                       std::string_view what);

// Removes `folder`/`name`, a file of the run: false if there is none. Refuses (Error(io), naming it) a name
// that is not plain or anything but a regular file; the caller says why it is the run's.
bool remove_run_file(const std::filesystem::path& folder, std::string_view name);

// The files of a run that its metrics.jsonl in `folder` records, by name: `periodic` (oldest record first,
// each once) and `all` (every checkpoint record). Records from before names were recorded hold an absolute
// `path` alone: one directly inside `folder` counts by its name; any other (a run folder copied elsewhere, a
// relative path, a hand-edited line) is never the run's, and is listed in `foreign` for a warning.
struct RecordedRunFiles {
  std::vector<std::string> periodic;
  std::vector<std::string> all;
  std::vector<std::string> foreign;
};
RecordedRunFiles recorded_run_files(const std::filesystem::path& folder);

// The files of a run in `folder` that a new run would meet: metrics.jsonl, last.safetensors,
// best.safetensors, validation.json, requested checkpoints, the files its metrics.jsonl records, and the
// periodic files `checkpoint_template` names; sorted. Regular files only. `removable`: only those a run can
// show it wrote (all but template matches its log does not record), which --overwrite removes.
std::vector<std::filesystem::path> run_files_in(const std::filesystem::path& folder,
                                                const std::string& checkpoint_template,
                                                bool removable = false);

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
  std::vector<std::filesystem::path> files;      // previous_run, other_run: that run's files (run_files_in)
  std::vector<std::filesystem::path> removable;  // of `files`, those --overwrite removes
  std::filesystem::path checkpoint_run;          // other_run: the folder of the checkpoint's own run
  std::filesystem::path checkpoint;              // later_state: the checkpoint resumed
  std::int64_t resumed_step = 0;                 // later_state: its step
  std::int64_t later_step = 0;                   // later_state: the step of the folder's last.safetensors

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

}  // namespace unet
