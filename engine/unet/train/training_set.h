// How many samples a run of a config trains on, before it starts: the data counted as the run will find it
// (the preflight's usable samples, or the generated ones), less the validation samples its split takes. Fit
// batch bounds the batch by it (plan/batch_fit.h): a batch beyond the training set only repeats samples.
// And how large its images are: Fit patch (plan/patch_fit.h) proposes no patch beyond them.
#pragma once

#include <cstdint>

#include "unet/config/config.h"
#include "unet/plan/batch_fit.h"
#include "unet/plan/patch_fit.h"

namespace unet {

// The training samples of a run of `config` (data.validation_split's, or data.val_fraction's split). Throws
// what the run's start would for data it refuses (DatasetError, a ConfigError of the split).
std::int64_t training_set_size(const Config& config);

// Fit batch's bounds for `config`: its training set counted, or (data the start would refuse, no data yet)
// not, with the reason's first line in FitBounds::not_counted; the devices' memory read when fitting.
FitBounds fit_bounds_for_run(const Config& config);

// Fit patch's bounds for `config`: the largest of its images as the files store them (the tallest one's
// height, the widest one's width, over data.path; data.image_size for the generated source), measured as a
// start scans them; or (data the start would refuse, no data yet) not, with the reason's first line in
// PatchBounds::not_measured. The devices' memory is read when fitting.
PatchBounds patch_bounds_for_run(const Config& config);

}  // namespace unet
