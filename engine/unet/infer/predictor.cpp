#include "unet/infer/predictor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "unet/model/unet.h"

namespace unet {

namespace {

constexpr std::int64_t kMaxTile = 16384;  // ImageLimits' largest side
constexpr std::int64_t kMaxBatch = 4096;

// Flip test-time augmentation's variants, as bits: 1 flips left-right, 2 top-bottom.
constexpr int kFlipLeftRight = 1, kFlipTopBottom = 2;

// Index i of a row of n pixels extended by mirroring about its first and last pixel (..., 2, 1, 0, 1, 2, ...,
// n-2, n-1, n-2, ...), as often as the extension needs: an image smaller than half a tile still pads.
std::int64_t mirrored(std::int64_t i, std::int64_t n) {
  if (n == 1) return 0;
  const std::int64_t period = 2 * (n - 1);
  const std::int64_t m = i % period;
  return m < n ? m : period - m;
}

// `image` extended to height x width (each at least the image's) below and to the right.
Image padded(const Image& image, std::int64_t height, std::int64_t width, PredictPadding padding) {
  if (height == image.height && width == image.width) return image;
  const std::int64_t c = image.channels;
  Image out{height, width, c, std::vector<std::uint8_t>(static_cast<std::size_t>(height * width * c), 0)};
  for (std::int64_t y = 0; y < height; ++y) {
    if (padding == PredictPadding::zero && y >= image.height) break;
    const std::int64_t sy = y < image.height ? y : mirrored(y, image.height);
    for (std::int64_t x = 0; x < width; ++x) {
      if (padding == PredictPadding::zero && x >= image.width) break;
      const std::int64_t sx = x < image.width ? x : mirrored(x, image.width);
      std::memcpy(out.pixels.data() + (y * width + x) * c, image.pixels.data() + (sy * image.width + sx) * c,
                  static_cast<std::size_t>(c));
    }
  }
  return out;
}

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

const char* to_string(PredictMode mode) noexcept {
  switch (mode) {
    case PredictMode::automatic:
      return "auto";
    case PredictMode::resize:
      return "resize";
    case PredictMode::tiled:
      return "tiled";
    case PredictMode::whole:
      return "whole";
  }
  return "?";
}

const char* to_string(PredictPadding padding) noexcept {
  return padding == PredictPadding::reflect ? "reflect" : "zero";
}

const char* to_string(PredictAugmentation augmentation) noexcept {
  return augmentation == PredictAugmentation::none ? "none" : "flips";
}

namespace {

template <typename Enum, std::size_t N>
Enum from_string(const std::string& text, const std::string& key, const Enum (&choices)[N]) {
  std::string names;
  for (const Enum choice : choices) {
    if (text == to_string(choice)) return choice;
    names += (names.empty() ? "" : ", ") + std::string(to_string(choice));
  }
  throw ConfigError(key, "must be one of " + names + ", got '" + text + "'");
}

}  // namespace

PredictMode predict_mode_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictMode kModes[] = {PredictMode::automatic, PredictMode::resize, PredictMode::tiled,
                                           PredictMode::whole};
  return from_string(text, key, kModes);
}

PredictPadding predict_padding_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictPadding kPaddings[] = {PredictPadding::reflect, PredictPadding::zero};
  return from_string(text, key, kPaddings);
}

PredictAugmentation predict_augmentation_from_string(const std::string& text, const std::string& key) {
  static constexpr PredictAugmentation kAugmentations[] = {PredictAugmentation::none,
                                                           PredictAugmentation::flips};
  return from_string(text, key, kAugmentations);
}

void validate(const PredictOptions& options, const UNetSpec& model) {
  const std::int64_t multiple = model.size_multiple();
  for (const std::int64_t side : {options.tile_height, options.tile_width}) {
    if (side == 0) continue;
    if (side < multiple || side > kMaxTile || side % multiple != 0)
      throw ConfigError("tile", "each side must be a multiple of 2^depth = " + std::to_string(multiple) +
                                    " (model.depth " + std::to_string(model.depth) + ") in " +
                                    std::to_string(multiple) + ".." + std::to_string(kMaxTile) + ", got " +
                                    std::to_string(side));
  }
  if ((options.tile_height == 0) != (options.tile_width == 0))
    throw ConfigError("tile", "give both sides or neither (0 x 0: the training size), got " +
                                  std::to_string(options.tile_height) + "x" +
                                  std::to_string(options.tile_width));
  if (!(options.overlap >= 0 && options.overlap <= PredictOptions::max_overlap)) {
    char text[64];
    std::snprintf(text, sizeof text, "must be in 0..%.1f, got %g", PredictOptions::max_overlap,
                  options.overlap);
    throw ConfigError("overlap", text);
  }
  if (options.batch < 1 || options.batch > kMaxBatch)
    throw ConfigError(
        "batch", "must be in 1.." + std::to_string(kMaxBatch) + ", got " + std::to_string(options.batch));
}

