// The CUDA backend's convolutions through cuDNN: a plan per shape (descriptors, the heuristic's algorithms
// with their workspaces confirmed, the choice among them), the passes run with fallback from one algorithm
// to the next, the filter packing, and the transposed convolution as the matching convolution's passes.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/backend/cuda/cuda_backend.h"
#include "unet/backend/cuda/op_support.h"

namespace unet::cuda {
namespace {

// The largest cuDNN workspace an algorithm may ask for; larger ones are passed over.
constexpr std::size_t kConvWorkspaceLimit = std::size_t{1} << 30;

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

// Each pass's three cuDNN calls over a plan's descriptors, in the order that pass takes them: the heuristic's
// ranked list, an algorithm's workspace size, and the default algorithm (PyTorch's in deterministic mode).
struct ForwardApi {
  static constexpr const char* kRankedCall = "cudnnGetConvolutionForwardAlgorithm_v7";
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr Algo kDefault = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  static cudnnStatus_t ranked(cudnnHandle_t h, const ConvPlan& p, int n, int* returned, Perf* r) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(), n,
                                                  returned, r);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvPlan& p, Algo algo, std::size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x.get(), p.w.get(), p.conv.get(), p.y.get(), algo,
                                                   bytes);
  }
};
struct BackwardDataApi {
  static constexpr const char* kRankedCall = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr Algo kDefault = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  static cudnnStatus_t ranked(cudnnHandle_t h, const ConvPlan& p, int n, int* returned, Perf* r) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(), n,
                                                       returned, r);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvPlan& p, Algo algo, std::size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
                                                        algo, bytes);
  }
};
struct BackwardFilterApi {
  static constexpr const char* kRankedCall = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr Algo kDefault = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  static cudnnStatus_t ranked(cudnnHandle_t h, const ConvPlan& p, int n, int* returned, Perf* r) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(), n,
                                                         returned, r);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvPlan& p, Algo algo, std::size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
                                                          algo, bytes);
  }
};

// What cuDNN offers for one pass of plan `p`: the heuristic's ranked list and the pass's default algorithm,
// each with its workspace confirmed under its own math type (set on the plan's descriptor before the query).
struct Offer {
  std::vector<AlgoCandidate> offered;
  std::optional<AlgoCandidate> fallback;
};
template <class Api>
Offer offer(cudnnHandle_t h, const ConvPlan& p, int device) {
  std::array<typename Api::Perf, Api::kCount> r{};
  int returned = 0;
  if (const cudnnStatus_t status = Api::ranked(h, p, static_cast<int>(r.size()), &returned, r.data());
      status != CUDNN_STATUS_SUCCESS)
    throw_cudnn_error(status, Api::kRankedCall, device);
  const auto size_of = [&](typename Api::Algo algo, cudnnMathType_t math) -> std::optional<std::size_t> {
    std::size_t bytes = 0;
    if (cudnnSetConvolutionMathType(p.conv.get(), math) != CUDNN_STATUS_SUCCESS ||
        Api::workspace(h, p, algo, &bytes) != CUDNN_STATUS_SUCCESS)
      return std::nullopt;
    return bytes;
  };
  return {candidates_of(r.data(), returned, size_of), default_candidate(Api::kDefault, p.math, size_of)};
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
  Offer o;
  switch (cudnn_pass) {
    case ConvPass::forward:
      o = offer<ForwardApi>(h, p, device());
      break;
    case ConvPass::backward_data:
      o = offer<BackwardDataApi>(h, p, device());
      break;
    case ConvPass::backward_weights:
      o = offer<BackwardFilterApi>(h, p, device());
      break;
  }
  {
    // Refused workspace queries leave a message behind; they are not errors here: take it, so that a later
    // error does not report it.
    std::array<char, 512> stale{};
    cudnnGetLastErrorString(stale.data(), stale.size());
  }
  AlgoChoice choice(o.offered, o.fallback, rules);
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

}  // namespace unet::cuda
