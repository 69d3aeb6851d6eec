// The boundary between the model and the hardware. A Backend is one device (a CPU replica or one GPU) with
// its allocator, its streams and the operations the U-Net needs, forward and backward.
//
// Rules every implementation keeps:
// - Every operation names the stream it runs on. On the CPU a stream runs work at once on the calling
//   thread; on a GPU it queues it. Host code reads results only after Stream::synchronize().
// - Activations are 4-D [N, C, H, W] in the layout their Tensor says (NHWC by default) and in the compute
//   dtype (f32, or bf16/f16 in mixed precision). Weights, biases and their gradients are always f32 in the
//   canonical layouts of docs/MODEL.md; a backend that wants another layout or dtype packs them into its
//   workspace.
// - Temporary memory comes from the caller as a Workspace of the size the backend asked for, so that every
//   byte is allocated (and counted) by the engine's allocator. No hidden allocations of device memory.
// - One Backend is used by one thread at a time (on a GPU: the thread that made the device current). Two
//   calls are the exception, safe from any thread while the device works: sample_device() and
//   allocator().stats(), which the trainer's memory sampler takes ten times a second.
#pragma once

#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "unet/core/device_id.h"  // DeviceKind
#include "unet/core/dtype.h"
#include "unet/core/error.h"
#include "unet/core/memory.h"
#include "unet/core/tensor.h"
#include "unet/loss/desc.h"

namespace unet {

struct DeviceInfo {
  std::string id;    // "cpu:0", "cuda:1"
  std::string name;  // "AMD EPYC (2 threads)", "NVIDIA H200"
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  std::int64_t total_bytes = 0;
  std::int64_t free_bytes = 0;
  std::int64_t used_by_others_bytes = -1;  // other processes' memory on this device; -1 when unknown
  // NVML sees memory in use but cannot tell this process's share from others' (no entry with our PID: a
  // PID namespace; memory_attribution.h): used_by_others_bytes is -1 and is shown as "not attributable".
  bool others_not_attributable = false;
  std::string compute_capability;  // GPUs: "9.0"; empty for CPUs
  std::string pci_bus_id;          // GPUs: "0000:01:00.0" (the key NVML is asked by); empty for CPUs
};

// A mark in a stream's queue, for ordering work across streams (a copy stream and a compute stream, a
// communicator and the backward pass) without the host waiting. A new event, never recorded, is complete.
class Event {
 public:
  virtual ~Event() = default;
  // True when the work it marks has finished; never blocks.
  virtual bool ready() = 0;
  // Blocks the calling thread until the work it marks has finished.
  virtual void synchronize() = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  // Waits until everything queued on this stream has finished.
  virtual void synchronize() = 0;
  // `event` marks everything queued on this stream so far (recording again moves the mark).
  virtual void record(Event& event) = 0;
  // Work queued on this stream after this call starts only once what `event` marks has finished. The event
  // may belong to another stream or another backend; a stream that runs work at once (the CPU's) waits here.
  virtual void wait(Event& event) = 0;
};

// A reading of a device's memory and health, for the live charts. -1: unknown on this device.
struct DeviceSample {
  std::int64_t total_bytes = 0;
  std::int64_t free_bytes = 0;
  std::int64_t used_by_others_bytes = -1;  // other processes' memory on this device
  bool others_not_attributable = false;    // as DeviceInfo's: used_by_others_bytes is then -1
  double utilisation_percent = -1;
  double temperature_celsius = -1;
  double power_watts = -1;
};

struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// conv3x3 / conv1x1 / depthwise conv3x3: stride 1, "same" padding, output [n, c_out, h, w].
struct ConvDesc {
  std::int64_t n = 0, c_in = 0, c_out = 0, h = 0, w = 0;
  int kernel = 3;          // 1 or 3
  bool depthwise = false;  // groups = c_in = c_out, weights [c, 1, k, k]
  bool bias = true;
  bool relu = false;         // ReLU after the bias, fused into the forward pass
  DType dtype = DType::f32;  // of the activations
  Layout layout = Layout::nhwc;
  auto operator<=>(const ConvDesc&) const = default;

  Shape weight_shape() const {
    return depthwise ? Shape{c_out, 1, kernel, kernel} : Shape{c_out, c_in, kernel, kernel};
  }
  ActShape input() const { return {n, c_in, h, w}; }
  ActShape output() const { return {n, c_out, h, w}; }
};

// Transposed convolution 2x2 stride 2: [n, c_in, h, w] -> [n, c_out, 2h, 2w], weights [c_in, c_out, 2, 2],
// bias.
struct UpConvDesc {
  std::int64_t n = 0, c_in = 0, c_out = 0, h = 0, w = 0;
  DType dtype = DType::f32;
  Layout layout = Layout::nhwc;
  auto operator<=>(const UpConvDesc&) const = default;

