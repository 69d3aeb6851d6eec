#include "unet/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/backend/cuda/kernels.h"
#include "unet/backend/cuda/op_support.h"
#include "unet/core/error.h"
#include "unet/loss/desc.h"

namespace unet::cuda {
namespace {

// The backend's resident scratch: the loss's partial sums, its bad-target flag, then CUB's temporary storage
// for the sum of squares and for the non-finite count, each in its own region so that a loss and the two
// reductions may run on different streams at once. CUB's sizes depend on the GPU (CudaBackend's constructor).
constexpr std::size_t kLossPartialsOffset = 0;
constexpr std::size_t kBadTargetOffset = ck::kReduceBlocks * sizeof(double);
constexpr std::size_t kSquaresTempOffset = kBadTargetOffset + 256;

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, EventHandle event) : device_(device), event_(std::move(event)) {}
  bool ready() override {
    const cudaError_t status = cudaEventQuery(event_.get());
    if (status == cudaErrorNotReady) {
      // The runtime keeps it as the thread's last error: the next launch check would report it.
      (void)cudaGetLastError();
      return false;
    }
    UNET_CUDA_CHECK(status, device_);
    return true;
  }
  void synchronize() override { UNET_CUDA_CHECK(cudaEventSynchronize(event_.get()), device_); }
  cudaEvent_t get() const noexcept { return event_.get(); }

 private:
  int device_;
  EventHandle event_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(int device, StreamHandle stream) : device_(device), stream_(std::move(stream)) {}
  void synchronize() override {
    UNET_CUDA_CHECK(cudaStreamSynchronize(stream_.get()), device_);
    report_bad_targets();
  }
  void record(Event& event) override {
    auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
    UNET_CHECK(cuda_event != nullptr, usage, "an event of another kind of backend cannot mark GPU work");
    const DeviceGuard guard(device_);  // the stream's device, whichever thread records
    UNET_CUDA_CHECK(cudaEventRecord(cuda_event->get(), stream_.get()), device_);
  }
  void wait(Event& event) override {
    if (auto* cuda_event = dynamic_cast<CudaEvent*>(&event)) {  // legal across devices
      const DeviceGuard guard(device_);
      UNET_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), cuda_event->get(), 0), device_);
    } else {
      event.synchronize();  // a CPU event: its work is done, or the host waits for it here
    }
  }
  cudaStream_t get() const noexcept { return stream_.get(); }
  int device() const noexcept { return device_; }

  // The loss's check of its targets, deferred to the host's next synchronize() of this stream rather than
  // a synchronization of its own per call: queues a copy of the device flag (which kernels only ever set)
  // into pinned host memory behind the work queued so far. The device is current.
  void check_targets_at_sync(int* device_flag, std::int64_t classes) {
    if (!flag_host_.get()) flag_host_ = make_pinned_host(sizeof(int), device_);
    UNET_CUDA_CHECK(
        cudaMemcpyAsync(flag_host_.get(), device_flag, sizeof(int), cudaMemcpyDeviceToHost, stream_.get()),
        device_);
    flag_device_ = device_flag;
    flag_classes_ = classes;
  }

 private:
  // After a synchronization: Error(data), as the CPU backend's loss throws at once, when a loss since the
  // last one met a target class >= classes. The flag is cleared for the steps after this one.
  void report_bad_targets() {
    if (!flag_device_) return;
    int* const device_flag = std::exchange(flag_device_, nullptr);
    int& seen = *static_cast<int*>(flag_host_.get());
    if (seen == 0) return;
    seen = 0;
    const DeviceGuard guard(device_);
    UNET_CUDA_CHECK(cudaMemsetAsync(device_flag, 0, sizeof(int), stream_.get()), device_);
    throw Error(ErrorKind::data,
                "a mask holds a class index >= model.classes (" + std::to_string(flag_classes_) + ")");
  }

  int device_;
  StreamHandle stream_;
  PinnedHostBuffer flag_host_;  // int, written by the stream's copies
  int* flag_device_ = nullptr;  // the flag a pending check reads (the backend's scratch); null: none
  std::int64_t flag_classes_ = 0;
};

}  // namespace

