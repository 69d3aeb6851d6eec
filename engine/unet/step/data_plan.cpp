#include "unet/step/data_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "unet/core/error.h"
#include "unet/core/rng.h"

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

Augmentation augmentation_for(std::uint64_t seed, std::int64_t epoch, std::int64_t position, bool square) {
  Rng rng(seed ^ (static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL),
          augment_stream + static_cast<std::uint64_t>(position));
  return random_augmentation(rng, square);
}

namespace {

// The random numbers of the sample at `position` in epoch `epoch`: where its patch is, then its augmentation.
Rng sample_rng(std::uint64_t seed, std::int64_t epoch, std::int64_t position) {
  return Rng(seed ^ (static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL),
             augment_stream + static_cast<std::uint64_t>(position));
}

void assemble_patches(const Dataset& dataset, std::span<const std::size_t> samples,
                      std::span<const std::int64_t> positions, std::int64_t epoch, const BatchRecipe& recipe,
                      HostBatch& batch) {
  const PatchOptions& patch = *recipe.patch;
  const std::int64_t h = patch.height, w = patch.width, c = dataset.channels();
  const auto n = static_cast<std::int64_t>(samples.size());
  batch.count = n;
  batch.height = h;
  batch.width = w;
  batch.channels = c;
  batch.pixels.resize(static_cast<std::size_t>(n * h * w * c));
  batch.masks.resize(static_cast<std::size_t>(n * h * w));
  for (std::int64_t i = 0; i < n; ++i) {
    const Sample s = dataset.get(samples[static_cast<std::size_t>(i)]);
    UNET_CHECK(s.channels == c, data,
               s.source + ": " + std::to_string(s.channels) + " channels where the dataset has " +
                   std::to_string(c));
    Rng rng = sample_rng(recipe.seed, epoch, positions[static_cast<std::size_t>(i)]);
    const PatchPlace place = place_patch(s, patch, rng);
    Sample cut;
    cut.height = h;
    cut.width = w;
    cut.channels = c;
    cut.source = s.source;
    cut.image.resize(static_cast<std::size_t>(h * w * c));
    cut.mask.resize(static_cast<std::size_t>(h * w));
    crop_patch(s, place, patch, cut.image.data(), cut.mask.data());
    if (recipe.augment) apply(random_augmentation(rng, h == w), cut);
    std::copy(cut.image.begin(), cut.image.end(), batch.pixels.begin() + i * h * w * c);
    std::copy(cut.mask.begin(), cut.mask.end(), batch.masks.begin() + i * h * w);
  }
}

}  // namespace

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
  assemble_batch(dataset, samples, positions, epoch, BatchRecipe{augment, seed, std::nullopt}, batch);
}

void assemble_batch(const Dataset& dataset, std::span<const std::size_t> samples,
                    std::span<const std::int64_t> positions, std::int64_t epoch, const BatchRecipe& recipe,
                    HostBatch& batch) {
  if (recipe.patch) {
    assemble_patches(dataset, samples, positions, epoch, recipe, batch);
    return;
  }
  const bool augment = recipe.augment;
  const std::uint64_t seed = recipe.seed;
  const std::int64_t h = dataset.height(), w = dataset.width(), c = dataset.channels();
  const auto n = static_cast<std::int64_t>(samples.size());
  batch.count = n;
  batch.height = h;
  batch.width = w;
  batch.channels = c;
  batch.pixels.resize(static_cast<std::size_t>(n * h * w * c));
  batch.masks.resize(static_cast<std::size_t>(n * h * w));
  for (std::int64_t i = 0; i < n; ++i) {
    Sample s = dataset.get(samples[static_cast<std::size_t>(i)]);
    if (augment) apply(augmentation_for(seed, epoch, positions[static_cast<std::size_t>(i)], h == w), s);
    UNET_CHECK(s.height == h && s.width == w && s.channels == c, data,
               s.source + ": " + std::to_string(s.height) + "x" + std::to_string(s.width) + "x" +
                   std::to_string(s.channels) + " where the dataset is " + std::to_string(h) + "x" +
                   std::to_string(w) + "x" + std::to_string(c));
    std::copy(s.image.begin(), s.image.end(), batch.pixels.begin() + i * h * w * c);
    std::memcpy(batch.masks.data() + i * h * w, s.mask.data(), static_cast<std::size_t>(h * w));
  }
}

}  // namespace unet
