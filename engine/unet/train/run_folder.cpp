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

}  // namespace unet