CudaBackend::CudaBackend(DeviceInfo info, const BackendOptions& options, std::function<DeviceSample()> sample)
    : info_(std::move(info)),
      options_(options.cuda),
      cap_bytes_(options.cap_bytes),
      sample_(std::move(sample)) {
  const DeviceGuard guard(device());
  int major = 0, minor = 0;
  UNET_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device()), device());
  UNET_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device()), device());
  compute_capability_ = major * 10 + minor;
  // A GPU this build has no code for fails at its first kernel with "no kernel image": say so up front.
  int binary_version = 0;
  const cudaError_t image = ck::kernel_image_status(binary_version);
  if (image == cudaErrorNoKernelImageForDevice || image == cudaErrorInvalidDeviceFunction)
    throw Error(ErrorKind::unsupported,
                "this build has no GPU code for sm_" + std::to_string(compute_capability_) + " (built for " +
                    UNET_CUDA_BUILT_ARCHITECTURES + ")",
                info_.id,
                "rebuild with -DUNET_CUDA_ARCHITECTURES=" + std::to_string(compute_capability_) +
                    "-real (or add it to the list)");
  UNET_CUDA_CHECK(image, device());
  // cuDNN's handle allocates device memory outside the allocator: before a memory.growth false reservation
  // takes the device.
  cudnn_ = make_cudnn(device());
  allocator_ = std::make_unique<CudaAllocator>(device(), options_.expandable_arena);
  allocator_->set_cap(cap_bytes_);
  // memory.growth false: the reservation comes before the backend's own scratch below.
  if (options.reserve_bytes > 0) allocator_->reserve(options.reserve_bytes);
  // CUB's temporary storage for the two flat reductions, sized for the largest vector the GPU could hold.
  UNET_CUDA_CHECK(ck::reduction_temp_bytes(info_.total_bytes > 0 ? info_.total_bytes : std::int64_t{1} << 40,
                                           squares_temp_bytes_, count_temp_bytes_),
                  device());
  scratch_bytes_ = kSquaresTempOffset + align256(squares_temp_bytes_) + align256(count_temp_bytes_);
  scratch_ = allocator_->allocate(scratch_bytes_, MemoryCategory::other);
  // The loss's bad-target flag is only ever set by kernels, and cleared when reported: clear it once here,
  // before any stream can use it.
  auto* bad_target = static_cast<char*>(scratch_.data()) + kBadTargetOffset;
  UNET_CUDA_CHECK(cudaMemset(bad_target, 0, sizeof(int)), device());
  UNET_CUDA_CHECK(cudaDeviceSynchronize(), device());
}

std::size_t CudaBackend::resident_bytes() const {
  return scratch_bytes_;
}

CudaBackend::~CudaBackend() {
  // The device current while its objects are released; members go in reverse order after this.
  const QuietDeviceGuard guard(device());
  conv_plans_.clear();
  upconv_plans_.clear();
  scratch_ = Buffer{};
  cudnn_.reset();
  allocator_.reset();
}

std::unique_ptr<Stream> CudaBackend::create_stream() {
  const DeviceGuard guard(device());
  return std::make_unique<CudaStream>(device(), make_stream(device()));
}

std::unique_ptr<Event> CudaBackend::create_event() {
  const DeviceGuard guard(device());
  return std::make_unique<CudaEvent>(device(), make_event(device()));
}

bool CudaBackend::supports(DType compute) const {
  switch (compute) {
    case DType::f32:
    case DType::f16:
      return compute_capability_ >= 75;
    case DType::bf16:
      return compute_capability_ >= 80;
    default:
      return false;
  }
}

DeviceSample CudaBackend::sample_device() const {
  if (sample_) return sample_();
  DeviceSample s;
  s.total_bytes = info_.total_bytes;
  s.free_bytes = -1;
  return s;
}

cudaStream_t CudaBackend::native(Stream& s) const {
  auto* stream = dynamic_cast<CudaStream*>(&s);
  UNET_CHECK(stream != nullptr && stream->device() == device(), usage,
             "a stream of another device or backend was given to " + info_.id);
  return stream->get();
}

cudnnHandle_t CudaBackend::cudnn_on(cudaStream_t stream) {
  if (stream != cudnn_stream_) {
    UNET_CUDNN_CHECK(cudnnSetStream(cudnn_.get(), stream), device());
    cudnn_stream_ = stream;
  }
  return cudnn_.get();
}

