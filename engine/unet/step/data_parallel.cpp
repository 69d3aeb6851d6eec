#include "unet/step/data_parallel.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "unet/core/parallel.h"
#include "unet/step/worker.h"

namespace unet {

void LossTotals::add(const LossTotals& o) {
  cross_entropy_sum += o.cross_entropy_sum;
  class_weight_sum += o.class_weight_sum;
  dice_sum += o.dice_sum;
  images += o.images;
  labelled_pixels += o.labelled_pixels;
}

double LossTotals::mean(const LossDesc& d) const {
  double value = 0;
  if (d.has_cross_entropy() && class_weight_sum > 0)
    value += d.cross_entropy_weight * cross_entropy_sum / class_weight_sum;
  if (d.has_dice() && images > 0) value += d.dice_weight * dice_sum / static_cast<double>(images);
  return value;
}

LossTotals loss_denominators(const LossDesc& d, int classes, const HostBatch& batch) {
  LossTotals t;
  t.images = batch.count;
  // Per mask value: binary masks weigh by foreground (non-zero) or background; a softmax mask value past
  // the classes is left to the backend, which refuses it.
  std::array<double, kMaxLossClasses> weight_of{};
  for (int v = 0; v < kMaxLossClasses; ++v) {
    const int cls = classes == 1 ? (v ? 1 : 0) : v;
    weight_of[static_cast<std::size_t>(v)] = cls < std::max(classes, 2) ? d.class_weight(cls) : 0.0;
  }
  std::array<std::int64_t, kMaxLossClasses> histogram{};
  for (std::uint8_t v : batch.masks) ++histogram[v];
  // With pixel weights, each mask value's pixels weigh the sum of their weights instead of their count (the
  // same number, exactly, when every weight is 1).
  std::array<double, kMaxLossClasses> pixel_weight_sum{};
  if (!batch.weights.empty()) {
    UNET_CHECK(batch.weights.size() == batch.masks.size(), usage,
               "loss: " + std::to_string(batch.weights.size()) + " pixel weights for " +
                   std::to_string(batch.masks.size()) + " mask pixels");
    for (std::size_t i = 0; i < batch.masks.size(); ++i) {
      const float w = batch.weights[i];
      if (!std::isfinite(w) || w < 0.0f)
        throw Error(ErrorKind::data, "a pixel weight must be finite and >= 0, got " + std::to_string(w) +
                                         " (pixel " + std::to_string(i) + " of a batch)");
      pixel_weight_sum[batch.masks[i]] += static_cast<double>(w);
    }
  }
  for (int v = 0; v < kMaxLossClasses; ++v) {
    if (v == d.ignore_index) continue;
    const auto at = static_cast<std::size_t>(v);
    const std::int64_t n = histogram[at];
    t.labelled_pixels += n;
    const double weighed = batch.weights.empty() ? static_cast<double>(n) : pixel_weight_sum[at];
    t.class_weight_sum += weighed * weight_of[at];
  }
  return t;
}

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
  Tensor loss_sums;   // f64 [kLossSums]
  Tensor non_finite;  // i64 [1]
  Tensor squares;     // f64 [1]: the gradients' sum of squares

  // Gradient buckets (DataParallelOptions::bucket_bytes): slab ranges from the slab's end, which backward
  // finishes first, each handed to the communication thread once backward has finished all its layers, in
  // bucket order on every replica (the communicator needs the same order of sums everywhere).
  struct Bucket {
    std::int64_t begin = 0, end = 0;
    int layers = 0, pending = 0;
    std::unique_ptr<Event> written;  // on `stream`: backward has queued the bucket's gradients
  };
  std::vector<Bucket> buckets;
  std::unordered_map<const Layer*, std::size_t> bucket_of;
  std::size_t next_bucket = 0;  // the next bucket to hand over
  std::unique_ptr<Stream> comm_stream;
  std::unique_ptr<Event> summed;  // on comm_stream: every bucket is summed
  Worker comm;

  Worker worker;

  Replica(int r, std::unique_ptr<Backend> b, const DataParallelOptions& o)
      : rank(r),
        backend(std::move(b)),
        stream(backend->create_stream()),
        ctx{*backend, *stream, o.compute, o.layout},
        comm("replica-" + std::to_string(r) + "-comm"),
        worker("replica-" + std::to_string(r)) {}

