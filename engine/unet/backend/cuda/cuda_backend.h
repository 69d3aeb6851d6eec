// One GPU as a Backend: cuDNN's legacy convolution API for the convolutions, the backend's own kernels
// (kernels.h) for everything else. Host code (g++); docs/CUDA_BACKEND.md §2 is the design it follows.
#pragma once

#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>

#include "unet/backend/backend.h"
#include "unet/backend/cuda/cuda_allocator.h"
#include "unet/backend/cuda/cuda_raii.h"
#include "unet/backend/devices.h"

namespace unet::cuda {

// A convolution as cuDNN sees it, in its own terms: input X [n, c, h, w] -> output Y [n, k, h', w'], filter
// [k, c/groups, r, s]. A transposed convolution is the matching stride-2 convolution run backwards.
struct ConvPlan {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  std::int64_t k = 0, c = 0, rs = 0;  // filter extents, for packing
  bool krsc = true;                   // the packed filter's order (NHWC activations: KRSC)
  std::size_t packed_bytes = 0;       // the filter in the compute type
  std::int64_t bias_channels = 0;     // of the backend op's bias gradient
  // Algorithms and their workspace, chosen once per pass (cuDNN's forward, backward data, backward filter).
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
  std::size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
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

  void input_from_u8(Stream& s, const Tensor& pixels, Tensor& x, float scale) override;
  std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) override;
  void loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets, Tensor* dlogits,
            LossGradScales grad_scales, Tensor& loss_sums, Workspace ws) override;
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
  void choose_algorithms(ConvPlan& p, DType dtype);
  std::size_t workspace_bytes(const ConvPlan& p, ConvPass cudnn_pass) const;

  DeviceInfo info_;
  CudaOptions options_;
  std::int64_t cap_bytes_ = 0;
  int compute_capability_ = 0;  // major * 10 + minor
  std::function<DeviceSample()> sample_;
  std::unique_ptr<CudaAllocator> allocator_;
  CudnnHandle cudnn_;
  cudaStream_t cudnn_stream_ = nullptr;
  // Scratch for reductions and flags, allocated once: no operation allocates.
  Buffer scratch_;
  std::map<ConvDesc, ConvPlan> conv_plans_;
  std::map<UpConvDesc, ConvPlan> upconv_plans_;
};

}  // namespace unet::cuda
