#include "unet/backend/cuda/cuda_backend.h"

#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "unet/backend/cuda/kernels.h"
#include "unet/backend/cuda/loss_params.h"
#include "unet/core/error.h"

namespace unet::cuda {
namespace {

namespace ck = unet::cuda_kernels;

// The largest cuDNN workspace an algorithm may ask for; larger ones are passed over.
constexpr std::size_t kConvWorkspaceLimit = std::size_t{1} << 30;

// The backend's resident scratch: partial sums of the three reductions and the loss's bad-target flag, each
// in its own region so that a loss and a non-finite count may run on different streams at once.
constexpr std::size_t kLossPartialsOffset = 0;
constexpr std::size_t kCountPartialsOffset = ck::kReduceBlocks * sizeof(double);
constexpr std::size_t kBadTargetOffset =
    kCountPartialsOffset + ck::kReduceBlocks * sizeof(unsigned long long);
constexpr std::size_t kSquaresPartialsOffset = kBadTargetOffset + 256;
constexpr std::size_t kScratchBytes = kSquaresPartialsOffset + ck::kReduceBlocks * sizeof(double);

constexpr std::size_t align256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

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

// Where a pass's pieces lie in the caller's workspace: [packed filter or filter gradient][cuDNN's
// workspace][bias-gradient partials], each 256-byte aligned.
struct WorkspaceParts {
  void* packed = nullptr;
  void* algo = nullptr;
  std::size_t algo_bytes = 0;
};

WorkspaceParts split_workspace(Workspace ws, std::size_t packed_bytes, std::size_t algo_bytes,
                               std::size_t needed, const std::string& what) {
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             what + ": workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  char* base = static_cast<char*>(ws.data);
  WorkspaceParts parts;
  parts.packed = base;
  parts.algo = algo_bytes ? base + align256(packed_bytes) : nullptr;
  parts.algo_bytes = algo_bytes;
  return parts;
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
  void synchronize() override { UNET_CUDA_CHECK(cudaStreamSynchronize(stream_.get()), device_); }
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

 private:
  int device_;
  StreamHandle stream_;
};

// First heuristic result that ran, fits the workspace limit, is deterministic when asked and, for f32 without
// TF32, uses FMA math only.
template <class Perf>
const Perf* pick(const Perf* results, int count, bool deterministic, bool fma_only) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kConvWorkspaceLimit) continue;
    if (deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    if (fma_only && r.mathType != CUDNN_FMA_MATH) continue;
    return &r;
  }
  return nullptr;
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
  allocator_ = std::make_unique<CudaAllocator>(device(), options_.expandable_arena);
  allocator_->set_cap(cap_bytes_);
  // memory.growth false: the reservation comes before the backend's own scratch below.
  if (options.reserve_bytes > 0) allocator_->reserve(options.reserve_bytes);
  cudnn_ = make_cudnn(device());
  scratch_ = allocator_->allocate(kScratchBytes, MemoryCategory::other);
}

std::size_t CudaBackend::resident_bytes() const {
  return kScratchBytes;
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

void CudaBackend::choose_algorithms(ConvPlan& p, DType dtype) {
  const bool f32 = dtype == DType::f32;
  // f32: CUDNN_DEFAULT_MATH lets cuDNN use TF32 tensor cores on Ampere and newer, CUDNN_FMA_MATH forbids
  // them; f16/bf16: tensor cores.
  const cudnnMathType_t math =
      f32 ? (options_.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH) : CUDNN_TENSOR_OP_MATH;
  const bool fma_only = f32 && !options_.tf32;
  const bool det = options_.deterministic;
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), math), device());
  const cudnnHandle_t h = cudnn_.get();
  const auto none = [&](const char* pass) {
    return Error(ErrorKind::unsupported,
                 std::string("cuDNN offers no ") + (det ? "deterministic " : "") + pass +
                     " algorithm within " + format_bytes(static_cast<std::int64_t>(kConvWorkspaceLimit)) +
                     " of workspace for this convolution",
                 info_.id, det ? "set cuda.deterministic to false, or use another precision" : "");
  };
  int returned = 0;
  {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> r{};
    UNET_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(),
                                                            static_cast<int>(r.size()), &returned, r.data()),
                     device());
    const auto* best = pick(r.data(), returned, det, fma_only);
    if (!best) throw none("forward");
    p.fwd_algo = best->algo;
    p.fwd_math = best->mathType;
    p.fwd_bytes = best->memory;
  }
  {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> r{};
    UNET_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
                                                    static_cast<int>(r.size()), &returned, r.data()),
        device());
    const auto* best = pick(r.data(), returned, det, fma_only);
    if (!best) throw none("backward-data");
    p.bwd_data_algo = best->algo;
    p.bwd_data_math = best->mathType;
    p.bwd_data_bytes = best->memory;
  }
  {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> r{};
    UNET_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
                                                      static_cast<int>(r.size()), &returned, r.data()),
        device());
    const auto* best = pick(r.data(), returned, det, fma_only);
    if (!best) throw none("backward-filter");
    p.bwd_filter_algo = best->algo;
    p.bwd_filter_math = best->mathType;
    p.bwd_filter_bytes = best->memory;
  }
}

