// Temp file + fsync + rename + fsync of the folder. Every failure before the rename removes the temporary
// file and leaves the target as it was; a failure after it (syncing the folder) is still reported, because
// the new file may not survive a power cut.
#include "unet/io/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <string>
#include <system_error>

#include "unet/core/error.h"
#include "unet/core/unique_fd.h"

namespace unet {
namespace {

constexpr std::string_view kTempMarker = ".tmp-";
constexpr std::size_t kSuffixDigits = 12;

std::string system_reason(int err) {
  return std::error_code(err, std::generic_category()).message();
}

[[noreturn]] void throw_io(const std::filesystem::path& target, const std::string& step, int err) {
  throw Error(ErrorKind::io, target.string() + ": " + step + ": " + system_reason(err));
}

bool is_out_of_space(int err) {
  return err == ENOSPC || err == EDQUOT;
}

// The file system of `target` is full (or the user's quota is): says how much the file needed (when known)
// and what was free.
[[noreturn]] void throw_out_of_space(const std::filesystem::path& target, std::uint64_t needed, int err) {
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  std::string free_text;
  struct statvfs fs {};
  if (::statvfs(folder.c_str(), &fs) == 0)
    free_text = std::to_string(std::uint64_t{fs.f_bavail} * fs.f_frsize) + " bytes are free there";
  const std::string need_text = needed > 0 ? "the file needs " + std::to_string(needed) + " bytes" : "";
  throw Error(ErrorKind::io,
              target.string() + ": not saved: " + system_reason(err) + ": " + need_text +
                  (need_text.empty() || free_text.empty() ? "" : ", ") + free_text,
              {}, "free some space on that disk or write to another one");
}

std::string random_suffix() {
  std::random_device device;
  const std::uint64_t bits = (std::uint64_t{device()} << 32) ^ std::uint64_t{device()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(kSuffixDigits, '0');
  for (std::size_t i = 0; i < kSuffixDigits; ++i) text[i] = kHex[(bits >> (4 * i)) & 0xf];
  return text;
}

// Removes the temporary file unless dismissed (after the rename, when it no longer exists under its name).
class TempFileGuard {
 public:
  explicit TempFileGuard(std::filesystem::path path) : path_(std::move(path)) {}
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  ~TempFileGuard() {
    if (!armed_) return;
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
      log_noexcept("cannot remove temporary file", path_.string() + ": " + system_reason(errno));
    }
  }
  void dismiss() noexcept { armed_ = false; }

 private:
  std::filesystem::path path_;
  bool armed_ = true;
};

// Writes all of `bytes`; `written` counts the file's bytes so far, `expected` is the caller's size (0:
// unknown).
void write_all(int fd, std::span<const std::byte> bytes, const std::filesystem::path& target,
               std::uint64_t& written, std::uint64_t expected) {
  constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // Linux writes at most ~2 GiB per call anyway
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), std::min(bytes.size(), kMaxChunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (is_out_of_space(errno))
        throw_out_of_space(target, std::max(expected, written + bytes.size()), errno);
      throw_io(target, "cannot write", errno);
    }
    if (n == 0) throw_io(target, "cannot write (no progress)", EIO);
    written += static_cast<std::uint64_t>(n);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// A link, a FIFO, a device, a socket or a folder where the file goes is not replaced (rename() would replace
// the link or the device node itself): only a regular file, or nothing.
void refuse_non_regular_target(const std::filesystem::path& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* kind = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISDIR(st.st_mode)  ? "a folder"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a device";
  throw Error(ErrorKind::io, target.string() + ": not replaced: it is " + kind + ", not a regular file", {},
              "remove it yourself, or write to another path");
}

// Whether `path` is a regular temporary file that no writer holds (its flock is free): a leftover.
bool is_unheld_temp_file(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(const ByteSink& sink)>& produce,
                           std::uint64_t expected_bytes) {
  const std::filesystem::path name = target.filename();
  if (name.empty() || name == "." || name == "..") {
    throw Error(ErrorKind::io, target.string() + ": not a file path");
  }
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  refuse_non_regular_target(target);

  std::filesystem::path temp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    temp = folder / ("." + name.string() + std::string(kTempMarker) + random_suffix());
    fd.reset(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd && is_out_of_space(errno)) throw_out_of_space(target, expected_bytes, errno);
    if (!fd && errno != EEXIST)
      throw_io(target, "cannot create a temporary file in " + folder.string(), errno);
  }
  if (!fd) throw_io(target, "cannot create a temporary file in " + folder.string(), EEXIST);

