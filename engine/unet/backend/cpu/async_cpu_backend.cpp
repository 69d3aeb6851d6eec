#include "unet/backend/cpu/async_cpu_backend.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>

#include "unet/core/error.h"

namespace unet {

struct AsyncCpuBackend::Streams {
  std::mutex mutex;
  std::vector<TaskStream*> live;

  void drain_all() noexcept {
    std::lock_guard lock(mutex);
    for (TaskStream* s : live) s->drain();
  }
};

// A task stream with the CPU backend's own (immediate) stream, which the queued operations run on.
class AsyncCpuBackend::AsyncStream final : public TaskStream {
 public:
  AsyncStream(std::string name, std::unique_ptr<Stream> inner, std::shared_ptr<Streams> streams)
      : TaskStream(std::move(name)), inner_(std::move(inner)), streams_(std::move(streams)) {
    std::lock_guard lock(streams_->mutex);
    streams_->live.push_back(this);
  }
  ~AsyncStream() override {
    {
      std::lock_guard lock(streams_->mutex);
      std::erase(streams_->live, this);
    }
    // The queued operations use inner_, which goes before the base class stops the thread.
    drain();
  }
  AsyncStream(const AsyncStream&) = delete;
  AsyncStream& operator=(const AsyncStream&) = delete;

  Stream& inner() noexcept { return *inner_; }

 private:
  std::unique_ptr<Stream> inner_;
  std::shared_ptr<Streams> streams_;
};

AsyncCpuBackend::AsyncCpuBackend(const CpuBackendOptions& options)
    : inner_(options), info_(inner_.info()), streams_(std::make_shared<Streams>()) {
  info_.name += " (asynchronous streams)";
  // As cudaFree waits for the device, memory goes back to the system only once queued work is done with it.
  dynamic_cast<HostAllocator&>(inner_.allocator()).set_release_fence([streams = streams_] {
    streams->drain_all();
  });
}

AsyncCpuBackend::~AsyncCpuBackend() {
  dynamic_cast<HostAllocator&>(inner_.allocator()).set_release_fence({});
}

std::unique_ptr<Stream> AsyncCpuBackend::create_stream() {
  std::size_t n = 0;
  {
    std::lock_guard lock(streams_->mutex);
    n = streams_->live.size();
  }
  return std::make_unique<AsyncStream>(info_.id + " stream " + std::to_string(n), inner_.create_stream(),
                                       streams_);
}

std::unique_ptr<Event> AsyncCpuBackend::create_event() {
  return std::make_unique<TaskEvent>();
}

template <class Op>
void AsyncCpuBackend::queue(Stream& s, Op&& op) {
  auto* stream = dynamic_cast<AsyncStream*>(&s);
  UNET_CHECK(stream != nullptr, usage, info_.id + ": an operation names a stream of another backend");
  stream->enqueue([stream, op = std::forward<Op>(op)]() mutable {
    op(stream->inner());
    stream->inner().synchronize();
  });
}

namespace {

// What a queued operation holds of a tensor argument: its memory, not a share in it (see Tensor::unowned).
std::optional<Tensor> unowned_or_none(const Tensor* t) {
  return t ? std::optional<Tensor>(t->unowned()) : std::nullopt;
}

}  // namespace

void AsyncCpuBackend::conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w,
                                   const Tensor* b, Tensor& y, Workspace ws) {
  queue(s, [this, d, x = x.unowned(), w = w.unowned(), b = unowned_or_none(b), y = y.unowned(),
            ws](Stream& in) mutable { inner_.conv_forward(in, d, x, w, b ? &*b : nullptr, y, ws); });
}

void AsyncCpuBackend::conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w,
                                         Tensor& dx, Workspace ws) {
  queue(s, [this, d, dz = dz.unowned(), w = w.unowned(), dx = dx.unowned(), ws](Stream& in) mutable {
    inner_.conv_backward_data(in, d, dz, w, dx, ws);
  });
}

