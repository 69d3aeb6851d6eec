// What a GPU holds for a training process beyond the allocator's mapped pages: the CUDA context and the
// module code loaded into it (lazily, as cuDNN's kernels are first used), cuDNN's handle, NCCL's buffers. It
// cannot be derived from the model, so the first run on a GPU measures it (device used, less other processes,
// less the allocator's reserved bytes, after its first step and its first validation) and keeps it per GPU
// model, software versions and precision in <cache>/overhead.json; the planner adds it to the allocator's
// peak to predict what the device will show (docs/CUDA_BACKEND.md §4.2).
//
// <cache> is $UNET_CACHE_DIR, else $XDG_CACHE_HOME/unet-workbench, else ~/.cache/unet-workbench. The file is
// a cache: one that cannot be read is ignored (and replaced by the next measurement), never an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/backend/devices.h"
#include "unet/config/config.h"

namespace unet {

// What the overhead depends on, as one line: "NVIDIA H200 | 143771 MiB | driver 13.0 (580.65.06) | CUDA 13.0
// | cuDNN 9.19.0 | NCCL 2.28.9 | mixed-bf16 | 1 GPU".
std::string overhead_key(const DeviceInfo& gpu, const CudaVersions& versions, Precision precision, int gpus);

// The device's used bytes less other processes' and the allocator's reserved; nullopt when NVML could not
// say what others use, or said it without telling this process apart (others_not_attributable): then
// ours and theirs cannot be told apart, and "overhead 0" would be a guess.
std::optional<std::int64_t> overhead_of(const DeviceSample& now, std::int64_t allocator_reserved);

std::filesystem::path overhead_cache_path();

class OverheadCache {
 public:
  struct Entry {
    std::int64_t bytes = 0;
    std::string measured;  // when, ISO 8601 UTC
  };
  // Reads `file` if it exists; a file that cannot be read or parsed leaves the cache empty and says why in
  // problem().
  explicit OverheadCache(std::filesystem::path file = overhead_cache_path());

  std::optional<Entry> find(const std::string& key) const;
  // Keeps `bytes` for `key` and writes the file (atomically, creating its folder). Returns false, with the
  // reason in problem(), when it cannot be written.
  bool record(const std::string& key, std::int64_t bytes);
  const std::string& problem() const noexcept { return problem_; }
  const std::filesystem::path& file() const noexcept { return file_; }

 private:
  std::filesystem::path file_;
  std::map<std::string, Entry> entries_;
  std::string problem_;
};

// Measures a run's GPUs: each reading keeps the largest overhead seen per key (module code grows as kernels
// are first used, so the trainer reads after its first step and again after its first validation) and
// writes the cache when a reading grew.
class OverheadRecorder {
 public:
  OverheadRecorder(const std::vector<Backend*>& replicas, Precision precision,
                   std::filesystem::path cache_file = overhead_cache_path());
  bool active() const noexcept { return !gpus_.empty(); }
  // A line for the run's log for each key whose reading grew, or why nothing could be measured or kept.
  std::vector<std::string> measure();

 private:
  std::vector<Backend*> gpus_;
  std::vector<std::string> keys_;  // per GPU
  OverheadCache cache_;
  std::map<std::string, std::int64_t> largest_;
  bool said_unmeasurable_ = false;
};

}  // namespace unet
