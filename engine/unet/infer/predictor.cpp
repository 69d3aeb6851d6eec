#include "unet/infer/predictor.h"

#include <cmath>
#include <cstring>

#include "unet/model/unet.h"

namespace unet {

struct Predictor::Impl {
  Config config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<ExecContext> ctx;
  std::unique_ptr<UNet> model;
};

Predictor::Predictor(const Config& config, const std::vector<float>& parameters, const DeviceId& device)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  // The checkpoint's config says how its GPU convolutions ran; prediction keeps those choices.
  impl_->backend = create_backend(device, {.cuda = config.cuda});
  impl_->stream = impl_->backend->create_stream();
  impl_->ctx =
      std::make_unique<ExecContext>(ExecContext{*impl_->backend, *impl_->stream, DType::f32, Layout::nhwc});
  impl_->model = std::make_unique<UNet>(config.model, impl_->backend->allocator());
  impl_->model->set_parameters(*impl_->ctx, parameters);
}

Predictor::Predictor(const Checkpoint& checkpoint, const DeviceId& device)
    : Predictor(checkpoint.config, checkpoint.parameters, device) {}

Predictor::~Predictor() = default;

const Config& Predictor::config() const noexcept {
  return impl_->config;
}

std::vector<Prediction> Predictor::predict(const std::vector<Image>& images,
                                           const std::vector<std::string>& names, std::int64_t batch) {
  const Config& c = impl_->config;
  const std::int64_t h = c.data.image_height, w = c.data.image_width, channels = c.model.in_channels;
  const std::int64_t classes = c.model.classes;
  const std::int64_t out_channels = classes == 1 ? 1 : classes;
  std::vector<Prediction> out(images.size());
  Backend& be = *impl_->backend;
  for (std::size_t first = 0; first < images.size(); first += static_cast<std::size_t>(batch)) {
    const std::size_t n = std::min(images.size() - first, static_cast<std::size_t>(batch));
    std::vector<std::uint8_t> pixels(n * static_cast<std::size_t>(h * w * channels));
    for (std::size_t i = 0; i < n; ++i) {
      const Image model_input =
          resize_image(convert_channels(images[first + i], channels, names.at(first + i)), h, w);
      std::memcpy(pixels.data() + i * static_cast<std::size_t>(h * w * channels), model_input.pixels.data(),
                  model_input.pixels.size());
    }
    const auto count = static_cast<std::int64_t>(n);
    Tensor input =
        Tensor::empty(be.allocator(), Shape{count, h, w, channels}, DType::u8, MemoryCategory::input_batch);
    be.copy_from_host(*impl_->stream, pixels.data(), input);
    const UNet::Pass pass = impl_->model->forward(*impl_->ctx, input, false);
    Tensor probs =
        Tensor::empty(be.allocator(), Shape{count * h * w * out_channels}, DType::f32, MemoryCategory::other);
    be.probabilities(*impl_->stream, pass.logits, probs);
    std::vector<float> host(static_cast<std::size_t>(probs.numel()));
    be.copy_to_host(*impl_->stream, probs, host.data());
    impl_->stream->synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      const Image& original = images[first + i];
      const auto begin =
          host.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(h * w * out_channels));
      std::vector<float> map(begin, begin + h * w * out_channels);
      Prediction& p = out[first + i];
      p.height = original.height;
      p.width = original.width;
      p.channels = out_channels;
      p.probabilities = resize_probabilities(map, h, w, out_channels, original.height, original.width);
    }
  }
  return out;
}

std::vector<std::uint8_t> class_mask(const Prediction& p, double threshold) {
  const auto pixels = static_cast<std::size_t>(p.height * p.width);
  UNET_CHECK(p.channels >= 1 && p.probabilities.size() == pixels * static_cast<std::size_t>(p.channels),
             usage, "class_mask: a prediction whose probabilities do not match its shape");
  std::vector<std::uint8_t> mask(pixels, 0);
  for (std::size_t i = 0; i < pixels; ++i) {
    const float* v = p.probabilities.data() + i * static_cast<std::size_t>(p.channels);
    if (p.channels == 1) {
      mask[i] = v[0] >= threshold ? 1 : 0;
      continue;
    }
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < p.channels; ++k)
      if (v[k] > v[best]) best = k;
    mask[i] = static_cast<std::uint8_t>(best);
  }
  return mask;
}

Image probability_image(const Prediction& p, std::int64_t channel) {
  UNET_CHECK(channel >= 0 && channel < p.channels, usage,
             "probability_image: no channel " + std::to_string(channel));
  Image image{p.height, p.width, 1, std::vector<std::uint8_t>(static_cast<std::size_t>(p.height * p.width))};
  for (std::int64_t i = 0; i < p.height * p.width; ++i) {
    const float v = p.probabilities[static_cast<std::size_t>(i * p.channels + channel)];
    image.pixels[static_cast<std::size_t>(i)] =
        static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f));
  }
  return image;
}

}  // namespace unet
