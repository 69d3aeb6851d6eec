// A backend that forwards every call to a real one, and on chosen training steps turns the loss gradient into
// NaN: every weight gradient of that step is then NaN, as after an fp16 overflow. For testing what training
// does with non-finite gradients on machines without fp16.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "unet/backend/backend.h"

namespace unet::test {

class FaultInjectingBackend final : public Backend {
 public:
  // `poisoned`: 1-based numbers of the loss calls that compute a gradient (a training micro-batch) whose
  // gradient becomes NaN.
  FaultInjectingBackend(std::unique_ptr<Backend> inner, std::set<std::int64_t> poisoned)
      : inner_(std::move(inner)), poisoned_(std::move(poisoned)) {}

  std::int64_t training_losses() const noexcept { return training_losses_; }

  const DeviceInfo& info() const override { return posed_info_ ? *posed_info_ : inner_->info(); }
  Allocator& allocator() override { return inner_->allocator(); }
  std::unique_ptr<Stream> create_stream() override { return inner_->create_stream(); }
  std::unique_ptr<Event> create_event() override { return inner_->create_event(); }
  bool supports(DType compute) const override { return inner_->supports(compute); }
  Layout preferred_layout() const override { return inner_->preferred_layout(); }
  DeviceSample sample_device() const override {
    return posed_sample_ ? posed_sample_() : inner_->sample_device();
  }
  // Reports `info` and `sample` instead of the real device's: a CPU posing as a GPU to code that only reads
  // what a device says of itself (the runtime-overhead measurement).
  void pose_as(DeviceInfo info, std::function<DeviceSample()> sample) {
    posed_info_ = std::move(info);
    posed_sample_ = std::move(sample);
  }
  std::size_t resident_bytes() const override {
    return resident_bytes_ ? resident_bytes_ : inner_->resident_bytes();
  }
  // Claims this many resident bytes instead of the real backend's (which a CPU backend has none of).
  void set_resident_bytes(std::size_t bytes) { resident_bytes_ = bytes; }

  std::size_t conv_workspace_bytes(const ConvDesc& d, ConvPass pass) override {
    return inner_->conv_workspace_bytes(d, pass);
  }
  void conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, Workspace ws) override {
    inner_->conv_forward(s, d, x, w, b, y, ws);
  }
  void conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w, Tensor& dx,
                          Workspace ws) override {
    inner_->conv_backward_data(s, d, dz, w, dx, ws);
  }
  void conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz, Tensor& dw,
                             Tensor* db, bool accumulate, Workspace ws) override {
    inner_->conv_backward_weights(s, d, x, dz, dw, db, accumulate, ws);
  }
  std::size_t upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) override {
    return inner_->upconv_workspace_bytes(d, pass);
  }
  void upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                      Tensor& y, Workspace ws) override {
    inner_->upconv_forward(s, d, x, w, b, y, ws);
  }
  void upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx,
                            Workspace ws) override {
    inner_->upconv_backward_data(s, d, dy, w, dx, ws);
  }
  void upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor& db, bool accumulate, Workspace ws) override {
    inner_->upconv_backward_weights(s, d, x, dy, dw, db, accumulate, ws);
  }
  void relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) override {
    inner_->relu_backward(s, y, dy, dz);
  }
  std::size_t maxpool_saved_bytes(const PoolDesc& d) override { return inner_->maxpool_saved_bytes(d); }
  std::size_t maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) override {
    return inner_->maxpool_workspace_bytes(d, pass);
  }
  void maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                       Workspace ws) override {
    inner_->maxpool_forward(s, d, x, y, saved, ws);
  }
  void maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor& x, const Tensor& y,
                        const void* saved, Tensor& dx, bool accumulate, Workspace ws) override {
    inner_->maxpool_backward(s, d, dy, x, y, saved, dx, accumulate, ws);
  }
  void concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) override {
    inner_->concat_channels(s, a, b, out);
  }
  void split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) override {
    inner_->split_channels(s, dout, da, db, accumulate_b);
  }
  void input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) override {
    inner_->input_from_pixels(s, pixels, x, scale);
  }
  std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) override {
    return inner_->loss_workspace_bytes(d, logits);
  }
  void loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
            const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales, Tensor& loss_sums,
            Workspace ws) override {
    inner_->loss(s, d, logits, targets, pixel_weights, dlogits, grad_scales, loss_sums, ws);
    if (dlogits && poisoned_.contains(++training_losses_))
      inner_->fill(s, *dlogits, std::numeric_limits<double>::quiet_NaN());
  }
  void segmentation_counts(Stream& s, const Tensor& logits, const Tensor& targets, Tensor& counts,
                           int ignore_index) override {
    inner_->segmentation_counts(s, logits, targets, counts, ignore_index);
  }
  void probabilities(Stream& s, const Tensor& logits, Tensor& probs) override {
    inner_->probabilities(s, logits, probs);
  }
  void fill(Stream& s, Tensor& t, double value) override { inner_->fill(s, t, value); }
  void scale(Stream& s, Tensor& t, float factor) override { inner_->scale(s, t, factor); }
  void add(Stream& s, const Tensor& x, Tensor& y) override { inner_->add(s, x, y); }
  void adam_step(Stream& s, const AdamStep& step, Tensor& params, const Tensor& grads, Tensor& m,
                 Tensor& v) override {
    inner_->adam_step(s, step, params, grads, m, v);
  }
  void sgd_step(Stream& s, const SgdStep& step, Tensor& params, const Tensor& grads,
                Tensor& momentum) override {
    inner_->sgd_step(s, step, params, grads, momentum);
  }
  void sum_of_squares(Stream& s, const Tensor& t, Tensor& sum) override { inner_->sum_of_squares(s, t, sum); }
  void count_non_finite(Stream& s, const Tensor& t, Tensor& count) override {
    inner_->count_non_finite(s, t, count);
  }
  void copy_from_host(Stream& s, const void* host, Tensor& dst) override {
    inner_->copy_from_host(s, host, dst);
  }
  void copy_to_host(Stream& s, const Tensor& src, void* host) override { inner_->copy_to_host(s, src, host); }
  void copy(Stream& s, const Tensor& src, Tensor& dst) override { inner_->copy(s, src, dst); }

 private:
  std::unique_ptr<Backend> inner_;
  std::set<std::int64_t> poisoned_;
  std::int64_t training_losses_ = 0;
  std::size_t resident_bytes_ = 0;
  std::optional<DeviceInfo> posed_info_;
  std::function<DeviceSample()> posed_sample_;
};

}  // namespace unet::test