// --- ReLU, pooling, concatenation -------------------------------------------------------------------------

void CudaBackend::relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) {
  UNET_CHECK(y.numel() == dy.numel() && dy.numel() == dz.numel() && y.dtype() == dy.dtype() &&
                 dy.dtype() == dz.dtype(),
             usage,
             "relu_backward: y, dy and dz must match, got " + y.shape().str() + ", " + dy.shape().str() +
                 ", " + dz.shape().str());
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(
      ck::launch_relu_backward(y.data(), dy.data(), dz.data(), elem(y.dtype()), y.numel(), native(s)),
      device());
}

std::size_t CudaBackend::maxpool_saved_bytes(const PoolDesc& d) {
  return static_cast<std::size_t>(d.output().numel());  // one u8 window index per output
}

std::size_t CudaBackend::maxpool_workspace_bytes(const PoolDesc&, ConvPass) {
  return 0;
}

void CudaBackend::maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                                  Workspace) {
  check_act(x, d.input(), d.dtype, d.layout, "maxpool_forward x");
  check_act(y, d.output(), d.dtype, d.layout, "maxpool_forward y");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_maxpool_forward(x.data(), y.data(), static_cast<std::uint8_t*>(saved),
                                             elem(d.dtype), dims_of(x), native(s)),
                  device());
}

void CudaBackend::maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor&,
                                   const Tensor&, const void* saved, Tensor& dx, bool accumulate, Workspace) {
  check_act(dy, d.output(), d.dtype, d.layout, "maxpool_backward dy");
  check_act(dx, d.input(), d.dtype, d.layout, "maxpool_backward dx");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_maxpool_backward(dy.data(), static_cast<const std::uint8_t*>(saved), dx.data(),
                                              elem(d.dtype), dims_of(dx), accumulate, native(s)),
                  device());
}

void CudaBackend::concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) {
  const ActShape sa = a.act(), sb = b.act(), so = out.act();
  UNET_CHECK(sa.n == so.n && sb.n == so.n && sa.h == so.h && sb.h == so.h && sa.w == so.w && sb.w == so.w &&
                 sa.c + sb.c == so.c && a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
                 a.layout() == out.layout() && b.layout() == out.layout(),
             usage, "concat_channels: " + sa.str() + " + " + sb.str() + " -> " + so.str());
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_concat_channels(a.data(), b.data(), out.data(), elem(out.dtype()), dims_of(out),
                                             sa.c, native(s)),
                  device());
}

void CudaBackend::split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) {
  const ActShape sa = da.act(), sb = db.act(), so = dout.act();
  UNET_CHECK(sa.n == so.n && sb.n == so.n && sa.h == so.h && sb.h == so.h && sa.w == so.w && sb.w == so.w &&
                 sa.c + sb.c == so.c && da.dtype() == dout.dtype() && db.dtype() == dout.dtype() &&
                 da.layout() == dout.layout() && db.layout() == dout.layout(),
             usage, "split_channels: " + so.str() + " -> " + sa.str() + " + " + sb.str());
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_split_channels(dout.data(), da.data(), db.data(), elem(dout.dtype()),
                                            dims_of(dout), sa.c, accumulate_b, native(s)),
                  device());
}

// --- input, loss, metrics ---------------------------------------------------------------------------------

void CudaBackend::input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) {
  const ActShape shape = x.act();
  UNET_CHECK((pixels.dtype() == DType::u8 || pixels.dtype() == DType::f32) && pixels.numel() == shape.numel(),
             usage,
             "input_from_pixels: " + pixels.shape().str() + " " + std::string(to_string(pixels.dtype())) +
                 " pixels for a " + shape.str() + " input");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_input_from_pixels(pixels.data(), pixels.dtype() == DType::f32, x.data(),
                                               elem(x.dtype()), dims_of(x), scale, native(s)),
                  device());
}

std::size_t CudaBackend::loss_workspace_bytes(const LossDesc& d, const ActShape& logits) {
  return ck::loss_scratch_bytes(loss_params(d), dims_of(logits, Layout::nhwc));
}

