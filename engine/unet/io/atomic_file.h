// Writing a file so that a crash, a full disk or a failed write never leaves it half-written: the bytes go to
// a temporary file in the target's folder, which is fsynced and then renamed over the target, and the folder
// is fsynced so that the rename itself survives a power cut. The one non-obvious rule: the temporary file
// must be in the same folder (the same filesystem), or rename() is not atomic (or fails with EXDEV).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace unet {

// Receives the file's bytes in order; may be called any number of times. Throws unet::Error(io) on failure.
using ByteSink = std::function<void(std::span<const std::byte>)>;

// Writes what `produce` hands to its sink to `target`, atomically: afterwards `target` holds exactly those
// bytes, or, if anything failed, what it held before (or still does not exist), and no temporary file is left
// behind. Only a regular file (or nothing) at `target` is replaced: a symbolic link, a FIFO, a device, a
// socket or a folder there is refused (Error(io) naming it). The temporary file is flock()ed while it is
// written, so that a leftover (a writer killed) can be told from a write in progress. Failures of the file
// system throw unet::Error(ErrorKind::io) naming `target`, the step and the system's reason; an exception
// thrown by `produce` itself propagates unchanged (after the same clean-up). The file is created with mode
// 0644 less the process umask.
//
// `expected_bytes` (0: unknown) is what `produce` will write: the space is reserved before the first byte, so
// that a disk too small fails at once. A save that fails for lack of space (ENOSPC, EDQUOT) says how many
// bytes the file needs and how many the file system has free.
void write_file_atomically(const std::filesystem::path& target,
                           const std::function<void(const ByteSink& sink)>& produce,
                           std::uint64_t expected_bytes = 0);
void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes);

// Whether a file name has the form of the temporary files above: "." + target name + ".tmp-" + 12 lower-case
// hexadecimal digits.
bool is_atomic_temp_file_name(std::string_view file_name) noexcept;

// Deletes the regular files in `folder` (not its sub-folders) whose names are atomic-write temporaries left
// by a crash or an interrupted write, and returns their paths, sorted. A temporary file whose writer still
// holds it (its flock) is left alone.
std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& folder);

// The same for the temporary files of one target (".<name>.tmp-…" beside it): what a write of `target` that
// was interrupted left behind, for the next write of it to clear away.
std::vector<std::filesystem::path> remove_stale_temp_files_of(const std::filesystem::path& target);

}  // namespace unet
