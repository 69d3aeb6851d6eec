#include "unet/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/backend/cuda/kernels.h"
#include "unet/core/error.h"
#include "unet/loss/desc.h"

namespace unet::cuda {
namespace {

namespace ck = unet::cuda_kernels;

// The largest cuDNN workspace an algorithm may ask for; larger ones are passed over.
constexpr std::size_t kConvWorkspaceLimit = std::size_t{1} << 30;

// The backend's resident scratch: the loss's partial sums, its bad-target flag, then CUB's temporary storage
// for the sum of squares and for the non-finite count, each in its own region so that a loss and the two
// reductions may run on different streams at once. CUB's sizes depend on the GPU (CudaBackend's constructor).
constexpr std::size_t kLossPartialsOffset = 0;
constexpr std::size_t kBadTargetOffset = ck::kReduceBlocks * sizeof(double);
constexpr std::size_t kSquaresTempOffset = kBadTargetOffset + 256;

ck::ElemType elem(DType t) {
  return static_cast<ck::ElemType>(t);  // the same order (kernels.h)
}
static_assert(static_cast<int>(ck::ElemType::f64) == static_cast<int>(DType::f64) &&
              static_cast<int>(ck::ElemType::bf16) == static_cast<int>(DType::bf16));

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(ErrorKind::unsupported,
                  "cuDNN convolutions take f32, f16 or bf16 activations, not " + std::string(to_string(t)));
  }
}

