#include "unet/train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <system_error>
#include <tuple>

#include <nlohmann/json.hpp>

#include "unet/config/config.h"
#include "unet/core/error.h"
#include "unet/core/json_limits.h"
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

// The names the run gives its own files: a file of one of these names in a run folder is the run's.
bool is_fixed_run_file_name(const std::string& name) {
  return name == kMetricsFileName || name == kLastCheckpointName || name == kBestCheckpointName ||
         name == kValidationSplitName ||
         (name.starts_with(kRequestedCheckpointPrefix) && name.ends_with(".safetensors"));
}

std::filesystem::path normal_absolute(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path a = std::filesystem::absolute(p, ec).lexically_normal();
  if (ec) a = p.lexically_normal();
  // "/x/run/" and "/x/run" are one folder.
  if (a.has_filename() || a == a.root_path()) return a;
  return a.parent_path();
}

bool same_folder(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (normal_absolute(a) == normal_absolute(b)) return true;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

}  // namespace

bool is_plain_file_name(std::string_view name) noexcept {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

void check_run_folder_location(const std::filesystem::path& folder) {
  const std::filesystem::path f = normal_absolute(folder);
  const auto refuse = [&](const std::string& why) {
    throw ConfigError("checkpoint.dir", f.string() + " is " + why +
                                            ", not a run folder: a run writes, and with --overwrite removes, "
                                            "files there; choose a folder of its own, such as " +
                                            (f / "unet-run").string());
  };
  if (f == f.root_path()) refuse("the root of the file system");
  if (const char* home = std::getenv("HOME"); home && *home == '/') {
    const std::filesystem::path h = normal_absolute(home);
    if (same_folder(f, h)) refuse("the home folder ($HOME)");
    // A folder above $HOME (/home): it holds every user's home.
    const auto [end, rest] = std::mismatch(f.begin(), f.end(), h.begin(), h.end());
    if (end == f.end() && rest != h.end()) refuse("a folder above the home folder ($HOME)");
  }
  static constexpr std::string_view kSystemFolders[] = {"bin", "boot", "dev",  "etc", "lib",  "lib64",
                                                        "opt", "proc", "root", "run", "sbin", "srv",
                                                        "sys", "tmp",  "usr",  "var"};
  if (f.parent_path() == f.root_path())
    for (std::string_view s : kSystemFolders)
      if (f.filename() == s) refuse("a folder of the system");
}

UniqueFd open_run_file(const std::filesystem::path& folder, std::string_view name, int flags,
                       std::string_view what) {
  const std::filesystem::path file = folder / name;
  if (!is_plain_file_name(name))
    throw Error(ErrorKind::io, file.string() + ": not a file name directly inside the run folder");
  UniqueFd fd(::open(file.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
  const int err = errno;
  struct stat st {};
  if (!fd) {
    // O_NOFOLLOW fails with ELOOP on a link; a FIFO without a reader with ENXIO; a folder with EISDIR.
    if ((err == ELOOP || err == ENXIO || err == EISDIR || err == ENODEV) && ::lstat(file.c_str(), &st) == 0 &&
        !S_ISREG(st.st_mode))
      throw Error(ErrorKind::io,
                  file.string() + " is not a regular file (" +
                      (S_ISLNK(st.st_mode)    ? "a symbolic link"
                       : S_ISDIR(st.st_mode)  ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                              : "a device or socket") +
                      "): the run does not follow or replace it for its " + std::string(what),
                  {}, "remove it, or choose another checkpoint.dir");
    throw Error(ErrorKind::io,
                "cannot open " + file.string() + " (" + std::string(what) + "): " + system_reason(err));
  }
  if (::fstat(fd.get(), &st) != 0)
    throw Error(ErrorKind::io, "cannot read " + file.string() + ": " + system_reason(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(
        ErrorKind::io,
        file.string() + " is not a regular file: the run does not use it for its " + std::string(what), {},
        "remove it, or choose another checkpoint.dir");
  // Blocking again for the regular file it is (O_NONBLOCK was only for a FIFO in its place).
  const int status = ::fcntl(fd.get(), F_GETFL);
  if (status >= 0) (void)::fcntl(fd.get(), F_SETFL, status & ~O_NONBLOCK);
  return fd;
}

bool remove_run_file(const std::filesystem::path& folder, std::string_view name) {
  const std::filesystem::path file = folder / name;
  if (!is_plain_file_name(name))
    throw Error(ErrorKind::io, file.string() + ": not removed: not a file directly inside the run folder");
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw Error(ErrorKind::io, "cannot remove " + file.string() + ": " + system_reason(errno));
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::io, file.string() + ": not removed: not a regular file, so not one the run wrote");
  if (::unlink(file.c_str()) != 0) {
    if (errno == ENOENT) return false;
    throw Error(ErrorKind::io, "cannot remove " + file.string() + ": " + system_reason(errno));
  }
  return true;
}

RecordedRunFiles recorded_run_files(const std::filesystem::path& folder) {
  RecordedRunFiles recorded;
  const std::filesystem::path file = folder / kMetricsFileName;
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return recorded;
  const std::filesystem::path here = normal_absolute(folder);
  // Lines as read_run_history reads them: at most kMaxMetricsRecordBytes held, nesting bounded
  // (json_limits.h).
  const auto record = [&](std::string_view line) {
    nlohmann::json j;
    try {
      j = parse_json_bounded(line, /*allow_exceptions=*/false);
    } catch (const JsonTooDeep&) {
      return;  // no record of the run's is nested so
    }
    // A line edited by hand or cut short is skipped, never an internal error.
    const auto text = [&](const char* key) {
      const auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (!j.is_object() || text("kind") != "checkpoint") return;
    std::string name = text("file");
    if (name.empty()) {
      // A record from before names were recorded: its absolute path.
      const std::filesystem::path p = text("path");
      if (p.empty()) return;
      // Runs wrote absolute paths only: a relative one was never the run's.
      if (p.is_absolute() && p.has_filename() && same_folder(p.lexically_normal().parent_path(), here)) {
        name = p.filename().string();
      } else {
        if (std::find(recorded.foreign.begin(), recorded.foreign.end(), p.string()) == recorded.foreign.end())
          recorded.foreign.push_back(p.string());
        return;
      }
    }
    if (!is_plain_file_name(name) || (is_reserved_run_file_name(name) && !is_fixed_run_file_name(name))) {
      if (std::find(recorded.foreign.begin(), recorded.foreign.end(), name) == recorded.foreign.end())
        recorded.foreign.push_back(name);
      return;
    }
    if (std::find(recorded.all.begin(), recorded.all.end(), name) == recorded.all.end())
      recorded.all.push_back(name);
    if (text("reason") == "periodic") {
      std::erase(recorded.periodic, name);
      recorded.periodic.push_back(name);
    }
  };
  // A line too long to be a record of the run's is skipped (read_run_history warns of it).
  for_each_capped_line(file, kMaxMetricsRecordBytes, record, [](std::int64_t, std::int64_t) {});
  return recorded;
}

RunLock::RunLock(const std::filesystem::path& folder) {
  const std::filesystem::path file = folder / kRunLockName;
  // A refused start takes back the folder it made, lock file and all (RunOutputs::close): a lock taken on a
  // file that was unlinked meanwhile is no lock, so the file locked must still be the folder's run.lock.
  for (int attempt = 0;; ++attempt) {
    fd_ = open_run_file(folder, kRunLockName, O_RDWR | O_CREAT, "lock");
    while (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK)
        throw Error(ErrorKind::io,
                    "the run folder " + folder.string() + " is in use by another run (" +
                        read_holder(fd_.get()) + "); one run writes into a folder at a time",
                    {}, "wait for that run to end or stop it, or choose another checkpoint.dir");
      throw Error(ErrorKind::io, file.string() + ": cannot lock the run folder: " + system_reason(errno));
    }
    struct stat locked {
    }, named{};
    if (::fstat(fd_.get(), &locked) == 0 && ::lstat(file.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino)
      break;
    if (attempt == 100)
      throw Error(ErrorKind::io, file.string() +
                                     ": cannot lock the run folder: its lock file keeps being "
                                     "removed and made again");
  }
  // Who holds it, for the message of the next run that tries. Only a courtesy: the flock is the lock.
  const std::string holder = holder_description() + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()))
    log_noexcept("cannot record the run in its lock file", file.string() + ": " + system_reason(errno));
}

std::vector<std::filesystem::path> run_files_in(const std::filesystem::path& folder,
                                                const std::string& checkpoint_template, bool removable) {
  const RecordedRunFiles recorded = recorded_run_files(folder);
  std::vector<std::filesystem::path> found;
  for (const auto& f : regular_files_in(folder)) {
    const std::string name = f.filename().string();
    if (is_fixed_run_file_name(name) ||
        std::find(recorded.all.begin(), recorded.all.end(), name) != recorded.all.end() ||
        (!removable && matches_checkpoint_template(checkpoint_template, name)))
      found.push_back(f);
  }
  std::sort(found.begin(), found.end());
  return found;
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
  c.removable = run_files_in(folder, checkpoint_template, true);
  c.kind = resumed ? RunFolderConflict::Kind::other_run : RunFolderConflict::Kind::previous_run;
  if (resumed && !resumed->run_folders.empty()) c.checkpoint_run = resumed->run_folders.front();
  return c;
}

}  // namespace unet
