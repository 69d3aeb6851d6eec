// The CPU backend: oneDNN primitives (convolutions, deconvolution, pooling, ReLU backward, concatenation,
// reorders), created once per shape and cached, with the engine's own loops for what oneDNN lacks (losses,
// metrics, Adam, channel split). oneDNN here is Debian 12's 2.6 (the v2 "op desc -> primitive desc" API).
//
// Weights stay f32 in their canonical layouts; oneDNN's fast kernels want blocked weight layouts, so each
// call reorders them into the workspace (a pass over the weights, small beside the convolution), and
// gradients are reordered back, added to the canonical gradients by the reorder itself when accumulating.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "unet/backend/backend.h"

namespace unet {

struct CpuBackendOptions {
  int index = 0;                   // cpu:<index>
  int threads = 0;                 // 0: every hardware thread
  std::int64_t cap_bytes = 0;      // 0: no cap
  std::int64_t reserve_bytes = 0;  // reserved up front (memory.growth false); 0: none
};

DeviceInfo cpu_device_info(int index, int threads);
// True when this CPU runs bf16 convolutions natively (AVX512-BF16 or AMX).
bool cpu_has_native_bf16();

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options);
  ~CpuBackend() override;

  const DeviceInfo& info() const override { return info_; }
  Allocator& allocator() override { return allocator_; }
  std::unique_ptr<Stream> create_stream() override;
  bool supports(DType compute) const override;
  Layout preferred_layout() const override { return Layout::nhwc; }
  std::unique_ptr<Event> create_event() override;
  DeviceSample sample_device() const override;
  int threads() const noexcept { return threads_; }

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

 private:
  struct Impl;  // oneDNN objects stay out of this header
  struct ThreadsGuard;

  DeviceInfo info_;
  int threads_;
  HostAllocator allocator_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace unet
