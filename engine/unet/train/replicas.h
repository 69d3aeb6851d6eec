// A run's replicas: the step as the config sets it (step_options(), which the planner plans too) with this
// run's seams added: the communicator between the processes of a run, the backends of
// TrainerOptions::make_backend, and with memory.growth false the planned peak reserved up front on each
// device. Replicas that do not fit are reported as a failed step's out-of-memory is, with the remedies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "unet/config/config.h"
#include "unet/plan/memory_planner.h"
#include "unet/step/data_parallel.h"
#include "unet/train/observer.h"

namespace unet {

class ProcessGroup;

// The step options of this process's share of the run (`group` null: the whole run); `config` and `out` must
// outlive the options (their communicator hook logs how the processes joined).
DataParallelOptions replica_options(const Config& config, ProcessGroup* group, TrainerObserver& out);

// Makes the replicas, reserving `plan`'s peaks when config.memory.growth is false. Out of memory: reports
// it to `out` at step `step` + 1, offering `resume_from`, sets `reported` and rethrows.
std::unique_ptr<DataParallel> make_replicas(DataParallelOptions options, const Config& config,
                                            const MemoryPlan* plan, std::int64_t step,
                                            const std::string& resume_from, TrainerObserver& out,
                                            bool& reported);

}  // namespace unet