cudnnTensorFormat_t cudnn_format(Layout l) {
  return l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

kmath::Dims dims_of(const ActShape& s, Layout l) {
  return kmath::Dims{s.n, s.c, s.h, s.w, l == Layout::nhwc};
}
kmath::Dims dims_of(const Tensor& t) {
  return dims_of(t.act(), t.layout());
}

std::string describe(const ConvDesc& d) {
  return "conv" + std::to_string(d.kernel) + "x" + std::to_string(d.kernel) +
         (d.depthwise ? " depthwise" : "") + " " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}
std::string describe(const UpConvDesc& d) {
  return "upconv2x2 " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}

void check_act(const Tensor& t, const ActShape& want, DType dtype, Layout layout, const char* what) {
  UNET_CHECK(
      t.defined() && t.shape().rank == 4 && t.act() == want && t.dtype() == dtype && t.layout() == layout,
      usage,
      std::string(what) + ": expected " + want.str() + " " + std::string(to_string(dtype)) + ", got " +
          (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

void check_param(const Tensor& t, const Shape& want, const char* what) {
  UNET_CHECK(t.defined() && t.shape().numel() == want.numel() && t.dtype() == DType::f32, usage,
             std::string(what) + ": expected f32 " + want.str() + ", got " +
                 (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

// The caller's workspace for a pass that needs `needed` bytes (conv_workspace_bytes).
char* checked_workspace(Workspace ws, std::size_t needed, const std::string& what) {
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             what + ": workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  return static_cast<char*>(ws.data);
}

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

// cuDNN's answer to one algorithm's run: "" when it ran; why not when cuDNN refused that algorithm for this
// convolution (not supported, a bad parameter for it, its kernel failed), which the next algorithm may cure,
// after clearing what the failure left as the thread's last CUDA error; throws for anything else.
std::string refusal(cudnnStatus_t status, int device) {
  if (status == CUDNN_STATUS_SUCCESS) return {};
  const int category = CUDNN_STATUS_CATEGORY(status);
  if (category != CUDNN_STATUS_NOT_SUPPORTED && category != CUDNN_STATUS_BAD_PARAM &&
      category != CUDNN_STATUS_EXECUTION_FAILED)
    throw_cudnn_error(status, "a cuDNN convolution", device);
  std::array<char, 512> detail{};
  cudnnGetLastErrorString(detail.data(), detail.size());
  const cudaError_t cuda_status = cudaGetLastError();
  if (is_sticky_error(cuda_status)) throw_cuda_error(cuda_status, "a cuDNN convolution", device);
  std::string why = cudnnGetErrorString(status);
  if (detail[0] != '\0') why += std::string(" (") + detail.data() + ")";
  return why;
}

// The heuristic's list in plain terms (conv_rules.h), each entry's workspace confirmed by the pass's
// cudnnGet*WorkspaceSize for its algorithm and math type (m12: the larger of the two figures is kept);
// `size_of(algo, math)` returns nullopt when cuDNN refuses the query, and the entry is then unusable.
template <class Perf, class SizeOf>
std::vector<AlgoCandidate> candidates_of(const Perf* results, int count, SizeOf&& size_of) {
  std::vector<AlgoCandidate> out;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    AlgoCandidate c{.algo = static_cast<int>(r.algo),
                    .math = static_cast<int>(r.mathType),
                    .bytes = r.memory,
                    .deterministic = r.determinism == CUDNN_DETERMINISTIC,
                    .fma_math = r.mathType == CUDNN_FMA_MATH,
                    .usable = r.status == CUDNN_STATUS_SUCCESS};
    if (c.usable) {
      const std::optional<std::size_t> confirmed = size_of(r.algo, r.mathType);
      c.usable = confirmed.has_value();
      if (confirmed) c.bytes = std::max(c.bytes, *confirmed);
    }
    out.push_back(c);
  }
  return out;
}

// The pass's default algorithm (PyTorch's in deterministic mode) with the plan's math type, when cuDNN
// accepts its workspace query.
template <class Algo, class SizeOf>
std::optional<AlgoCandidate> default_candidate(Algo algo, cudnnMathType_t math, SizeOf&& size_of) {
  const std::optional<std::size_t> bytes = size_of(algo, math);
  if (!bytes) return std::nullopt;
  return AlgoCandidate{.algo = static_cast<int>(algo),
                       .math = static_cast<int>(math),
                       .bytes = *bytes,
                       .deterministic = true,
                       .fma_math = math == CUDNN_FMA_MATH,
                       .usable = true};
}

const char* pass_name(ConvPass cudnn_pass) {
  switch (cudnn_pass) {
    case ConvPass::forward:
      return "forward";
    case ConvPass::backward_data:
      return "backward-data";
    case ConvPass::backward_weights:
      return "backward-filter";
  }
  return "";
}

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

// --- convolution plans ------------------------------------------------------------------------------------

ConvPlan CudaBackend::make_plan(const ConvShape& shape, std::string what, DType dtype, Layout layout,
                                int kernel, bool transposed, bool depthwise, std::int64_t x_h,
                                std::int64_t x_w, std::int64_t y_h, std::int64_t y_w) {
  const int stride = transposed ? 2 : 1;
  const cudnnDataType_t type = cudnn_type(dtype);
  const cudnnTensorFormat_t format = cudnn_format(layout);
  ConvPlan p;
  p.what = std::move(what);
  p.shape = shape;
  p.dtype = dtype;
  // f32: CUDNN_DEFAULT_MATH lets cuDNN use TF32 tensor cores on Ampere and newer, CUDNN_FMA_MATH forbids
  // them; f16/bf16: tensor cores.
  p.math = dtype == DType::f32 ? (options_.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH) : CUDNN_TENSOR_OP_MATH;
  // cuDNN's legacy descriptors hold int dimensions and 32-bit element counts: refuse what does not fit
  // rather than truncate it.
  const std::string& w = p.what;
  check_cudnn_tensor(shape.n, shape.c_pad, x_h, x_w, "input", w);
  check_cudnn_tensor(shape.n, shape.k_pad, y_h, y_w, "output", w);
  check_cudnn_tensor(shape.k_pad, shape.filter_c_pad, kernel, kernel, "filter", w);
  const auto i = [&](std::int64_t v) { return cudnn_int(v, "dimension", w); };
  p.x = make_tensor_descriptor(device());
  p.y = make_tensor_descriptor(device());
  p.w = make_filter_descriptor(device());
  p.conv = make_convolution_descriptor(device());
  UNET_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p.x.get(), format, type, i(shape.n), i(shape.c_pad), i(x_h), i(x_w)),
      device());
  UNET_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p.y.get(), format, type, i(shape.n), i(shape.k_pad), i(y_h), i(y_w)),
      device());
  UNET_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w.get(), type, format, i(shape.k_pad), i(shape.filter_c_pad),
                                              kernel, kernel),
                   device());
  const int pad = stride == 1 ? kernel / 2 : 0;
  UNET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv.get(), pad, pad, stride, stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   device());
  if (depthwise) UNET_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv.get(), i(shape.c)), device());
  if (shape.bias_channels > 0) {
    // The bias gradient sums the real gradient: the conv's dY (k channels), the upconv's dY (X here).
    const bool of_y = !transposed;
    p.bias_source = make_tensor_descriptor(device());
    p.bias = make_tensor_descriptor(device());
    UNET_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p.bias_source.get(), format, type, i(shape.n), i(shape.bias_channels),
                                   i(of_y ? y_h : x_h), i(of_y ? y_w : x_w)),
        device());
    UNET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.bias.get(), format, type, 1, i(shape.bias_channels), 1, 1),
                     device());
  }
  return p;
}

