// The CPU backend with asynchronous streams: every operation is queued on its stream and runs later, in
// order, on that stream's own thread (TaskStream), as a GPU runs its streams; events record and wait as
// CUDA's do. It computes exactly what the CPU backend computes, so any test that passes on cpu:0 must pass
// here too, and one that fails here but not there has an ordering bug that a GPU would show: a host read
// without the synchronisation the Backend contract asks for, an event recorded before the work it should
// cover was queued, a stream that does not wait for another's results, memory reused while queued work still
// reads it.
//
// Chosen by UNET_CPU_STREAMS=async in the environment (create_backend), for tests and debugging: it is slower
// than the immediate CPU backend (a thread hand-off per operation) and has no use in training.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/task_stream.h"

namespace unet {

class AsyncCpuBackend final : public Backend {
 public:
  explicit AsyncCpuBackend(const CpuBackendOptions& options);
  ~AsyncCpuBackend() override;
  AsyncCpuBackend(const AsyncCpuBackend&) = delete;
  AsyncCpuBackend& operator=(const AsyncCpuBackend&) = delete;

  const DeviceInfo& info() const override { return info_; }
  Allocator& allocator() override { return inner_.allocator(); }
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  bool supports(DType compute) const override { return inner_.supports(compute); }
  Layout preferred_layout() const override { return inner_.preferred_layout(); }
  DeviceSample sample_device() const override { return inner_.sample_device(); }
  std::size_t resident_bytes() const override { return inner_.resident_bytes(); }

  std::size_t conv_workspace_bytes(const ConvDesc& d, ConvPass pass) override {
    return inner_.conv_workspace_bytes(d, pass);
  }
  void conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, Workspace ws) override;
  void conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w, Tensor& dx,
                          Workspace ws) override;
  void conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz, Tensor& dw,
                             Tensor* db, bool accumulate, Workspace ws) override;

  std::size_t upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) override {
    return inner_.upconv_workspace_bytes(d, pass);
  }
  void upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                      Tensor& y, Workspace ws) override;
  void upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx,
                            Workspace ws) override;
  void upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor& db, bool accumulate, Workspace ws) override;

  void relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) override;

  std::size_t maxpool_saved_bytes(const PoolDesc& d) override { return inner_.maxpool_saved_bytes(d); }
  std::size_t maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) override {
    return inner_.maxpool_workspace_bytes(d, pass);
  }
  void maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                       Workspace ws) override;
  void maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor& x, const Tensor& y,
                        const void* saved, Tensor& dx, bool accumulate, Workspace ws) override;

  void concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) override;
  void split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) override;

  void input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) override;
  std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) override {
    return inner_.loss_workspace_bytes(d, logits);
  }
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

  // Reads the host memory at once (a staged copy, as a GPU's copy from pageable memory): it may be reused
  // when the call returns.
  void copy_from_host(Stream& s, const void* host, Tensor& dst) override;
  // Writes the host memory when the copy runs: it holds the values only once the stream is synchronised.
  void copy_to_host(Stream& s, const Tensor& src, void* host) override;
  void copy(Stream& s, const Tensor& src, Tensor& dst) override;

 private:
  class AsyncStream;
  struct Streams;  // the backend's live streams, which its allocator waits for before freeing memory

  // Queues `op(inner stream)` on `s`, which must be one of this backend's streams.
  template <class Op>
  void queue(Stream& s, Op&& op);

  CpuBackend inner_;
  DeviceInfo info_;
  std::shared_ptr<Streams> streams_;
};

}  // namespace unet
