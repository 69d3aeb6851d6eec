// A device that computes nothing. Every operation returns at once; memory comes from a CountingAllocator that
// hands out addresses without touching memory; workspace and saved-state sizes are asked of a real backend of
// the same kind (the "oracle": oneDNN's primitive descriptors on a CPU, cuDNN's queries on a GPU). Running
// the real training step against it allocates exactly what the real run would: that is the memory planner.
//
// The one rule for code that runs on it: never read tensor memory on the host side of the backend boundary.
#pragma once

#include <memory>

#include "unet/backend/backend.h"

namespace unet {

class PlanningBackend final : public Backend {
 public:
  // `oracle` answers size queries only; `info` is the device being planned for, `capacity` its bytes (or a
  // cap).
  PlanningBackend(std::unique_ptr<Backend> oracle, DeviceInfo info, std::int64_t cap_bytes);

  const DeviceInfo& info() const override { return info_; }
  Allocator& allocator() override { return allocator_; }
  std::unique_ptr<Stream> create_stream() override;
  bool supports(DType compute) const override { return oracle_->supports(compute); }
  Layout preferred_layout() const override { return oracle_->preferred_layout(); }
  std::unique_ptr<Event> create_event() override;
  std::size_t resident_bytes() const override { return oracle_->resident_bytes(); }
  DeviceSample sample_device() const override {
    return {.total_bytes = info_.total_bytes, .free_bytes = info_.free_bytes};
  }

  std::size_t conv_workspace_bytes(const ConvDesc& d, ConvPass pass) override {
    return oracle_->conv_workspace_bytes(d, pass);
  }
  void conv_forward(Stream&, const ConvDesc&, const Tensor&, const Tensor&, const Tensor*, Tensor&,
                    Workspace) override {}
  void conv_backward_data(Stream&, const ConvDesc&, const Tensor&, const Tensor&, Tensor&,
                          Workspace) override {}
  void conv_backward_weights(Stream&, const ConvDesc&, const Tensor&, const Tensor&, Tensor&, Tensor*, bool,
                             Workspace) override {}

  std::size_t upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) override {
    return oracle_->upconv_workspace_bytes(d, pass);
  }
  void upconv_forward(Stream&, const UpConvDesc&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                      Workspace) override {}
  void upconv_backward_data(Stream&, const UpConvDesc&, const Tensor&, const Tensor&, Tensor&,
                            Workspace) override {}
  void upconv_backward_weights(Stream&, const UpConvDesc&, const Tensor&, const Tensor&, Tensor&, Tensor&,
                               bool, Workspace) override {}

  void relu_backward(Stream&, const Tensor&, const Tensor&, Tensor&) override {}

  std::size_t maxpool_saved_bytes(const PoolDesc& d) override { return oracle_->maxpool_saved_bytes(d); }
  std::size_t maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) override {
    return oracle_->maxpool_workspace_bytes(d, pass);
  }
  void maxpool_forward(Stream&, const PoolDesc&, const Tensor&, Tensor&, void*, Workspace) override {}
  void maxpool_backward(Stream&, const PoolDesc&, const Tensor&, const Tensor&, const Tensor&, const void*,
                        Tensor&, bool, Workspace) override {}

  void concat_channels(Stream&, const Tensor&, const Tensor&, Tensor&) override {}
  void split_channels(Stream&, const Tensor&, Tensor&, Tensor&, bool) override {}

  void input_from_pixels(Stream&, const Tensor&, Tensor&, float) override {}
  std::size_t loss_workspace_bytes(const LossDesc& d, const ActShape& logits) override {
    return oracle_->loss_workspace_bytes(d, logits);
  }
  void loss(Stream&, const LossDesc&, const Tensor&, const Tensor&, const Tensor*, Tensor*, LossGradScales,
            Tensor&, Workspace) override {}
  void segmentation_counts(Stream&, const Tensor&, const Tensor&, Tensor&, int) override {}
  void probabilities(Stream&, const Tensor&, Tensor&) override {}

  void fill(Stream&, Tensor&, double) override {}
  void scale(Stream&, Tensor&, float) override {}
  void add(Stream&, const Tensor&, Tensor&) override {}
  void adam_step(Stream&, const AdamStep&, Tensor&, const Tensor&, Tensor&, Tensor&) override {}
  void sgd_step(Stream&, const SgdStep&, Tensor&, const Tensor&, Tensor&) override {}
  void sum_of_squares(Stream&, const Tensor&, Tensor&) override {}
  void count_non_finite(Stream&, const Tensor&, Tensor&) override {}

  // Host memory is real: reads of the device give zeros.
  void copy_from_host(Stream&, const void*, Tensor&) override {}
  void copy_to_host(Stream&, const Tensor& src, void* host) override;
  void copy(Stream&, const Tensor&, Tensor&) override {}

 private:
  std::unique_ptr<Backend> oracle_;
  DeviceInfo info_;
  CountingAllocator allocator_;
  Buffer resident_;  // as much as the real backend holds for its life (resident_bytes)
};

}  // namespace unet