ConvPlan& CudaBackend::plan(const ConvDesc& d) {
  if (auto it = conv_plans_.find(d); it != conv_plans_.end()) return it->second;
  ConvPlan p = make_plan(conv_shape(d), describe(d), d.dtype, d.layout, d.kernel, false, d.depthwise, d.h,
                         d.w, d.h, d.w);
  return conv_plans_.emplace(d, std::move(p)).first->second;
}

// The transposed convolution's matching convolution: X [n, c_out, 2h, 2w] -> Y [n, c_in, h, w], filter
// [c_in, c_out, 2, 2] (the canonical upconv weights, as they are), 2x2, stride 2, no padding.
ConvPlan& CudaBackend::plan(const UpConvDesc& d) {
  if (auto it = upconv_plans_.find(d); it != upconv_plans_.end()) return it->second;
  ConvPlan p =
      make_plan(conv_shape(d), describe(d), d.dtype, d.layout, 2, true, false, 2 * d.h, 2 * d.w, d.h, d.w);
  return upconv_plans_.emplace(d, std::move(p)).first->second;
}

AlgoChoice& CudaBackend::algorithms(ConvPlan& p, ConvPass cudnn_pass) {
  std::optional<AlgoChoice>& slot = p.passes[static_cast<std::size_t>(cudnn_pass)];
  if (slot) return *slot;
  const cudnnHandle_t h = cudnn_.get();
  const AlgoRules rules{.deterministic = options_.deterministic,
                        .fma_only = p.math == CUDNN_FMA_MATH,
                        .workspace_limit = kConvWorkspaceLimit};
  // The heuristic is asked with the plan's math type set; each entry's own math type is set before its
  // workspace query and before it runs.
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.math), device());
  std::vector<AlgoCandidate> offered;
  std::optional<AlgoCandidate> fallback;
  int returned = 0;
  const auto math_set = [&](cudnnMathType_t math) {
    return cudnnSetConvolutionMathType(p.conv.get(), math) == CUDNN_STATUS_SUCCESS;
  };
  switch (cudnn_pass) {
    case ConvPass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> r{};
      UNET_CUDNN_CHECK(
          cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(),
                                                 static_cast<int>(r.size()), &returned, r.data()),
          device());
      const auto size_of = [&](cudnnConvolutionFwdAlgo_t algo,
                               cudnnMathType_t math) -> std::optional<std::size_t> {
        std::size_t bytes = 0;
        if (!math_set(math) ||
            cudnnGetConvolutionForwardWorkspaceSize(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(), algo,
                                                    &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      };
      offered = candidates_of(r.data(), returned, size_of);
      fallback = default_candidate(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, p.math, size_of);
      break;
    }
    case ConvPass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> r{};
      UNET_CUDNN_CHECK(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
                                                      static_cast<int>(r.size()), &returned, r.data()),
          device());
      const auto size_of = [&](cudnnConvolutionBwdDataAlgo_t algo,
                               cudnnMathType_t math) -> std::optional<std::size_t> {
        std::size_t bytes = 0;
        if (!math_set(math) ||
            cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
                                                         algo, &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      };
      offered = candidates_of(r.data(), returned, size_of);
      fallback = default_candidate(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, p.math, size_of);
      break;
    }
    case ConvPass::backward_weights: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> r{};
      UNET_CUDNN_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
                                                        static_cast<int>(r.size()), &returned, r.data()),
          device());
      const auto size_of = [&](cudnnConvolutionBwdFilterAlgo_t algo,
                               cudnnMathType_t math) -> std::optional<std::size_t> {
        std::size_t bytes = 0;
        if (!math_set(math) ||
            cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
                                                           algo, &bytes) != CUDNN_STATUS_SUCCESS)
          return std::nullopt;
        return bytes;
      };
      offered = candidates_of(r.data(), returned, size_of);
      fallback = default_candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, p.math, size_of);
      break;
    }
  }
  {
    // Refused workspace queries leave a message behind; they are not errors here: take it, so that a later
    // error does not report it.
    std::array<char, 512> stale{};
    cudnnGetLastErrorString(stale.data(), stale.size());
  }
  AlgoChoice choice(offered, fallback, rules);
  if (choice.empty())
    throw Error(ErrorKind::unsupported,
                p.what + ": cuDNN offers no " + (options_.deterministic ? "deterministic " : "") +
                    pass_name(cudnn_pass) + " algorithm within " +
                    format_bytes(static_cast<std::int64_t>(kConvWorkspaceLimit)) + " of workspace",
                info_.id,
                options_.deterministic ? "set cuda.deterministic to false, or use another precision" : "");
  return slot.emplace(std::move(choice));
}

