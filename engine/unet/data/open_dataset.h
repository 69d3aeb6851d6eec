// Where the trainer (and anything else that trains or evaluates) gets its dataset from a config: the one
// place that maps data.source to a Dataset. The rule to keep: file sources always go through the preflight
// scan, so a run never starts on files that were not all decoded once.
#pragma once

#include <memory>
#include <stop_token>

#include "unet/data/dataset.h"
#include "unet/data/preflight.h"

namespace unet {

struct Config;

// synthetic: SyntheticCells (task instances: with its instance labels and their target), generated once and
// kept when that takes at most 1 GiB (SyntheticCells::sample_bytes), else on demand.
// folder, dsb2018: the preflight scan (preflight.h), then a FileDataset over the usable samples; throws
// DatasetError when the scan refuses the data. `report`, when given, receives the scan's report (also when it
// throws); for the synthetic source it says how many samples there are. A stop requested on `stop` ends the
// scan or the generation with Error(cancelled). `hash_content`: the report's content digests (preflight.h),
// for a run of several processes.
std::shared_ptr<const Dataset> open_dataset(const Config& config, PreflightReport* report = nullptr,
                                            std::stop_token stop = {}, bool hash_content = false);

}  // namespace unet
