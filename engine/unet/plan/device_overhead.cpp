#include "unet/plan/device_overhead.h"

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "unet/io/atomic_file.h"

namespace unet {
namespace {

std::filesystem::path from_environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? std::filesystem::path(value) : std::filesystem::path();
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::string overhead_key(const DeviceInfo& gpu, const CudaVersions& versions, Precision precision, int gpus) {
  const auto known = [](const std::string& v) { return v.empty() ? std::string("unknown") : v; };
  return gpu.name + " | " + std::to_string(gpu.total_bytes >> 20) + " MiB | driver " +
         known(versions.driver) + " | CUDA " + known(versions.runtime) + " | cuDNN " + known(versions.cudnn) +
         // NCCL's buffers exist only when GPUs talk to each other.
         (gpus > 1 ? " | NCCL " + known(versions.nccl) : std::string()) + " | " + to_string(precision) +
         " | " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
}

std::optional<std::int64_t> overhead_of(const DeviceSample& now, std::int64_t allocator_reserved) {
  // Unattributable: NVML's "others" could hold ours, so the difference would not be the overhead.
  if (now.others_not_attributable || now.used_by_others_bytes < 0 || now.total_bytes <= 0 ||
      now.free_bytes < 0)
    return std::nullopt;
  const std::int64_t ours = now.total_bytes - now.free_bytes - now.used_by_others_bytes;
  return std::max<std::int64_t>(0, ours - allocator_reserved);
}

std::filesystem::path overhead_cache_path() {
  std::filesystem::path dir = from_environment("UNET_CACHE_DIR");
  if (dir.empty()) {
    if (auto xdg = from_environment("XDG_CACHE_HOME"); !xdg.empty())
      dir = xdg / "unet-workbench";
    else if (auto home = from_environment("HOME"); !home.empty())
      dir = home / ".cache" / "unet-workbench";
    else
      dir = std::filesystem::temp_directory_path() / "unet-workbench";
  }
  return dir / "overhead.json";
}

OverheadCache::OverheadCache(std::filesystem::path file) : file_(std::move(file)) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_, ec)) return;
  try {
    std::ifstream in(file_, std::ios::binary);
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& [key, value] : doc.at("overhead").items())
      entries_[key] = {value.at("bytes").get<std::int64_t>(), value.value("measured", std::string())};
  } catch (const std::exception& e) {
    entries_.clear();
    problem_ = file_.string() + " is not a readable overhead cache (" + e.what() + "); it is ignored";
  }
}

std::optional<OverheadCache::Entry> OverheadCache::find(const std::string& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool OverheadCache::record(const std::string& key, std::int64_t bytes) {
  entries_[key] = {bytes, utc_now()};
  nlohmann::json overhead = nlohmann::json::object();
  for (const auto& [k, e] : entries_) overhead[k] = {{"bytes", e.bytes}, {"measured", e.measured}};
  const std::string text =
      nlohmann::json{{"about", "GPU memory beyond the allocator, measured by unet-workbench runs"},
                     {"overhead", overhead}}
          .dump(2) +
      "\n";
  try {
    std::filesystem::create_directories(file_.parent_path());
    write_file_atomically(file_, std::as_bytes(std::span(text.data(), text.size())));
  } catch (const std::exception& e) {
    problem_ = "could not keep the measured overhead in " + file_.string() + ": " + e.what();
    return false;
  }
  return true;
}

OverheadRecorder::OverheadRecorder(const std::vector<Backend*>& replicas, Precision precision,
                                   std::filesystem::path cache_file)
    : cache_(std::move(cache_file)) {
  for (Backend* b : replicas)
    if (b->info().kind == DeviceKind::cuda) gpus_.push_back(b);
  if (gpus_.empty()) return;
  const CudaVersions versions = list_devices().versions;
  for (Backend* b : gpus_)
    keys_.push_back(overhead_key(b->info(), versions, precision, static_cast<int>(gpus_.size())));
}

std::vector<std::string> OverheadRecorder::measure() {
  std::vector<std::string> lines;
  std::map<std::string, std::int64_t> grown;
  for (std::size_t g = 0; g < gpus_.size(); ++g) {
    const DeviceSample now = gpus_[g]->sample_device();
    const auto bytes = overhead_of(now, gpus_[g]->allocator().stats().reserved);
    if (!bytes) {
      if (!said_unmeasurable_)
        lines.push_back(
            gpus_[g]->info().id + ": the runtime overhead cannot be measured " +
            (now.others_not_attributable
                 ? "here: NVML lists no process with this one's PID (a container's PID namespace), "
                   "so its memory cannot be told from other processes'"
                 : "without NVML (libnvidia-ml.so.1)") +
            ", so estimate will not include it");
      said_unmeasurable_ = true;
      continue;
    }
    std::int64_t& largest = largest_[keys_[g]];
    if (*bytes > largest) grown[keys_[g]] = largest = *bytes;
  }
  for (const auto& [key, bytes] : grown) {
    if (!cache_.record(key, bytes)) {
      lines.push_back(cache_.problem());
      continue;
    }
    lines.push_back("runtime overhead " + format_bytes(bytes) + " measured for " + key + " (kept in " +
                    cache_.file().string() + " for estimate)");
  }
  return lines;
}

}  // namespace unet