WorkspaceLayout CudaBackend::layout(ConvPlan& p, ConvPass cudnn_pass) {
  return workspace_layout(p.shape, cudnn_pass, algorithms(p, cudnn_pass).workspace_bytes());
}

void CudaBackend::run_cudnn(ConvPlan& p, ConvPass cudnn_pass, cudaStream_t stream, const void* first,
                            const void* second, void* out, const WorkspaceLayout& l, char* ws) {
  AlgoChoice& choice = algorithms(p, cudnn_pass);
  const cudnnHandle_t h = cudnn_on(stream);
  void* algo_ws = l.algo.bytes ? ws + l.algo.offset : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const auto attempt = [&](const AlgoCandidate& c) -> std::string {
    UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), static_cast<cudnnMathType_t>(c.math)),
                     device());
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    switch (cudnn_pass) {
      case ConvPass::forward:
        status = cudnnConvolutionForward(h, &one, p.x.get(), first, p.w.get(), second, p.conv.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), algo_ws,
                                         l.algo.bytes, &zero, p.y.get(), out);
        break;
      case ConvPass::backward_data:
        status = cudnnConvolutionBackwardData(h, &one, p.w.get(), second, p.y.get(), first, p.conv.get(),
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), algo_ws,
                                              l.algo.bytes, &zero, p.x.get(), out);
        break;
      case ConvPass::backward_weights:
        status = cudnnConvolutionBackwardFilter(h, &one, p.x.get(), first, p.y.get(), second, p.conv.get(),
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), algo_ws,
                                                l.algo.bytes, &zero, p.w.get(), out);
        break;
    }
    return refusal(status, device());
  };
  choice.run(l.algo.bytes, attempt, p.what + " " + pass_name(cudnn_pass));
}

