#include "unet/train/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

#include "unet/core/json_limits.h"
#include "unet/data/open_dataset.h"
#include "unet/io/atomic_file.h"
#include "unet/step/data_parallel.h"
#include "unet/train/object_validation.h"
#include "unet/train/segmentation_metrics.h"
#include "unet/train/tiled_validation.h"

namespace unet {

namespace {
constexpr std::string_view kValidationSplitFormat = "unet-workbench-validation/1";
}  // namespace

DataSplit choose_validation_split(const Config& c, const Dataset& dataset, DataSplit computed,
                                  const std::filesystem::path& run_dir, bool continues_run, bool writes_files,
                                  TrainerObserver& out) {
  DataSplit split = std::move(computed);
  const std::filesystem::path own = run_dir / kValidationSplitName;
  std::filesystem::path from;
  bool required = false;  // a split the config names must be usable; a resumed run's own falls back
  if (!c.data.validation_split.empty()) {
    from = c.resolve(c.data.validation_split);
    if (std::filesystem::is_directory(from)) from /= kValidationSplitName;
    required = true;
  } else if (continues_run && std::filesystem::exists(own)) {
    from = own;
  }
  if (!from.empty()) {
    const auto refuse = [&](const std::string& why) {
      if (required) throw ConfigError("data.validation_split", from.string() + ": " + why);
      out.on_log(LogLevel::warning,
                 from.string() + ": " + why + "; validating on the split of data.val_fraction and data.seed");
    };
    // Size and nesting bounded (unet/core/json_limits.h) before anything is parsed or held.
    std::string text;
    const std::optional<std::string> unreadable = read_capped_file(from, kMaxValidationSplitBytes, text);
    nlohmann::json j;
    try {
      if (!unreadable) j = parse_json_bounded(text, /*allow_exceptions=*/false);
    } catch (const JsonTooDeep&) {
      j = nlohmann::json::value_t::discarded;  // refused below as not a split this program wrote
    }
    std::string().swap(text);
    if (unreadable) {
      refuse(*unreadable);
    } else if (!j.is_object() || j.value("format", "") != kValidationSplitFormat || !j.contains("samples") ||
               !j["samples"].is_array()) {
      refuse("not a validation split written by unet-workbench (no \"format\": \"" +
             std::string(kValidationSplitFormat) + "\" with a \"samples\" list)");
    } else {
      std::map<std::string, std::size_t> index;
      for (std::size_t i = 0; i < dataset.size(); ++i) index.emplace(dataset.sample_name(i), i);
      std::vector<bool> is_val(dataset.size(), false);
      std::size_t listed = 0, missing = 0;
      for (const auto& name : j["samples"]) {
        ++listed;
        const auto it = name.is_string() ? index.find(name.get<std::string>()) : index.end();
        if (it == index.end()) {
          ++missing;
        } else {
          is_val[it->second] = true;
        }
      }
      if (listed > 0 && missing == listed) {
        refuse("names none of the " + std::to_string(dataset.size()) + " samples of " + dataset.describe());
      } else {
        // Training keeps the order of the computed split (the data order follows from it, so a resume whose
        // validation set is unchanged trains exactly as before); validation runs in index order.
        DataSplit chosen;
        for (const auto* part : {&split.train, &split.val})
          for (const std::size_t i : *part)
            if (!is_val[i]) chosen.train.push_back(i);
        for (std::size_t i = 0; i < is_val.size(); ++i)
          if (is_val[i]) chosen.val.push_back(i);
        split = std::move(chosen);
        out.on_log(LogLevel::info,
                   "validating on the " + std::to_string(split.val.size()) + " samples " + from.string() +
                       " lists" +
                       (missing ? " (" + std::to_string(missing) + " of its " + std::to_string(listed) +
                                      " are no longer in the dataset)"
                                : std::string()));
        if (split.train.empty())
          throw ConfigError(required ? "data.validation_split" : "data.val_fraction",
                            from.string() + " leaves no sample of " + dataset.describe() + " to train on");
        if (from == own) return split;  // the run's own file stays as it was
      }
    }
  }
  if (!writes_files) return split;
  nlohmann::json names = nlohmann::json::array();
  for (const std::size_t i : split.val) names.push_back(dataset.sample_name(i));
  const nlohmann::json file{
      {"format", kValidationSplitFormat}, {"dataset", dataset.describe()}, {"samples", std::move(names)}};
  // The names are UTF-8 (preflight refuses others); the dataset's description holds its folder, which may
  // not be, and is only shown.
  const std::string text = file.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_file_atomically(own, std::as_bytes(std::span(text.data(), text.size())));
  return split;
}

// data.val_path's split: the whole training dataset trains; the validation folder, scanned as data.path is,
// validates. `validation` receives the pass over it.
DataSplit validation_folder_split(const Config& c, const Dataset& training, std::stop_token stop,
                                  TrainerObserver& out, std::unique_ptr<Validation>& validation) {
  Config folder = c;
  folder.data.path = c.data.val_path;
  PreflightReport report;
  std::shared_ptr<const Dataset> val;
  try {
    val = open_dataset(folder, &report, std::move(stop));
  } catch (const DatasetError& e) {
    throw ConfigError("data.val_path", e.what());
  }
  out.on_log(LogLevel::info, "validation folder: " + report.summary());
  DataSplit split;
  split.train.resize(training.size());
  std::iota(split.train.begin(), split.train.end(), std::size_t{0});
  split.val.resize(val->size());
  std::iota(split.val.begin(), split.val.end(), std::size_t{0});
  validation = std::make_unique<Validation>(c, val, split.val);
  return split;
}

Validation::Validation(const Config& config, std::shared_ptr<const Dataset> dataset,
                       std::vector<std::size_t> samples)
    : config_(config), dataset_(std::move(dataset)), samples_(std::move(samples)) {}

EpochReport Validation::run(DataParallel& dp, std::int64_t micro_batch, TrainerObserver& out) {
  std::optional<ObjectValidation> objects;
  if (config_.task == ModelTask::instances) objects.emplace(config_.instances);
  if (config_.data.mode == DataMode::patch) {
    // Whole images, tiled as predict runs them, on this process's first device.
    const EvalOutcome e = evaluate_tiled(config_, dp.parameters(0), dp.options().devices.front(), *dataset_,
                                         samples_, micro_batch, nullptr, 0, objects ? &*objects : nullptr);
    EpochReport r = report_of(e, static_cast<std::int64_t>(samples_.size()), out);
    if (objects) objects->report(r);
    return r;
  }
  // Batches of the current micro-batch size: what training fits, forward-only validation fits too.
  const std::int64_t batch = micro_batch;
  // Split over the run's replicas; this process loads its own replicas' shares.
  const int world = dp.world_replicas(), first = dp.first_replica(), local = dp.replicas();
  std::vector<std::vector<HostBatch>> per_replica(static_cast<std::size_t>(local));
  const auto n = static_cast<std::int64_t>(samples_.size());
  for (std::int64_t begin = 0; begin < n; begin += batch) {
    const std::int64_t end = std::min(n, begin + batch);
    const std::vector<std::int64_t> sizes = replica_split(end - begin, world);
    std::int64_t at = begin;
    for (int r = 0; r < world; ++r) {
      const std::int64_t count = sizes[static_cast<std::size_t>(r)];
      const bool mine = r >= first && r < first + local;
      if (count > 0 && mine) {
        std::vector<std::size_t> samples(samples_.begin() + at, samples_.begin() + at + count);
        std::vector<std::int64_t> positions(static_cast<std::size_t>(count), 0);
        HostBatch b;
        assemble_batch(*dataset_, samples, positions, 0, false, 0, b);
        per_replica[static_cast<std::size_t>(r - first)].push_back(std::move(b));
      }
      at += count;
    }
  }
  EpochReport r = report_of(n > 0 ? dp.evaluate(per_replica) : EvalOutcome{}, n, out);
  if (objects) {
    add_object_maps(dp, micro_batch, *objects);
    objects->report(r);
  }
  return r;
}

void Validation::add_object_maps(DataParallel& dp, std::int64_t micro_batch,
                                 ObjectValidation& objects) const {
  // Every process scores every validation image on its replica 0 (the object metrics are not sums of a
  // replica's share), in chunks no larger than a training micro-batch on one device, as predictions().
  const auto chunk =
      static_cast<std::size_t>(std::max<std::int64_t>(1, (micro_batch + dp.replicas() - 1) / dp.replicas()));
  const std::int64_t classes = config_.model.classes;
  for (std::size_t first = 0; first < samples_.size(); first += chunk) {
    const std::size_t count = std::min(chunk, samples_.size() - first);
    const std::vector<std::size_t> samples(samples_.begin() + static_cast<std::ptrdiff_t>(first),
                                           samples_.begin() + static_cast<std::ptrdiff_t>(first + count));
    HostBatch batch;
    assemble_batch(*dataset_, samples, std::vector<std::int64_t>(count, 0), 0, false, 0, batch);
    const std::vector<float> probs = dp.probabilities(batch);
    const auto per_image = static_cast<std::size_t>(batch.height * batch.width * classes);
    for (std::size_t i = 0; i < count; ++i) {
      objects.add(std::span(probs).subspan(i * per_image, per_image), batch.height, batch.width, classes,
                  dataset_->get(samples[i]).instances);
    }
  }
}

EpochReport Validation::report_of(const EvalOutcome& e, std::int64_t n, TrainerObserver& out) {
  EpochReport r;
  if (n > 0) {
    const SegmentationMetrics m = segmentation_metrics(e.counts, config_.model.classes);
    // A loss over no labelled pixel is absent as the metrics are: the cross-entropy/focal term's denominator
    // is the labelled pixels' class weights, and an image without labelled pixels has no Dice to speak of.
    const LossDesc& d = config_.loss;
    const bool term_over_nothing =
        d.has_cross_entropy() && d.cross_entropy_weight > 0 && e.loss.class_weight_sum <= 0;
    r.val_loss = e.loss.labelled_pixels > 0 && !term_over_nothing ? e.loss_value : NAN;
    if (e.loss.labelled_pixels == 0 && !warned_unlabelled_) {
      warned_unlabelled_ = true;
      out.on_log(LogLevel::warning,
                 "the " + std::to_string(n) + " validation sample" + (n == 1 ? " has" : "s have") +
                     " no labelled pixel (loss.ignore_index " + std::to_string(d.ignore_index) +
                     " marks them all): val_loss, val_iou, val_dice and val_acc are absent, and no "
                     "checkpoint, schedule or early stopping that watches them sees an improvement");
    }
    r.val_iou = m.iou;
    r.val_dice = m.dice;
    r.val_acc = m.accuracy;
    r.val_class_iou = m.class_iou;
    r.val_class_dice = m.class_dice;
  } else {
    r.val_loss = r.val_iou = r.val_dice = r.val_acc = NAN;
  }
  return r;
}

PredictionsReport Validation::predictions(DataParallel& dp, std::int64_t micro_batch, int wanted,
                                          std::int64_t at_epoch, std::int64_t step) const {
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(std::max(0, wanted)), samples_.size());
  PredictionsReport report{at_epoch, step, {}};
  if (n == 0) return report;
  // In chunks no larger than a training micro-batch on one device: the predictions must not need more
  // memory than the run the planner planned (under a tight cap, four images at once once ran out of it).
  const std::int64_t micro = micro_batch;
  const auto chunk =
      static_cast<std::size_t>(std::max<std::int64_t>(1, (micro + dp.replicas() - 1) / dp.replicas()));
  const std::int64_t classes = config_.model.classes;
  if (config_.data.mode == DataMode::patch) {
    // The first images whole, as validation predicts them.
    const std::vector<std::size_t> shown(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<Prediction> kept;
    evaluate_tiled(config_, dp.parameters(0), dp.options().devices.front(), *dataset_, shown, micro, &kept,
                   n);
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const Sample s = dataset_->get(shown[i]);
      PredictionSample p;
      p.height = s.height;
      p.width = s.width;
      p.channels = s.channels;
      p.classes = classes;
      p.image = display_pixels(s.image, config_.data.normalize);
      p.mask = s.mask;
      p.probabilities = std::move(kept[i].probabilities);
      report.samples.push_back(std::move(p));
    }
    return report;
  }
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t count = std::min(chunk, n - first);
    HostBatch batch;
    const std::vector<std::size_t> samples(samples_.begin() + static_cast<std::ptrdiff_t>(first),
                                           samples_.begin() + static_cast<std::ptrdiff_t>(first + count));
    assemble_batch(*dataset_, samples, std::vector<std::int64_t>(count, 0), 0, false, 0, batch);
    const std::vector<float> probs = dp.probabilities(batch);
    const std::int64_t pixels = batch.height * batch.width;
    for (std::size_t i = 0; i < count; ++i) {
      PredictionSample p;
      p.height = batch.height;
      p.width = batch.width;
      p.channels = batch.channels;
      p.classes = classes;
      const auto px = static_cast<std::ptrdiff_t>(pixels * batch.channels),
                 mk = static_cast<std::ptrdiff_t>(pixels);
      const auto at = static_cast<std::ptrdiff_t>(i);
      p.image = display_pixels(
          std::span(batch.pixels).subspan(static_cast<std::size_t>(at * px), static_cast<std::size_t>(px)),
          config_.data.normalize);
      p.mask.assign(batch.masks.begin() + at * mk, batch.masks.begin() + (at + 1) * mk);
      const auto pr = static_cast<std::ptrdiff_t>(pixels * classes);
      p.probabilities.assign(probs.begin() + at * pr, probs.begin() + (at + 1) * pr);
      report.samples.push_back(std::move(p));
    }
  }
  return report;
}

}  // namespace unet
