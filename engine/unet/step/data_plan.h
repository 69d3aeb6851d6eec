// Which samples go where: the train/validation split, each epoch's order, the steps of an epoch, the share of
// a micro-batch each replica gets, and each sample's patch and augmentation. All are pure functions of the
// seeds and the position in the run, so that a resumed run, or one on a different number of devices, sees
// exactly the samples (and augmentations) an uninterrupted one would.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/augment_draw.h"
#include "unet/data/dataset.h"
#include "unet/data/patch_sampler.h"

namespace unet {

struct DataSplit {
  std::vector<std::size_t> train, val;
};

// A seeded shuffle of 0..count-1; the first round(count * val_fraction) go to validation (at least one when
// val_fraction > 0). Throws Error(data) when nothing is left to train on.
DataSplit split_dataset(std::size_t count, double val_fraction, std::uint64_t seed);

// The training samples in the order epoch `epoch` visits them.
std::vector<std::size_t> epoch_order(const std::vector<std::size_t>& train, std::uint64_t seed,
                                     std::int64_t epoch, bool shuffle);

// Optimizer steps per epoch: each takes `batch` x `accumulation` samples; the last one takes what is left.
std::int64_t steps_per_epoch(std::size_t train_samples, std::int64_t batch, std::int64_t accumulation);

// docs/MODEL.md: replica r of R gets batch / R samples, the first batch % R one more.
std::vector<std::int64_t> replica_split(std::int64_t batch, int replicas);

// Images and masks of a batch, as the model takes them: pixels f32 [n, h, w, c] (normalised), masks u8
// [n, h, w], and the per-pixel loss weights f32 [n, h, w] when the samples have them (Sample::weights,
// instances.target weight_map; a sample without them weighs 1 in a batch that has them), else empty.
struct HostBatch {
  std::int64_t count = 0, height = 0, width = 0, channels = 0;
  std::vector<float> pixels;
  std::vector<std::uint8_t> masks;
  std::vector<float> weights;
};

// How samples become a batch's images: whole (resize mode: every sample has the dataset's size) or as patches
// (patch mode), augmented (augment.*) or not, with the seed of the run's data.
struct BatchRecipe {
  bool augment = false;
  std::uint64_t seed = 0;
  std::optional<PatchOptions> patch;  // patch mode
  AugmentConfig augmentation{};
  int ignore_index = -1;  // resize mode: the mask value of pixels a rotation brings in from outside
};
// The recipe of a run's training batches: data.augment, data.seed, data.mode's patch, augment.*.
BatchRecipe training_recipe(const Config& config);

// Everything drawn for the sample at `position` in epoch `epoch`'s order (of size height x width, the
// patch's in patch mode): its patch's place (patch mode) and its augmentation (when the recipe augments).
struct SampleDraw {
  std::optional<PatchPlace> place;
  std::optional<AugmentDraw> augmentation;
};
SampleDraw draw_for(const BatchRecipe& recipe, const Sample& sample, std::int64_t epoch,
                    std::int64_t position);

// Copies samples (as patches, augmented, as the recipe says) into a batch. `positions[i]` is samples[i]'s
// place in the epoch order: with the seed and the epoch it seeds everything drawn for that sample. A sample's
// weights take its mask's geometry: the same crop, the same flips and turns, and the same warp (read
// linearly where the mask is read by nearest neighbour), kPaddingWeight where the patch reaches past the
// image.
void assemble_batch(const Dataset& dataset, std::span<const std::size_t> samples,
                    std::span<const std::int64_t> positions, std::int64_t epoch, const BatchRecipe& recipe,
                    HostBatch& batch);
void assemble_batch(const Dataset& dataset, std::span<const std::size_t> samples,
                    std::span<const std::int64_t> positions, std::int64_t epoch, bool augment,
                    std::uint64_t seed, HostBatch& batch);

// Patch mode's epoch: `patches` sample indices, the training samples shuffled (when asked) and repeated, each
// round in a new order, as many times as it takes.
std::vector<std::size_t> patch_epoch_order(const std::vector<std::size_t>& train, std::uint64_t seed,
                                           std::int64_t epoch, bool shuffle, std::int64_t patches);

}  // namespace unet
