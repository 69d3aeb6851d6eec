#include "unet/distributed/run_agreement.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "unet/core/error.h"
#include "unet/io/sha256.h"

namespace unet {
namespace {

// What one rank may put into each agreement's gather: the config's JSON text (far larger than any real
// config), the dataset's description, a replica count.
constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxDescriptionBytes = std::size_t{64} << 10;
constexpr std::size_t kMaxCountBytes = 16;

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
  const std::vector<std::string> all = group.all_gather(config_to_json(config).dump(), kMaxConfigBytes);
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
  const std::vector<std::string> all = group.all_gather(description, kMaxDescriptionBytes);
  for (int r = 1; r < group.size(); ++r)
    if (all.at(static_cast<std::size_t>(r)) != all[0])
      throw Error(ErrorKind::data,
                  group.describe(r) + " reads " + all[static_cast<std::size_t>(r)] + ", " +
                      group.describe(0) + " reads " + all[0] +
                      ": every process must read the same dataset (a shared folder, or identical "
                      "copies)");
}

void agree_on_start(ProcessGroup& group, const StartState& start) {
  const nlohmann::json mine = {
      {"kind", start.kind}, {"step", start.step}, {"file", start.file}, {"sha256", start.sha256}};
  const std::vector<std::string> all = group.all_gather(mine.dump(), kMaxDescriptionBytes);
  const auto parse = [&](int r) {
    nlohmann::json j = nlohmann::json::parse(all.at(static_cast<std::size_t>(r)), nullptr, false);
    if (!j.is_object() || !j.contains("kind") || !j.contains("step") || !j.contains("sha256") ||
        !j.contains("file"))
      throw Error(ErrorKind::usage,
                  group.describe(r) + " sent a malformed start: the processes are out of step");
    return j;
  };
  const auto text = [&](int r, const nlohmann::json& j) {
    const std::string file = j["file"].is_string() ? j["file"].get<std::string>() : "?";
    return group.describe(r) + " starts from " +
           (j["kind"].is_string() ? j["kind"].get<std::string>() : "?") + " at step " + j["step"].dump() +
           (file.empty() ? "" : " (" + file + ")");
  };
  const nlohmann::json first = parse(0);
  for (int r = 1; r < group.size(); ++r) {
    const nlohmann::json other = parse(r);
    if (other["kind"] == first["kind"] && other["step"] == first["step"] &&
        other["sha256"] == first["sha256"])
      continue;
    const bool same_position = other["kind"] == first["kind"] && other["step"] == first["step"];
    throw Error(
        ErrorKind::config,
        text(0, first) + ", " + text(r, other) +
            (same_position ? ", whose states differ (another run's checkpoint at the same step)" : "") +
            ": every process must resume the same checkpoint (--resume the same file on every rank)");
  }
}

std::string hash_of_state(std::initializer_list<const std::vector<float>*> slabs,
                          const std::string& position) {
  Sha256 sha;
  for (const std::vector<float>* slab : slabs) {
    sha.update(std::to_string(slab->size()) + "\n");
    sha.update(std::as_bytes(std::span(*slab)));
  }
  sha.update(position);
  return to_hex(sha.finish());
}

void agree_on_content(ProcessGroup& group, const std::vector<SampleDigest>& samples) {
  // The hash of samples [from, to): names and digests.
  const auto range_hash = [&](std::size_t from, std::size_t to) {
    Sha256 sha;
    for (std::size_t i = from; i < to && i < samples.size(); ++i) {
      sha.update(samples[i].name);
      sha.update(std::string_view("\n"));
      sha.update(std::as_bytes(std::span(samples[i].sha256)));
    }
    return to_hex(sha.finish());
  };
  // Whether some rank's hash of [from, to) differs from rank 0's; the first such rank.
  const auto first_differing = [&](const std::string& mine) {
    const std::vector<std::string> all = group.all_gather(mine, 128);
    for (int r = 1; r < group.size(); ++r)
      if (all.at(static_cast<std::size_t>(r)) != all[0]) return r;
    return 0;
  };
  if (first_differing(std::to_string(samples.size()) + " " + range_hash(0, samples.size())) == 0) return;
  // The counts are equal (agree_on_dataset compared them); bisect to the first differing sample.
  const std::vector<std::string> counts = group.all_gather(std::to_string(samples.size()), kMaxCountBytes);
  for (int r = 1; r < group.size(); ++r)
    if (counts.at(static_cast<std::size_t>(r)) != counts[0])
      throw Error(ErrorKind::data, group.describe(r) + " reads " + counts[static_cast<std::size_t>(r)] +
                                       " samples, " + group.describe(0) + " " + counts[0] +
                                       ": every process must read the same dataset");
  std::size_t lo = 0, hi = samples.size();
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (first_differing(range_hash(lo, mid)) != 0)
      hi = mid;
    else
      lo = mid;
  }
  const std::string name = lo < samples.size() ? samples[lo].name : "";
  const std::vector<std::string> names = group.all_gather(name.substr(0, 4096), 4096);
  const int r = first_differing(range_hash(lo, lo + 1));
  const std::string& theirs = names.at(static_cast<std::size_t>(std::max(r, 1)));
  throw Error(ErrorKind::data,
              names[0] == theirs
                  ? group.describe(std::max(r, 1)) + " reads other bytes in " + names[0] + " than " +
                        group.describe(0) +
                        ": every process must read the same dataset (a shared folder, or identical copies)"
                  : group.describe(std::max(r, 1)) + " reads " + theirs + " where " + group.describe(0) +
                        " reads " + names[0] +
                        ": every process must read the same dataset (a shared folder, or identical "
                        "copies)");
}

std::vector<DeviceId> local_devices(const ProcessGroup& group, const std::vector<DeviceId>& devices) {
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
  const std::vector<std::string> counts = group.all_gather(std::to_string(local_replicas), kMaxCountBytes);
  ReplicaRange range;
  for (int r = 0; r < group.size(); ++r) {
    const std::string& text = counts.at(static_cast<std::size_t>(r));
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1)
      throw Error(ErrorKind::usage, group.describe(r) + " sent a replica count of \"" + text +
                                        "\": the processes are out of step");
    if (r < group.rank()) range.first += n;
    range.world += n;
  }
  return range;
}

}  // namespace unet
