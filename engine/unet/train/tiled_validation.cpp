#include "unet/train/tiled_validation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "unet/backend/devices.h"
#include "unet/core/error.h"

namespace unet {

namespace {

// Probabilities as logits whose sigmoid (one channel) or softmax (several) gives them back, clamped away from
// 0 and 1 so that a certain pixel has a finite loss.
std::vector<float> logits_of(const std::vector<float>& probabilities, std::int64_t channels) {
  constexpr double kTiny = 1e-7;
  std::vector<float> logits(probabilities.size());
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    const double p = std::clamp(static_cast<double>(probabilities[i]), kTiny, 1.0 - kTiny);
    logits[i] = static_cast<float>(channels == 1 ? std::log(p / (1.0 - p)) : std::log(p));
  }
  return logits;
}

}  // namespace

PredictOptions validation_predict_options(const Config& config, std::int64_t batch) {
  PredictOptions options;
  options.mode = PredictMode::tiled;
  options.tile_height = config.data.patch_height;
  options.tile_width = config.data.patch_width;
  options.batch = std::clamp<std::int64_t>(batch, 1, 4096);
  return options;
}

EvalOutcome evaluate_tiled(const Config& config, const std::vector<float>& parameters, const DeviceId& device,
                           const Dataset& dataset, const std::vector<std::size_t>& samples,
                           std::int64_t batch, std::vector<Prediction>* kept, std::size_t keep,
                           ObjectValidation* objects) {
  Predictor predictor(config, parameters, device);
  const PredictOptions options = validation_predict_options(config, batch);
  const LossDesc& desc = config.loss;
  const int classes = config.model.classes;
  const std::int64_t channels = classes == 1 ? 1 : classes;
  // The loss and the counts on the host's CPU backend, whatever device predicted.
  const std::unique_ptr<Backend> cpu = create_backend(DeviceId{}, {});
  const std::unique_ptr<Stream> stream = cpu->create_stream();
  Tensor sums = Tensor::empty(cpu->allocator(), Shape{kLossSums}, DType::f64, MemoryCategory::other);
  Tensor counts = Tensor::empty(cpu->allocator(), Shape{segmentation_counts_size(classes)}, DType::i64,
                                MemoryCategory::other);
  cpu->fill(*stream, sums, 0.0);
  cpu->fill(*stream, counts, 0.0);
  EvalOutcome outcome;
  for (std::size_t n = 0; n < samples.size(); ++n) {
    Sample s = dataset.get(samples[n]);
    const std::int64_t h = s.height, w = s.width;
    std::vector<Prediction> predicted =
        predictor.predict({ModelImage{h, w, s.channels, std::move(s.image)}}, {s.source}, options);
    UNET_CHECK(predicted.size() == 1, usage, "validation: no prediction of " + s.source);
    const std::vector<float> logits = logits_of(predicted.front().probabilities, channels);
    Tensor logits_t = Tensor::empty(cpu->allocator(), Shape{1, channels, h, w}, DType::f32,
                                    MemoryCategory::other, Layout::nhwc);
    cpu->copy_from_host(*stream, logits.data(), logits_t);
    Tensor targets = Tensor::empty(cpu->allocator(), Shape{1, h, w}, DType::u8, MemoryCategory::input_batch);
    cpu->copy_from_host(*stream, s.mask.data(), targets);
    // The sample's pixel weights, when it has them: the loss as training weighs it.
    std::optional<Tensor> weights;
    if (!s.weights.empty()) {
      UNET_CHECK(static_cast<std::int64_t>(s.weights.size()) == h * w, data,
                 s.source + ": " + std::to_string(s.weights.size()) + " pixel weights for " +
                     std::to_string(h * w) + " pixels");
      weights = Tensor::empty(cpu->allocator(), Shape{1, h, w}, DType::f32, MemoryCategory::input_batch);
      cpu->copy_from_host(*stream, s.weights.data(), *weights);
    }
    Tensor scratch = Tensor::empty(
        cpu->allocator(), Shape{static_cast<std::int64_t>(cpu->loss_workspace_bytes(desc, logits_t.act()))},
        DType::u8, MemoryCategory::workspace);
    cpu->loss(*stream, desc, logits_t, targets, weights ? &*weights : nullptr, nullptr, {}, sums,
              Workspace{scratch.data(), scratch.bytes()});
    cpu->segmentation_counts(*stream, logits_t, targets, counts, desc.ignore_index);
    if (objects) objects->add(predicted.front().probabilities, h, w, channels, std::move(s.instances));
    HostBatch labels{1, h, w, s.channels, {}, std::move(s.mask), std::move(s.weights)};
    outcome.loss.add(loss_denominators(desc, classes, labels));
    outcome.pixels += h * w;
    if (kept && n < keep) kept->push_back(std::move(predicted.front()));
  }
  std::array<double, kLossSums> host_sums{};
  cpu->copy_to_host(*stream, sums, host_sums.data());
  outcome.counts.assign(static_cast<std::size_t>(segmentation_counts_size(classes)), 0);
  cpu->copy_to_host(*stream, counts, outcome.counts.data());
  stream->synchronize();
  outcome.loss.cross_entropy_sum = host_sums[loss_sum_cross_entropy];
  outcome.loss.dice_sum = host_sums[loss_sum_dice];
  outcome.loss_value = outcome.loss.mean(desc);
  return outcome;
}

}  // namespace unet
