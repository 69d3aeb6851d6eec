// A run over several processes trains one model: before any work, the processes check that they train the
// same config from the same state (its kind, step and a hash of the whole state, so that a byte-identical
// copy of a checkpoint agrees and another step or run does not), and then that their copies of the data, and
// the validation splits they chose, are the same (distributed/run_agreement.h does the exchanges).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/distributed/run_agreement.h"
#include "unet/io/run_state.h"
#include "unet/step/data_plan.h"

namespace unet {

// `start`: what this process trains from, resumed (`resuming`) from `checkpoint` or set by the caller;
// `optimizer`: the optimizer.kind that made its state.
void agree_on_run_start(ProcessGroup& group, const Config& config, const RunState& start, bool resuming,
                        const std::string& optimizer, const std::filesystem::path& checkpoint);

// The dataset's shape and size, the split's sample indices, and `content`, the files' digests.
void agree_on_run_data(ProcessGroup& group, const Dataset& dataset, const DataSplit& split,
                       const std::vector<SampleDigest>& content);

}  // namespace unet
