// Inference with a trained model: images of any size in, per-pixel probabilities at each image's own size
// out. An image is given the model's channels and normalised as the model's data.normalize says, over the
// whole image (data/model_input.h), then run in one of these ways (PredictMode):
//
//   resize  as training prepared its inputs: the image resized to the training size (data.image_size), the
//           probabilities resized back. Right for images at the scale the model was trained at after its
//           resize (and the only faithful one when the training images were larger and were shrunk).
//   tiled   at the image's native pixel scale: the image (padded to multiples of 2^depth) is cut into
//           overlapping tiles of the tile size (at most the padded image), at multiples of 2^depth (where the
//           whole image's pooling windows lie), each tile's probabilities weighted by a Gaussian importance
//           map (highest at the tile's centre, where the network sees the most context) and blended:
//           p(x) = sum_t w_t(x) p_t(x) / sum_t w_t(x). For images larger than the model was trained on
//           (microscopy, satellite scenes).
//   whole   at native scale, the entire image (padded to multiples of 2^depth) through the fully
//           convolutional network in one pass; the reference tiling approximates, memory permitting.
//   auto    (the default) resize for an image no larger than the training size on either side, which keeps
//           the output the resize mode gives and always gave; tiled for an image larger on either side.
//
// Padding (tiled, whole) adds pixels below and to the right of the image, mirrored (reflect) or black (zero);
// the output is cropped back to the image. A tile is never larger than the padded image: per axis it is the
// smaller of the tile size and the image's side rounded up to a multiple of 2^depth, so that a tile larger
// than the image runs the image as `whole` does. Flip test-time augmentation runs each model input also
// flipped left-right, top-bottom and both, un-flips each output and averages the four in probability space.
//
// Memory is planned like training's: the probabilities are handed on in rows as soon as no later model input
// can change them (predict_rows), so that what an image holds is the open rows' sums, never its whole map of
// classes x height x width floats; and before the images run, what each will need (the model's forward at the
// batch it runs, planned on a PlanningBackend, and the host's buffers) is checked against what the device and
// the host can give, and an image that would not fit is refused (Error out_of_memory, naming it and both
// figures) rather than run into an out-of-memory kill.
// Used by `unet-train predict` and the workbench's prediction window.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "unet/backend/devices.h"
#include "unet/data/model_input.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