void CudaBackend::loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                       const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales,
                       Tensor& loss_sums, Workspace ws) {
  const ActShape shape = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == shape.n * shape.h * shape.w, usage,
             "loss: targets must be u8 [n, h, w] for logits " + shape.str());
  check_pixel_weights(pixel_weights, shape);
  check_loss_desc(d, shape);
  UNET_CHECK(loss_sums.dtype() == DType::f64 && loss_sums.numel() == kLossSums, usage,
             "loss: loss_sums must be f64 [2]");
  if (dlogits) check_act(*dlogits, shape, logits.dtype(), logits.layout(), "loss dlogits");
  const loss_math::LossParams params = loss_params(d);
  const std::size_t needed = ck::loss_scratch_bytes(params, dims_of(logits));
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             "loss: workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  char* scratch = static_cast<char*>(scratch_.data());
  int* bad_target = reinterpret_cast<int*>(scratch + kBadTargetOffset);
  const bool softmax = shape.c > 1;
  UNET_CUDA_CHECK(
      ck::launch_loss(params, logits.data(), elem(logits.dtype()), dims_of(logits),
                      targets.data_as<std::uint8_t>(),
                      pixel_weights ? pixel_weights->data_as<float>() : nullptr,
                      dlogits ? dlogits->data() : nullptr, grad_scales.cross_entropy, grad_scales.dice,
                      reinterpret_cast<double*>(scratch + kLossPartialsOffset), static_cast<double*>(ws.data),
                      loss_sums.data_as<double>(), bad_target, stream),
      device());
  if (!softmax) return;  // a binary target is 0 or not: never bad
  // The CPU backend throws on a class index past the model's classes; this one reports it, as Error(data),
  // at the stream's next synchronize(), which the step makes anyway to read the loss: no wait of its own.
  static_cast<CudaStream&>(s).check_targets_at_sync(bad_target, shape.c);
}

void CudaBackend::segmentation_counts(Stream& s, const Tensor& logits, const Tensor& targets, Tensor& counts,
                                      int ignore_index) {
  const ActShape shape = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == shape.n * shape.h * shape.w, usage,
             "segmentation_counts: targets must be u8 [n, h, w] for logits " + shape.str());
  UNET_CHECK(
      counts.dtype() == DType::i64 && counts.numel() == segmentation_counts_size(static_cast<int>(shape.c)),
      usage, "segmentation_counts: counts must be i64 of segmentation_counts_size(classes)");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_segmentation_counts(logits.data(), elem(logits.dtype()), dims_of(logits),
                                                 targets.data_as<std::uint8_t>(), ignore_index,
                                                 counts.data_as<std::int64_t>(), native(s)),
                  device());
}

void CudaBackend::probabilities(Stream& s, const Tensor& logits, Tensor& probs) {
  const ActShape shape = logits.act();
  UNET_CHECK(probs.dtype() == DType::f32 && probs.numel() == shape.numel(), usage,
             "probabilities: probs must be f32 with as many values as the logits " + shape.str());
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_probabilities(logits.data(), elem(logits.dtype()), dims_of(logits),
                                           probs.data_as<float>(), native(s)),
                  device());
}

// --- vectors ----------------------------------------------------------------------------------------------

void CudaBackend::fill(Stream& s, Tensor& t, double value) {
  if (t.numel() == 0) return;
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  if (value == 0.0 && !std::signbit(value))  // all bits zero in every type
    UNET_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.bytes(), stream), device());
  else
    UNET_CUDA_CHECK(ck::launch_fill(t.data(), elem(t.dtype()), t.numel(), value, stream), device());
}

void CudaBackend::scale(Stream& s, Tensor& t, float factor) {
  UNET_CHECK(t.dtype() == DType::f32, usage, "scale: f32 only");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_scale(t.data_as<float>(), t.numel(), factor, native(s)), device());
}

void CudaBackend::add(Stream& s, const Tensor& x, Tensor& y) {
  UNET_CHECK(x.numel() == y.numel() && x.dtype() == y.dtype(), usage,
             "add: " + x.shape().str() + " into " + y.shape().str());
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_add(x.data(), y.data(), elem(y.dtype()), y.numel(), native(s)), device());
}

