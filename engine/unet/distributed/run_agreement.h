// What the processes of one run must agree on before training: the config, and which of the run's replicas
// each process drives.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/distributed/process_group.h"

namespace unet {

// Throws ConfigError naming the first key whose value differs between ranks, with both values and the ranks
// that hold them; every rank throws the same error.
void agree_on_config(ProcessGroup& group, const Config& config);

// Throws Error(data) naming the ranks when the processes' datasets differ in what the run's split depends on:
// `description` (the sample count, image size and channels), the same text on every rank that reads the same
// data.
void agree_on_dataset(ProcessGroup& group, const std::string& description);

// What a process starts training from. Processes that resume different checkpoints (another step of the
// run, a weights-only export, one fresh and one resumed) would train together into a model no correct run
// gives: they must agree first.
struct StartState {
  std::string
      kind;  // "a fresh model", "a full checkpoint", "a checkpoint without optimizer state (weights only)"
  std::int64_t step = 0;
  std::string file;    // the checkpoint's path, for messages ("" for a fresh model)
  std::string sha256;  // hex SHA-256 of the state it holds (parameters, optimizer state, position)
};
// Throws Error(config) naming both ranks, their kinds, steps and files when a rank's kind, step or hash
// differs from rank 0's; every rank throws the same error.
void agree_on_start(ProcessGroup& group, const StartState& start);
// StartState::sha256: of each slab (its length, then its values' bytes) and then `position`'s text.
std::string hash_of_state(std::initializer_list<const std::vector<float>*> slabs,
                          const std::string& position);

// The samples' file digests (PreflightReport::content: name and SHA-256 per sample), compared across the
// processes: one combined hash first, then, when it differs, a bisection over the list (about log2(samples)
// gathers of one hash each) to the first sample whose name or bytes differ. Throws Error(data) naming that
// file and the ranks. Nothing is sent that grows with the dataset.
struct SampleDigest {
  std::string name;
  std::array<std::uint8_t, 32> sha256{};
};
void agree_on_content(ProcessGroup& group, const std::vector<SampleDigest>& samples);

// This process's devices: the processes on one host share its `devices` list in equal consecutive parts
// (2 processes, 4 GPUs: cuda:0 and cuda:1, then cuda:2 and cuda:3), so that one config serves one process per
// host or one per GPU. Throws ConfigError("devices") when the list does not divide.
std::vector<DeviceId> local_devices(const ProcessGroup& group, const std::vector<DeviceId>& devices);

struct ReplicaRange {
  int first = 0;  // this process's first replica, counted over the run
  int world = 0;  // the run's replicas
};
// From every process's replica count, in rank order.
ReplicaRange replica_range(ProcessGroup& group, int local_replicas);

}  // namespace unet