namespace unet {

struct Prediction {
  std::int64_t height = 0, width = 0;
  std::int64_t channels = 1;         // 1: the foreground probability of a binary model; else one per class
  std::vector<float> probabilities;  // [height, width, channels]
};

enum class PredictMode { automatic, resize, tiled, whole };
enum class PredictPadding { reflect, zero };
enum class PredictAugmentation { none, flips };

// The names the CLI and the docs use: "auto", "resize", "tiled", "whole"; "reflect", "zero"; "none", "flips".
const char* to_string(PredictMode mode) noexcept;
const char* to_string(PredictPadding padding) noexcept;
const char* to_string(PredictAugmentation augmentation) noexcept;
// The inverse; ConfigError(key) naming the value and the choices when it is none of them.
PredictMode predict_mode_from_string(const std::string& text, const std::string& key);
PredictPadding predict_padding_from_string(const std::string& text, const std::string& key);
PredictAugmentation predict_augmentation_from_string(const std::string& text, const std::string& key);

struct PredictOptions {
  PredictMode mode = PredictMode::automatic;
  // The tiles' size (tiled, and auto's tiled images); 0: the training size. Each a multiple of 2^depth; on an
  // axis where the padded image is smaller, the tile is the padded image's side.
  std::int64_t tile_height = 0, tile_width = 0;
  // The share of a tile its neighbour covers, in [0, max_overlap]: 0.5 (nnU-Net's) moves tiles by half a
  // tile. The tiles' steps are then evened out so that the last tile ends at the (padded) image's edge.
  double overlap = 0.5;
  static constexpr double max_overlap = 0.9;  // beyond, the tiles' count (1/(1-overlap))^2 grows fast
  // Gaussian importance weighting of each tile (sigma = tile/8 per axis, nnU-Net's); false: a plain mean.
  bool gaussian = true;
  PredictPadding padding = PredictPadding::reflect;
  PredictAugmentation augmentation = PredictAugmentation::none;
  std::int64_t batch = 8;  // model inputs (resized images, tiles, flips) per forward pass, 1..4096
  // The host's memory that predict may use, in bytes; -1: MemAvailable of /proc/meminfo when each image
  // starts (plus, on a CPU device, what the allocator holds cached). Set by tests and by callers that keep
  // memory aside.
  std::int64_t host_memory_available = -1;
};

// Checks the options' ranges against `model` (tile sizes against 2^depth); ConfigError keyed by the option's
// name ("tile", "overlap", "batch").
void validate(const PredictOptions& options, const UNetSpec& model);

// What predict() reports as each image is finished.
struct PredictProgress {
  std::size_t image = 0;  // its index in predict()'s `images`
  std::size_t images = 0;
  PredictMode mode = PredictMode::resize;  // how it was run: resize, tiled or whole, never auto
  std::int64_t tiles = 1;                  // model inputs per augmentation: 1 unless tiled
  std::int64_t passes = 1;                 // tiles times the augmentations (4 with flips)
};

// One finished row of an image's probabilities, as predict_rows() hands it on.
struct PredictionRow {
  std::size_t image = 0;                 // its index in predict_rows()'s `images`
  std::int64_t height = 0, width = 0;    // the image's
  std::int64_t channels = 1;             // as Prediction's
  std::int64_t row = 0;                  // 0..height-1, each once, top to bottom
  std::span<const float> probabilities;  // [width, channels]; valid during the call only
};

struct PredictionSink {
  // Called on predict_rows()'s thread: the images in order, each one's rows top to bottom.
  std::function<void(const PredictionRow&)> row;
  // The bytes the sink keeps per pixel of an image until its last row (1 per class image it writes, 4 per
  // class for a float map): counted in each image's memory plan.
  std::int64_t bytes_per_pixel = 0;
};

// What one image will need, planned before it runs, and what there is.
struct PredictMemory {
  PredictMode mode = PredictMode::resize;          // how it runs: resize, tiled or whole
  std::int64_t input_height = 0, input_width = 0;  // each model input's size (a tile, clamped)
  std::int64_t batch = 1;                          // model inputs per forward pass
  std::int64_t tiles = 1;                          // model inputs per augmentation
  std::string device;                              // "cpu:0"
  bool device_is_host = true;                      // a CPU device: its memory is the host's
  // On the device: the bytes in use at the forward's peak (planned), the model's parameters included, and of
  // them what is held anyway (the parameters, the backend's own).
  std::int64_t forward_bytes = 0, resident_bytes = 0;
  // On the host: the image converted and padded, the batch's pixels, the probabilities copied back, the open
  // rows' sums and weights.
  std::int64_t host_bytes = 0;
  std::int64_t output_bytes = 0;  // what the sink keeps: PredictionSink::bytes_per_pixel x pixels
  // What there is: memory.cap_mib (0: none); the device's bytes (a GPU's free and held; -1 on a CPU); the
  // host's (PredictOptions::host_memory_available, or MemAvailable and the allocator's cached bytes).
  std::int64_t cap = 0, device_available = -1, host_available = 0;