void AsyncCpuBackend::conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz,
                                            Tensor& dw, Tensor* db, bool accumulate, Workspace ws) {
  queue(s, [this, d, x = x.unowned(), dz = dz.unowned(), dw = dw.unowned(), db = unowned_or_none(db),
            accumulate, ws](Stream& in) mutable {
    inner_.conv_backward_weights(in, d, x, dz, dw, db ? &*db : nullptr, accumulate, ws);
  });
}

void AsyncCpuBackend::upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w,
                                     const Tensor& b, Tensor& y, Workspace ws) {
  queue(s, [this, d, x = x.unowned(), w = w.unowned(), b = b.unowned(), y = y.unowned(),
            ws](Stream& in) mutable { inner_.upconv_forward(in, d, x, w, b, y, ws); });
}

void AsyncCpuBackend::upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w,
                                           Tensor& dx, Workspace ws) {
  queue(s, [this, d, dy = dy.unowned(), w = w.unowned(), dx = dx.unowned(), ws](Stream& in) mutable {
    inner_.upconv_backward_data(in, d, dy, w, dx, ws);
  });
}

void AsyncCpuBackend::upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x,
                                              const Tensor& dy, Tensor& dw, Tensor& db, bool accumulate,
                                              Workspace ws) {
  queue(s,
        [this, d, x = x.unowned(), dy = dy.unowned(), dw = dw.unowned(), db = db.unowned(), accumulate,
         ws](Stream& in) mutable { inner_.upconv_backward_weights(in, d, x, dy, dw, db, accumulate, ws); });
}

void AsyncCpuBackend::relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) {
  queue(s, [this, y = y.unowned(), dy = dy.unowned(), dz = dz.unowned()](Stream& in) mutable {
    inner_.relu_backward(in, y, dy, dz);
  });
}

void AsyncCpuBackend::maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                                      Workspace ws) {
  queue(s, [this, d, x = x.unowned(), y = y.unowned(), saved, ws](Stream& in) mutable {
    inner_.maxpool_forward(in, d, x, y, saved, ws);
  });
}

void AsyncCpuBackend::maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor& x,
                                       const Tensor& y, const void* saved, Tensor& dx, bool accumulate,
                                       Workspace ws) {
  queue(s,
        [this, d, dy = dy.unowned(), x = x.unowned(), y = y.unowned(), saved, dx = dx.unowned(), accumulate,
         ws](Stream& in) mutable { inner_.maxpool_backward(in, d, dy, x, y, saved, dx, accumulate, ws); });
}

void AsyncCpuBackend::concat_channels(Stream& s, const Tensor& a, const Tensor& b, Tensor& out) {
  queue(s, [this, a = a.unowned(), b = b.unowned(), out = out.unowned()](Stream& in) mutable {
    inner_.concat_channels(in, a, b, out);
  });
}

void AsyncCpuBackend::split_channels(Stream& s, const Tensor& dout, Tensor& da, Tensor& db,
                                     bool accumulate_b) {
  queue(s, [this, dout = dout.unowned(), da = da.unowned(), db = db.unowned(),
            accumulate_b](Stream& in) mutable { inner_.split_channels(in, dout, da, db, accumulate_b); });
}

void AsyncCpuBackend::input_from_pixels(Stream& s, const Tensor& pixels, Tensor& x, float scale) {
  queue(s, [this, pixels = pixels.unowned(), x = x.unowned(), scale](Stream& in) mutable {
    inner_.input_from_pixels(in, pixels, x, scale);
  });
}

void AsyncCpuBackend::loss(Stream& s, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                           const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales,
                           Tensor& loss_sums, Workspace ws) {
  queue(s, [this, d, logits = logits.unowned(), targets = targets.unowned(),
            pixel_weights = unowned_or_none(pixel_weights), dlogits = unowned_or_none(dlogits), grad_scales,
            loss_sums = loss_sums.unowned(), ws](Stream& in) mutable {
    inner_.loss(in, d, logits, targets, pixel_weights ? &*pixel_weights : nullptr,
                dlogits ? &*dlogits : nullptr, grad_scales, loss_sums, ws);
  });
}

