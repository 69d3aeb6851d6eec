#include "unet/train/data_parallel.h"

#include <algorithm>
#include <cmath>

#include "unet/core/parallel.h"
#include "unet/train/worker.h"

namespace unet {

std::int64_t StepBatches::samples() const {
  std::int64_t n = 0;
  for (const auto& per_replica : micro)
    for (const HostBatch& b : per_replica) n += b.count;
  return n;
}

struct DataParallel::Replica {
  // Declaration order is destruction order reversed: the worker thread stops first, the backend goes last.
  int rank = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  ExecContext ctx;
  std::unique_ptr<UNet> model;
  std::unique_ptr<Optimizer> optimizer;
  Tensor loss_sum;    // f64 [1]
  Tensor non_finite;  // i64 [1]
  Tensor squares;     // f64 [1]: the gradients' sum of squares
  Worker worker;

  Replica(int r, std::unique_ptr<Backend> b, const DataParallelOptions& o)
      : rank(r),
        backend(std::move(b)),
        stream(backend->create_stream()),
        ctx{*backend, *stream, o.compute, o.layout},
        worker("replica-" + std::to_string(r)) {}

  Tensor upload(const std::vector<std::uint8_t>& host, const Shape& shape) {
    Tensor t = Tensor::empty(backend->allocator(), shape, DType::u8, MemoryCategory::input_batch);
    backend->copy_from_host(*stream, host.data(), t);
    return t;
  }
};

DataParallel::DataParallel(const DataParallelOptions& options) : options_(options) {
  const int r = static_cast<int>(options.devices.size());
  UNET_CHECK(r >= 1, usage, "data parallel training needs at least one device");
  int cpu_replicas = 0;
  for (const DeviceId& d : options.devices) cpu_replicas += d.kind == DeviceKind::cpu ? 1 : 0;
  // CPU replicas share the machine's cores.
  const int cpu_threads = cpu_replicas > 0 ? std::max(1, hardware_threads() / cpu_replicas) : 0;
  for (int i = 0; i < r; ++i) {
    const DeviceId& id = options.devices[static_cast<std::size_t>(i)];
    const auto at = static_cast<std::size_t>(i);
    const BackendOptions bo{
        .cpu_threads = cpu_threads,
        .cap_bytes = options.cap_bytes,
        .reserve_bytes = at < options.reserve_bytes.size() ? options.reserve_bytes[at] : 0,
        .cuda = options.cuda};
    auto backend = options.make_backend ? options.make_backend(id, bo) : create_backend(id, bo);
    if (!backend->supports(options.compute))
      throw Error(ErrorKind::unsupported,
                  std::string(to_string(options.compute)) + " compute is not supported on this device",
                  id.str(),
                  options.compute == DType::bf16 ? "mixed-bf16 on a CPU needs AVX512-BF16 or AMX; use fp32"
                                                 : "use fp32");
    replicas_.push_back(std::make_unique<Replica>(i, std::move(backend), options));
  }
  std::vector<Backend*> ranks;
  ranks.reserve(replicas_.size());
  for (const auto& rep : replicas_) ranks.push_back(rep->backend.get());
  communicator_ = options.make_communicator ? options.make_communicator(ranks) : create_communicator(ranks);
  // Model, optimizer and buffers are allocated by each replica's own thread.
  on_all([&](Replica& rep) {
    rep.model = std::make_unique<UNet>(options_.spec, rep.backend->allocator());
    rep.model->set_checkpointing(options_.checkpointing);
    rep.optimizer = std::make_unique<Optimizer>(rep.ctx, *rep.model, options_.optimizer);
    rep.loss_sum = Tensor::empty(rep.backend->allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    rep.non_finite = Tensor::empty(rep.backend->allocator(), Shape{1}, DType::i64, MemoryCategory::other);
    rep.squares = Tensor::empty(rep.backend->allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    rep.backend->fill(*rep.stream, rep.model->gradient_slab(), 0.0);
    rep.stream->synchronize();
  });
}

DataParallel::~DataParallel() = default;

template <class Fn>
void DataParallel::on_all(Fn&& fn) {
  for (auto& rep : replicas_) {
    Replica* p = rep.get();
    rep->worker.post([&fn, p, this] {
      try {
        fn(*p);
      } catch (...) {
        // Outside the step protocol a failed rank would leave the others waiting in the communicator.
        if (communicator_) communicator_->abort("replica " + std::to_string(p->rank) + " failed");
        throw;
      }
    });
  }
  std::exception_ptr first;
  for (auto& rep : replicas_)
    if (auto e = rep->worker.wait(); e && !first) first = e;
  if (first) std::rethrow_exception(first);
}

template <class Fn>
void DataParallel::on_rank(int rank, Fn&& fn) {
  Replica& rep = *replicas_.at(static_cast<std::size_t>(rank));
  rep.worker.post([&fn, &rep] { fn(rep); });
  if (auto e = rep.worker.wait()) std::rethrow_exception(e);
}

Backend& DataParallel::backend(int rank) {
  return *replicas_.at(static_cast<std::size_t>(rank))->backend;
}
UNet& DataParallel::model(int rank) {
  return *replicas_.at(static_cast<std::size_t>(rank))->model;
}
Optimizer& DataParallel::optimizer(int rank) {
  return *replicas_.at(static_cast<std::size_t>(rank))->optimizer;
}

void DataParallel::set_parameters(const std::vector<float>& slab) {
  on_all([&](Replica& rep) { rep.model->set_parameters(rep.ctx, slab); });
}

void DataParallel::set_optimizer_state(const std::vector<std::vector<float>>& state, std::int64_t steps) {
  on_all([&](Replica& rep) {
    const std::vector<Tensor*> tensors = rep.optimizer->state();
    UNET_CHECK(state.size() == tensors.size(), usage,
               "optimizer state of " + std::to_string(state.size()) + " tensors; the optimizer has " +
                   std::to_string(tensors.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      UNET_CHECK(static_cast<std::int64_t>(state[i].size()) == rep.model->slab_elements(), usage,
                 "optimizer state of the wrong size");
      rep.backend->copy_from_host(*rep.stream, state[i].data(), *tensors[i]);
    }
    rep.optimizer->set_steps_taken(steps);
    rep.stream->synchronize();
  });
}

StepOutcome DataParallel::compute_gradients(const StepBatches& step, float loss_scale) {
  std::int64_t pixels = 0;
  for (const auto& per_replica : step.micro) {
    UNET_CHECK(per_replica.size() == replicas_.size(), usage,
               "a micro-batch must have one share per replica");
    for (const HostBatch& b : per_replica) pixels += b.count * b.height * b.width;
  }
  UNET_CHECK(pixels > 0, usage, "a training step needs at least one sample");
  // The mean loss over all the step's pixels: every replica scales its per-pixel gradients by 1 / pixels
  // (which is docs/MODEL.md's b_r / B weighting of each replica's own mean), times the loss scale.
  const float grad_scale = loss_scale / static_cast<float>(pixels);

  std::vector<double> local_loss(replicas_.size(), 0.0);
  std::vector<std::exception_ptr> local_error(replicas_.size());
  bool all_ok = true;
  double total_loss = 0, squared_norm = 0;
  std::int64_t non_finite = 0;
  on_all([&](Replica& rep) {
    const auto r = static_cast<std::size_t>(rep.rank);
    Backend& be = *rep.backend;
    try {
      be.fill(*rep.stream, rep.loss_sum, 0.0);
      bool have_gradients = false;
      for (const auto& per_replica : step.micro) {
        const HostBatch& b = per_replica[r];
        if (b.count == 0) continue;
        const Tensor pixels_t = rep.upload(b.pixels, Shape{b.count, b.height, b.width, b.channels});
        const Tensor targets_t = rep.upload(b.masks, Shape{b.count, b.height, b.width});
        UNet::Pass pass = rep.model->forward(rep.ctx, pixels_t, true);
        Tensor dlogits = rep.ctx.activation(pass.logits.act());
        be.loss(*rep.stream, loss_kind(options_.spec), pass.logits, targets_t, &dlogits, grad_scale,
                rep.loss_sum);
        rep.model->backward(rep.ctx, pass, std::move(dlogits), have_gradients);
        have_gradients = true;
      }
      // A replica with no samples in this step still takes part in the sum, with zeros.
      if (!have_gradients) be.fill(*rep.stream, rep.model->gradient_slab(), 0.0);
      be.copy_to_host(*rep.stream, rep.loss_sum, &local_loss[r]);
      rep.stream->synchronize();
    } catch (...) {
      local_error[r] = std::current_exception();
    }
    // Every replica learns whether all succeeded; only then are gradients summed.
    double agreement[2] = {local_error[r] ? 1.0 : 0.0, local_error[r] ? 0.0 : local_loss[r]};
    communicator_->all_reduce_host(rep.rank, agreement);
    if (agreement[0] > 0) {
      if (rep.rank == 0) all_ok = false;
      return;
    }
    communicator_->all_reduce_sum(rep.rank, be, *rep.stream, rep.model->gradient_slab());
    // Every replica holds the same sum, so each counts the same inf/NaN values; they still share their counts
    // (each in its own slot), so that a replica whose sum went wrong cannot go unnoticed.
    be.count_non_finite(*rep.stream, rep.model->gradient_slab(), rep.non_finite);
    be.sum_of_squares(*rep.stream, rep.model->gradient_slab(), rep.squares);
    std::int64_t count = 0;
    double squares = 0;
    be.copy_to_host(*rep.stream, rep.non_finite, &count);
    be.copy_to_host(*rep.stream, rep.squares, &squares);
    rep.stream->synchronize();
    std::vector<double> counts(replicas_.size(), 0.0);
    counts[r] = static_cast<double>(count);
    communicator_->all_reduce_host(rep.rank, counts);
    if (rep.rank == 0) {
      total_loss = agreement[1];
      non_finite = static_cast<std::int64_t>(*std::max_element(counts.begin(), counts.end()));
      squared_norm = squares;
    }
  });

  StepOutcome outcome;
  outcome.ok = all_ok;
  outcome.pixels = pixels;
  outcome.loss_sum = total_loss;
  outcome.non_finite_gradients = non_finite;
  outcome.gradient_norm = std::sqrt(squared_norm) / static_cast<double>(loss_scale);
  for (std::size_t r = 0; r < local_error.size(); ++r)
    if (local_error[r]) {
      outcome.ok = false;
      outcome.error = local_error[r];
      outcome.failed_rank = static_cast<int>(r);
      break;
    }
  return outcome;
}

void DataParallel::apply_optimizer(const OptimizerStepValues& values) {
  on_all([&](Replica& rep) {
    rep.optimizer->step(rep.ctx, values);
    rep.stream->synchronize();
  });
}

std::int64_t DataParallel::non_finite_state() {
  std::int64_t total = 0;
  on_rank(0, [&](Replica& rep) {
    Backend& be = *rep.backend;
    std::vector<Tensor*> tensors = rep.optimizer->state();
    tensors.push_back(&rep.model->parameter_slab());
    for (const Tensor* t : tensors) {
      std::int64_t count = 0;
      be.count_non_finite(*rep.stream, *t, rep.non_finite);
      be.copy_to_host(*rep.stream, rep.non_finite, &count);
      rep.stream->synchronize();
      total += count;
    }
  });
  return total;
}

EvalOutcome DataParallel::evaluate(const std::vector<std::vector<HostBatch>>& batches) {
  UNET_CHECK(batches.size() == replicas_.size(), usage, "evaluate: one list of batches per replica");
  const std::int64_t counts_size = segmentation_counts_size(options_.spec.classes);
  std::vector<EvalOutcome> outcomes(replicas_.size());
  on_all([&](Replica& rep) {
    const auto r = static_cast<std::size_t>(rep.rank);
    Backend& be = *rep.backend;
    Tensor counts = Tensor::empty(be.allocator(), Shape{counts_size}, DType::i64, MemoryCategory::other);
    be.fill(*rep.stream, counts, 0.0);
    be.fill(*rep.stream, rep.loss_sum, 0.0);
    EvalOutcome& out = outcomes[r];
    for (const HostBatch& b : batches[r]) {
      if (b.count == 0) continue;
      const Tensor pixels_t = rep.upload(b.pixels, Shape{b.count, b.height, b.width, b.channels});
      const Tensor targets_t = rep.upload(b.masks, Shape{b.count, b.height, b.width});
      UNet::Pass pass = rep.model->forward(rep.ctx, pixels_t, false);
      be.loss(*rep.stream, loss_kind(options_.spec), pass.logits, targets_t, nullptr, 1.0f, rep.loss_sum);
      be.segmentation_counts(*rep.stream, pass.logits, targets_t, counts);
      out.pixels += b.count * b.height * b.width;
    }
    out.counts.resize(static_cast<std::size_t>(counts_size));
    be.copy_to_host(*rep.stream, counts, out.counts.data());
    be.copy_to_host(*rep.stream, rep.loss_sum, &out.loss_sum);
    rep.stream->synchronize();
  });
  EvalOutcome total;
  total.counts.assign(static_cast<std::size_t>(counts_size), 0);
  for (const EvalOutcome& o : outcomes) {
    total.loss_sum += o.loss_sum;
    total.pixels += o.pixels;
    for (std::size_t i = 0; i < o.counts.size(); ++i) total.counts[i] += o.counts[i];
  }
  return total;
}

std::vector<float> DataParallel::probabilities(const HostBatch& b) {
  std::vector<float> out;
  on_rank(0, [&](Replica& rep) {
    const Tensor pixels_t = rep.upload(b.pixels, Shape{b.count, b.height, b.width, b.channels});
    const UNet::Pass pass = rep.model->forward(rep.ctx, pixels_t, false);
    Tensor probs = Tensor::empty(rep.backend->allocator(), Shape{pass.logits.numel()}, DType::f32,
                                 MemoryCategory::other);
    rep.backend->probabilities(*rep.stream, pass.logits, probs);
    out.resize(static_cast<std::size_t>(probs.numel()));
    rep.backend->copy_to_host(*rep.stream, probs, out.data());
    rep.stream->synchronize();
  });
  return out;
}

std::vector<float> DataParallel::download(Replica& rep, const Tensor& t) {
  std::vector<float> host(static_cast<std::size_t>(t.numel()));
  rep.backend->copy_to_host(*rep.stream, t, host.data());
  rep.stream->synchronize();
  return host;
}

std::vector<float> DataParallel::download(int rank, const Tensor& (*pick)(Replica&)) {
  std::vector<float> host;
  on_rank(rank, [&](Replica& rep) { host = download(rep, pick(rep)); });
  return host;
}

std::vector<float> DataParallel::parameters(int rank) {
  return download(rank, [](Replica& rep) -> const Tensor& { return rep.model->parameter_slab(); });
}
std::vector<float> DataParallel::gradients(int rank) {
  return download(rank, [](Replica& rep) -> const Tensor& { return rep.model->gradient_slab(); });
}
std::vector<std::vector<float>> DataParallel::optimizer_state(int rank) {
  std::vector<std::vector<float>> state;
  on_rank(rank, [&](Replica& rep) {
    for (const Tensor* t : rep.optimizer->state()) state.push_back(download(rep, *t));
  });
  return state;
}

}  // namespace unet
