#include "unet/core/json_limits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "unet/core/unique_fd.h"

namespace unet {

namespace {
using json = nlohmann::json;

std::string mib_text(std::int64_t bytes) {
  return bytes % (std::int64_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                              : std::to_string(bytes) + " bytes";
}

// A descriptor for reading a regular file, or why there is none. O_NONBLOCK: a FIFO must not wait for a
// writer; it is refused with devices and folders before anything is read.
UniqueFd open_regular(const std::filesystem::path& file, struct stat& st, std::string& why) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    why = errno == ENOENT ? "does not exist" : std::string("cannot be opened: ") + std::strerror(errno);
    return {};
  }
  if (::fstat(fd.get(), &st) != 0) {
    why = std::string("cannot be read: ") + std::strerror(errno);
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    why = "is a folder, not a file";
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is not a regular file (a pipe, device or socket)";
    return {};
  }
  return fd;
}

ssize_t read_some(int fd, char* into, std::size_t n) {
  ssize_t got;
  do {
    got = ::read(fd, into, n);
  } while (got < 0 && errno == EINTR);
  return got;
}
}  // namespace

JsonTooDeep::JsonTooDeep()
    : std::runtime_error("objects and arrays nested more than " + std::to_string(kMaxJsonDepth) +
                         " levels deep") {}

nlohmann::json parse_json_bounded(std::string_view text, bool allow_exceptions, const JsonParseHook& hook) {
  // `depth` is the number of objects and arrays around the one that opens: the top level's is 0.
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw JsonTooDeep();
    if (hook) hook(depth, event, parsed);
    return true;
  };
  return json::parse(text, callback, allow_exceptions);
}

std::optional<std::string> read_capped_file(const std::filesystem::path& file, std::int64_t max_bytes,
                                            std::string& text) {
  text.clear();
  struct stat st {};
  std::string why;
  const UniqueFd fd = open_regular(file, st, why);
  if (!fd) return why;
  if (st.st_size > max_bytes)
    return "is " + std::to_string(st.st_size) + " bytes; it may be at most " + std::to_string(max_bytes) +
           " bytes (" + mib_text(max_bytes) + ")";
  // One byte more than the limit is asked for, so that a file that grew meanwhile is noticed.
  text.resize(static_cast<std::size_t>(max_bytes) + 1);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read_some(fd.get(), text.data() + done, text.size() - done);
    if (n < 0) {
      text.clear();
      return std::string("cannot be read: ") + std::strerror(errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done > static_cast<std::size_t>(max_bytes)) {
    text.clear();
    return "grew past " + std::to_string(max_bytes) + " bytes (" + mib_text(max_bytes) +
           ") while it was read; it may be at most that";
  }
  text.resize(done);
  text.shrink_to_fit();
  return std::nullopt;
}

bool for_each_capped_line(const std::filesystem::path& file, std::int64_t max_line_bytes,
                          const std::function<void(std::string_view line)>& line,
                          const std::function<void(std::int64_t number, std::int64_t bytes)>& too_long) {
  struct stat st {};
  std::string why;
  const UniqueFd fd = open_regular(file, st, why);
  if (!fd) return false;
  std::vector<char> block(std::size_t{64} << 10);
  std::string current;      // the line so far, while it is within the limit
  std::int64_t length = 0;  // the line's length so far, kept or not
  std::int64_t number = 1;
  const auto finish = [&] {
    if (length > max_line_bytes)
      too_long(number, length);
    else
      line(current);
    current.clear();
    length = 0;
    ++number;
  };
  for (;;) {
    const ssize_t n = read_some(fd.get(), block.data(), block.size());
    if (n < 0) return false;
    if (n == 0) break;
    const char* p = block.data();
    const char* const end = p + n;
    while (p < end) {
      const char* newline = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = newline ? newline : end;
      const auto piece = static_cast<std::int64_t>(stop - p);
      if (length + piece <= max_line_bytes)
        current.append(p, stop);
      else if (length <= max_line_bytes)
        std::string().swap(current);  // past the limit: what was kept goes, memory and all
      length += piece;
      if (!newline) break;
      finish();
      p = newline + 1;
    }
  }
  if (length > 0) finish();
  return true;
}

}  // namespace unet
