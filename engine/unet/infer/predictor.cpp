#include "unet/infer/predictor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>

#include "unet/backend/device_monitor.h"
#include "unet/backend/planning_backend.h"
#include "unet/infer/probability_rows.h"
#include "unet/model/unet.h"

namespace unet {

namespace {

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
ModelImage padded(const ModelImage& image, std::int64_t height, std::int64_t width, PredictPadding padding) {
  if (height == image.height && width == image.width) return image;
  const std::int64_t c = image.channels;
  ModelImage out{height, width, c, std::vector<float>(static_cast<std::size_t>(height * width * c), 0.0f)};
  for (std::int64_t y = 0; y < height; ++y) {
    if (padding == PredictPadding::zero && y >= image.height) break;
    const std::int64_t sy = y < image.height ? y : mirrored(y, image.height);
    for (std::int64_t x = 0; x < width; ++x) {
      if (padding == PredictPadding::zero && x >= image.width) break;
      const std::int64_t sx = x < image.width ? x : mirrored(x, image.width);
      std::copy_n(image.values.data() + (sy * image.width + sx) * c, c,
                  out.values.data() + (y * width + x) * c);
    }
  }
  return out;
}

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

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
  DeviceId device;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<ExecContext> ctx;
  std::unique_ptr<UNet> model;

  // The same model on a PlanningBackend (made at the first plan): its forward allocates what the real one
  // does, block for block, without touching memory. Planned peaks by (inputs, height, width).
  std::unique_ptr<Backend> planning;
  std::unique_ptr<Stream> planning_stream;
  std::unique_ptr<ExecContext> planning_ctx;
  std::unique_ptr<UNet> planning_model;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::int64_t> planned_peaks;