// cudnnConvolutionBackwardBias (cuDNN's reduction over n, h, w, f32 accumulation) rather than a kernel of
// our own. Its output has the data's type: f32 accumulates into db through beta; bf16/f16 write the compute
// type into the workspace (as cuDNN's filter gradient does), which unpack_weights casts and adds into db.
void CudaBackend::bias_gradient(ConvPlan& p, cudaStream_t stream, const void* source, float* db,
                                bool accumulate, const WorkspaceLayout& l, char* ws) {
  const cudnnHandle_t h = cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f, beta = accumulate ? 1.0f : 0.0f;
  if (p.shape.f32) {
    UNET_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(h, &one, p.bias_source.get(), source, &beta, p.bias.get(), db),
        device());
    return;
  }
  void* partial = ws + l.bias.offset;
  UNET_CUDNN_CHECK(
      cudnnConvolutionBackwardBias(h, &one, p.bias_source.get(), source, &zero, p.bias.get(), partial),
      device());
  UNET_CUDA_CHECK(ck::launch_unpack_weights(partial, elem(p.dtype), db, p.shape.bias_channels, 1, 1, 1,
                                            p.shape.krsc, accumulate, stream),
                  device());
}

void CudaBackend::pack(const ConvPlan& p, const Tensor& w, void* packed, cudaStream_t stream) {
  const ConvShape& s = p.shape;
  UNET_CUDA_CHECK(ck::launch_pack_weights(w.data_as<float>(), packed, elem(p.dtype), s.k, s.filter_c, s.rs,
                                          s.k_pad, s.filter_c_pad, s.krsc, stream),
                  device());
}

void CudaBackend::unpack(const ConvPlan& p, const void* packed, Tensor& dw, bool accumulate,
                         cudaStream_t stream) {
  const ConvShape& s = p.shape;
  UNET_CUDA_CHECK(ck::launch_unpack_weights(packed, elem(p.dtype), dw.data_as<float>(), s.k, s.filter_c, s.rs,
                                            s.filter_c_pad, s.krsc, accumulate, stream),
                  device());
}

// --- convolution ------------------------------------------------------------------------------------------
//
// In bf16/f16 NHWC a convolution whose channel counts are not multiples of 8 runs on padded copies in the
// workspace (conv_rules.h): X padded with zero channels, the filter packed with zero filters and channels,
// Y (or dY) padded, the real channels copied back out; the gradients read only the real part.

std::size_t CudaBackend::conv_workspace_bytes(const ConvDesc& d, ConvPass pass) {
  const DeviceGuard guard(device());
  return layout(plan(d), pass).total;
}

void CudaBackend::conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w,
                               const Tensor* b, Tensor& y, Workspace ws) {
  check_act(x, d.input(), d.dtype, d.layout, "conv_forward x");
  check_act(y, d.output(), d.dtype, d.layout, "conv_forward y");
  check_param(w, d.weight_shape(), "conv_forward w");
  UNET_CHECK(d.bias == (b != nullptr), usage,
             "conv_forward: a bias must be given exactly when the desc has one");
  if (b) check_param(*b, Shape{d.c_out}, "conv_forward b");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const ConvShape& sh = p.shape;
  const WorkspaceLayout l = layout(p, ConvPass::forward);
  char* base = checked_workspace(ws, l.total, p.what);
  void* packed = base + l.filter.offset;
  pack(p, w, packed, stream);
  const void* x_in = x.data();
  if (sh.pads_x()) {
    x_in = base + l.x_pad.offset;
    UNET_CUDA_CHECK(ck::launch_copy_channels(x.data(), sh.c, base + l.x_pad.offset, sh.c_pad, sh.x_pixels,
                                             elem(d.dtype), stream),
                    device());
  }
  void* y_out = sh.pads_y() ? base + l.y_pad.offset : y.data();
  run_cudnn(p, ConvPass::forward, stream, x_in, packed, y_out, l, base);
  if (sh.pads_y())
    UNET_CUDA_CHECK(
        ck::launch_copy_channels(y_out, sh.k_pad, y.data(), sh.k, sh.y_pixels, elem(d.dtype), stream),
        device());
  if (b)
    UNET_CUDA_CHECK(
        ck::launch_bias_relu(y.data(), b->data_as<float>(), elem(d.dtype), dims_of(y), d.relu, stream),
        device());
  else if (d.relu)  // relu_backward(y, dy = y) is ReLU in place
    UNET_CUDA_CHECK(ck::launch_relu_backward(y.data(), y.data(), y.data(), elem(d.dtype), y.numel(), stream),
                    device());
}