  Shape weight_shape() const { return Shape{c_in, c_out, 2, 2}; }
  ActShape input() const { return {n, c_in, h, w}; }
  ActShape output() const { return {n, c_out, 2 * h, 2 * w}; }
};

// Max pooling 2x2 stride 2: [n, c, h, w] -> [n, c, h/2, w/2].
struct PoolDesc {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  DType dtype = DType::f32;
  Layout layout = Layout::nhwc;
  auto operator<=>(const PoolDesc&) const = default;

  ActShape input() const { return {n, c, h, w}; }
  ActShape output() const { return {n, c, h / 2, w / 2}; }
};

enum class ConvPass : std::uint8_t { forward, backward_data, backward_weights };

// What every backend's loss() checks of its LossDesc (unet/loss/desc.h) against the logits (the config has
// checked the user's values already; this guards the engine's own calls).
inline void check_loss_desc(const LossDesc& d, const ActShape& logits) {
  const std::int64_t weights = logits.c == 1 ? 2 : logits.c;
  UNET_CHECK(d.class_weights.empty() || static_cast<std::int64_t>(d.class_weights.size()) == weights, usage,
             "loss: " + std::to_string(d.class_weights.size()) + " class weights for " +
                 std::to_string(weights) + " classes");
  for (double w : d.class_weights)
    UNET_CHECK(std::isfinite(w) && w >= 0.0, usage, "loss: class weights must be finite and >= 0");
  UNET_CHECK(d.ignore_index >= -1 && d.ignore_index < kMaxLossClasses, usage,
             "loss: ignore_index must be -1..255, got " + std::to_string(d.ignore_index));
  UNET_CHECK(std::isfinite(d.focal_gamma) && d.focal_gamma >= 0.0 && std::isfinite(d.focal_alpha) &&
                 d.focal_alpha <= 1.0,
             usage, "loss: focal_gamma must be >= 0 and focal_alpha <= 1");
  UNET_CHECK(!d.has_dice() || (std::isfinite(d.dice_smooth) && d.dice_smooth > 0.0), usage,
             "loss: dice_smooth must be > 0");
}

// What every backend's loss() checks of its optional pixel weights: f32, one per pixel of the logits (their
// values are the caller's to check: loss_denominators, unet/step/data_parallel.h, refuses negative or
// non-finite ones from the host batch).
inline void check_pixel_weights(const Tensor* pixel_weights, const ActShape& logits) {
  if (!pixel_weights) return;
  UNET_CHECK(pixel_weights->dtype() == DType::f32 && pixel_weights->numel() == logits.n * logits.h * logits.w,
             usage, "loss: pixel weights must be f32 [n, h, w] for logits " + logits.str());
}

// The gradient scales of one loss call: dlogits = cross_entropy * d(sum of weighted per-pixel terms)/dz +
// dice * d(sum over images of the per-image Dice loss)/dz.
struct LossGradScales {
  float cross_entropy = 0.0f, dice = 0.0f;
};

// What loss() adds to its f64 [2] sums.
inline constexpr std::int64_t kLossSums = 2;
enum LossSum : std::int64_t {
  loss_sum_cross_entropy = 0,  // sum over labelled pixels of w_class * w_pixel * (cross-entropy or focal)
  loss_sum_dice = 1,           // sum over images of 1 - (weighted) mean Dice over the included classes
};

// torch.optim.Adam (weight decay added to the gradient, L2) or torch.optim.AdamW (decoupled: the parameter is
// multiplied by 1 - lr * weight_decay first).
struct AdamStep {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled_weight_decay = true;  // AdamW; false: Adam's L2
  std::int64_t step = 1;               // 1-based, for the bias correction
  float grad_scale = 1.0f;             // gradients are multiplied by this first (1 / loss scale)
};

// torch.optim.SGD with dampening 0: d = g + weight_decay * p; with momentum, buf = momentum * buf + d (a zero
// buffer makes the first step's buf = d, as torch's clone) and d = nesterov ? d + momentum * buf : buf;
// p -= lr * d.
struct SgdStep {
  float lr = 1e-2f;
  float momentum = 0.0f;  // 0: plain SGD, no buffer
  bool nesterov = false;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;  // gradients are multiplied by this first (1 / loss scale, times a clip factor)
};

// Confusion counts over pixels: for each class k of max(classes, 2): true positives, false positives, false
// negatives; then correct pixels and all pixels. Class 0 is the background of a binary model.
inline constexpr std::int64_t segmentation_counts_size(int classes) {
  return 3 * (classes > 1 ? classes : 2) + 2;
}

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const DeviceInfo& info() const = 0;
  virtual Allocator& allocator() = 0;
  virtual std::unique_ptr<Stream> create_stream() = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  virtual bool supports(DType compute) const = 0;
  virtual Layout preferred_layout() const = 0;
  // The device now (CPU: the host's memory). Safe from any thread, while the backend works on another: it
  // never touches the backend's streams or makes a GPU current (a GPU backend reads NVML).
  virtual DeviceSample sample_device() const = 0;
  // Bytes the backend allocates from its own allocator for its whole life (category other: a GPU backend's
  // reduction scratch), so that the memory planner can hold as much.
  virtual std::size_t resident_bytes() const { return 0; }