ConvPlan& CudaBackend::plan(const ConvDesc& d) {
  if (auto it = conv_plans_.find(d); it != conv_plans_.end()) return it->second;
  const cudnnDataType_t type = cudnn_type(d.dtype);
  const cudnnTensorFormat_t format = cudnn_format(d.layout);
  ConvPlan p;
  p.x = make_tensor_descriptor(device());
  p.y = make_tensor_descriptor(device());
  p.w = make_filter_descriptor(device());
  p.conv = make_convolution_descriptor(device());
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  UNET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x.get(), format, type, i(d.n), i(d.c_in), i(d.h), i(d.w)),
                   device());
  UNET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y.get(), format, type, i(d.n), i(d.c_out), i(d.h), i(d.w)),
                   device());
  p.k = d.c_out;
  p.c = d.depthwise ? 1 : d.c_in;
  p.rs = std::int64_t{d.kernel} * d.kernel;
  p.krsc = d.layout == Layout::nhwc;
  p.packed_bytes = static_cast<std::size_t>(p.k * p.c * p.rs) * dtype_size(d.dtype);
  p.bias_channels = d.bias ? d.c_out : 0;
  UNET_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w.get(), type, format, i(p.k), i(p.c), d.kernel, d.kernel),
                   device());
  const int pad = d.kernel / 2;
  UNET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv.get(), pad, pad, 1, 1, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   device());
  if (d.depthwise) UNET_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv.get(), i(d.c_in)), device());
  choose_algorithms(p, d.dtype);
  return conv_plans_.emplace(d, std::move(p)).first->second;
}

// The transposed convolution's matching convolution: X [n, c_out, 2h, 2w] -> Y [n, c_in, h, w], filter
// [c_in, c_out, 2, 2] (the canonical upconv weights, as they are), 2x2, stride 2, no padding.
ConvPlan& CudaBackend::plan(const UpConvDesc& d) {
  if (auto it = upconv_plans_.find(d); it != upconv_plans_.end()) return it->second;
  const cudnnDataType_t type = cudnn_type(d.dtype);
  const cudnnTensorFormat_t format = cudnn_format(d.layout);
  ConvPlan p;
  p.x = make_tensor_descriptor(device());
  p.y = make_tensor_descriptor(device());
  p.w = make_filter_descriptor(device());
  p.conv = make_convolution_descriptor(device());
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  UNET_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p.x.get(), format, type, i(d.n), i(d.c_out), i(2 * d.h), i(2 * d.w)),
      device());
  UNET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y.get(), format, type, i(d.n), i(d.c_in), i(d.h), i(d.w)),
                   device());
  p.k = d.c_in;
  p.c = d.c_out;
  p.rs = 4;
  p.krsc = d.layout == Layout::nhwc;
  p.packed_bytes = static_cast<std::size_t>(p.k * p.c * p.rs) * dtype_size(d.dtype);
  p.bias_channels = d.c_out;
  UNET_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w.get(), type, format, i(p.k), i(p.c), 2, 2), device());
  UNET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv.get(), 0, 0, 2, 2, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT),
                   device());
  choose_algorithms(p, d.dtype);
  return upconv_plans_.emplace(d, std::move(p)).first->second;
}