void CudaBackend::conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w,
                                     Tensor& dx, Workspace ws) {
  check_act(dz, d.output(), d.dtype, d.layout, "conv_backward_data dz");
  check_act(dx, d.input(), d.dtype, d.layout, "conv_backward_data dx");
  check_param(w, d.weight_shape(), "conv_backward_data w");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const ConvShape& sh = p.shape;
  const WorkspaceLayout l = layout(p, ConvPass::backward_data);
  char* base = checked_workspace(ws, l.total, p.what);
  void* packed = base + l.filter.offset;
  pack(p, w, packed, stream);
  const void* dy_in = dz.data();
  if (sh.pads_y()) {
    dy_in = base + l.y_pad.offset;
    UNET_CUDA_CHECK(ck::launch_copy_channels(dz.data(), sh.k, base + l.y_pad.offset, sh.k_pad, sh.y_pixels,
                                             elem(d.dtype), stream),
                    device());
  }
  void* dx_out = sh.pads_x() ? base + l.x_pad.offset : dx.data();
  run_cudnn(p, ConvPass::backward_data, stream, dy_in, packed, dx_out, l, base);
  if (sh.pads_x())
    UNET_CUDA_CHECK(
        ck::launch_copy_channels(dx_out, sh.c_pad, dx.data(), sh.c, sh.x_pixels, elem(d.dtype), stream),
        device());
}

void CudaBackend::conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz,
                                        Tensor& dw, Tensor* db, bool accumulate, Workspace ws) {
  check_act(x, d.input(), d.dtype, d.layout, "conv_backward_weights x");
  check_act(dz, d.output(), d.dtype, d.layout, "conv_backward_weights dz");
  check_param(dw, d.weight_shape(), "conv_backward_weights dw");
  UNET_CHECK(d.bias == (db != nullptr), usage,
             "conv_backward_weights: a bias gradient must be given exactly when the desc has a bias");
  if (db) check_param(*db, Shape{d.c_out}, "conv_backward_weights db");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const ConvShape& sh = p.shape;
  const WorkspaceLayout l = layout(p, ConvPass::backward_weights);
  char* base = checked_workspace(ws, l.total, p.what);
  const void* x_in = x.data();
  if (sh.pads_x()) {
    x_in = base + l.x_pad.offset;
    UNET_CUDA_CHECK(ck::launch_copy_channels(x.data(), sh.c, base + l.x_pad.offset, sh.c_pad, sh.x_pixels,
                                             elem(d.dtype), stream),
                    device());
  }
  const void* dy_in = dz.data();
  if (sh.pads_y()) {
    dy_in = base + l.y_pad.offset;
    UNET_CUDA_CHECK(ck::launch_copy_channels(dz.data(), sh.k, base + l.y_pad.offset, sh.k_pad, sh.y_pixels,
                                             elem(d.dtype), stream),
                    device());
  }
  void* packed = base + l.filter.offset;
  run_cudnn(p, ConvPass::backward_weights, stream, x_in, dy_in, packed, l, base);
  unpack(p, packed, dw, accumulate, stream);
  if (db) bias_gradient(p, stream, dz.data(), db->data_as<float>(), accumulate, l, base);
}

// --- transposed convolution: the matching convolution's passes, swapped ------------------------------------

namespace {
ConvPass cudnn_pass_of_upconv(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return ConvPass::backward_data;
    case ConvPass::backward_data:
      return ConvPass::forward;
    case ConvPass::backward_weights:
      return ConvPass::backward_weights;
  }
  return pass;
}
}  // namespace

std::size_t CudaBackend::upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) {
  const DeviceGuard guard(device());
  return layout(plan(d), cudnn_pass_of_upconv(pass)).total;
}

