// Whose memory is on a GPU: NVML's list of the processes on a device, split into this process's share and
// the others'. Inline, since the CUDA module (which links no engine code) calls it and the engine's tests
// check it.
//
// The non-obvious rule: NVML names processes by the PIDs it sees. In a container or sandbox those are the
// host's, so this process's entry carries a PID that is not getpid(), or NVML lists no process at all. Then
// every byte of ours would count as another process's (and "our overhead", used − others − mapped, would
// come out 0), so such a reading is "not attributable" instead: others unknown (−1). The exception is a
// device where this process holds no context: nothing there is ours, so whatever is used is others'
// ((total − free) − (mapped + overhead) with both 0, docs/CUDA_BACKEND.md §4.3).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace unet {

// One entry of NVML's compute-process list.
struct ProcessMemory {
  unsigned pid = 0;
  std::int64_t bytes = -1;  // -1: NVML cannot say (NVML_VALUE_NOT_AVAILABLE, as under MIG)
};

struct OthersShare {
  std::int64_t bytes = -1;        // other processes' memory on the device; -1: not known
  bool not_attributable = false;  // known memory that cannot be split between this process and others
};

// `processes`: NVML's list (nullopt when NVML could not give it); `self`: this process's PID as NVML would
// show it; `holds_context`: whether this process has a context on the device (its primary context is
// active); `device_used`: total − free on the device (−1 when unknown).
inline OthersShare others_share(const std::optional<std::vector<ProcessMemory>>& processes, unsigned self,
                                bool holds_context, std::int64_t device_used) {
  const auto sum_without = [&](std::optional<unsigned> skip) -> std::int64_t {
    std::int64_t sum = 0;
    for (const ProcessMemory& p : *processes) {
      if (skip && p.pid == *skip) continue;
      if (p.bytes < 0) return -1;
      sum += p.bytes;
    }
    return sum;
  };
  if (!holds_context) {
    // Nothing here is ours: the listed processes are all others, and where NVML lists none (a sandbox
    // hides them) or cannot say, what the device has in use is theirs.
    if (processes && !processes->empty())
      if (const std::int64_t listed = sum_without(std::nullopt); listed >= 0) return {.bytes = listed};
    return {.bytes = device_used < 0 ? -1 : device_used};
  }
  if (device_used < 0 && !processes) return {};  // no NVML reading at all: unknown, not unattributable
  bool found = false;
  if (processes)
    for (const ProcessMemory& p : *processes) found = found || p.pid == self;
  if (found)
    if (const std::int64_t others = sum_without(self); others >= 0) return {.bytes = others};
  return {.bytes = -1, .not_attributable = true};
}

}  // namespace unet