std::vector<std::int64_t> tile_starts(std::int64_t length, std::int64_t tile, double overlap,
                                      std::int64_t align) {
  UNET_CHECK(align >= 1 && tile >= align && length >= tile && tile % align == 0 && length % align == 0, usage,
             "tile_starts: a tile of " + std::to_string(tile) + " in " + std::to_string(length) +
                 " pixels, aligned to " + std::to_string(align));
  // In units of `align` pixels, where the tiles' starts are whole numbers.
  const std::int64_t span = (length - tile) / align;
  if (span == 0) return {0};
  // The largest step the overlap allows, at least one unit; a hair below exact quotients so that 64 / 16
  // pixels stays 4 steps whatever the rounding of tile * (1 - overlap).
  const std::int64_t tile_units = tile / align;  // exact: the tile is a multiple of `align`
  const double step = std::max(1.0, static_cast<double>(tile_units) * (1.0 - overlap));
  const auto steps = static_cast<std::int64_t>(std::ceil(static_cast<double>(span) / step - 1e-9));
  std::vector<std::int64_t> starts;
  for (std::int64_t i = 0; i <= steps; ++i)
    starts.push_back((2 * i * span + steps) / (2 * steps) * align);  // round(i * span / steps), halves up
  return starts;
}

std::vector<float> gaussian_importance(std::int64_t height, std::int64_t width) {
  UNET_CHECK(height >= 1 && width >= 1, usage, "gaussian_importance: an empty tile");
  auto axis = [](std::int64_t n) {
    std::vector<double> g(static_cast<std::size_t>(n));
    const double sigma = static_cast<double>(n) / 8.0, centre = static_cast<double>(n) / 2.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(i) + 0.5 - centre;
      g[static_cast<std::size_t>(i)] = std::exp(-d * d / (2.0 * sigma * sigma));
    }
    return g;
  };
  const std::vector<double> gy = axis(height), gx = axis(width);
  std::vector<float> map(static_cast<std::size_t>(height * width));
  for (std::int64_t y = 0; y < height; ++y)
    for (std::int64_t x = 0; x < width; ++x)
      map[static_cast<std::size_t>(y * width + x)] =
          static_cast<float>(gy[static_cast<std::size_t>(y)] * gx[static_cast<std::size_t>(x)]);
  return map;
}

struct Predictor::Impl {
  Config config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<ExecContext> ctx;
  std::unique_ptr<UNet> model;

  // [count, height, width, in_channels] pixels in; [count, height, width, classes] probabilities out.
  std::vector<float> forward(const std::vector<std::uint8_t>& pixels, std::int64_t count, std::int64_t height,
                             std::int64_t width);
};

std::vector<float> Predictor::Impl::forward(const std::vector<std::uint8_t>& pixels, std::int64_t count,
                                            std::int64_t height, std::int64_t width) {
  const std::int64_t channels = config.model.in_channels, classes = config.model.classes;
  Backend& be = *backend;
  Tensor input = Tensor::empty(be.allocator(), Shape{count, height, width, channels}, DType::u8,
                               MemoryCategory::input_batch);
  be.copy_from_host(*stream, pixels.data(), input);
  const UNet::Pass pass = model->forward(*ctx, input, false);
  Tensor probs = Tensor::empty(be.allocator(), Shape{count * height * width * classes}, DType::f32,
                               MemoryCategory::other);
  be.probabilities(*stream, pass.logits, probs);
  std::vector<float> host(static_cast<std::size_t>(probs.numel()));
  be.copy_to_host(*stream, probs, host.data());
  stream->synchronize();
  return host;
}

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

PredictMode Predictor::mode_for(std::int64_t height, std::int64_t width,
                                const PredictOptions& options) const {
  if (options.mode != PredictMode::automatic) return options.mode;
  const DataConfig& data = impl_->config.data;
  return height <= data.image_height && width <= data.image_width ? PredictMode::resize : PredictMode::tiled;
}

namespace {

// One image on its way through the model: the canvas its model inputs are cut from (the image resized or
// padded), the weighted sums of the probabilities over the canvas and their weights, and how many of its
// model inputs are still to come back.
struct ImageInProgress {
  std::int64_t height = 0, width = 0;                // the image's
  std::int64_t canvas_height = 0, canvas_width = 0;  // the grid the sums are kept on
  PredictMode mode = PredictMode::resize;
  std::int64_t tiles = 1, passes = 1;
  std::vector<float> sums;     // [canvas, classes]
  std::vector<float> weights;  // [canvas]
  std::int64_t outstanding = 0;
};

// A model input: where in which image it goes, and how it was flipped.
struct ModelInput {
  std::size_t image = 0;
  std::int64_t top = 0, left = 0;
  int flips = 0;
};

}  // namespace

