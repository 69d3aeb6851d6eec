#include "unet/train/training_set.h"

#include <algorithm>

#include "unet/data/open_dataset.h"
#include "unet/step/data_plan.h"
#include "unet/train/validation.h"

namespace unet {

std::int64_t training_set_size(const Config& config) {
  const auto training_samples = [&](std::size_t samples) {
    // A validation folder (data.val_path) leaves every sample of data.path to training.
    if (!config.data.val_path.empty()) return static_cast<std::int64_t>(samples);
    return static_cast<std::int64_t>(
        split_dataset(samples, config.data.val_fraction, config.data.seed).train.size());
  };
  if (!config.data.validation_split.empty() && config.data.val_path.empty()) {
    // The split names its samples: the dataset's names are needed to find them.
    const auto dataset = open_dataset(config);
    TrainerObserver quiet;
    const DataSplit split = choose_validation_split(
        config, *dataset, split_dataset(dataset->size(), config.data.val_fraction, config.data.seed), {},
        /*continues_run=*/false, /*writes_files=*/false, quiet);
    return static_cast<std::int64_t>(split.train.size());
  }
  if (config.data.source == DataSource::synthetic)
    return training_samples(static_cast<std::size_t>(config.data.synthetic_samples));
  // The preflight the start runs, without keeping the decoded samples.
  DataSourceOptions options = data_source_options(config);
  options.target.cache_mib = 0;
  return training_samples(preflight(options).pairs.size());
}

namespace {

// The first line of what `e` says: the headline of a dataset's refusal, without its list of files.
std::string first_line(const Error& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

FitBounds fit_bounds_for_run(const Config& config) {
  FitBounds bounds;
  if (config.data.mode == DataMode::patch) {
    // An epoch of patch mode is data.patches_per_epoch random patches: any batch draws distinct crops.
    bounds.not_counted = "data.mode is \"patch\": a batch of patches is not bounded by the number of images";
    return bounds;
  }
  try {
    bounds.training_samples = training_set_size(config);
  } catch (const Error& e) {
    bounds.not_counted = first_line(e);
  }
  return bounds;
}

PatchBounds patch_bounds_for_run(const Config& config) {
  PatchBounds bounds;
  if (config.data.source == DataSource::synthetic) {
    bounds.image_height = config.data.image_height;
    bounds.image_width = config.data.image_width;
    return bounds;
  }
  try {
    DataSourceOptions options = data_source_options(config);
    options.target.cache_mib = 0;  // the sizes are in the report: nothing is kept
    for (const auto& [size, count] : preflight(options).report.sizes) {
      bounds.image_height = std::max(bounds.image_height, size.first);
      bounds.image_width = std::max(bounds.image_width, size.second);
    }
  } catch (const Error& e) {
    bounds.not_measured = first_line(e);
  }
  return bounds;
}

}  // namespace unet
