#include "unet/step/data_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "unet/core/error.h"
#include "unet/core/rng.h"
#include "unet/data/augment_intensity.h"
#include "unet/data/augment_warp.h"

namespace unet {
namespace {

// Stream ids keep the split, the orders and the augmentations independent of each other.
constexpr std::uint64_t split_stream = 0x5350'4c49'5400ULL;
constexpr std::uint64_t order_stream = 0x4f52'4445'5200ULL;
constexpr std::uint64_t augment_stream = 0x4155'4700ULL;

void shuffle(std::vector<std::size_t>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(rng.below(i))]);
}

}  // namespace

DataSplit split_dataset(std::size_t count, double val_fraction, std::uint64_t seed) {
  std::vector<std::size_t> all(count);
  std::iota(all.begin(), all.end(), std::size_t{0});
  Rng rng(seed, split_stream);
  shuffle(all, rng);
  auto n_val = static_cast<std::size_t>(std::llround(static_cast<double>(count) * val_fraction));
  if (val_fraction > 0 && n_val == 0) n_val = 1;
  if (n_val >= count)
    throw Error(ErrorKind::data, "the dataset has " + std::to_string(count) +
                                     " sample(s): data.val_fraction " + std::to_string(val_fraction) +
                                     " leaves none to train on");
  DataSplit split;
  split.val.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_val));
  split.train.assign(all.begin() + static_cast<std::ptrdiff_t>(n_val), all.end());
  // Validation in index order: its batches are the same whatever the seed's shuffle did to the rest.
  std::sort(split.val.begin(), split.val.end());
  return split;
}

std::vector<std::size_t> epoch_order(const std::vector<std::size_t>& train, std::uint64_t seed,
                                     std::int64_t epoch, bool shuffled) {
  std::vector<std::size_t> order = train;
  if (shuffled) {
    Rng rng(seed, order_stream + static_cast<std::uint64_t>(epoch));
    shuffle(order, rng);
  }
  return order;
}

std::int64_t steps_per_epoch(std::size_t train_samples, std::int64_t batch, std::int64_t accumulation) {
  const std::int64_t per_step = batch * accumulation;
  return (static_cast<std::int64_t>(train_samples) + per_step - 1) / per_step;
}

std::vector<std::int64_t> replica_split(std::int64_t batch, int replicas) {
  std::vector<std::int64_t> split(static_cast<std::size_t>(replicas), batch / replicas);
  for (std::int64_t r = 0; r < batch % replicas; ++r) ++split[static_cast<std::size_t>(r)];
  return split;
}

namespace {

// The random numbers of the sample at `position` in epoch `epoch`: where its patch is, then its augmentation.
Rng sample_rng(std::uint64_t seed, std::int64_t epoch, std::int64_t position) {
  return Rng(seed ^ (static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL),
             augment_stream + static_cast<std::uint64_t>(position));
}

}  // namespace

BatchRecipe training_recipe(const Config& config) {
  BatchRecipe recipe;
  recipe.augment = config.data.augment;
  recipe.seed = config.data.seed;
  recipe.augmentation = config.augment;
  recipe.ignore_index = config.loss.ignore_index;
  if (config.data.mode == DataMode::patch)
    recipe.patch = PatchOptions{config.data.patch_height, config.data.patch_width,
                                config.data.foreground_oversample, config.loss.ignore_index};
  return recipe;
}

SampleDraw draw_for(const BatchRecipe& recipe, const Sample& sample, std::int64_t epoch,
                    std::int64_t position) {
  SampleDraw draw;
  Rng rng = sample_rng(recipe.seed, epoch, position);
  if (recipe.patch) draw.place = place_patch(sample, *recipe.patch, rng);
  const std::int64_t h = recipe.patch ? recipe.patch->height : sample.height;
  const std::int64_t w = recipe.patch ? recipe.patch->width : sample.width;
  if (recipe.augment) draw.augmentation = draw_augmentation(recipe.augmentation, h == w, rng);
  return draw;
}

