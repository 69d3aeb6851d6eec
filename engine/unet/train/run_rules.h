// The rules a run adds once it knows its data and length (docs/CONFIG.md, "Rules a run adds"): images the
// model cannot take, settings that
// watch validation without validation samples, a warm-up as long as the run, and training masks with no
// labelled pixel or none of a class weighed above 0. The masks are read before training when the dataset
// holds them in memory; a dataset decoded on demand is counted by the first epoch instead (LabelCheck
// counts the steps' labelled pixels until then), so that the start does not decode everything twice.
// Each refusal is a ConfigError naming the keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/step/data_plan.h"
#include "unet/train/observer.h"

namespace unet {

// A checkpoint of model `have` resumed by a config of model `want`: a run resumes with the model it was
// saved with (ConfigError naming the first key that differs).
void refuse_another_model(const UNetSpec& have, const UNetSpec& want);

// Images the model cannot take: another number of channels, sizes not multiples of 2^depth.
void refuse_images_the_model_cannot_take(const UNetSpec& model, const Dataset& dataset);

// The settings rules: validation settings without a validation sample, a warm-up as long as the run.
void refuse_what_the_run_cannot_use(const Config& config, const Dataset& dataset, const DataSplit& split,
                                    const RunInfo& info, const std::filesystem::path& run_dir);

class LabelCheck {
 public:
  explicit LabelCheck(LossConfig loss) : loss_(std::move(loss)) {}

  // The masks were checked: nothing more to count.
  bool checked() const noexcept { return checked_; }
  // Checks the masks of the `train` samples now when `dataset` holds every sample in memory.
  void check_in_memory(const Config& config, const Dataset& dataset, const std::vector<std::size_t>& train);
  // A step trained on `labelled_pixels` whose class weights sum to `class_weight_sum`.
  void count(std::int64_t labelled_pixels, double class_weight_sum);
  // Checks what the steps counted, over `masks` ("the 18 training masks").
  void check_trained(const std::string& masks);
  // At an epoch's end: checks what the steps counted when they have seen every training mask (`whole_epoch`:
  // the epoch ran from its first step to its last, over `train_samples` samples) or the run ends (`run_end`),
  // unless the masks were checked already.
  void check_after_epoch(bool whole_epoch, bool run_end, std::size_t train_samples);

 private:
  // The labelled-pixel rule on `labelled` pixels whose class weights sum to `weight_sum`, over `masks`;
  // `classes` names the classes they hold, when known.
  void refuse(std::int64_t labelled, double weight_sum, const std::string& masks,
              const std::string& classes) const;

  LossConfig loss_;
  bool checked_ = false;
  std::int64_t trained_labelled_ = 0;  // the labelled pixels this process's run trained on
  double trained_weight_sum_ = 0;      // and their class weights
};

}  // namespace unet
