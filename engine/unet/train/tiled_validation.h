// Validation in patch mode (data.mode "patch"): each validation image whole, through the same tiled inference
// as `unet-train predict` (tiles of data.patch_size, half overlapping, Gaussian-blended: infer/predictor.h),
// so that its IoU is what the user will get from the model. The loss and the confusion counts are those of
// the blended probabilities, computed by a CPU backend's own loss and counts (the probabilities given as
// logits: log p per class, or log(p / (1 - p)) for a binary model), so no second copy of the loss exists.
#pragma once

#include <cstdint>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/infer/predictor.h"
#include "unet/step/data_parallel.h"
#include "unet/train/object_validation.h"

namespace unet {

// The predict options validation uses: tiled at data.patch_size, `batch` tiles per forward pass.
PredictOptions validation_predict_options(const Config& config, std::int64_t batch);

// The loss and the counts of `samples` of `dataset` under the model of `config` with `parameters` on
// `device`; the first `keep` predictions are returned in `kept` (when given), for the workbench's view, and
// every image's probabilities with its instance labels go to `objects` (when given: task "instances").
EvalOutcome evaluate_tiled(const Config& config, const std::vector<float>& parameters, const DeviceId& device,
                           const Dataset& dataset, const std::vector<std::size_t>& samples,
                           std::int64_t batch, std::vector<Prediction>* kept = nullptr, std::size_t keep = 0,
                           ObjectValidation* objects = nullptr);

}  // namespace unet
