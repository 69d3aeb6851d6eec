#include "unet/train/run_folder_claim.h"

#include <algorithm>

#include "unet/core/utf8.h"

namespace unet {

namespace {

// Checkpoints store the run's paths resolved to absolute ones, as JSON text: each must be UTF-8, which the
// config's values are (config.cpp), but the config file's folder or the working directory a relative value
// is resolved against may not be. Refused before any work, rather than failing every save after training.
void refuse_recorded_paths_not_utf8(const Config& c, const std::filesystem::path& run_dir) {
  const auto check = [](const char* key, const std::string& path) {
    if (!is_valid_utf8(path))
      throw ConfigError(key, "resolves to a path that " + not_utf8_problem(path) +
                                 ": checkpoints record it as UTF-8 text; give an absolute UTF-8 path, or run "
                                 "from a folder whose path is UTF-8");
  };
  check("checkpoint.dir", run_dir.native());
  for (const auto& [key, value] :
       {std::pair{"data.path", &c.data.path}, std::pair{"data.validation_split", &c.data.validation_split}})
    if (!value->empty()) check(key, std::filesystem::absolute(c.resolve(*value)).lexically_normal().native());
}

// Makes `run_dir` and the folders above it that are missing; returns those it made, `run_dir` first. Each is
// made with create_directory, which says whether this call made it, so that a folder another program made
// meanwhile is never counted as the run's.
std::vector<std::filesystem::path> make_run_folder(const std::filesystem::path& run_dir) {
  std::vector<std::filesystem::path> missing;
  std::error_code ec;
  for (std::filesystem::path p = run_dir; !p.empty() && !std::filesystem::exists(p, ec);
       p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::vector<std::filesystem::path> made;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const bool created = std::filesystem::create_directory(*it, ec);
    if (ec)
      throw Error(ErrorKind::io, "cannot create the run folder " + run_dir.string() + ": " + ec.message());
    if (created) made.insert(made.begin(), *it);
  }
  if (!std::filesystem::is_directory(run_dir, ec))
    throw Error(ErrorKind::io, "cannot create the run folder " + run_dir.string() + ": not a folder");
  return made;
}

}  // namespace

RunFolderClaim claim_run_folder(const Config& config, const std::filesystem::path& run_dir,
                                bool check_previous_run, const std::optional<ResumedRun>& resumed_run,
                                bool replace_previous_run, TrainerObserver& out) {
  refuse_recorded_paths_not_utf8(config, run_dir);
  check_run_folder_location(run_dir);
  std::vector<std::filesystem::path> made = make_run_folder(run_dir);
  RunFolderClaim claim{RunLock(run_dir), std::move(made)};
  if (!check_previous_run) return claim;
  const std::optional<RunFolderConflict> conflict =
      run_folder_conflict(run_dir, config.checkpoint.filename_template, resumed_run);
  if (!conflict) return claim;
  if (!replace_previous_run) throw RunFolderTaken(*conflict);
  if (conflict->kind == RunFolderConflict::Kind::later_state) {
    out.on_log(LogLevel::info,
               "going on in " + run_dir.string() + " from step " + std::to_string(conflict->resumed_step) +
                   ", as asked: its checkpoints of later steps (last.safetensors at step " +
                   std::to_string(conflict->later_step) + ") are replaced as this run writes its own");
    return claim;
  }
  // Only what the previous run can be shown to have written (run_folder.h): a file the template's pattern
  // merely matches may be the user's, and stays.
  for (const auto& file : conflict->files) {
    if (std::find(conflict->removable.begin(), conflict->removable.end(), file) ==
        conflict->removable.end()) {
      out.on_log(LogLevel::info, "kept " + file.string() +
                                     ": its name fits checkpoint.template, but the previous run's log does "
                                     "not record it as that run's");
      continue;
    }
    try {
      if (remove_run_file(run_dir, file.filename().string()))
        out.on_log(LogLevel::info,
                   "removed " + file.string() + " (the previous run in this folder, as asked)");
    } catch (const Error& e) {
      throw Error(ErrorKind::io, std::string(e.what()) + " (a file of the previous run)");
    }
  }
  return claim;
}

}  // namespace unet
