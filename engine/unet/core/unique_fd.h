// A move-only owner of a POSIX file descriptor, so that every path out of a function (including exceptions)
// closes what it opened. The one non-obvious rule: a descriptor that was written to must be closed with
// close_checked(), because close() can be the call that reports a delayed write error (NFS, quota); the
// destructor only closes quietly, for the paths that are already failing.
#pragma once

#include <unistd.h>

#include <utility>

namespace unet {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Closes the current descriptor (errors ignored) and takes ownership of fd.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

  // Closes and returns close()'s result (0, or -1 with errno set). On Linux the descriptor is gone even when
  // close() fails, EINTR included, so it is never retried.
  int close_checked() noexcept {
    const int fd = std::exchange(fd_, -1);
    return fd >= 0 ? ::close(fd) : 0;
  }

 private:
  int fd_ = -1;
};

}  // namespace unet
