#include "unet/train/run_rules.h"

#include <algorithm>
#include <array>

#include "unet/data/cached_dataset.h"
#include "unet/data/file_dataset.h"

namespace unet {

void refuse_another_model(const UNetSpec& have, const UNetSpec& want) {
  auto differ = [](const char* key, auto a, auto b) {
    throw ConfigError(key, "the checkpoint's model has " + std::to_string(a) + ", the config " +
                               std::to_string(b) + "; a run resumes with the model it was saved with");
  };
  if (have.in_channels != want.in_channels) differ("model.in_channels", have.in_channels, want.in_channels);
  if (have.classes != want.classes) differ("model.classes", have.classes, want.classes);
  if (have.width != want.width) differ("model.width", have.width, want.width);
  if (have.depth != want.depth) differ("model.depth", have.depth, want.depth);
  if (have.separable != want.separable) differ("model.separable", have.separable, want.separable);
}

void refuse_images_the_model_cannot_take(const UNetSpec& model, const Dataset& dataset) {
  if (dataset.channels() != model.in_channels)
    throw ConfigError("model.in_channels", "is " + std::to_string(model.in_channels) +
                                               " but the images have " + std::to_string(dataset.channels()) +
                                               " channels");
  if (dataset.height() % model.size_multiple() != 0 || dataset.width() % model.size_multiple() != 0)
    throw ConfigError("data.image_size", "images of " + std::to_string(dataset.height()) + "x" +
                                             std::to_string(dataset.width()) +
                                             " are not multiples of 2^depth");
}

void refuse_what_the_run_cannot_use(const Config& c, const Dataset& dataset, const DataSplit& split,
                                    const RunInfo& info, const std::filesystem::path& run_dir) {
  std::vector<ConfigProblem> problems;
  // No validation sample although the config asked for some (data.val_fraction 0 is training_problems'):
  // a data.validation_split, or a resumed run's own validation.json, that lists none.
  if (split.val.empty() && (c.data.val_fraction > 0 || !c.data.validation_split.empty()))
    problems = validation_problems(
        c, "the run has no validation sample (" +
               (c.data.validation_split.empty()
                    ? (run_dir / kValidationSplitName).string() + ", the split this run keeps, lists none"
                    : "data.validation_split lists none of " + dataset.describe()) +
               ")");
  const std::string steps_text = c.train.steps > 0
                                     ? "train.steps " + std::to_string(c.train.steps)
                                     : "train.epochs " + std::to_string(c.train.epochs) + " x " +
                                           std::to_string(info.steps_per_epoch) + " steps per epoch of " +
                                           std::to_string(split.train.size()) + " training samples";
  if (auto p = warmup_problem(c, info.total_steps, steps_text)) problems.push_back(std::move(*p));
  throw_config_problems(problems);
}

void LabelCheck::check_in_memory(const Config& c, const Dataset& dataset,
                                 const std::vector<std::size_t>& train) {
  // The training masks, when reading them costs a copy each (the dataset holds every sample in memory); a
  // dataset decoded on demand is counted by the first epoch instead (loop()), so that the start does not
  // decode everything twice.
  const auto* files = dynamic_cast<const FileDataset*>(&dataset);
  const bool in_memory = dynamic_cast<const CachedDataset*>(&dataset) != nullptr ||
                         (files && files->cached_count() == files->size());
  if (!in_memory) return;
  std::array<std::int64_t, 256> pixels_of{};  // pixels per mask value
  for (const std::size_t i : train)
    for (const std::uint8_t v : dataset.get(i).mask) ++pixels_of[v];
  std::int64_t labelled = 0;
  double weight_sum = 0;
  std::vector<std::string> present;
  for (int v = 0; v < 256; ++v) {
    const std::int64_t n = pixels_of[static_cast<std::size_t>(v)];
    if (n == 0 || v == c.loss.ignore_index) continue;
    // A binary model's masks are binarised around the ignore label: any other value than 0 is foreground.
    const int cls = c.model.classes == 1 ? (v ? 1 : 0) : v;
    if (cls >= std::max(c.model.classes, 2)) continue;  // refused by the backend, naming the file
    labelled += n;
    weight_sum += static_cast<double>(n) * c.loss.class_weight(cls);
    if (std::find(present.begin(), present.end(), std::to_string(cls)) == present.end())
      present.push_back(std::to_string(cls));
  }
  std::string classes;
  for (std::size_t i = 0; i < present.size(); ++i)
    classes += (i == 0 ? "" : i + 1 == present.size() ? " and " : ", ") + present[i];
  refuse(labelled, weight_sum,
         "the " + std::to_string(train.size()) + " training mask" + (train.size() == 1 ? "" : "s"),
         present.empty() ? std::string() : (present.size() == 1 ? "class " : "classes ") + classes);
  checked_ = true;
}

void LabelCheck::count(std::int64_t labelled_pixels, double class_weight_sum) {
  trained_labelled_ += labelled_pixels;
  trained_weight_sum_ += class_weight_sum;
}

void LabelCheck::check_trained(const std::string& masks) {
  refuse(trained_labelled_, trained_weight_sum_, masks, {});
  checked_ = true;
}

void LabelCheck::refuse(std::int64_t labelled, double weight_sum, const std::string& masks,
                        const std::string& classes) const {
  const LossConfig& loss = loss_;
  if (labelled == 0 && loss.ignore_index >= 0)
    throw ConfigError("loss.ignore_index",
                      "is " + std::to_string(loss.ignore_index) + ", and it marks every pixel of " + masks +
                          ": no pixel is labelled, so the run cannot learn, and its metrics would be over "
                          "nothing; set it to the value that marks only the unlabelled pixels (-1: none)");
  if (labelled > 0 && weight_sum <= 0 && !loss.class_weights.empty()) {
    nlohmann::json weights = loss.class_weights;
    throw ConfigError(
        "loss.class_weights",
        weights.dump() + " weighs 0 every class " + masks + " label" +
            (classes.empty() ? std::string() : " (" + classes + ")") +
            ": no labelled pixel counts in the loss, so the run cannot learn; weigh a class the "
            "masks hold above 0");
  }
}

void LabelCheck::check_after_epoch(bool whole_epoch, bool run_end, std::size_t train_samples) {
  if (checked_ || !(whole_epoch || run_end)) return;
  check_trained(whole_epoch ? "the " + std::to_string(train_samples) + " training masks"
                            : "the training samples this run trained on");
}

}  // namespace unet