void CudaBackend::adam_step(Stream& s, const AdamStep& step, Tensor& params, const Tensor& grads, Tensor& m,
                            Tensor& v) {
  UNET_CHECK(params.dtype() == DType::f32 && grads.dtype() == DType::f32 && m.dtype() == DType::f32 &&
                 v.dtype() == DType::f32 && grads.numel() == params.numel() && m.numel() == params.numel() &&
                 v.numel() == params.numel(),
             usage, "adam_step: params, grads, m and v must be f32 of one size");
  const DeviceGuard guard(device());
  const kmath::AdamScalars scalars =
      kmath::adam_scalars(step.lr, step.beta1, step.beta2, step.eps, step.weight_decay,
                          step.decoupled_weight_decay, step.step, step.grad_scale);
  UNET_CUDA_CHECK(ck::launch_adam(scalars, params.data_as<float>(), grads.data_as<float>(),
                                  m.data_as<float>(), v.data_as<float>(), params.numel(), native(s)),
                  device());
}

void CudaBackend::sgd_step(Stream& s, const SgdStep& step, Tensor& params, const Tensor& grads,
                           Tensor& momentum) {
  UNET_CHECK(
      params.dtype() == DType::f32 && grads.dtype() == DType::f32 && grads.numel() == params.numel() &&
          (step.momentum == 0.0f || (momentum.dtype() == DType::f32 && momentum.numel() == params.numel())),
      usage, "sgd_step: params, grads and the momentum buffer must be f32 of one size");
  const DeviceGuard guard(device());
  const kmath::SgdScalars scalars{.lr = step.lr,
                                  .momentum = step.momentum,
                                  .weight_decay = step.weight_decay,
                                  .grad_scale = step.grad_scale,
                                  .nesterov = step.nesterov};
  UNET_CUDA_CHECK(
      ck::launch_sgd(scalars, params.data_as<float>(), grads.data_as<float>(),
                     step.momentum != 0.0f ? momentum.data_as<float>() : nullptr, params.numel(), native(s)),
      device());
}

void CudaBackend::sum_of_squares(Stream& s, const Tensor& t, Tensor& sum) {
  UNET_CHECK(t.dtype() == DType::f32 && sum.dtype() == DType::f64 && sum.numel() == 1, usage,
             "sum_of_squares: an f32 vector into f64 [1]");
  const DeviceGuard guard(device());
  void* temp = static_cast<char*>(scratch_.data()) + kSquaresTempOffset;
  UNET_CUDA_CHECK(ck::launch_sum_of_squares(t.data_as<float>(), t.numel(), temp, squares_temp_bytes_,
                                            sum.data_as<double>(), native(s)),
                  device());
}

void CudaBackend::count_non_finite(Stream& s, const Tensor& t, Tensor& count) {
  UNET_CHECK(count.dtype() == DType::i64 && count.numel() == 1, usage,
             "count_non_finite: count must be i64 [1]");
  const DeviceGuard guard(device());
  void* temp = static_cast<char*>(scratch_.data()) + kSquaresTempOffset + align256(squares_temp_bytes_);
  UNET_CUDA_CHECK(ck::launch_count_non_finite(t.data(), elem(t.dtype()), t.numel(), temp, count_temp_bytes_,
                                              count.data_as<std::int64_t>(), native(s)),
                  device());
}

// --- copies -----------------------------------------------------------------------------------------------

void CudaBackend::copy_from_host(Stream& s, const void* host, Tensor& dst) {
  if (!dst.bytes()) return;
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(cudaMemcpyAsync(dst.data(), host, dst.bytes(), cudaMemcpyHostToDevice, native(s)),
                  device());
}

void CudaBackend::copy_to_host(Stream& s, const Tensor& src, void* host) {
  if (!src.bytes()) return;
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(cudaMemcpyAsync(host, src.data(), src.bytes(), cudaMemcpyDeviceToHost, native(s)),
                  device());
}

void CudaBackend::copy(Stream& s, const Tensor& src, Tensor& dst) {
  UNET_CHECK(src.bytes() == dst.bytes(), usage, "copy: " + src.shape().str() + " into " + dst.shape().str());
  if (!src.bytes()) return;
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, native(s)),
                  device());
}

}  // namespace unet::cuda