  // Buckets of at least `bytes` of whole layers, from the slab's end.
  void plan_buckets(std::int64_t bytes) {
    const auto& slabs = model->layer_slabs();
    for (auto it = slabs.rbegin(); it != slabs.rend(); ++it) {
      if (buckets.empty() || (buckets.back().end - buckets.back().begin) * 4 >= bytes) {
        buckets.push_back({.begin = it->begin,
                           .end = it->end,
                           .layers = 0,
                           .pending = 0,
                           .written = backend->create_event()});
      }
      Bucket& b = buckets.back();
      b.begin = it->begin;
      ++b.layers;
      bucket_of[it->layer] = buckets.size() - 1;
    }
    comm_stream = backend->create_stream();
    summed = backend->create_event();
  }

  template <class T>
  Tensor upload(const std::vector<T>& host, const Shape& shape) {
    constexpr DType dtype = std::is_same_v<T, float> ? DType::f32 : DType::u8;
    Tensor t = Tensor::empty(backend->allocator(), shape, dtype, MemoryCategory::input_batch);
    backend->copy_from_host(*stream, host.data(), t);
    return t;
  }

  // The batch's pixel weights f32 [n, h, w] for the loss: its own; ones when it has none and the run has
  // them (`run_has_weights`, DataParallelOptions::pixel_weights); nothing otherwise.
  std::optional<Tensor> upload_weights(const HostBatch& b, bool run_has_weights) {
    const Shape shape{b.count, b.height, b.width};
    if (!b.weights.empty()) {
      UNET_CHECK(static_cast<std::int64_t>(b.weights.size()) == shape.numel(), usage,
                 "a batch of " + shape.str() + " pixels with " + std::to_string(b.weights.size()) +
                     " pixel weights");
      return upload(b.weights, shape);
    }
    if (!run_has_weights) return std::nullopt;
    Tensor t = Tensor::empty(backend->allocator(), shape, DType::f32, MemoryCategory::input_batch);
    backend->fill(*stream, t, 1.0);
    return t;
  }
};

DataParallel::DataParallel(const DataParallelOptions& options) : options_(options) {
  const int r = static_cast<int>(options.devices.size());
  UNET_CHECK(r >= 1, usage, "data parallel training needs at least one device");
  int cpu_replicas = 0;
  for (const DeviceId& d : options.devices) cpu_replicas += d.kind == DeviceKind::cpu ? 1 : 0;
  // CPU replicas share the machine's cores, with those of other processes on it.
  const int sharing = std::max(cpu_replicas, options.cpu_replicas_on_host);
  const int cpu_threads = cpu_replicas > 0 ? std::max(1, hardware_threads() / sharing) : 0;
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
    rep.loss_sums =
        Tensor::empty(rep.backend->allocator(), Shape{kLossSums}, DType::f64, MemoryCategory::other);
    rep.non_finite = Tensor::empty(rep.backend->allocator(), Shape{1}, DType::i64, MemoryCategory::other);
    rep.squares = Tensor::empty(rep.backend->allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    rep.backend->fill(*rep.stream, rep.model->gradient_slab(), 0.0);
    if (options_.bucket_bytes > 0 && communicator_->size() > 1) rep.plan_buckets(options_.bucket_bytes);
    rep.stream->synchronize();
  });
}

DataParallel::~DataParallel() {
  // Work still queued on a replica's streams (a bucket's sum, on a GPU or an asynchronous CPU stream) uses
  // the communicator and the model, which go next: it finishes first, each replica on its own thread.
  for (auto& rep : replicas_) {
    Replica* p = rep.get();
    try {
      p->worker.post([p] {
        p->stream->synchronize();
        if (p->comm_stream) p->comm_stream->synchronize();
      });
    } catch (const std::exception& e) {
      log_noexcept("data parallel", e.what());
    }
  }
  for (auto& rep : replicas_) {
    if (std::exception_ptr e = rep->worker.wait()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& failure) {
        log_noexcept("data parallel", "replica " + std::to_string(rep->rank) +
                                          ": queued work failed at shutdown: " + failure.what());
      } catch (...) {
        log_noexcept("data parallel",
                     "replica " + std::to_string(rep->rank) + ": queued work failed at shutdown");
      }
    }
  }
}

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

namespace {

// What a replica that failed a step tells the others: its error's kind, so that every process of a run makes
// the same decision (out-of-memory recovery, or the end of the run).
double failure_code(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return 1.0 + static_cast<double>(e.kind());
  } catch (...) {
    return 1.0 + static_cast<double>(ErrorKind::backend);
  }
}

// The error a process reports for a replica of another process that failed; its own process reports the
// details.
std::exception_ptr remote_failure(double code, int rank) {
  const auto kind = static_cast<ErrorKind>(static_cast<int>(code) - 1);
  const std::string what = "replica " + std::to_string(rank) + " failed (" + to_string(kind) +
                           ") in another process; its output says why";
  if (kind == ErrorKind::out_of_memory)
    return std::make_exception_ptr(OutOfMemoryError(
        "replica " + std::to_string(rank), "ran out of memory in another process; its output says where", 0,
        MemoryCategory::other, MemoryStats{}));
  return std::make_exception_ptr(Error(kind, what));
}