  // [count, height, width, in_channels] pixels in; [count, height, width, classes] probabilities out.
  std::vector<float> forward(const std::vector<float>& pixels, std::int64_t count, std::int64_t height,
                             std::int64_t width);
  // What forward() has in use on the device at its peak for `count` inputs of height x width, the parameters
  // and the backend's own included.
  std::int64_t planned_forward_peak(std::int64_t count, std::int64_t height, std::int64_t width);
  std::int64_t planned_resident = 0;  // of it, what the device holds between forward passes (those)
};

std::vector<float> Predictor::Impl::forward(const std::vector<float>& pixels, std::int64_t count,
                                            std::int64_t height, std::int64_t width) {
  const std::int64_t channels = config.model.in_channels, classes = config.model.classes;
  Backend& be = *backend;
  Tensor input = Tensor::empty(be.allocator(), Shape{count, height, width, channels}, DType::f32,
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

std::int64_t Predictor::Impl::planned_forward_peak(std::int64_t count, std::int64_t height,
                                                   std::int64_t width) {
  const auto key = std::tuple{count, height, width};
  if (const auto at = planned_peaks.find(key); at != planned_peaks.end()) return at->second;
  if (!planning) {
    std::unique_ptr<Backend> oracle = create_backend(device, {.cuda = config.cuda});
    DeviceInfo info = oracle->info();
    planning = std::make_unique<PlanningBackend>(std::move(oracle), std::move(info), 0);
    planning_stream = planning->create_stream();
    planning_ctx =
        std::make_unique<ExecContext>(ExecContext{*planning, *planning_stream, DType::f32, Layout::nhwc});
    planning_model = std::make_unique<UNet>(config.model, planning->allocator());
    planned_resident = planning->allocator().stats().in_use;
  }
  // forward()'s allocations, in its order.
  Allocator& allocator = planning->allocator();
  allocator.reset_peak();
  {
    Tensor input = Tensor::empty(allocator, Shape{count, height, width, config.model.in_channels}, DType::f32,
                                 MemoryCategory::input_batch);
    const UNet::Pass pass = planning_model->forward(*planning_ctx, input, false);
    Tensor probs = Tensor::empty(allocator, Shape{count * height * width * config.model.classes}, DType::f32,
                                 MemoryCategory::other);
  }
  const std::int64_t peak = allocator.stats().peak_in_use;
  planned_peaks.emplace(key, peak);
  return peak;
}

Predictor::Predictor(const Config& config, const std::vector<float>& parameters, const DeviceId& device)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->device = device;
  // The checkpoint's config says how its GPU convolutions ran; prediction keeps those choices. A cap
  // (memory.cap_mib) makes the device act as one of that size, as in training.
  impl_->backend = create_backend(device, {.cap_bytes = config.memory.cap_bytes(), .cuda = config.cuda});
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

// How an image of height x width meets the model: its mode, the canvas its inputs are cut from (the image
// resized, or padded to multiples of 2^depth), the inputs' size and where they start.
struct ImageLayout {
  PredictMode mode = PredictMode::resize;
  std::int64_t canvas_height = 0, canvas_width = 0;
  std::int64_t input_height = 0, input_width = 0;
  std::vector<std::int64_t> tops{0}, lefts{0};
};

ImageLayout layout_of(PredictMode mode, std::int64_t height, std::int64_t width, const Config& c,
                      const PredictOptions& options) {
  const std::int64_t multiple = c.model.size_multiple();
  ImageLayout l;
  l.mode = mode;
  switch (mode) {
    case PredictMode::resize:
      l.canvas_height = l.input_height = c.data.image_height;
      l.canvas_width = l.input_width = c.data.image_width;
      break;
    case PredictMode::whole:
      l.canvas_height = l.input_height = round_up(height, multiple);
      l.canvas_width = l.input_width = round_up(width, multiple);
      break;
    case PredictMode::tiled: {
      // The canvas a multiple of 2^depth, and the tiles at multiples of it: each tile's pooling grid is then
      // the whole image's. (A U-Net is not shift-equivariant: moved by another amount, its 2x2 poolings take
      // other windows, and it says something else of the same pixels.) A tile larger than the canvas on an
      // axis is the canvas there: an image smaller than the tile is padded only to its multiple of 2^depth,
      // as `whole` pads it, not to the tile (which could be 16384 pixels for an 8-pixel image).
      l.canvas_height = round_up(height, multiple);
      l.canvas_width = round_up(width, multiple);
      l.input_height =
          std::min(options.tile_height ? options.tile_height : c.data.image_height, l.canvas_height);
      l.input_width = std::min(options.tile_width ? options.tile_width : c.data.image_width, l.canvas_width);
      l.tops = tile_starts(l.canvas_height, l.input_height, options.overlap, multiple);
      l.lefts = tile_starts(l.canvas_width, l.input_width, options.overlap, multiple);
      break;
    }
    case PredictMode::automatic:
      UNET_CHECK(false, usage, "Predictor: mode_for left auto undecided");
  }
  return l;
}

std::int64_t flip_count(const PredictOptions& options) {
  return options.augmentation == PredictAugmentation::flips ? 4 : 1;
}

// Model inputs per forward pass for an image: a resized image shares its passes with other images' (they
// are all of the model's size); an image's tiles, or a whole image, share them only with its own.
std::int64_t batch_of(const ImageLayout& l, const PredictOptions& options) {
  if (l.mode == PredictMode::resize) return options.batch;
  const std::int64_t inputs = std::ssize(l.tops) * std::ssize(l.lefts) * flip_count(options);
  return std::min(options.batch, inputs);
}

// Canvas rows whose sums are open at once: the rows of the tile rows one forward pass spans, and the tile
// row still open before it. A resized or whole image: all of its canvas.
std::int64_t open_rows_of(const ImageLayout& l, std::int64_t batch, const PredictOptions& options) {
  if (l.mode != PredictMode::tiled) return l.canvas_height;
  const std::int64_t per_tile_row = std::ssize(l.lefts) * flip_count(options);
  const std::int64_t tile_rows = (batch + per_tile_row - 1) / per_tile_row + 1;
  return std::min(l.canvas_height, tile_rows * l.input_height);
}

}  // namespace

std::int64_t PredictMemory::host_needed() const noexcept {
  const std::int64_t forward_growth =
      device_is_host ? std::max<std::int64_t>(0, forward_bytes - resident_bytes) : 0;
  return host_bytes + output_bytes + forward_growth;
}

bool PredictMemory::fits() const noexcept {
  if (cap > 0 && forward_bytes > cap) return false;
  if (!device_is_host && cap == 0 && device_available >= 0 && forward_bytes > device_available) return false;
  return host_needed() <= host_available;
}

std::string PredictMemory::shortfall(const std::string& name) const {
  if (fits()) return {};
  const std::string inputs = std::to_string(batch) + (batch == 1 ? " input" : " inputs") + " of " +
                             std::to_string(input_width) + "x" + std::to_string(input_height);
  const std::string how = mode == PredictMode::tiled
                              ? std::to_string(tiles) + (tiles == 1 ? " tile" : " tiles") + " of " +
                                    std::to_string(input_width) + "x" + std::to_string(input_height)
                              : std::string(to_string(mode));
  const bool over_device =
      (cap > 0 && forward_bytes > cap) ||
      (!device_is_host && cap == 0 && device_available >= 0 && forward_bytes > device_available);
  if (over_device) {
    const std::int64_t limit = cap > 0 ? cap : device_available;
    return name + ": predicting it (" + how + ") needs " + format_bytes(forward_bytes) + " on " + device +
           " at the peak of the model's forward pass (" + inputs + " per pass), but " + format_bytes(limit) +
           " is available there" + (cap > 0 ? " (memory.cap_mib)" : "");
  }
  return name + ": predicting it (" + how + ") needs " + format_bytes(host_needed()) +
         " of the host's memory (" +
         (device_is_host ? "the model's forward pass, " + inputs + " per pass, " +
                               format_bytes(std::max<std::int64_t>(0, forward_bytes - resident_bytes)) + "; "
                         : std::string()) +
         "the image's buffers and the open rows' sums " + format_bytes(host_bytes) + "; the outputs kept " +
         format_bytes(output_bytes) + "), but " + format_bytes(host_available) + " is available";
}

PredictMemory Predictor::memory_for(std::int64_t height, std::int64_t width, const PredictOptions& options,
                                    std::int64_t bytes_per_pixel) const {
  const Config& c = impl_->config;
  const ImageLayout l = layout_of(mode_for(height, width, options), height, width, c, options);
  const std::int64_t in_channels = c.model.in_channels, classes = c.model.classes;
  PredictMemory m;
  m.mode = l.mode;
  m.input_height = l.input_height;
  m.input_width = l.input_width;
  m.batch = batch_of(l, options);
  m.tiles = std::ssize(l.tops) * std::ssize(l.lefts);
  const DeviceInfo& info = impl_->backend->info();
  m.device = info.id;
  m.device_is_host = info.kind == DeviceKind::cpu;
  m.forward_bytes = impl_->planned_forward_peak(m.batch, l.input_height, l.input_width);
  m.resident_bytes = impl_->planned_resident;
  const std::int64_t input_pixels = m.batch * l.input_height * l.input_width;
  // Resized images share forward passes: as many canvases as a pass takes are open at once.
  const std::int64_t canvases = l.mode == PredictMode::resize ? m.batch : 1;
  const std::int64_t open_rows = open_rows_of(l, m.batch, options);
  // The image's model input, its canvas and the batch's pixels are normalised floats.
  m.host_bytes = height * width * in_channels * 4                                 // converted
                 + canvases * l.canvas_height * l.canvas_width * in_channels * 4  // canvas
                 + input_pixels * in_channels * 4                                 // the batch's pixels
                 + input_pixels * classes * 4                                     // probabilities copied back
                 + canvases * open_rows * l.canvas_width * (classes + 1) * 4      // sums and weights
                 + (l.mode == PredictMode::resize ? 3 * width * classes * 4 : 0);  // resized rows
  m.output_bytes = bytes_per_pixel * height * width;
  m.cap = c.memory.cap_bytes();
  const MemoryStats held = impl_->backend->allocator().stats();
  if (!m.device_is_host) {
    const DeviceSample sample = impl_->backend->sample_device();
    m.device_available = sample.free_bytes >= 0 ? sample.free_bytes + held.reserved : info.total_bytes;
  }
  if (options.host_memory_available >= 0) {
    m.host_available = options.host_memory_available;
  } else {
    m.host_available = host_memory().second;
    // On a CPU the allocator's cached blocks are the host's too, and the forward reuses them.
    if (m.device_is_host) m.host_available += held.reserved - held.in_use;
  }
  return m;
}

namespace {

// One image on its way through the model: its layout, the sums of its open canvas rows (each the weighted
// sum of the probabilities there, [canvas_width, classes], and the weights, [canvas_width]), and how many of
// its model inputs have come back.
struct ImageInProgress {
  std::int64_t height = 0, width = 0;
  ImageLayout layout;
  std::int64_t tiles = 1, passes = 1;
  std::int64_t inputs_per_tile_row = 1;
  std::int64_t returned = 0;
  std::int64_t first_open_row = 0;               // canvas rows before it are handed on (or padding, dropped)
  std::deque<std::vector<float>> sums, weights;  // canvas rows first_open_row, first_open_row + 1, ...
  bool started = false;

  // Canvas row y's sums and weights, made (zero) when first touched.
  std::pair<float*, float*> open_row(std::int64_t y, std::int64_t classes) {
    const auto at = static_cast<std::size_t>(y - first_open_row);
    while (sums.size() <= at) {
      sums.emplace_back(static_cast<std::size_t>(layout.canvas_width * classes), 0.0F);
      weights.emplace_back(static_cast<std::size_t>(layout.canvas_width), 0.0F);
    }
    return {sums[at].data(), weights[at].data()};
  }
  // Canvas rows no input still to come covers: those above the next unfinished tile row.
  std::int64_t finished_rows() const {
    const std::int64_t complete = returned / inputs_per_tile_row;
    return complete >= std::ssize(layout.tops) ? layout.canvas_height
                                               : layout.tops[static_cast<std::size_t>(complete)];
  }
};

// A model input: where in which image it goes, and how it was flipped.
struct ModelInput {
  std::size_t image = 0;
  std::int64_t top = 0, left = 0;
  int flips = 0;
};

}  // namespace

std::size_t Predictor::predict_rows(const std::vector<Image>& images, const std::vector<std::string>& names,
                                    const PredictOptions& options, const PredictionSink& sink,
                                    const PredictControl& control) {
  UNET_CHECK(names.size() == images.size(), usage, "Predictor::predict_rows: a name for each image");
  const InputRecipe recipe = input_recipe(impl_->config);
  return run_rows(
      images.size(),
      [&](std::size_t i) {
        return std::pair{images[i].height, images[i].width};
      },
      [&](std::size_t i) { return model_image(images[i], recipe, names[i]); }, names, options, sink, control);
}

std::size_t Predictor::predict_rows(const std::vector<ModelImage>& images,
                                    const std::vector<std::string>& names, const PredictOptions& options,
                                    const PredictionSink& sink, const PredictControl& control) {
  UNET_CHECK(names.size() == images.size(), usage, "Predictor::predict_rows: a name for each image");
  for (std::size_t i = 0; i < images.size(); ++i)
    UNET_CHECK(images[i].channels == impl_->config.model.in_channels, usage,
               names[i] + ": " + std::to_string(images[i].channels) + " channels for a model of " +
                   std::to_string(impl_->config.model.in_channels));
  return run_rows(
      images.size(),
      [&](std::size_t i) {
        return std::pair{images[i].height, images[i].width};
      },
      [&](std::size_t i) { return images[i]; }, names, options, sink, control);
}

std::size_t Predictor::run_rows(
    std::size_t count, const std::function<std::pair<std::int64_t, std::int64_t>(std::size_t)>& size_of,
    const std::function<ModelImage(std::size_t)>& input_of, const std::vector<std::string>& names,
    const PredictOptions& options, const PredictionSink& sink, const PredictControl& control) {
  const Config& c = impl_->config;
  validate(options, c.model);
  const std::int64_t in_channels = c.model.in_channels, classes = c.model.classes;
  std::vector<int> flip_variants{0};
  if (options.augmentation == PredictAugmentation::flips)
    flip_variants = {0, kFlipLeftRight, kFlipTopBottom, kFlipLeftRight | kFlipTopBottom};
  // Gaussian importance maps by tile size (tiles clamped to small images differ from the others).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<float>> tile_weights;

  std::vector<ImageInProgress> work(count);
  std::size_t finished = 0;
  bool stopped = false;

  // Hands on the rows of the images in progress that no input still to come changes, in image order; an
  // image whose rows are all handed on is finished.
  auto hand_on = [&] {
    while (finished < count && work[finished].started) {
      ImageInProgress& w = work[finished];
      const std::int64_t done = w.finished_rows();
      const ImageLayout& l = w.layout;
      // Row y of the finished image's probabilities, [width, classes], to the sink.
      const auto row_to_sink = [&](std::int64_t y, std::span<const float> probabilities) {
        if (sink.row)
          sink.row({.image = finished,
                    .height = w.height,
                    .width = w.width,
                    .channels = classes,
                    .row = y,
                    .probabilities = probabilities});
      };
      if (l.mode == PredictMode::resize) {
        if (done < l.canvas_height) return;
        // The mean over the canvas, then resized to the image, a row at a time.
        for (std::int64_t y = 0; y < l.canvas_height; ++y) {
          float* sum = w.sums[static_cast<std::size_t>(y)].data();
          const float* weight = w.weights[static_cast<std::size_t>(y)].data();
          for (std::int64_t x = 0; x < l.canvas_width; ++x)
            for (std::int64_t k = 0; k < classes; ++k) sum[x * classes + k] /= weight[x];
        }
        ProbabilityRowResizer resized(
            [&w](std::int64_t y) { return w.sums[static_cast<std::size_t>(y)].data(); }, l.canvas_height,
            l.canvas_width, classes, w.height, w.width);
        for (std::int64_t y = 0; y < w.height; ++y) row_to_sink(y, resized.row(y));
      } else {
        // Every canvas pixel lies in at least one input, and no weight is zero: the division is defined.
        for (; w.first_open_row < done; ++w.first_open_row) {
          const std::int64_t y = w.first_open_row;
          if (y < w.height) {
            float* sum = w.sums.front().data();
            const float* weight = w.weights.front().data();
            for (std::int64_t x = 0; x < w.width; ++x)
              for (std::int64_t k = 0; k < classes; ++k) sum[x * classes + k] /= weight[x];
            row_to_sink(y, std::span<const float>(sum, static_cast<std::size_t>(w.width * classes)));
          }
          w.sums.pop_front();
          w.weights.pop_front();
        }
        if (done < l.canvas_height) return;
      }
      const PredictProgress progress{
          .image = finished, .images = count, .mode = l.mode, .tiles = w.tiles, .passes = w.passes};
      w = ImageInProgress{};  // its sums are no longer needed
      ++finished;
      if (control.on_image) control.on_image(progress);
    }
  };

  // The batch being gathered: inputs of one size, at most options.batch of them, of one image (or resized
  // images of several).
  std::vector<ModelInput> batch;
  std::vector<float> batch_pixels;
  std::int64_t batch_height = 0, batch_width = 0;

  // Runs the batch and adds each output, un-flipped and weighted, to its image's sums.
  auto run_batch = [&] {
    if (batch.empty() || stopped) return;
    if (control.stop.stop_requested()) {
      stopped = true;
      return;
    }
    const auto inputs = static_cast<std::int64_t>(batch.size());
    const std::vector<float> probabilities = impl_->forward(batch_pixels, inputs, batch_height, batch_width);
    const std::int64_t h = batch_height, w = batch_width;
    for (std::int64_t b = 0; b < inputs; ++b) {
      const ModelInput& input = batch[static_cast<std::size_t>(b)];
      ImageInProgress& target = work[input.image];
      // Tiles are weighted by the importance map; a resized image, a whole one or the one tile of an image
      // is the only input at its pixels (but for its flips, which weigh the same), so any constant weight
      // gives its probabilities.
      const std::vector<float>* map = nullptr;
      if (target.layout.mode == PredictMode::tiled && options.gaussian && target.tiles > 1) {
        std::vector<float>& m = tile_weights[{h, w}];
        if (m.empty()) m = gaussian_importance(h, w);
        map = &m;
      }
      const float* source = probabilities.data() + b * h * w * classes;
      for (std::int64_t y = 0; y < h; ++y) {
        // The output pixel over input pixel (y, x) of the unflipped image is at the flipped position.
        const std::int64_t sy = input.flips & kFlipTopBottom ? h - 1 - y : y;
        const auto [sums, weights] = target.open_row(input.top + y, classes);
        for (std::int64_t x = 0; x < w; ++x) {
          const std::int64_t sx = input.flips & kFlipLeftRight ? w - 1 - x : x;
          const float weight = map ? (*map)[static_cast<std::size_t>(y * w + x)] : 1.0F;
          const std::int64_t at = input.left + x;
          weights[at] += weight;
          const float* p = source + (sy * w + sx) * classes;
          float* sum = sums + at * classes;
          for (std::int64_t k = 0; k < classes; ++k) sum[k] += weight * p[k];
        }
      }
      ++target.returned;
    }
    batch.clear();
    batch_pixels.clear();
    hand_on();
  };

  // Adds the input of `canvas` at (top, left), height x width, flipped as `flips` says, to the batch.
  auto add_input = [&](std::size_t image, const ModelImage& canvas, std::int64_t top, std::int64_t left,
                       std::int64_t height, std::int64_t width, int flips) {
    const bool shared = work[image].layout.mode == PredictMode::resize;
    if (!batch.empty() &&
        (batch_height != height || batch_width != width || std::ssize(batch) >= options.batch ||
         (batch.front().image != image &&
          !(shared && work[batch.front().image].layout.mode == PredictMode::resize))))
      run_batch();
    if (stopped) return;
    batch_height = height;
    batch_width = width;
    batch.push_back({image, top, left, flips});
    const std::size_t at = batch_pixels.size();
    batch_pixels.resize(at + static_cast<std::size_t>(height * width * in_channels));
    float* dst = batch_pixels.data() + at;
    for (std::int64_t y = 0; y < height; ++y) {
      const std::int64_t sy = top + (flips & kFlipTopBottom ? height - 1 - y : y);
      for (std::int64_t x = 0; x < width; ++x) {
        const std::int64_t sx = left + (flips & kFlipLeftRight ? width - 1 - x : x);
        std::copy_n(canvas.values.data() + (sy * canvas.width + sx) * in_channels, in_channels,
                    dst + (y * width + x) * in_channels);
      }
    }
  };

  // Every image planned before any runs: one that would not fit is refused, naming it, before anything is
  // computed (rather than run until the host or the device runs out).
  for (std::size_t i = 0; i < count; ++i) {
    const auto [height, width] = size_of(i);
    const PredictMemory memory = memory_for(height, width, options, sink.bytes_per_pixel);
    if (!memory.fits())
      throw Error(ErrorKind::out_of_memory, memory.shortfall(names[i]), {},
                  "predict it in smaller tiles, with fewer model inputs per forward pass, or keeping smaller "
                  "outputs");
  }
  for (std::size_t i = 0; i < count && !stopped; ++i) {
    // The model's channels, normalised over the whole image (never tile by tile).
    ModelImage converted = input_of(i);
    ImageInProgress& w = work[i];
    w.height = converted.height;
    w.width = converted.width;
    w.layout = layout_of(mode_for(converted.height, converted.width, options), converted.height,
                         converted.width, c, options);
    const ImageLayout& l = w.layout;
    const ModelImage canvas = l.mode == PredictMode::resize
                                  ? resized(converted, l.canvas_height, l.canvas_width)
                                  : padded(converted, l.canvas_height, l.canvas_width, options.padding);
    converted = ModelImage{};
    w.tiles = std::ssize(l.tops) * std::ssize(l.lefts);
    w.passes = w.tiles * std::ssize(flip_variants);
    w.inputs_per_tile_row = std::ssize(l.lefts) * std::ssize(flip_variants);
    w.started = true;
    for (const std::int64_t top : l.tops)
      for (const std::int64_t left : l.lefts)
        for (const int flips : flip_variants)
          add_input(i, canvas, top, left, l.input_height, l.input_width, flips);
  }
  run_batch();
  return finished;
}

namespace {

// predict_rows()'s rows gathered into one map per image.
template <class Images>
std::vector<Prediction> gather(Predictor& predictor, const Images& images,
                               const std::vector<std::string>& names, const PredictOptions& options,
                               const PredictControl& control) {
  std::vector<Prediction> out;
  out.reserve(images.size());
  PredictionSink sink;
  sink.bytes_per_pixel = predictor.config().model.classes * static_cast<std::int64_t>(sizeof(float));
  sink.row = [&out](const PredictionRow& r) {
    if (r.row == 0)
      out.push_back(
          {.height = r.height,
           .width = r.width,
           .channels = r.channels,
           .probabilities = std::vector<float>(static_cast<std::size_t>(r.height * r.width * r.channels))});
    std::copy(r.probabilities.begin(), r.probabilities.end(),
              out.back().probabilities.begin() + r.row * r.width * r.channels);
  };
  const std::size_t finished = predictor.predict_rows(images, names, options, sink, control);
  out.resize(finished);  // an image stopped in the middle of its rows is not a prediction
  return out;
}

}  // namespace

std::vector<Prediction> Predictor::predict(const std::vector<Image>& images,
                                           const std::vector<std::string>& names,
                                           const PredictOptions& options, const PredictControl& control) {
  return gather(*this, images, names, options, control);
}

std::vector<Prediction> Predictor::predict(const std::vector<ModelImage>& images,
                                           const std::vector<std::string>& names,
                                           const PredictOptions& options, const PredictControl& control) {
  return gather(*this, images, names, options, control);
}

}  // namespace unet