  // --- convolutions ----------------------------------------------------------------------------------------
  virtual std::size_t conv_workspace_bytes(const ConvDesc& d, ConvPass pass) = 0;
  // y = [relu](conv(x, w) + b)
  virtual void conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                            Tensor& y, Workspace ws) = 0;
  // dx = conv_backward_data(dz, w), dz being the gradient after the ReLU's backward
  virtual void conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w, Tensor& dx,
                                  Workspace ws) = 0;
  // dw (+)= conv_backward_weights(x, dz); db (+)= sum of dz; `accumulate` adds to what the gradients hold
  virtual void conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz,
                                     Tensor& dw, Tensor* db, bool accumulate, Workspace ws) = 0;

  virtual std::size_t upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) = 0;
  virtual void upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w,
                              const Tensor& b, Tensor& y, Workspace ws) = 0;
  virtual void upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w,
                                    Tensor& dx, Workspace ws) = 0;
  virtual void upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy,
                                       Tensor& dw, Tensor& db, bool accumulate, Workspace ws) = 0;

  // dz = dy * (y > 0); dz may be dy itself.
  virtual void relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) = 0;

  // --- pooling, concatenation ------------------------------------------------------------------------------
  // Bytes the forward pass saves for the backward pass (argmax indices), kept by the caller with the
  // activations.
  virtual std::size_t maxpool_saved_bytes(const PoolDesc& d) = 0;
  virtual std::size_t maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) = 0;
  virtual void maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                               Workspace ws) = 0;
  // dx (+)= the gradient routed back through the max of each window.
  virtual void maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor& x,
                                const Tensor& y, const void* saved, Tensor& dx, bool accumulate,
                                Workspace ws) = 0;

  // out = [a, b] along channels.
  virtual void concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // da = dout[:, :Ca]; db (+)= dout[:, Ca:]
  virtual void split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) = 0;

  // --- input, loss, metrics --------------------------------------------------------------------------------
  // x = scale * pixels; pixels is u8 or f32 [n, h, w, c] (channels last, as images are stored), x an
  // activation. Training and prediction give normalised f32 pixels (scale 1); u8 pixels are scaled by 1/255.
  virtual void input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) = 0;
  // Scratch the loss needs for logits of this shape (the Dice term's per-image sums), given by the caller.
  virtual std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) = 0;
  // Adds the loss's sums (LossSum) to loss_sums (f64 [2]) and, when dlogits is given, writes dlogits (see
  // LossGradScales). targets: u8 [n, h, w]; pixels whose target is d.ignore_index add nothing and get a zero
  // gradient. Any other target of a softmax model must be < classes (else a data error). pixel_weights: f32
  // [n, h, w], finite and >= 0, each multiplying its pixel's per-pixel term (value and gradient) on top of
  // its class weight, never the Dice term; null: every pixel weighs 1.
  virtual void loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                    const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales,
                    Tensor& loss_sums, Workspace ws) = 0;
  // Adds confusion counts (see segmentation_counts_size) to counts (i64). Pixels whose target is
  // ignore_index (-1: none) are not counted.
  virtual void segmentation_counts(Stream& s, const Tensor& logits, const Tensor& targets, Tensor& counts,
                                   int ignore_index) = 0;
  // Per-pixel foreground probability (binary) or class probabilities (softmax), f32 [n, h, w, classes].
  virtual void probabilities(Stream& s, const Tensor& logits, Tensor& probs) = 0;

  // --- flat f32 vectors: optimizer, gradient bookkeeping ---------------------------------------------------
  virtual void fill(Stream& s, Tensor& t, double value) = 0;
  virtual void scale(Stream& s, Tensor& t, float factor) = 0;
  // y += x
  virtual void add(Stream& s, const Tensor& x, Tensor& y) = 0;
  virtual void adam_step(Stream& s, const AdamStep& step, Tensor& params, const Tensor& grads, Tensor& m,
                         Tensor& v) = 0;
  // `momentum` is read and written only when step.momentum != 0 (it may be empty otherwise).
  virtual void sgd_step(Stream& s, const SgdStep& step, Tensor& params, const Tensor& grads,
                        Tensor& momentum) = 0;
  // The sum of the squares of an f32 vector, accumulated in double, written to sum (f64 [1]): the gradient
  // norm for clipping and the log. inf/NaN values make it inf/NaN.
  virtual void sum_of_squares(Stream& s, const Tensor& t, Tensor& sum) = 0;
  // Number of inf/NaN values, written to count (i64 [1]).
  virtual void count_non_finite(Stream& s, const Tensor& t, Tensor& count) = 0;

  // --- copies ----------------------------------------------------------------------------------------------
  virtual void copy_from_host(Stream& s, const void* host, Tensor& dst) = 0;
  virtual void copy_to_host(Stream& s, const Tensor& src, void* host) = 0;
  virtual void copy(Stream& s, const Tensor& src, Tensor& dst) = 0;
};

}  // namespace unet