// The step's denominators and pixels, as host values to sum across replicas.
constexpr std::size_t kStepTotals = 4;
std::array<double, kStepTotals> as_values(const LossTotals& t, std::int64_t pixels) {
  return {t.class_weight_sum, static_cast<double>(t.images), static_cast<double>(t.labelled_pixels),
          static_cast<double>(pixels)};
}

}  // namespace

StepOutcome DataParallel::compute_gradients(const StepBatches& step, float loss_scale) {
  for (const auto& per_replica : step.micro)
    UNET_CHECK(per_replica.size() == replicas_.size(), usage,
               "a micro-batch must have one share per replica");
  const LossDesc& desc = options_.loss;
  const auto world = static_cast<std::size_t>(communicator_->size());
  const auto first = static_cast<std::size_t>(communicator_->first_rank());

  std::vector<std::exception_ptr> local_error(replicas_.size());
  bool all_ok = true;
  bool no_samples = false;
  LossTotals totals;
  std::int64_t pixels = 0;
  double squared_norm = 0;
  std::int64_t non_finite = 0;
  int failed_rank = -1;
  std::exception_ptr failure;
  on_all([&](Replica& rep) {
    const auto r = static_cast<std::size_t>(rep.rank);
    Backend& be = *rep.backend;
    // The step's loss over all its labelled pixels and images: every replica scales its gradients by the
    // whole step's denominators (docs/MODEL.md's b_r / B weighting of each replica's own share), summed over
    // the replicas of every process first, times the loss scale.
    LossTotals mine;
    std::int64_t my_pixels = 0;
    for (const auto& per_replica : step.micro) {
      const HostBatch& b = per_replica[r];
      my_pixels += b.count * b.height * b.width;
      mine.add(loss_denominators(desc, options_.spec.classes, b));
    }
    std::array<double, kStepTotals> step_totals = as_values(mine, my_pixels);
    communicator_->all_reduce_host(rep.rank, step_totals);
    if (step_totals[3] <= 0) {
      if (rep.rank == 0) no_samples = true;
      return;
    }
    // A step whose pixels are all ignored has no cross-entropy gradient.
    LossGradScales grad_scales;
    if (desc.has_cross_entropy() && step_totals[0] > 0)
      grad_scales.cross_entropy =
          static_cast<float>(static_cast<double>(loss_scale) * desc.cross_entropy_weight / step_totals[0]);
    if (desc.has_dice())
      grad_scales.dice =
          static_cast<float>(static_cast<double>(loss_scale) * desc.dice_weight / step_totals[1]);

    std::array<double, kLossSums> loss_sums{};
    const bool bucketed = bucketing_ && !rep.buckets.empty();
    if (bucketed) {
      for (Replica::Bucket& bucket : rep.buckets) bucket.pending = bucket.layers;
      rep.next_bucket = 0;
    }
    try {
      be.fill(*rep.stream, rep.loss_sums, 0.0);
      bool have_gradients = false;
      for (std::size_t m = 0; m < step.micro.size(); ++m) {
        const HostBatch& b = step.micro[m][r];
        if (b.count == 0) continue;
        // The last micro-batch's backward finishes the gradients: their buckets are summed as it goes.
        if (bucketed && m + 1 == step.micro.size())
          rep.ctx.after_backward = [this, &rep](const Layer& layer) { layer_finished(rep, layer); };
        const Tensor pixels_t = rep.upload(b.pixels, Shape{b.count, b.height, b.width, b.channels});
        const Tensor targets_t = rep.upload(b.masks, Shape{b.count, b.height, b.width});
        const std::optional<Tensor> weights_t = rep.upload_weights(b, options_.pixel_weights);
        UNet::Pass pass = rep.model->forward(rep.ctx, pixels_t, true);
        Tensor dlogits = rep.ctx.activation(pass.logits.act());
        const Buffer scratch = rep.ctx.workspace(be.loss_workspace_bytes(desc, pass.logits.act()));
        be.loss(*rep.stream, desc, pass.logits, targets_t, weights_t ? &*weights_t : nullptr, &dlogits,
                grad_scales, rep.loss_sums, as_workspace(scratch));
        rep.model->backward(rep.ctx, pass, std::move(dlogits), have_gradients);
        rep.ctx.after_backward = {};
        have_gradients = true;
      }
      // A replica with no samples in this step still takes part in the sum, with zeros.
      if (!have_gradients) be.fill(*rep.stream, rep.model->gradient_slab(), 0.0);
      be.copy_to_host(*rep.stream, rep.loss_sums, loss_sums.data());
      rep.stream->synchronize();
    } catch (...) {
      rep.ctx.after_backward = {};
      local_error[r] = std::current_exception();
    }
    if (bucketed) {
      // Every bucket is summed on every replica, also one whose backward failed or never ran (its gradients
      // are then not used: the step is skipped), so that all replicas make the same sums in the same order.
      for (Replica::Bucket& bucket : rep.buckets) bucket.pending = 0;
      release_ready_buckets(rep);
      // The communication thread queues each bucket's sum on the comm stream; an event marks only what was
      // queued before it is recorded, so `summed` is recorded once that thread has queued the last one, and
      // nothing reads the gradients on the compute stream before the comm stream has summed them all.
      if (std::exception_ptr e = rep.comm.wait()) std::rethrow_exception(e);
      rep.comm_stream->record(*rep.summed);
      rep.stream->wait(*rep.summed);
    }
    // Every replica learns whether all succeeded (each failure in its replica's slot, as the kind of its
    // error); only then are gradients summed.
    std::vector<double> agreement(kLossSums + world, 0.0);
    if (local_error[r]) {
      agreement[kLossSums + first + r] = failure_code(local_error[r]);
    } else {
      agreement[loss_sum_cross_entropy] = loss_sums[loss_sum_cross_entropy];
      agreement[loss_sum_dice] = loss_sums[loss_sum_dice];
    }
    communicator_->all_reduce_host(rep.rank, agreement);
    if (rep.rank == 0) {
      totals.class_weight_sum = step_totals[0];
      totals.images = static_cast<std::int64_t>(step_totals[1]);
      totals.labelled_pixels = static_cast<std::int64_t>(step_totals[2]);
      pixels = static_cast<std::int64_t>(step_totals[3]);
      totals.cross_entropy_sum = agreement[loss_sum_cross_entropy];
      totals.dice_sum = agreement[loss_sum_dice];
    }
    for (std::size_t g = 0; g < world; ++g) {
      if (agreement[kLossSums + g] == 0) continue;
      if (rep.rank == 0) {
        all_ok = false;
        failed_rank = static_cast<int>(g);
        failure = g >= first && g < first + replicas_.size()
                      ? local_error[g - first]
                      : remote_failure(agreement[kLossSums + g], static_cast<int>(g));
      }
      return;
    }
    if (!bucketed) communicator_->all_reduce_sum(rep.rank, be, *rep.stream, rep.model->gradient_slab());
    // Every replica holds the same sum, so each counts the same inf/NaN values; they still share their counts
    // (each in its own slot), so that a replica whose sum went wrong cannot go unnoticed.
    be.count_non_finite(*rep.stream, rep.model->gradient_slab(), rep.non_finite);
    be.sum_of_squares(*rep.stream, rep.model->gradient_slab(), rep.squares);
    std::int64_t count = 0;
    double squares = 0;
    be.copy_to_host(*rep.stream, rep.non_finite, &count);
    be.copy_to_host(*rep.stream, rep.squares, &squares);
    rep.stream->synchronize();
    std::vector<double> counts(world, 0.0);
    counts[first + r] = static_cast<double>(count);
    communicator_->all_reduce_host(rep.rank, counts);
    if (rep.rank == 0) {
      non_finite = static_cast<std::int64_t>(*std::max_element(counts.begin(), counts.end()));
      squared_norm = squares;
    }
  });
  UNET_CHECK(!no_samples, usage, "a training step needs at least one sample");

  StepOutcome outcome;
  outcome.ok = all_ok;
  outcome.pixels = pixels;
  outcome.loss = totals;
  outcome.loss_value = totals.mean(desc);
  outcome.non_finite_gradients = non_finite;
  outcome.gradient_norm = std::sqrt(squared_norm) / static_cast<double>(loss_scale);
  outcome.error = failure;
  outcome.failed_rank = failed_rank;
  return outcome;
}

