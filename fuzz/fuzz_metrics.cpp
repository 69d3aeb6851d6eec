// libFuzzer target: reading a run's metrics.jsonl (read_run_history, what a resumed run and the workbench's
// Open read) on any bytes, from a file as the program reads it. Nothing may escape it: an unreadable or odd
// file gives an empty or partial history. The line reader under it is checked against the bytes as well: with
// a small cap, every line is either handed over whole or reported too long with its true length, in order.
// The file lives in a per-process temporary folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "unet/core/json_limits.h"
#include "unet/train/metrics_log.h"

namespace {

std::filesystem::path input_file() {
  static const std::filesystem::path file = [] {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("unet-fuzz-metrics-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / "metrics.jsonl";
  }();
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path file = input_file();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const unet::RunHistory history = unet::read_run_history(file);
  (void)unet::read_run_history(file, 3);
  for (const unet::StepReport& r : history.steps)
    if (r.step < 0) __builtin_trap();

  constexpr std::int64_t kCap = 16;
  std::size_t at = 0;  // where the next line starts in `bytes`
  std::int64_t expected_number = 1;
  const auto next_line = [&]() {
    const std::size_t end = bytes.find('\n', at);
    const std::string_view line =
        bytes.substr(at, end == std::string_view::npos ? bytes.size() - at : end - at);
    at = end == std::string_view::npos ? bytes.size() : end + 1;
    return line;
  };
  const bool read = unet::for_each_capped_line(
      file, kCap,
      [&](std::string_view line) {
        if (line.size() > static_cast<std::size_t>(kCap) || next_line() != line) __builtin_trap();
        ++expected_number;
      },
      [&](std::int64_t number, std::int64_t length) {
        if (number != expected_number || length <= kCap ||
            next_line().size() != static_cast<std::size_t>(length))
          __builtin_trap();
        ++expected_number;
      });
  if (!read || at != bytes.size()) __builtin_trap();
  return 0;
}
