// One GPU as a Backend: cuDNN's legacy convolution API for the convolutions, the backend's own kernels
// (kernels.h) for everything else. Host code (g++); docs/CUDA_BACKEND.md §2 is the design it follows.
#pragma once

#include <cudnn.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "unet/backend/backend.h"
#include "unet/backend/cuda/conv_rules.h"
#include "unet/backend/cuda/cuda_allocator.h"
#include "unet/backend/cuda/cuda_raii.h"
#include "unet/backend/devices.h"

namespace unet::cuda {

// A convolution as cuDNN runs it, in its own terms: input X [n, c, h, w] -> output Y [n, k, h', w'], filter
// [k, c/groups, r, s] (conv_rules.h's ConvShape). A transposed convolution is the matching stride-2
// convolution run backwards. In bf16/f16 NHWC the descriptors have the padded channel counts (c_pad, k_pad);
// the backend pads and unpads around each call, so nothing outside the backend sees the padding.
struct ConvPlan {
  std::string what;  // the op and its shape, for errors
  ConvShape shape;
  DType dtype = DType::f32;  // of the activations and the packed filter
  TensorDescriptor x, y;     // as cuDNN runs the convolution (padded channels)
  FilterDescriptor w;        // [k_pad, filter_c_pad, r, s] in the compute type
  ConvolutionDescriptor conv;
  // The bias gradient, cudnnConvolutionBackwardBias: the real (unpadded) tensor whose channel sums it is
  // (the conv's dY, the upconv's dY = X here) and db [1, bias_channels, 1, 1] in the compute type.
  TensorDescriptor bias_source, bias;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // asked of the heuristics (cuda.tf32, the precision)
  // By cuDNN pass (ConvPass order: forward, backward data, backward filter), chosen when first needed.
  std::array<std::optional<AlgoChoice>, 3> passes;
};

class CudaBackend final : public Backend {
 public:
  // `sample` reads the device through NVML (thread-safe, no CUDA context): the module supplies it.
  CudaBackend(DeviceInfo info, const BackendOptions& options, std::function<DeviceSample()> sample);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const DeviceInfo& info() const override { return info_; }
  Allocator& allocator() override { return *allocator_; }
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  bool supports(DType compute) const override;
  Layout preferred_layout() const override { return Layout::nhwc; }
  DeviceSample sample_device() const override;
  std::size_t resident_bytes() const override;

  std::size_t conv_workspace_bytes(const ConvDesc& d, ConvPass pass) override;
  void conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, Workspace ws) override;
  void conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w, Tensor& dx,
                          Workspace ws) override;
  void conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz, Tensor& dw,
                             Tensor* db, bool accumulate, Workspace ws) override;

  std::size_t upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) override;
  void upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                      Tensor& y, Workspace ws) override;
  void upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx,
                            Workspace ws) override;
  void upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor& db, bool accumulate, Workspace ws) override;

  void relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) override;

  std::size_t maxpool_saved_bytes(const PoolDesc& d) override;
  std::size_t maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) override;
  void maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                       Workspace ws) override;
  void maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor& x, const Tensor& y,
                        const void* saved, Tensor& dx, bool accumulate, Workspace ws) override;

  void concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) override;
  void split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) override;

  void input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) override;
  std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) override;
  void loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
            const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales, Tensor& loss_sums,
            Workspace ws) override;
  void segmentation_counts(Stream& s, const Tensor& logits, const Tensor& targets, Tensor& counts,
                           int ignore_index) override;
  void probabilities(Stream& s, const Tensor& logits, Tensor& probs) override;

  void fill(Stream& s, Tensor& t, double value) override;
  void scale(Stream& s, Tensor& t, float factor) override;
  void add(Stream& s, const Tensor& x, Tensor& y) override;
  void adam_step(Stream& s, const AdamStep& step, Tensor& params, const Tensor& grads, Tensor& m,
                 Tensor& v) override;
  void sgd_step(Stream& s, const SgdStep& step, Tensor& params, const Tensor& grads,
                Tensor& momentum) override;
  void sum_of_squares(Stream& s, const Tensor& t, Tensor& sum) override;
  void count_non_finite(Stream& s, const Tensor& t, Tensor& count) override;

  void copy_from_host(Stream& s, const void* host, Tensor& dst) override;
  void copy_to_host(Stream& s, const Tensor& src, void* host) override;
  void copy(Stream& s, const Tensor& src, Tensor& dst) override;

  // For the communicators, which queue their work on a replica's own stream.
  int device() const noexcept { return info_.index; }
  const CudaOptions& options() const noexcept { return options_; }
  // The CUDA stream behind a stream of this backend; throws Error(usage) for any other stream.
  cudaStream_t native(Stream& s) const;

 private:
  // The cuDNN handle, bound to the stream (cudnnSetStream only when it changed).
  cudnnHandle_t cudnn_on(cudaStream_t stream);
  ConvPlan& plan(const ConvDesc& d);
  ConvPlan& plan(const UpConvDesc& d);
  // The descriptors of a plan for `shape` (each dimension checked against cuDNN's 32-bit limits).
  // `transposed`: the matching stride-2 convolution of an upconv, whose bias gradient sums X.
  ConvPlan make_plan(const ConvShape& shape, std::string what, DType dtype, Layout layout, int kernel,
                     bool transposed, bool depthwise, std::int64_t x_h, std::int64_t x_w, std::int64_t y_h,
                     std::int64_t y_w);
  // The algorithms of one cuDNN pass, chosen the first time the pass is needed.
  AlgoChoice& algorithms(ConvPlan& p, ConvPass cudnn_pass);
  // Where the pass's pieces lie in the caller's workspace (chooses the pass's algorithms).
  WorkspaceLayout layout(ConvPlan& p, ConvPass cudnn_pass);
  // Runs cuDNN's pass with fallback over its algorithms: forward (first = X, second = packed W) -> Y,
  // backward data (first = dY, second = packed W) -> dX, backward filter (first = X, second = dY) -> dW.
  void run_cudnn(ConvPlan& p, ConvPass cudnn_pass, cudaStream_t stream, const void* first, const void* second,
                 void* out, const WorkspaceLayout& l, char* ws);
  // db (+)= the channel sums of `source` (the plan's bias_source), by cuDNN.
  void bias_gradient(ConvPlan& p, cudaStream_t stream, const void* source, float* db, bool accumulate,
                     const WorkspaceLayout& l, char* ws);
  void pack(const ConvPlan& p, const Tensor& w, void* packed, cudaStream_t stream);
  void unpack(const ConvPlan& p, const void* packed, Tensor& dw, bool accumulate, cudaStream_t stream);

  DeviceInfo info_;
  CudaOptions options_;
  std::int64_t cap_bytes_ = 0;
  int compute_capability_ = 0;  // major * 10 + minor
  std::function<DeviceSample()> sample_;
  std::unique_ptr<CudaAllocator> allocator_;
  CudnnHandle cudnn_;
  cudaStream_t cudnn_stream_ = nullptr;
  // Scratch for reductions and flags, allocated once: no operation allocates. Its size depends on the GPU
  // (CUB's temporary storage), found at construction.
  std::size_t squares_temp_bytes_ = 0, count_temp_bytes_ = 0;
  std::size_t scratch_bytes_ = 0;
  Buffer scratch_;
  std::map<ConvDesc, ConvPlan> conv_plans_;
  std::map<UpConvDesc, ConvPlan> upconv_plans_;
};

}  // namespace unet::cuda