  TempFileGuard guard(temp);
  // Held until the process closes the file or ends, however it ends: a temporary file nobody holds is a
  // leftover (remove_stale_temp_files).
  (void)::flock(fd.get(), LOCK_EX | LOCK_NB);
  // Reserves the blocks (the size stays 0): a disk without room fails here, before anything is written. File
  // systems that cannot reserve just go on to write.
  if (expected_bytes > 0 &&
      ::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(expected_bytes)) != 0 &&
      is_out_of_space(errno))
    throw_out_of_space(target, expected_bytes, errno);
  std::uint64_t written = 0;
  produce(
      [&](std::span<const std::byte> bytes) { write_all(fd.get(), bytes, target, written, expected_bytes); });
  // Fewer bytes than announced: give back the blocks reserved beyond them.
  if (expected_bytes > written && ::ftruncate(fd.get(), static_cast<off_t>(written)) != 0)
    throw_io(target, "cannot trim the temporary file", errno);
  if (::fsync(fd.get()) != 0) {
    if (is_out_of_space(errno)) throw_out_of_space(target, std::max(expected_bytes, written), errno);
    throw_io(target, "cannot flush the temporary file to disk", errno);
  }
  refuse_non_regular_target(target);  // nothing took the target's place meanwhile
  if (fd.close_checked() != 0) throw_io(target, "cannot close the temporary file", errno);
  if (::rename(temp.c_str(), target.c_str()) != 0) throw_io(target, "cannot replace the file", errno);
  guard.dismiss();

  UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw_io(target, "written, but cannot open its folder to sync it", errno);
  // Some file systems cannot sync a folder (EINVAL); there is nothing more to do on those.
  if (::fsync(dir.get()) != 0 && errno != EINVAL && errno != ENOTSUP) {
    throw_io(target, "written, but syncing its folder failed", errno);
  }
}

void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes) {
  write_file_atomically(
      target, [&](const ByteSink& sink) { sink(bytes); }, bytes.size());
}

bool is_atomic_temp_file_name(std::string_view file_name) noexcept {
  // "." + at least one character + ".tmp-" + the digits
  if (file_name.size() < 2 + kTempMarker.size() + kSuffixDigits || file_name.front() != '.') return false;
  const std::string_view digits = file_name.substr(file_name.size() - kSuffixDigits);
  const std::string_view marker =
      file_name.substr(file_name.size() - kSuffixDigits - kTempMarker.size(), kTempMarker.size());
  return marker == kTempMarker && std::all_of(digits.begin(), digits.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

namespace {

// Removes the unheld temporary files in `folder` whose names `wanted` accepts.
std::vector<std::filesystem::path> remove_unheld_temp_files(
    const std::filesystem::path& folder, const std::function<bool(const std::string&)>& wanted) {
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  std::filesystem::directory_iterator it(folder, ec);
  if (ec) throw Error(ErrorKind::io, folder.string() + ": cannot list the folder: " + ec.message());
  // Collected first and removed after, so that the listing is not changed while it is read.
  for (const std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
    const auto& entry = *it;
    const std::string name = entry.path().filename().string();
    if (!is_atomic_temp_file_name(name) || !wanted(name)) continue;
    std::error_code status_ec;
    if (std::filesystem::is_regular_file(entry.symlink_status(status_ec))) stale.push_back(entry.path());
  }
  if (ec) throw Error(ErrorKind::io, folder.string() + ": cannot list the folder: " + ec.message());

  std::vector<std::filesystem::path> removed;
  for (const auto& path : stale) {
    if (!is_unheld_temp_file(path)) continue;  // a write in progress, in this process or another
    if (::unlink(path.c_str()) == 0) {
      removed.push_back(path);
    } else if (errno != ENOENT) {
      throw Error(ErrorKind::io,
                  path.string() + ": cannot remove a stale temporary file: " + system_reason(errno));
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& folder) {
  return remove_unheld_temp_files(folder, [](const std::string&) { return true; });
}

std::vector<std::filesystem::path> remove_stale_temp_files_of(const std::filesystem::path& target) {
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  const std::string prefix = "." + target.filename().string() + std::string(kTempMarker);
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return {};  // nothing can be left in a folder not there
  std::vector<std::filesystem::path> removed = remove_unheld_temp_files(folder, [&](const std::string& name) {
    return name.size() == prefix.size() + kSuffixDigits && name.starts_with(prefix);
  });
  // Named as the target is: beside "weights.safetensors", not "./".
  if (!target.has_parent_path())
    for (auto& path : removed) path = path.filename();
  return removed;
}

}  // namespace unet