std::vector<Prediction> Predictor::predict(const std::vector<Image>& images,
                                           const std::vector<std::string>& names,
                                           const PredictOptions& options, const PredictControl& control) {
  const Config& c = impl_->config;
  validate(options, c.model);
  UNET_CHECK(names.size() == images.size(), usage, "Predictor::predict: a name for each image");
  const std::int64_t in_channels = c.model.in_channels, classes = c.model.classes;
  const std::int64_t tile_height = options.tile_height ? options.tile_height : c.data.image_height;
  const std::int64_t tile_width = options.tile_width ? options.tile_width : c.data.image_width;
  const std::int64_t multiple = c.model.size_multiple();
  const std::vector<float> tile_weights =
      options.gaussian ? gaussian_importance(tile_height, tile_width) : std::vector<float>{};
  std::vector<int> flip_variants{0};
  if (options.augmentation == PredictAugmentation::flips)
    flip_variants = {0, kFlipLeftRight, kFlipTopBottom, kFlipLeftRight | kFlipTopBottom};

  std::vector<ImageInProgress> work(images.size());
  std::vector<Prediction> out;
  out.reserve(images.size());
  bool stopped = false;

  // Finishes the images whose inputs have all come back, in order, so that `out` is always a prefix.
  auto finish_ready = [&] {
    while (out.size() < images.size() && !work[out.size()].sums.empty() &&
           work[out.size()].outstanding == 0) {
      ImageInProgress& w = work[out.size()];
      // Every canvas pixel lies in at least one input, and no weight is zero: the division is defined.
      const std::int64_t canvas_pixels = w.canvas_height * w.canvas_width;
      for (std::int64_t i = 0; i < canvas_pixels; ++i)
        for (std::int64_t k = 0; k < classes; ++k)
          w.sums[static_cast<std::size_t>(i * classes + k)] /= w.weights[static_cast<std::size_t>(i)];
      Prediction p;
      p.height = w.height;
      p.width = w.width;
      p.channels = classes;
      if (w.mode == PredictMode::resize) {
        p.probabilities =
            resize_probabilities(w.sums, w.canvas_height, w.canvas_width, classes, w.height, w.width);
      } else {  // the image's part of the padded canvas
        p.probabilities.resize(static_cast<std::size_t>(w.height * w.width * classes));
        for (std::int64_t y = 0; y < w.height; ++y)
          std::memcpy(p.probabilities.data() + y * w.width * classes,
                      w.sums.data() + y * w.canvas_width * classes,
                      static_cast<std::size_t>(w.width * classes) * sizeof(float));
      }
      const PredictProgress progress{
          .image = out.size(), .images = images.size(), .mode = w.mode, .tiles = w.tiles, .passes = w.passes};
      out.push_back(std::move(p));
      w = ImageInProgress{};  // its sums are no longer needed
      if (control.on_image) control.on_image(progress);
    }
  };

  // The batch being gathered: inputs of one size, at most options.batch of them.
  std::vector<ModelInput> batch;
  std::vector<std::uint8_t> batch_pixels;
  std::int64_t batch_height = 0, batch_width = 0;

  // Runs the batch and adds each output, un-flipped and weighted, to its image's sums.
  auto run_batch = [&] {
    if (batch.empty() || stopped) return;
    if (control.stop.stop_requested()) {
      stopped = true;
      return;
    }
    const auto count = static_cast<std::int64_t>(batch.size());
    const std::vector<float> probabilities = impl_->forward(batch_pixels, count, batch_height, batch_width);
    const std::int64_t h = batch_height, w = batch_width;
    for (std::int64_t b = 0; b < count; ++b) {
      const ModelInput& input = batch[static_cast<std::size_t>(b)];
      ImageInProgress& target = work[input.image];
      // Tiles are weighted by the importance map; a resized image or a whole one is the only input at its
      // pixels (but for its flips, which weigh the same), so any constant weight gives its probabilities.
      const bool weighted = target.mode == PredictMode::tiled && !tile_weights.empty();
      const float* source = probabilities.data() + b * h * w * classes;
      for (std::int64_t y = 0; y < h; ++y) {
        // The output pixel over input pixel (y, x) of the unflipped image is at the flipped position.
        const std::int64_t sy = input.flips & kFlipTopBottom ? h - 1 - y : y;
        for (std::int64_t x = 0; x < w; ++x) {
          const std::int64_t sx = input.flips & kFlipLeftRight ? w - 1 - x : x;
          const float weight = weighted ? tile_weights[static_cast<std::size_t>(y * w + x)] : 1.0F;
          const std::int64_t at = (input.top + y) * target.canvas_width + input.left + x;
          target.weights[static_cast<std::size_t>(at)] += weight;
          const float* p = source + (sy * w + sx) * classes;
          float* sum = target.sums.data() + at * classes;
          for (std::int64_t k = 0; k < classes; ++k) sum[k] += weight * p[k];
        }
      }
      --target.outstanding;
    }
    batch.clear();
    batch_pixels.clear();
    finish_ready();
  };

  // Adds the input of `canvas` at (top, left), height x width, flipped as `flips` says, to the batch.
  auto add_input = [&](std::size_t image, const Image& canvas, std::int64_t top, std::int64_t left,
                       std::int64_t height, std::int64_t width, int flips) {
    if (!batch.empty() &&
        (batch_height != height || batch_width != width || std::ssize(batch) >= options.batch))
      run_batch();
    if (stopped) return;
    batch_height = height;
    batch_width = width;
    batch.push_back({image, top, left, flips});
    const std::size_t at = batch_pixels.size();
    batch_pixels.resize(at + static_cast<std::size_t>(height * width * in_channels));
    std::uint8_t* dst = batch_pixels.data() + at;
    for (std::int64_t y = 0; y < height; ++y) {
      const std::int64_t sy = top + (flips & kFlipTopBottom ? height - 1 - y : y);
      for (std::int64_t x = 0; x < width; ++x) {
        const std::int64_t sx = left + (flips & kFlipLeftRight ? width - 1 - x : x);
        std::memcpy(dst + (y * width + x) * in_channels,
                    canvas.pixels.data() + (sy * canvas.width + sx) * in_channels,
                    static_cast<std::size_t>(in_channels));
      }
    }
  };

  for (std::size_t i = 0; i < images.size() && !stopped; ++i) {
    const Image converted = convert_channels(images[i], in_channels, names[i]);
    ImageInProgress& w = work[i];
    w.height = converted.height;
    w.width = converted.width;
    w.mode = mode_for(converted.height, converted.width, options);
    Image canvas;
    std::vector<std::int64_t> tops{0}, lefts{0};
    std::int64_t input_height = 0, input_width = 0;
    switch (w.mode) {
      case PredictMode::resize:
        canvas = resize_image(converted, c.data.image_height, c.data.image_width);
        input_height = canvas.height;
        input_width = canvas.width;
        break;
      case PredictMode::whole: {
        canvas = padded(converted, round_up(converted.height, multiple), round_up(converted.width, multiple),
                        options.padding);
        input_height = canvas.height;
        input_width = canvas.width;
        break;
      }
      case PredictMode::tiled:
        // The canvas a multiple of 2^depth, and the tiles at multiples of it: each tile's pooling grid is
        // then the whole image's. (A U-Net is not shift-equivariant: moved by another amount, its 2x2
        // poolings take other windows, and it says something else of the same pixels.)
        canvas = padded(converted, round_up(std::max(converted.height, tile_height), multiple),
                        round_up(std::max(converted.width, tile_width), multiple), options.padding);
        tops = tile_starts(canvas.height, tile_height, options.overlap, multiple);
        lefts = tile_starts(canvas.width, tile_width, options.overlap, multiple);
        input_height = tile_height;
        input_width = tile_width;
        break;
      case PredictMode::automatic:
        UNET_CHECK(false, usage, "Predictor::predict: mode_for left auto undecided");
    }
    w.canvas_height = canvas.height;
    w.canvas_width = canvas.width;
    w.tiles = std::ssize(tops) * std::ssize(lefts);
    w.passes = w.tiles * std::ssize(flip_variants);
    w.outstanding = w.passes;
    w.sums.assign(static_cast<std::size_t>(canvas.height * canvas.width * classes), 0.0F);
    w.weights.assign(static_cast<std::size_t>(canvas.height * canvas.width), 0.0F);
    for (const std::int64_t top : tops)
      for (const std::int64_t left : lefts)
        for (const int flips : flip_variants)
          add_input(i, canvas, top, left, input_height, input_width, flips);
  }
  run_batch();
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

Image mask_image(const Prediction& p, double threshold) {
  std::vector<std::uint8_t> mask = class_mask(p, threshold);
  if (p.channels == 1)
    for (std::uint8_t& v : mask) v = v ? 255 : 0;
  return Image{p.height, p.width, 1, std::move(mask)};
}

}  // namespace unet