  // What the host must give beyond what it holds: the host's buffers and outputs, and on a CPU device the
  // forward's growth over what it holds anyway.
  std::int64_t host_needed() const noexcept;
  bool fits() const noexcept;
  // Why it does not fit, naming `name`, the figure needed and the figure available; empty when it fits.
  std::string shortfall(const std::string& name) const;
};

struct PredictControl {
  std::function<void(const PredictProgress&)> on_image;  // called on predict()'s thread
  std::stop_token stop;                                  // checked between forward passes; see predict()
};

class Predictor {
 public:
  // The model of `config` with `parameters` (its slab layout) on `device`.
  Predictor(const Config& config, const std::vector<float>& parameters, const DeviceId& device);
  explicit Predictor(const Checkpoint& checkpoint, const DeviceId& device = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // `names` are used in error messages. Model inputs of the same size (several images' resized inputs, an
  // image's tiles and their flips) share forward passes, up to options.batch each. When `control.stop` is
  // requested, it stops before the next forward pass and returns the images finished so far (the first
  // ones of `images`).
  // Built on predict_rows(), whose rows it gathers into one map per image (so that its plan counts 4 bytes a
  // class a pixel): for images small enough to hold whole (the workbench's).
  // Images as read from files are given the model's channels and normalised (model_input.h) one at a time,
  // as each starts; ModelImages are taken as they are (already normalised: validation's samples).
  std::vector<Prediction> predict(const std::vector<Image>& images, const std::vector<std::string>& names,
                                  const PredictOptions& options = {}, const PredictControl& control = {});
  std::vector<Prediction> predict(const std::vector<ModelImage>& images,
                                  const std::vector<std::string>& names, const PredictOptions& options = {},
                                  const PredictControl& control = {});
  // The images' probabilities handed to `sink` row by row as they are finished; returns how many images were
  // finished (all, unless stopped: then the first ones; the next may have had some of its rows). Before any
  // image runs, each one's memory is planned (memory_for), and when one does not fit the call is refused with
  // Error(out_of_memory) naming that image, the bytes needed and the bytes available.
  std::size_t predict_rows(const std::vector<Image>& images, const std::vector<std::string>& names,
                           const PredictOptions& options, const PredictionSink& sink,
                           const PredictControl& control = {});
  std::size_t predict_rows(const std::vector<ModelImage>& images, const std::vector<std::string>& names,
                           const PredictOptions& options, const PredictionSink& sink,
                           const PredictControl& control = {});
  // The memory plan of an image of this size (in the model's channels) with these options, for a sink that
  // keeps `bytes_per_pixel`.
  PredictMemory memory_for(std::int64_t height, std::int64_t width, const PredictOptions& options,
                           std::int64_t bytes_per_pixel) const;
  const Config& config() const noexcept;
  // The mode `options` gives an image of this size: options.mode, with auto decided by the rule above.
  PredictMode mode_for(std::int64_t height, std::int64_t width, const PredictOptions& options) const;

 private:
  // predict_rows() over `count` images of these sizes, each one's model input made when it starts.
  std::size_t run_rows(std::size_t count,
                       const std::function<std::pair<std::int64_t, std::int64_t>(std::size_t)>& size_of,
                       const std::function<ModelImage(std::size_t)>& input_of,
                       const std::vector<std::string>& names, const PredictOptions& options,
                       const PredictionSink& sink, const PredictControl& control);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The starts of the tiles along one axis of `length` pixels: the fewest tiles of `tile` pixels whose step is
// at most tile * (1 - overlap) (and at least `align`), the steps evened out, every start a multiple of
// `align`, the first at 0 and the last at length - tile. Length and tile are multiples of `align`, the tile
// at most the length. predict() aligns to 2^depth, so that each tile pools as the whole image does.
std::vector<std::int64_t> tile_starts(std::int64_t length, std::int64_t tile, double overlap,
                                      std::int64_t align = 1);

// The Gaussian importance map of a tile, [height, width]: w(y, x) = g_h(y) g_w(x) with
// g_n(i) = exp(-(i + 0.5 - n/2)^2 / (2 (n/8)^2)): pixel centres measured from the tile's centre, sigma n/8,
// 1 in the middle, about exp(-8) = 3.4e-4 at an edge and exp(-16) = 1.1e-7 in a corner. Never zero, so that
// a pixel only one tile covers (the image's corners) still has its prediction; symmetric, so that a flip of
// the tile flips the map onto itself. Blending divides by the summed map, so its scale does not matter.
std::vector<float> gaussian_importance(std::int64_t height, std::int64_t width);

// A probability map as an 8-bit grayscale PNG image of one of its channels: round(255 p).
Image probability_image(const Prediction& p, std::int64_t channel);

// The segmentation a prediction makes, one class index per pixel ([height, width]): a binary model's
// foreground (1) where its probability is at least `threshold`, else 0; a model of several classes, the most
// probable class (the lowest index on a tie; `threshold` unused).
std::vector<std::uint8_t> class_mask(const Prediction& p, double threshold = 0.5);

// The mask as a PNG image, as `unet-train predict --output-kind mask` and the workbench save it: class
// indices, a binary model's foreground as 255.
Image mask_image(const Prediction& p, double threshold = 0.5);

// Row `row.row` of probability_image(channel) and of mask_image(threshold), from a row predict_rows() hands
// on, into `out` ([row.width]): the same bytes, without the whole map.
void probability_row(const PredictionRow& row, std::int64_t channel, std::span<std::uint8_t> out);
void mask_row(const PredictionRow& row, double threshold, std::span<std::uint8_t> out);

}  // namespace unet
