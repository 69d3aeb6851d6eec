// The replicated step's options as a config decides them, written once. The memory planner, the trainer and
// unet-bench all run the step these options describe; before, each assembled DataParallelOptions by hand and
// the copies drifted (the planner's lacked the gradient buckets the trainer sums in). A new option of the
// step that follows from the config goes here, and all three get it. Each caller adds only its own seams:
// make_backend, make_communicator, reserve_bytes, cpu_replicas_on_host.
#pragma once

#include <vector>

#include "unet/config/config.h"
#include "unet/step/data_parallel.h"

namespace unet {

// The optimizer options a config asks for (optimizer.*, train.lr, train.weight_decay).
OptimizerOptions optimizer_options(const Config& config);

// Everything about the step on `devices` (this process's replicas) that follows from `config`: the model, the
// loss, the compute dtype (precision), the optimizer, the per-device cap (memory.cap_mib), the gradient
// buckets (comm.bucket_mib), activation checkpointing and the CUDA options. The seams stay empty: each
// replica's backend and the communicator are the engine's own.
DataParallelOptions step_options(const Config& config, std::vector<DeviceId> devices);

}  // namespace unet
