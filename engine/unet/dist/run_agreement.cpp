#include "unet/dist/run_agreement.h"

#include <nlohmann/json.hpp>

#include "unet/core/error.h"

namespace unet {
namespace {

// The dotted path of the first value that differs between a and b ("" when they are equal), and the two
// values.
bool first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path,
                      std::string& key, std::string& a_value, std::string& b_value) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [name, value] : a.items()) {
      const std::string here = path.empty() ? name : path + "." + name;
      if (!b.contains(name)) {
        key = here, a_value = value.dump(), b_value = "(absent)";
        return true;
      }
      if (first_difference(value, b.at(name), here, key, a_value, b_value)) return true;
    }
    for (const auto& [name, value] : b.items())
      if (!a.contains(name)) {
        key = path.empty() ? name : path + "." + name, a_value = "(absent)", b_value = value.dump();
        return true;
      }
    return false;
  }
  if (a == b) return false;
  key = path, a_value = a.dump(), b_value = b.dump();
  return true;
}

}  // namespace

void agree_on_config(ProcessGroup& group, const Config& config) {
  const std::vector<std::string> all = group.all_gather(config_to_json(config).dump());
  const nlohmann::json first = nlohmann::json::parse(all.at(0));
  for (int r = 1; r < group.size(); ++r) {
    std::string key, mine, theirs;
    if (!first_difference(first, nlohmann::json::parse(all.at(static_cast<std::size_t>(r))), "", key, mine,
                          theirs))
      continue;
    throw ConfigError(key, "differs between the processes of the run: " + group.describe(0) + " has " + mine +
                               ", " + group.describe(r) + " has " + theirs +
                               "; every process must train with the same config");
  }
}

void agree_on_dataset(ProcessGroup& group, const std::string& description) {
  const std::vector<std::string> all = group.all_gather(description);
  for (int r = 1; r < group.size(); ++r)
    if (all.at(static_cast<std::size_t>(r)) != all[0])
      throw Error(ErrorKind::data,
                  group.describe(r) + " reads " + all[static_cast<std::size_t>(r)] + ", " +
                      group.describe(0) + " reads " + all[0] +
                      ": every process must read the same dataset (a shared folder, or identical "
                      "copies)");
}

std::vector<std::string> local_devices(const ProcessGroup& group, const std::vector<std::string>& devices) {
  const int local = group.local_size();
  const auto d = static_cast<int>(devices.size());
  if (local == 1) return devices;
  const std::string host = group.hosts().at(static_cast<std::size_t>(group.rank()));
  if (d % local != 0)
    throw ConfigError("devices", "lists " + std::to_string(d) + " devices for the " + std::to_string(local) +
                                     " processes on " + host +
                                     ", which share them in equal parts: list a multiple of " +
                                     std::to_string(local) + " (one per process: one GPU each)");
  const int share = d / local, at = group.local_rank() * share;
  return {devices.begin() + at, devices.begin() + at + share};
}

ReplicaRange replica_range(ProcessGroup& group, int local_replicas) {
  const std::vector<std::string> counts = group.all_gather(std::to_string(local_replicas));
  ReplicaRange range;
  for (int r = 0; r < group.size(); ++r) {
    const int n = std::stoi(counts.at(static_cast<std::size_t>(r)));
    if (r < group.rank()) range.first += n;
    range.world += n;
  }
  return range;
}

}  // namespace unet
