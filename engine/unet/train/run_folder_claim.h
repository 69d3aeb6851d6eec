// Claiming a run folder for a run (run_folder.h says the rules): the paths a checkpoint records must be
// UTF-8, the folder must be a place for a run, it is created and locked, and a folder that holds another
// run's files, or this run further along, is refused (RunFolderTaken) unless the caller asked to replace
// them: then the previous run's files are removed, each logged, or the run goes on from its step.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "unet/config/config.h"
#include "unet/train/observer.h"
#include "unet/train/run_folder.h"

namespace unet {

struct RunFolderClaim {
  RunLock lock;
  // The folders the claim made, the run folder first, then those above it that it made for it: what a
  // start refused before it writes takes back (RunOutputs::close).
  std::vector<std::filesystem::path> made;
};

// Claims `run_dir` (config.checkpoint.dir made absolute), making it where it is missing, and returns its
// lock. `check_previous_run` false skips the conflict check (a run set to start at a later step continues in
// its folder); `resumed_run`: the run the folder may hold, for a resume.
RunFolderClaim claim_run_folder(const Config& config, const std::filesystem::path& run_dir,
                                bool check_previous_run, const std::optional<ResumedRun>& resumed_run,
                                bool replace_previous_run, TrainerObserver& out);

}  // namespace unet
