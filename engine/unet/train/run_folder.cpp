#include "unet/train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>
#include <tuple>

#include "unet/config/config.h"
#include "unet/core/error.h"
#include "unet/io/checkpoint.h"

namespace unet {
namespace {

std::string system_reason(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// "pid 1234 on host, started 2026-11-30T21:03:27Z": what the lock file says of its holder.
std::string holder_description() {
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char when[32] = "?";
  if (::gmtime_r(&now, &utc)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return "pid " + std::to_string(::getpid()) + " on " + host + ", started " + when;
}

std::string read_holder(int fd) {
  char text[512] = "";
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder.empty() ? "a run that has not yet said who it is" : holder;
}

std::vector<std::filesystem::path> regular_files_in(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  std::filesystem::directory_iterator it(folder, ec);
  if (ec) throw Error(ErrorKind::io, folder.string() + ": cannot list the folder: " + ec.message());
  for (const std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
    std::error_code status_ec;
    if (std::filesystem::is_regular_file(it->symlink_status(status_ec))) files.push_back(it->path());
  }
  if (ec) throw Error(ErrorKind::io, folder.string() + ": cannot list the folder: " + ec.message());
  return files;
}

bool is_run_file_name(const std::string& name, const std::string& checkpoint_template) {
  return name == kMetricsFileName || name == kLastCheckpointName || name == kBestCheckpointName ||
         name == kValidationSplitName ||
         (name.starts_with(kRequestedCheckpointPrefix) && name.ends_with(".safetensors")) ||
         matches_checkpoint_template(checkpoint_template, name);
}

}  // namespace

RunLock::RunLock(const std::filesystem::path& folder) {
  const std::filesystem::path file = folder / kRunLockName;
  fd_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_)
    throw Error(ErrorKind::io,
                file.string() + ": cannot open the run folder's lock: " + system_reason(errno));
  while (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      throw Error(ErrorKind::io,
                  "the run folder " + folder.string() + " is in use by another run (" +
                      read_holder(fd_.get()) + "); one run writes into a folder at a time",
                  {}, "wait for that run to end or stop it, or choose another checkpoint.dir");
    throw Error(ErrorKind::io, file.string() + ": cannot lock the run folder: " + system_reason(errno));
  }
  // Who holds it, for the message of the next run that tries. Only a courtesy: the flock is the lock.
  const std::string holder = holder_description() + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()))
    log_noexcept("cannot record the run in its lock file", file.string() + ": " + system_reason(errno));
}

std::vector<std::filesystem::path> run_files_in(const std::filesystem::path& folder,
                                                const std::string& checkpoint_template) {
  std::vector<std::filesystem::path> found;
  for (const auto& f : regular_files_in(folder))
    if (is_run_file_name(f.filename().string(), checkpoint_template)) found.push_back(f);
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::filesystem::path> periodic_checkpoints_in(const std::filesystem::path& folder,
                                                           const std::string& checkpoint_template) {
  struct Dated {
    std::filesystem::file_time_type time;
    std::filesystem::path path;
  };
  std::vector<Dated> found;
  for (const auto& f : regular_files_in(folder)) {
    if (!matches_checkpoint_template(checkpoint_template, f.filename().string())) continue;
    std::error_code ec;
    const auto time = std::filesystem::last_write_time(f, ec);
    if (!ec) found.push_back({time, f});
  }
  std::sort(found.begin(), found.end(), [](const Dated& a, const Dated& b) {
    return std::tie(a.time, a.path) < std::tie(b.time, b.path);
  });
  std::vector<std::filesystem::path> paths;
  paths.reserve(found.size());
  for (auto& d : found) paths.push_back(std::move(d.path));
  return paths;
}

std::string RunFolderConflict::file_names() const {
  std::string names;
  for (std::size_t i = 0; i < files.size() && i < 4; ++i)
    names += (i ? ", " : "") + files[i].filename().string();
  if (files.size() > 4) names += " and " + std::to_string(files.size() - 4) + " more";
  return names;
}

std::string RunFolderConflict::message() const {
  switch (kind) {
    case Kind::previous_run:
      return folder.string() + " holds a previous run (" + file_names() +
             "), which a new run would replace; choose another checkpoint.dir, continue that run from its "
             "last checkpoint, or start over in that folder, removing that run's files";
    case Kind::other_run:
      return folder.string() + " holds another run (" + file_names() +
             ") than the checkpoint resumed, whose run is in " + checkpoint_run.string() +
             "; resuming here would mix their histories and replace that run's checkpoints; resume into the "
             "checkpoint's own folder, choose another checkpoint.dir, or remove that run's files first";
    case Kind::later_state:
      return folder.string() + " holds this run further along: its last.safetensors is at step " +
             std::to_string(later_step) + ", the checkpoint resumed (" + checkpoint.string() + ") at step " +
             std::to_string(resumed_step) +
             "; resuming here would replace the later checkpoints as the run writes its own; branch off into "
             "another checkpoint.dir, or resume last.safetensors to go on from step " +
             std::to_string(later_step);
  }
  return {};
}

RunFolderTaken::RunFolderTaken(RunFolderConflict conflict)
    : ConfigError("checkpoint.dir", conflict.message()), conflict_(std::move(conflict)) {}

std::optional<RunFolderConflict> run_folder_conflict(const std::filesystem::path& folder,
                                                     const std::string& checkpoint_template,
                                                     const std::optional<ResumedRun>& resumed) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return std::nullopt;
  RunFolderConflict c;
  c.folder = folder;
  const bool its_own =
      resumed && std::any_of(resumed->run_folders.begin(), resumed->run_folders.end(),
                             [&](const auto& d) { return std::filesystem::equivalent(d, folder, ec); });
  if (its_own) {
    // Its own run: only a later state of it is at stake (an earlier checkpoint resumed, a later last).
    const std::filesystem::path last = folder / kLastCheckpointName;
    if (!std::filesystem::is_regular_file(last, ec) ||
        std::filesystem::equivalent(last, resumed->checkpoint, ec))
      return std::nullopt;
    try {
      c.later_step = inspect_checkpoint(last).position.step;
    } catch (const Error&) {
      return std::nullopt;  // a damaged last.safetensors holds no state to keep
    }
    if (c.later_step <= resumed->step) return std::nullopt;
    c.kind = RunFolderConflict::Kind::later_state;
    c.checkpoint = resumed->checkpoint;
    c.resumed_step = resumed->step;
    return c;
  }
  c.files = run_files_in(folder, checkpoint_template);
  if (c.files.empty()) return std::nullopt;
  c.kind = resumed ? RunFolderConflict::Kind::other_run : RunFolderConflict::Kind::previous_run;
  if (resumed && !resumed->run_folders.empty()) c.checkpoint_run = resumed->run_folders.front();
  return c;
}

}  // namespace unet