void AsyncCpuBackend::segmentation_counts(Stream& s, const Tensor& logits, const Tensor& targets,
                                          Tensor& counts, int ignore_index) {
  queue(s, [this, logits = logits.unowned(), targets = targets.unowned(), counts = counts.unowned(),
            ignore_index](Stream& in) mutable {
    inner_.segmentation_counts(in, logits, targets, counts, ignore_index);
  });
}

void AsyncCpuBackend::probabilities(Stream& s, const Tensor& logits, Tensor& probs) {
  queue(s, [this, logits = logits.unowned(), probs = probs.unowned()](Stream& in) mutable {
    inner_.probabilities(in, logits, probs);
  });
}

void AsyncCpuBackend::fill(Stream& s, Tensor& t, double value) {
  queue(s, [this, t = t.unowned(), value](Stream& in) mutable { inner_.fill(in, t, value); });
}

void AsyncCpuBackend::scale(Stream& s, Tensor& t, float factor) {
  queue(s, [this, t = t.unowned(), factor](Stream& in) mutable { inner_.scale(in, t, factor); });
}

void AsyncCpuBackend::add(Stream& s, const Tensor& x, Tensor& y) {
  queue(s, [this, x = x.unowned(), y = y.unowned()](Stream& in) mutable { inner_.add(in, x, y); });
}

void AsyncCpuBackend::adam_step(Stream& s, const AdamStep& step, Tensor& params, const Tensor& grads,
                                Tensor& m, Tensor& v) {
  queue(s, [this, step, params = params.unowned(), grads = grads.unowned(), m = m.unowned(),
            v = v.unowned()](Stream& in) mutable { inner_.adam_step(in, step, params, grads, m, v); });
}

void AsyncCpuBackend::sgd_step(Stream& s, const SgdStep& step, Tensor& params, const Tensor& grads,
                               Tensor& momentum) {
  queue(s, [this, step, params = params.unowned(), grads = grads.unowned(), momentum = momentum.unowned()](
               Stream& in) mutable { inner_.sgd_step(in, step, params, grads, momentum); });
}

void AsyncCpuBackend::sum_of_squares(Stream& s, const Tensor& t, Tensor& sum) {
  queue(s, [this, t = t.unowned(), sum = sum.unowned()](Stream& in) mutable {
    inner_.sum_of_squares(in, t, sum);
  });
}

void AsyncCpuBackend::count_non_finite(Stream& s, const Tensor& t, Tensor& count) {
  queue(s, [this, t = t.unowned(), count = count.unowned()](Stream& in) mutable {
    inner_.count_non_finite(in, t, count);
  });
}

void AsyncCpuBackend::copy_from_host(Stream& s, const void* host, Tensor& dst) {
  // The host's bytes are taken now, as cudaMemcpyAsync stages pageable memory before it returns (the GPU
  // backend copies from the engine's ordinary host vectors): the caller may reuse them at once.
  const auto* bytes = static_cast<const std::byte*>(host);
  auto staged = std::make_shared<const std::vector<std::byte>>(bytes, bytes + dst.bytes());
  queue(s, [this, staged, dst = dst.unowned()](Stream& in) mutable {
    inner_.copy_from_host(in, staged->data(), dst);
  });
}

void AsyncCpuBackend::copy_to_host(Stream& s, const Tensor& src, void* host) {
  queue(s, [this, src = src.unowned(), host](Stream& in) mutable { inner_.copy_to_host(in, src, host); });
}

void AsyncCpuBackend::copy(Stream& s, const Tensor& src, Tensor& dst) {
  queue(s,
        [this, src = src.unowned(), dst = dst.unowned()](Stream& in) mutable { inner_.copy(in, src, dst); });
}

}  // namespace unet