// `cudnn_pass` in cuDNN's terms: forward, backward data, backward filter of the plan's convolution.
std::size_t CudaBackend::workspace_bytes(const ConvPlan& p, ConvPass cudnn_pass) const {
  switch (cudnn_pass) {
    case ConvPass::forward:
      return align256(p.packed_bytes) + align256(p.fwd_bytes);
    case ConvPass::backward_data:
      return align256(p.packed_bytes) + align256(p.bwd_data_bytes);
    case ConvPass::backward_weights:
      // the filter gradient in the compute type, cuDNN's workspace, and room for a two-pass bias gradient's
      // partials (kReduceThreads floats per channel; the present one-pass kernel leaves it unused)
      return align256(p.packed_bytes) + align256(p.bwd_filter_bytes) +
             align256(static_cast<std::size_t>(p.bias_channels) * ck::kReduceThreads * sizeof(float));
  }
  return 0;
}

// --- convolution ------------------------------------------------------------------------------------------

std::size_t CudaBackend::conv_workspace_bytes(const ConvDesc& d, ConvPass pass) {
  const DeviceGuard guard(device());
  return workspace_bytes(plan(d), pass);
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
  const WorkspaceParts ws_parts =
      split_workspace(ws, p.packed_bytes, p.fwd_bytes, workspace_bytes(p, ConvPass::forward), describe(d));
  UNET_CUDA_CHECK(ck::launch_pack_weights(w.data_as<float>(), ws_parts.packed, elem(d.dtype), p.k, p.c, p.rs,
                                          p.krsc, stream),
                  device());
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.fwd_math), device());
  const float one = 1.0f, zero = 0.0f;
  UNET_CUDNN_CHECK(
      cudnnConvolutionForward(h, &one, p.x.get(), x.data(), p.w.get(), ws_parts.packed, p.conv.get(),
                              p.fwd_algo, ws_parts.algo, ws_parts.algo_bytes, &zero, p.y.get(), y.data()),
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
  const WorkspaceParts ws_parts = split_workspace(ws, p.packed_bytes, p.bwd_data_bytes,
                                                  workspace_bytes(p, ConvPass::backward_data), describe(d));
  UNET_CUDA_CHECK(ck::launch_pack_weights(w.data_as<float>(), ws_parts.packed, elem(d.dtype), p.k, p.c, p.rs,
                                          p.krsc, stream),
                  device());
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_data_math), device());
  const float one = 1.0f, zero = 0.0f;
  UNET_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, p.w.get(), ws_parts.packed, p.y.get(), dz.data(),
                                                p.conv.get(), p.bwd_data_algo, ws_parts.algo,
                                                ws_parts.algo_bytes, &zero, p.x.get(), dx.data()),
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
  const WorkspaceParts ws_parts = split_workspace(
      ws, p.packed_bytes, p.bwd_filter_bytes, workspace_bytes(p, ConvPass::backward_weights), describe(d));
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_filter_math), device());
  const float one = 1.0f, zero = 0.0f;
  UNET_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, p.x.get(), x.data(), p.y.get(), dz.data(),
                                                  p.conv.get(), p.bwd_filter_algo, ws_parts.algo,
                                                  ws_parts.algo_bytes, &zero, p.w.get(), ws_parts.packed),
                   device());
  UNET_CUDA_CHECK(ck::launch_unpack_weights(ws_parts.packed, elem(d.dtype), dw.data_as<float>(), p.k, p.c,
                                            p.rs, p.krsc, accumulate, stream),
                  device());
  if (db)
    UNET_CUDA_CHECK(
        ck::launch_bias_grad(dz.data(), elem(d.dtype), dims_of(dz), db->data_as<float>(), accumulate, stream),
        device());
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
  return workspace_bytes(plan(d), cudnn_pass_of_upconv(pass));
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
  const WorkspaceParts ws_parts = split_workspace(ws, p.packed_bytes, p.bwd_data_bytes,
                                                  workspace_bytes(p, ConvPass::backward_data), describe(d));
  UNET_CUDA_CHECK(ck::launch_pack_weights(w.data_as<float>(), ws_parts.packed, elem(d.dtype), p.k, p.c, p.rs,
                                          p.krsc, stream),
                  device());
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_data_math), device());
  const float one = 1.0f, zero = 0.0f;
  // y = the gradient of the matching convolution's input for an output gradient x
  UNET_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, p.w.get(), ws_parts.packed, p.y.get(), x.data(),
                                                p.conv.get(), p.bwd_data_algo, ws_parts.algo,
                                                ws_parts.algo_bytes, &zero, p.x.get(), y.data()),
                   device());
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
  const WorkspaceParts ws_parts =
      split_workspace(ws, p.packed_bytes, p.fwd_bytes, workspace_bytes(p, ConvPass::forward), describe(d));
  UNET_CUDA_CHECK(ck::launch_pack_weights(w.data_as<float>(), ws_parts.packed, elem(d.dtype), p.k, p.c, p.rs,
                                          p.krsc, stream),
                  device());
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.fwd_math), device());
  const float one = 1.0f, zero = 0.0f;
  UNET_CUDNN_CHECK(
      cudnnConvolutionForward(h, &one, p.x.get(), dy.data(), p.w.get(), ws_parts.packed, p.conv.get(),
                              p.fwd_algo, ws_parts.algo, ws_parts.algo_bytes, &zero, p.y.get(), dx.data()),
      device());
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
  const WorkspaceParts ws_parts = split_workspace(
      ws, p.packed_bytes, p.bwd_filter_bytes, workspace_bytes(p, ConvPass::backward_weights), describe(d));
  const cudnnHandle_t h = cudnn_on(stream);
  UNET_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_filter_math), device());
  const float one = 1.0f, zero = 0.0f;
  // the matching convolution's input is dy, its output gradient x
  UNET_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, p.x.get(), dy.data(), p.y.get(), x.data(),
                                                  p.conv.get(), p.bwd_filter_algo, ws_parts.algo,
                                                  ws_parts.algo_bytes, &zero, p.w.get(), ws_parts.packed),
                   device());
  UNET_CUDA_CHECK(ck::launch_unpack_weights(ws_parts.packed, elem(d.dtype), dw.data_as<float>(), p.k, p.c,
                                            p.rs, p.krsc, accumulate, stream),
                  device());
  UNET_CUDA_CHECK(
      ck::launch_bias_grad(dy.data(), elem(d.dtype), dims_of(dy), db.data_as<float>(), accumulate, stream),
      device());
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
  const kmath::LossParams params = loss_params(d);
  const std::size_t needed = ck::loss_scratch_bytes(params, dims_of(logits));
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             "loss: workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  const DeviceGuard guard(device());
  const cudaStream_t stream = native(s);
  char* scratch = static_cast<char*>(scratch_.data());
  int* bad_target = reinterpret_cast<int*>(scratch + kBadTargetOffset);
  const bool softmax = shape.c > 1;
  if (softmax) UNET_CUDA_CHECK(cudaMemsetAsync(bad_target, 0, sizeof(int), stream), device());
  UNET_CUDA_CHECK(
      ck::launch_loss(params, logits.data(), elem(logits.dtype()), dims_of(logits),
                      targets.data_as<std::uint8_t>(), dlogits ? dlogits->data() : nullptr,
                      grad_scales.cross_entropy, grad_scales.dice,
                      reinterpret_cast<double*>(scratch + kLossPartialsOffset), static_cast<double*>(ws.data),
                      loss_sums.data_as<double>(), bad_target, stream),
      device());
  if (!softmax) return;  // a binary target is 0 or not: never bad
  // The CPU backend throws on a class index past the model's classes; so must this one, which means waiting
  // for the kernel here.
  int bad = 0;
  UNET_CUDA_CHECK(cudaMemcpyAsync(&bad, bad_target, sizeof(int), cudaMemcpyDeviceToHost, stream), device());
  UNET_CUDA_CHECK(cudaStreamSynchronize(stream), device());
  if (bad)
    throw Error(ErrorKind::data,
                "a mask holds a class index >= model.classes (" + std::to_string(shape.c) + ")");
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
  auto* partials = reinterpret_cast<double*>(static_cast<char*>(scratch_.data()) + kSquaresPartialsOffset);
  UNET_CUDA_CHECK(
      ck::launch_sum_of_squares(t.data_as<float>(), t.numel(), partials, sum.data_as<double>(), native(s)),
      device());
}

void CudaBackend::count_non_finite(Stream& s, const Tensor& t, Tensor& count) {
  UNET_CHECK(count.dtype() == DType::i64 && count.numel() == 1, usage,
             "count_non_finite: count must be i64 [1]");
  const DeviceGuard guard(device());
  auto* partials =
      reinterpret_cast<unsigned long long*>(static_cast<char*>(scratch_.data()) + kCountPartialsOffset);
  UNET_CUDA_CHECK(ck::launch_count_non_finite(t.data(), elem(t.dtype()), t.numel(), partials,
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
