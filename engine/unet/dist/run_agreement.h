// What the processes of one run must agree on before training: the config, and which of the run's replicas
// each process drives.
#pragma once

#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/dist/process_group.h"

namespace unet {

// Throws ConfigError naming the first key whose value differs between ranks, with both values and the ranks
// that hold them; every rank throws the same error.
void agree_on_config(ProcessGroup& group, const Config& config);

// Throws Error(data) naming the ranks when the processes' datasets differ in what the run's split depends on:
// `description` (the sample count, image size and channels), the same text on every rank that reads the same
// data.
void agree_on_dataset(ProcessGroup& group, const std::string& description);

// This process's devices: the processes on one host share its `devices` list in equal consecutive parts
// (2 processes, 4 GPUs: cuda:0 and cuda:1, then cuda:2 and cuda:3), so that one config serves one process per
// host or one per GPU. Throws ConfigError("devices") when the list does not divide.
std::vector<std::string> local_devices(const ProcessGroup& group, const std::vector<std::string>& devices);

struct ReplicaRange {
  int first = 0;  // this process's first replica, counted over the run
  int world = 0;  // the run's replicas
};
// From every process's replica count, in rank order.
ReplicaRange replica_range(ProcessGroup& group, int local_replicas);

}  // namespace unet