void DataParallel::layer_finished(Replica& rep, const Layer& layer) {
  const auto it = rep.bucket_of.find(&layer);
  if (it == rep.bucket_of.end()) return;  // no parameters
  --rep.buckets[it->second].pending;
  release_ready_buckets(rep);
}

void DataParallel::release_ready_buckets(Replica& rep) {
  while (rep.next_bucket < rep.buckets.size() && rep.buckets[rep.next_bucket].pending <= 0) {
    Replica::Bucket& bucket = rep.buckets[rep.next_bucket++];
    rep.stream->record(*bucket.written);
    rep.comm.enqueue([this, &rep, &bucket] {
      rep.comm_stream->wait(*bucket.written);
      Tensor range = Tensor::view(rep.model->gradient_slab().storage(),
                                  static_cast<std::size_t>(bucket.begin) * sizeof(float),
                                  Shape{bucket.end - bucket.begin}, DType::f32);
      communicator_->all_reduce_sum(rep.rank, *rep.backend, *rep.comm_stream, range);
    });
  }
}

double DataParallel::time_gradient_sum() {
  double seconds = 0;
  on_all([&](Replica& rep) {
    rep.stream->synchronize();
    double nothing = 0;
    communicator_->all_reduce_host(rep.rank, std::span(&nothing, 1));
    const auto started = std::chrono::steady_clock::now();
    communicator_->all_reduce_sum(rep.rank, *rep.backend, *rep.stream, rep.model->gradient_slab());
    rep.stream->synchronize();
    if (rep.rank == 0)
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  });
  return seconds;
}