std::vector<std::size_t> patch_epoch_order(const std::vector<std::size_t>& train, std::uint64_t seed,
                                           std::int64_t epoch, bool shuffled, std::int64_t patches) {
  std::vector<std::size_t> order;
  order.reserve(static_cast<std::size_t>(std::max<std::int64_t>(0, patches)));
  for (std::uint64_t round = 0; static_cast<std::int64_t>(order.size()) < patches && !train.empty();
       ++round) {
    std::vector<std::size_t> next = train;
    if (shuffled) {
      // Round 0 is epoch_order's shuffle; later rounds draw from streams of their own.
      Rng rng(seed ^ (round * 0xD1B54A32D192ED03ULL), order_stream + static_cast<std::uint64_t>(epoch));
      shuffle(next, rng);
    }
    const auto take = std::min<std::size_t>(next.size(), static_cast<std::size_t>(patches) - order.size());
    order.insert(order.end(), next.begin(), next.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return order;
}

void assemble_batch(const Dataset& dataset, std::span<const std::size_t> samples,
                    std::span<const std::int64_t> positions, std::int64_t epoch, bool augment,
                    std::uint64_t seed, HostBatch& batch) {
  BatchRecipe recipe;
  recipe.augment = augment;
  recipe.seed = seed;
  assemble_batch(dataset, samples, positions, epoch, recipe, batch);
}

void assemble_batch(const Dataset& dataset, std::span<const std::size_t> samples,
                    std::span<const std::int64_t> positions, std::int64_t epoch, const BatchRecipe& recipe,
                    HostBatch& batch) {
  const std::int64_t h = recipe.patch ? recipe.patch->height : dataset.height();
  const std::int64_t w = recipe.patch ? recipe.patch->width : dataset.width();
  const std::int64_t c = dataset.channels();
  const auto n = static_cast<std::int64_t>(samples.size());
  batch.count = n;
  batch.height = h;
  batch.width = w;
  batch.channels = c;
  batch.pixels.resize(static_cast<std::size_t>(n * h * w * c));
  batch.masks.resize(static_cast<std::size_t>(n * h * w));
  batch.weights.clear();  // until a sample has weights
  const int ignore = recipe.patch ? recipe.patch->ignore_index : recipe.ignore_index;
  const auto mask_fill = static_cast<std::uint8_t>(ignore >= 0 ? ignore : 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const Sample s = dataset.get(samples[static_cast<std::size_t>(i)]);
    const bool fits = s.channels == c && (recipe.patch || (s.height == h && s.width == w));
    UNET_CHECK(fits, data,
               s.source + ": " + std::to_string(s.height) + "x" + std::to_string(s.width) + "x" +
                   std::to_string(s.channels) + " where the dataset is " + std::to_string(h) + "x" +
                   std::to_string(w) + "x" + std::to_string(c));
    UNET_CHECK(s.weights.empty() || static_cast<std::int64_t>(s.weights.size()) == s.height * s.width, data,
               s.source + ": " + std::to_string(s.weights.size()) + " pixel weights for " +
                   std::to_string(s.height) + "x" + std::to_string(s.width) + " pixels");
    // The first sample with weights gives the batch its weights: every pixel 1 until a sample's own.
    if (!s.weights.empty() && batch.weights.empty())
      batch.weights.assign(static_cast<std::size_t>(n * h * w), kPaddingWeight);
    float* image = batch.pixels.data() + i * h * w * c;
    std::uint8_t* mask = batch.masks.data() + i * h * w;
    float* weights = s.weights.empty() ? nullptr : batch.weights.data() + i * h * w;
    const SampleDraw draw = draw_for(recipe, s, epoch, positions[static_cast<std::size_t>(i)]);
    // The patch's top-left corner in the sample (resize mode: the whole sample).
    const PatchPlace place = draw.place ? *draw.place : PatchPlace{};
    if (draw.augmentation) {
      // The warp puts the output's centre on the patch's centre.
      const double centre_y = static_cast<double>(place.top) + static_cast<double>(h - 1) / 2;
      const double centre_x = static_cast<double>(place.left) + static_cast<double>(w - 1) / 2;
      warp_patch(s.image.data(), s.height, s.width, c, s.mask.data(), centre_y, centre_x,
                 draw.augmentation->spatial, 0.0f, mask_fill, h, w, image, mask);
      // The weights as a one-channel image through the same geometry: bilinear, as the image.
      if (weights)
        warp_patch(s.weights.data(), s.height, s.width, 1, nullptr, centre_y, centre_x,
                   draw.augmentation->spatial, kPaddingWeight, 0, h, w, weights, nullptr);
      apply_intensity(draw.augmentation->intensity, image, h, w, c);
    } else if (recipe.patch) {
      crop_patch(s, place, *recipe.patch, image, mask, weights);
    } else {
      std::copy(s.image.begin(), s.image.end(), image);
      std::copy(s.mask.begin(), s.mask.end(), mask);
      if (weights) std::copy(s.weights.begin(), s.weights.end(), weights);
    }
  }
}

}  // namespace unet
