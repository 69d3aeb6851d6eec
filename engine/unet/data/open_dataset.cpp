#include "unet/data/open_dataset.h"

#include "unet/config/config.h"
#include "unet/data/cached_dataset.h"
#include "unet/data/synthetic.h"

namespace unet {

std::shared_ptr<const Dataset> open_dataset(const Config& config, PreflightReport* report,
                                            std::stop_token stop, bool hash_content) {
  if (config.data.source != DataSource::synthetic) {
    DataSourceOptions options = data_source_options(config);
    options.stop = std::move(stop);
    options.hash_content = hash_content;
    return open_file_dataset(options, report);
  }

  SyntheticOptions o;
  o.count = static_cast<std::size_t>(config.data.synthetic_samples);
  o.height = config.data.image_height;
  o.width = config.data.image_width;
  o.channels = config.model.in_channels;
  o.classes = config.model.classes;
  o.seed = config.data.seed;
  o.normalize = config.data.normalize;
  if (config.task == ModelTask::instances) o.instances = config.instances;
  auto synthetic = std::make_unique<SyntheticCells>(o);
  if (report) {
    *report = PreflightReport{};
    report->layout = DataLayout::synthetic;
    report->target = FileDatasetOptions{};
    report->target.height = o.height;
    report->target.width = o.width;
    report->target.channels = o.channels;
    report->target.classes = o.classes;
    report->target.normalize = o.normalize;
    report->target.instances = o.instances;
    report->found = report->usable = o.count;
  }
  // Generated once and kept, unless that would take much memory: then generated on demand each time.
  if (static_cast<std::int64_t>(synthetic->size()) * synthetic->sample_bytes() <= (std::int64_t{1} << 30)) {
    if (report) report->cached = o.count;
    return std::make_shared<CachedDataset>(std::move(synthetic), 0, std::move(stop));
  }
  return std::shared_ptr<const Dataset>(std::move(synthetic));
}

}  // namespace unet