bool DataParallel::any_replica(bool flag) {
  bool any = false;
  on_all([&](Replica& rep) {
    double value = flag ? 1.0 : 0.0;
    communicator_->all_reduce_host(rep.rank, std::span(&value, 1));
    if (rep.rank == 0) any = value > 0;
  });
  return any;
}

int DataParallel::world_replicas() const noexcept {
  return communicator_->size();
}
int DataParallel::first_replica() const noexcept {
  return communicator_->first_rank();
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
  const LossDesc& desc = options_.loss;
  EvalOutcome total;
  on_all([&](Replica& rep) {
    const auto r = static_cast<std::size_t>(rep.rank);
    Backend& be = *rep.backend;
    Tensor counts = Tensor::empty(be.allocator(), Shape{counts_size}, DType::i64, MemoryCategory::other);
    be.fill(*rep.stream, counts, 0.0);
    be.fill(*rep.stream, rep.loss_sums, 0.0);
    LossTotals loss;
    std::int64_t pixels = 0;
    for (const HostBatch& b : batches[r]) {
      if (b.count == 0) continue;
      const Tensor pixels_t = rep.upload(b.pixels, Shape{b.count, b.height, b.width, b.channels});
      const Tensor targets_t = rep.upload(b.masks, Shape{b.count, b.height, b.width});
      const std::optional<Tensor> weights_t = rep.upload_weights(b, options_.pixel_weights);
      UNet::Pass pass = rep.model->forward(rep.ctx, pixels_t, false);
      const Buffer scratch = rep.ctx.workspace(be.loss_workspace_bytes(desc, pass.logits.act()));
      be.loss(*rep.stream, desc, pass.logits, targets_t, weights_t ? &*weights_t : nullptr, nullptr, {},
              rep.loss_sums, as_workspace(scratch));
      be.segmentation_counts(*rep.stream, pass.logits, targets_t, counts, desc.ignore_index);
      pixels += b.count * b.height * b.width;
      loss.add(loss_denominators(desc, options_.spec.classes, b));
    }
    std::vector<std::int64_t> my_counts(static_cast<std::size_t>(counts_size));
    be.copy_to_host(*rep.stream, counts, my_counts.data());
    std::array<double, kLossSums> sums{};
    be.copy_to_host(*rep.stream, rep.loss_sums, sums.data());
    rep.stream->synchronize();
    // Summed over the replicas of every process: counts and pixel totals are whole numbers far below 2^53, so
    // doubles hold them exactly.
    std::vector<double> values = {sums[loss_sum_cross_entropy],
                                  sums[loss_sum_dice],
                                  loss.class_weight_sum,
                                  static_cast<double>(loss.images),
                                  static_cast<double>(loss.labelled_pixels),
                                  static_cast<double>(pixels)};
    for (std::int64_t c : my_counts) values.push_back(static_cast<double>(c));
    communicator_->all_reduce_host(rep.rank, values);
    if (rep.rank != 0) return;
    total.loss.cross_entropy_sum = values[0];
    total.loss.dice_sum = values[1];
    total.loss.class_weight_sum = values[2];
    total.loss.images = static_cast<std::int64_t>(values[3]);
    total.loss.labelled_pixels = static_cast<std::int64_t>(values[4]);
    total.pixels = static_cast<std::int64_t>(values[5]);
    for (std::size_t i = 6; i < values.size(); ++i)
      total.counts.push_back(static_cast<std::int64_t>(values[i]));
  });
  total.loss_value = total.loss.mean(desc);
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
