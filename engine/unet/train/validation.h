// Validation: which samples a run validates on, the pass over them that gives the epoch's metrics, and the
// predictions on the first few that a front end shows. The choice of samples is written to the run folder's
// validation.json, so that a resumed run validates on the same ones even when the dataset grew.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stop_token>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/step/data_plan.h"
#include "unet/train/observer.h"

namespace unet {

class DataParallel;
class ObjectValidation;
struct EvalOutcome;

// The validation samples: data.validation_split's, a resumed run's own validation.json, or `computed` (the
// split of val_fraction and seed); `continues_run`: the run folder holds this run. The choice is written to
// <run_dir>/validation.json when `writes_files`. A split the config names must be usable (ConfigError
// otherwise); the run's own falls back to `computed` with a warning.
DataSplit choose_validation_split(const Config& config, const Dataset& dataset, DataSplit computed,
                                  const std::filesystem::path& run_dir, bool continues_run, bool writes_files,
                                  TrainerObserver& out);

class Validation;

// data.val_path's split: every sample of `training` trains; the validation folder, scanned as data.path is,
// validates (split.val indexes its dataset). `validation` receives the pass over it. ConfigError naming
// data.val_path when the folder's scan refuses it.
DataSplit validation_folder_split(const Config& c, const Dataset& training, std::stop_token stop,
                                  TrainerObserver& out, std::unique_ptr<Validation>& validation);

class Validation {
 public:
  Validation(const Config& config, std::shared_ptr<const Dataset> dataset, std::vector<std::size_t> samples);

  // The validation metrics (val_*) of the model on `dp`'s replicas, in batches of `micro_batch` split over
  // the run's replicas (this process loads its own replicas' shares); NaN where absent. Warns once when the
  // samples hold no labelled pixel.
  EpochReport run(DataParallel& dp, std::int64_t micro_batch, TrainerObserver& out);
  // The first `wanted` samples with the model's probabilities, in chunks no larger than a micro-batch per
  // replica.
  PredictionsReport predictions(DataParallel& dp, std::int64_t micro_batch, int wanted, std::int64_t at_epoch,
                                std::int64_t step) const;

 private:
  // The val_* metrics of an evaluation of `n` samples.
  EpochReport report_of(const EvalOutcome& e, std::int64_t n, TrainerObserver& out);
  // task instances in resize mode: every validation sample's probabilities, with its instance labels.
  void add_object_maps(DataParallel& dp, std::int64_t micro_batch, ObjectValidation& objects) const;

  const Config& config_;
  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::size_t> samples_;
  bool warned_unlabelled_ = false;
};

}  // namespace unet