void CudaBackend::upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w,
                                 const Tensor& b, Tensor& y, Workspace ws) {
  check_act(x, d.input(), d.dtype, d.layout, "upconv_forward x");
  check_act(y, d.output(), d.dtype, d.layout, "upconv_forward y");
  check_param(w, d.weight_shape(), "upconv_forward w");
  check_param(b, Shape{d.c_out}, "upconv_forward b");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const WorkspaceLayout l = layout(p, ConvPass::backward_data);
  char* base = checked_workspace(ws, l.total, p.what);
  void* packed = base + l.filter.offset;
  pack(p, w, packed, stream);
  // y = the gradient of the matching convolution's input for an output gradient x
  run_cudnn(p, ConvPass::backward_data, stream, x.data(), packed, y.data(), l, base);
  UNET_CUDA_CHECK(
      ck::launch_bias_relu(y.data(), b.data_as<float>(), elem(d.dtype), dims_of(y), false, stream), device());
}

void CudaBackend::upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w,
                                       Tensor& dx, Workspace ws) {
  check_act(dy, d.output(), d.dtype, d.layout, "upconv_backward_data dy");
  check_act(dx, d.input(), d.dtype, d.layout, "upconv_backward_data dx");
  check_param(w, d.weight_shape(), "upconv_backward_data w");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const WorkspaceLayout l = layout(p, ConvPass::forward);
  char* base = checked_workspace(ws, l.total, p.what);
  void* packed = base + l.filter.offset;
  pack(p, w, packed, stream);
  run_cudnn(p, ConvPass::forward, stream, dy.data(), packed, dx.data(), l, base);
}

void CudaBackend::upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy,
                                          Tensor& dw, Tensor& db, bool accumulate, Workspace ws) {
  check_act(x, d.input(), d.dtype, d.layout, "upconv_backward_weights x");
  check_act(dy, d.output(), d.dtype, d.layout, "upconv_backward_weights dy");
  check_param(dw, d.weight_shape(), "upconv_backward_weights dw");
  check_param(db, Shape{d.c_out}, "upconv_backward_weights db");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  ConvPlan& p = plan(d);
  const WorkspaceLayout l = layout(p, ConvPass::backward_weights);
  char* base = checked_workspace(ws, l.total, p.what);
  void* packed = base + l.filter.offset;
  // the matching convolution's input is dy, its output gradient x
  run_cudnn(p, ConvPass::backward_weights, stream, dy.data(), x.data(), packed, l, base);
  unpack(p, packed, dw, accumulate, stream);
  bias_gradient(p, stream, dy.data(), db.data_as<float>(), accumulate, l, base);
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

void CudaBackend::input_from_u8(Stream& s, const Tensor& pixels, Tensor& x, float scale) {
  const ActShape shape = x.act();
  UNET_CHECK(pixels.dtype() == DType::u8 && pixels.numel() == shape.numel(), usage,
             "input_from_u8: " + pixels.shape().str() + " u8 pixels for a " + shape.str() + " input");
  const DeviceGuard guard(device());
  UNET_CUDA_CHECK(ck::launch_input_from_u8(pixels.data_as<std::uint8_t>(), x.data(), elem(x.dtype()),
                                           dims_of(x), scale, native(s)),
                  device());
}

std::size_t CudaBackend::loss_workspace_bytes(const LossDesc& d, const ActShape& logits) {
  return ck::loss_scratch_bytes(loss_params(d), dims_of(logits, Layout::nhwc));
}

void CudaBackend::loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                       Tensor* dlogits, LossGradScales grad_scales, Tensor& loss_sums, Workspace ws) {
  const ActShape shape = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == shape.n * shape.h * shape.w, usage,
             "loss: targets must be u8 [n, h, w] for logits " + shape.str());
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
                      targets.data_as<std::uint8_t>(), dlogits ? dlogits->data() : nullptr,
                      grad_scales.cross_entropy, grad_scales.dice,
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
