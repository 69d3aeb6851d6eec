#include "unet/plan/memory_planner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "unet/backend/address_space.h"
#include "unet/backend/devices.h"
#include "unet/backend/planning_backend.h"
#include "unet/core/parallel.h"
#include "unet/data/synthetic.h"
#include "unet/model/unet.h"
#include "unet/plan/device_overhead.h"
#include "unet/plan/remedy_search.h"
#include "unet/step/step_options.h"

namespace unet {
namespace {

// Batches with shapes but no pixels: planning devices never read them.
//
// At most two micro-batches, whatever train.accumulation is: the first writes the gradients, the second adds
// to them, and every later one repeats the second exactly (the same shapes, the same allocations, served by
// the same cached blocks), so micro-batch k >= 2 peaks where micro-batch 2 does. Planning all of them would
// only make the planner's time and bookkeeping grow with accumulation.
StepBatches shaped_step(const Config& c, int replicas) {
  StepBatches step;
  const std::int64_t planned_micro_batches = std::min<std::int64_t>(c.train.accumulation, 2);
  for (std::int64_t j = 0; j < planned_micro_batches; ++j) {
    std::vector<HostBatch> shares;
    for (std::int64_t n : replica_split(c.train.batch_size, replicas))
      shares.push_back({n, c.data.input_height(), c.data.input_width(), c.model.in_channels, {}, {}, {}});
    step.micro.push_back(std::move(shares));
  }
  return step;
}

// The schedule both the planner and measure_memory() run: two training steps over every micro-batch with the
// optimizer, and a validation pass after the first.
void run_schedule(DataParallel& dp, const StepBatches& step,
                  const std::vector<std::vector<HostBatch>>& validation, float lr) {
  for (int round = 0; round < 2; ++round) {
    const StepOutcome out = dp.compute_gradients(step);
    if (!out.ok) std::rethrow_exception(out.error);
    dp.apply_optimizer({.lr = lr, .momentum = std::nullopt, .grad_scale = 1.0f});
    if (round == 0) dp.evaluate(validation);
  }
}

struct PlannedRun {
  std::vector<MemoryStats> stats;  // per device
  std::vector<DeviceInfo> info;
  bool completed = true;
};

}  // namespace

DataParallelOptions planned_step_options(const Config& c, bool capped) {
  DataParallelOptions o = step_options(c, c.devices);
  if (!capped) o.cap_bytes = 0;
  // Planning devices hold no memory to sum: the replicas only meet where a real sum would make them wait.
  o.make_communicator = [](std::span<Backend* const> ranks) -> std::unique_ptr<Communicator> {
    return std::make_unique<SharedMemoryCommunicator>(static_cast<int>(ranks.size()), false);
  };
  o.make_backend = [](const DeviceId& id, const BackendOptions& bo) -> std::unique_ptr<Backend> {
    std::unique_ptr<Backend> oracle =
        create_backend(id, {.cpu_threads = bo.cpu_threads, .cap_bytes = 0, .cuda = bo.cuda});
    DeviceInfo info = oracle->info();
    return std::make_unique<PlanningBackend>(std::move(oracle), std::move(info), bo.cap_bytes);
  };
  return o;
}

namespace {

PlannedRun run_planned(const Config& c, bool with_cap) {
  const DataParallelOptions o = planned_step_options(c, with_cap);
  PlannedRun run;
  std::unique_ptr<DataParallel> dp;
  auto record = [&] {
    if (!dp) return;
    run.stats.clear();
    run.info.clear();
    for (int r = 0; r < dp->replicas(); ++r) {
      run.stats.push_back(dp->backend(r).allocator().stats());
      run.info.push_back(dp->backend(r).info());
    }
  };
  try {
    dp = std::make_unique<DataParallel>(o);
    const StepBatches step = shaped_step(c, dp->replicas());
    std::vector<std::vector<HostBatch>> validation(static_cast<std::size_t>(dp->replicas()));
    const auto split = replica_split(c.train.batch_size, dp->replicas());
    for (int r = 0; r < dp->replicas(); ++r)
      validation[static_cast<std::size_t>(r)].push_back({split[static_cast<std::size_t>(r)],
                                                         c.data.input_height(),
                                                         c.data.input_width(),
                                                         c.model.in_channels,
                                                         {},
                                                         {},
                                                         {}});
    run_schedule(*dp, step, validation, static_cast<float>(c.train.lr));
    record();
  } catch (const OutOfMemoryError&) {
    if (!with_cap) throw;
    record();
    run.completed = false;
  }
  return run;
}

}  // namespace

std::vector<MemoryStats> measure_memory(const Config& c) {
  // Uncapped, as the planner's first run: what the run needs, not what a cap lets it keep cached.
  DataParallelOptions options = step_options(c, c.devices);
  options.cap_bytes = 0;
  DataParallel dp(options);
  dp.set_parameters(UNet::initial_slab(c.model, c.train.seed));
  const auto count = static_cast<std::size_t>(std::max<std::int64_t>(1, c.train.batch_size));
  // The run's kind of sample: task instances' samples carry their instance labels and target (weights).
  const SyntheticCells cells(
      {.count = count,
       .height = c.data.input_height(),
       .width = c.data.input_width(),
       .channels = c.model.in_channels,
       .classes = c.model.classes,
       .seed = c.data.seed,
       .instances = c.task == ModelTask::instances ? std::optional(c.instances) : std::nullopt});
  const auto split = replica_split(c.train.batch_size, dp.replicas());
  auto shares = [&] {
    std::vector<HostBatch> out(static_cast<std::size_t>(dp.replicas()));
    std::size_t next = 0;
    for (int r = 0; r < dp.replicas(); ++r) {
      std::vector<std::size_t> samples;
      for (std::int64_t k = 0; k < split[static_cast<std::size_t>(r)]; ++k) samples.push_back(next++);
      assemble_batch(cells, samples, std::vector<std::int64_t>(samples.size(), 0), 0, false, 0,
                     out[static_cast<std::size_t>(r)]);
    }
    return out;
  };
  StepBatches step;
  for (std::int64_t j = 0; j < c.train.accumulation; ++j) step.micro.push_back(shares());
  std::vector<std::vector<HostBatch>> validation;
  for (HostBatch& b : shares()) validation.push_back({std::move(b)});
  run_schedule(dp, step, validation, static_cast<float>(c.train.lr));
  std::vector<MemoryStats> stats;
  stats.reserve(static_cast<std::size_t>(dp.replicas()));
  for (int r = 0; r < dp.replicas(); ++r) stats.push_back(dp.backend(r).allocator().stats());
  return stats;
}

namespace {

// The measured overheads of the plan's GPUs (read once a plan: fit_batch plans many times).
class DeviceOverheads {
 public:
  DeviceOverheads(const Config& config, const std::vector<DeviceInfo>& devices)
      : precision_(config.precision) {
    for (const DeviceInfo& d : devices) gpus_ += d.kind == DeviceKind::cuda ? 1 : 0;
    if (gpus_ == 0) return;
    versions_ = list_devices().versions;
    cache_.emplace();
  }

  void apply(const DeviceInfo& device, bool capped, DevicePlan& d) const {
    if (device.kind != DeviceKind::cuda) {
      d.device_peak = d.peak_reserved;
      return;
    }
    const auto entry = cache_->find(overhead_key(device, versions_, precision_, gpus_));
    if (!entry) {
      d.overhead = d.device_peak = -1;
      return;
    }
    d.overhead = entry->bytes;
    d.overhead_measured = entry->measured;
    d.device_peak = d.peak_reserved + entry->bytes;
    // Without a cap the whole device is the limit, less what other processes hold now.
    if (!capped)
      d.fits = d.fits &&
               d.device_peak <= device.total_bytes - std::max<std::int64_t>(0, device.used_by_others_bytes);
  }

 private:
  Precision precision_;
  int gpus_ = 0;
  CudaVersions versions_;
  std::optional<OverheadCache> cache_;
};

}  // namespace

std::int64_t device_capacity(const DeviceInfo& device, std::int64_t cpu_replicas, std::int64_t cap_bytes) {
  const std::int64_t total = device.kind == DeviceKind::cpu && device.total_bytes > 0
                                 ? device.total_bytes / std::max<std::int64_t>(1, cpu_replicas)
                                 : device.total_bytes;
  // A cap is the capacity also where the device's bytes are unknown; without one, unknown stays unknown.
  return cap_bytes > 0 && (total <= 0 || cap_bytes < total) ? cap_bytes : total;
}

MemoryPlan plan_memory(const Config& config) {
  // Planning asks oneDNN for its primitives, whose generated code needs address space; where a limit leaves
  // less than that, oneDNN would die of the failed mapping, so the limit is reported here instead.
  if (const AddressSpace space = read_address_space();
      space.limited() && space.limit - space.mapped < kGeneratedCodeAllowance)
    throw Error(ErrorKind::out_of_memory,
                "out of memory: " + describe(space) + ", which leaves " +
                    format_bytes(std::max<std::int64_t>(0, space.limit - space.mapped)) +
                    " for the run; the engine's generated code alone needs about " +
                    format_bytes(kGeneratedCodeAllowance) + ", before any image or weight",
                {}, "raise the address-space limit (ulimit -v)");
  const auto started = std::chrono::steady_clock::now();
  MemoryPlan plan;
  const PlannedRun full = run_planned(config, false);
  const std::int64_t cap = config.memory.cap_bytes();
  // Under a cap the caching allocator gives cached blocks back before it fails: whether the run fits is
  // decided by running it under the cap too, exactly as the real allocator would behave.
  const bool capped_ok = cap == 0 || run_planned(config, true).completed;
  const auto split = replica_split(config.train.batch_size, static_cast<int>(full.stats.size()));
  const DeviceOverheads overheads(config, full.info);
  // CPU replicas are threads of one process on one host: without a cap, each has its share of the host's
  // memory, so that they fit together (each shown against the whole host, every one would look as if it
  // had it to itself).
  const auto cpu_replicas = std::count_if(full.info.begin(), full.info.end(),
                                          [](const DeviceInfo& i) { return i.kind == DeviceKind::cpu; });
  for (std::size_t r = 0; r < full.stats.size(); ++r) {
    const MemoryStats& s = full.stats[r];
    DevicePlan d;
    d.device = full.info[r].id;
    d.name = full.info[r].name;
    d.batch = split[r];
    d.capacity = device_capacity(full.info[r], cpu_replicas, cap);
    d.peak = s.peak_in_use;
    d.peak_reserved = s.peak_reserved;
    d.at_peak = s.at_peak_by;
    d.peak_by = s.peak_by;
    d.fits = d.peak <= d.capacity && capped_ok;
    overheads.apply(full.info[r], cap > 0, d);
    plan.fits = plan.fits && d.fits;
    plan.devices.push_back(std::move(d));
  }
  plan.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return plan;
}

bool fit_address_space_limit(MemoryPlan& plan, const Config& config, const AddressSpace& space) {
  if (!space.limited()) return false;
  const auto cpu_replicas = std::count_if(plan.devices.begin(), plan.devices.end(),
                                          [](const DevicePlan& d) { return d.device.starts_with("cpu"); });
  if (cpu_replicas == 0) return false;
  // The threads: the compute pool, one per replica, and the run's own (prefetcher, memory sampler,
  // checkpoint writer, the main thread's helpers).
  constexpr int kRunThreads = 4;
  const int threads = hardware_threads() + static_cast<int>(plan.devices.size()) + kRunThreads;
  // Beside the allocators: the checkpoint writer's copy of replica 0's weights and optimizer state, and the
  // prefetched batches of every replica.
  const auto in_use = [](const DevicePlan& d, MemoryCategory c) {
    return d.at_peak[static_cast<std::size_t>(c)];
  };
  std::int64_t beside = 0;
  for (std::size_t r = 0; r < plan.devices.size(); ++r) {
    const DevicePlan& d = plan.devices[r];
    if (r == 0) beside += in_use(d, MemoryCategory::parameters) + in_use(d, MemoryCategory::optimizer_state);
    beside += config.data.prefetch * in_use(d, MemoryCategory::input_batch);
  }
  const std::int64_t kept = address_space_allowance(space, threads) + beside;
  const std::int64_t left = std::max<std::int64_t>(0, space.limit - space.mapped - kept) / cpu_replicas;
  bool lowered = false;
  plan.fits = true;
  for (DevicePlan& d : plan.devices) {
    if (d.device.starts_with("cpu") && left < d.capacity) {
      d.capacity = left;
      d.capacity_note =
          "left" + (cpu_replicas > 1 ? " to each of " + std::to_string(cpu_replicas) + " CPU replicas" : "") +
          " under " + describe(space) + ", once " + format_bytes(kept) +
          " are kept for threads' stacks, generated code, the checkpoint copy and prefetched batches";
      d.fits = d.fits && d.peak_reserved <= d.capacity;
      lowered = true;
    }
    plan.fits = plan.fits && d.fits;
  }
  return lowered;
}

Config apply_changes(const Config& config, const nlohmann::json& changes) {
  nlohmann::json doc = config_to_json(config);
  for (const auto& [key, value] : changes.items()) apply_override(doc, key + "=" + value.dump());
  return config_from_json(doc, config.base_dir);
}

namespace {

std::int64_t worst_peak(const MemoryPlan& p) {
  std::int64_t worst = 0;
  for (const auto& d : p.devices) worst = std::max(worst, d.peak);
  return worst;
}

}  // namespace

std::vector<Remedy> rank_remedies(const Config& config, const MemoryPlan* planned_config,
                                  const PlanningProgress* progress_given) {
  const PlanningProgress progress = progress_given ? *progress_given : PlanningProgress{};
  struct Candidate {
    int rank;  // how intrusive: lower first among those that fit
    Remedy remedy;
  };
  std::vector<Candidate> candidates;
  auto add = [&](int rank, std::string name, std::string description, nlohmann::json changes, bool model) {
    candidates.push_back({rank, {std::move(name), std::move(description), std::move(changes), model, {}}});
  };

  const std::vector<DeviceId>& ids = config.devices;
  const bool all_cpu =
      std::all_of(ids.begin(), ids.end(), [](const DeviceId& d) { return d.kind == DeviceKind::cpu; });
  const auto all_support = [&](DType compute) {
    return std::all_of(ids.begin(), ids.end(),
                       [&](const DeviceId& d) { return device_supports(d, compute); });
  };

  if (config.precision == Precision::fp32) {
    if (all_support(DType::bf16))
      add(1, "mixed-bf16", "bfloat16 activations and compute, fp32 master weights",
          {{"precision", "mixed-bf16"}}, false);
    if (all_support(DType::f16))
      add(1, "mixed-fp16", "float16 activations and compute with dynamic loss scaling, fp32 master weights",
          {{"precision", "mixed-fp16"}}, false);
  }
  if (!config.memory.checkpointing)
    add(2, "activation checkpointing",
        "keep block boundaries only, recompute inside blocks in backward (slower)",
        {{"memory.checkpointing", true}}, false);
  // More devices: each holds a smaller share of the batch. CPU replicas share one host's memory, so they are
  // a remedy only when a cap makes each of them a device of its own size.
  if (!all_cpu || config.memory.cap_mib > 0) {
    std::vector<DeviceId> more = config.devices;
    more.push_back({ids.back().kind, ids.back().index + 1});
    if (!all_cpu) {
      // Only GPUs that exist (the device list tells).
      const DeviceListing listing = list_devices();
      const bool exists = std::any_of(listing.devices.begin(), listing.devices.end(),
                                      [&](const DeviceInfo& d) { return d.id == more.back().str(); });
      if (!exists) more.clear();
    }
    if (!more.empty())
      add(4, std::to_string(more.size()) + " devices", "spread the batch over " + more.back().str() + " too",
          {{"devices", device_names(more)}}, false);
  }
  if (!config.model.separable)
    add(6, "separable convolutions", "depthwise-separable 3x3 convolutions: a different, smaller model",
        {{"model.separable", true}}, true);
  if (config.model.width >= 2)
    add(7, "width " + std::to_string(config.model.width / 2),
        "half the channels at every level: a smaller model", {{"model.width", config.model.width / 2}}, true);

  std::vector<Candidate> planned;
  auto plan_candidate = [&](Candidate c) {
    progress.next("remedy: " + c.remedy.name);
    try {
      c.remedy.plan = plan_memory(apply_changes(config, c.remedy.changes));
      planned.push_back(std::move(c));
      return true;
    } catch (const Error&) {
      return false;  // a remedy this setup cannot run (an unsupported precision on a device) is not offered
    }
  };
  for (Candidate& c : candidates) plan_candidate(std::move(c));
  // The searched ones, offered only where they fit. A higher cap changes nothing of the run but what it may
  // hold: the least intrusive. A smaller image changes what the model sees, but not the model.
  const auto searched = [&](int rank, auto search) {
    try {
      if (std::optional<Remedy> r = search(config, progress)) planned.push_back({rank, std::move(*r)});
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::cancelled) throw;  // a config this setup cannot plan offers no such remedy
    }
  };
  searched(0, raise_cap_remedy);
  searched(5, smaller_image_remedy);

  // Gradient accumulation: the same effective batch in smaller micro-batches; the smallest factor that fits
  // (or the largest there is, when none does).
  auto accumulation = [&](std::int64_t k) {
    // A batch that k does not divide gets micro-batches of ceil(batch / k): the effective batch grows a
    // little.
    const std::int64_t micro = (config.train.batch_size + k - 1) / k;
    const std::int64_t effective = micro * config.train.accumulation * k;
    const std::int64_t was = config.train.batch_size * config.train.accumulation;
    return Candidate{3,
                     {"accumulation x" + std::to_string(k),
                      "micro-batch " + std::to_string(micro) + " with " +
                          std::to_string(config.train.accumulation * k) + " accumulation steps: " +
                          (effective == was ? std::string("the same effective batch")
                                            : "an effective batch of " + std::to_string(effective) +
                                                  " (was " + std::to_string(was) + ")"),
                      {{"train.batch_size", micro}, {"train.accumulation", config.train.accumulation * k}},
                      false,
                      {}}};
  };
  std::int64_t largest_k = 0;
  for (std::int64_t k = 2; (config.train.batch_size + k / 2 - 1) / (k / 2) > 1; k *= 2) largest_k = k;
  for (std::int64_t k = 2; k <= largest_k; k *= 2) {
    const bool planned_ok = plan_candidate(accumulation(k));
    if (planned_ok && (planned.back().remedy.plan.fits || k == largest_k)) break;  // keep this one
    if (planned_ok) planned.pop_back();                                            // a larger k may fit
  }

  // When nothing alone fits: everything that leaves the model as it is, together.
  const bool any_fits =
      std::any_of(planned.begin(), planned.end(), [](const Candidate& c) { return c.remedy.plan.fits; });
  if (!any_fits) {
    nlohmann::json all = nlohmann::json::object();
    std::string name;
    for (const Candidate& c : planned) {
      if (c.remedy.changes_model || c.remedy.name.starts_with("accumulation") ||
          c.remedy.changes.contains("devices"))
        continue;
      if (c.remedy.changes.contains("precision") && all.contains("precision")) continue;
      all.update(c.remedy.changes);
      name += (name.empty() ? "" : " + ") + c.remedy.name;
    }
    if (largest_k > 0) {
      all.update(accumulation(largest_k).remedy.changes);
      name += (name.empty() ? "" : " + ") + std::string("accumulation x") + std::to_string(largest_k);
    }
    // One remedy alone is not "all of these together": it is offered once, under its own name.
    const bool repeats_one = std::any_of(planned.begin(), planned.end(),
                                         [&](const Candidate& c) { return c.remedy.changes == all; });
    if (!name.empty() && !repeats_one) plan_candidate({0, {name, "all of these together", all, false, {}}});
  }
  // A remedy that does not fit must at least lower the peak by a step worth taking (1 %): one that raises it
  // or changes nothing (CPU replicas on a host without a cap, checkpointing a model whose activations are
  // already small) is no advice.
  if (!planned_config) progress.next("the settings");
  try {
    const std::int64_t now = worst_peak(planned_config ? *planned_config : plan_memory(config));
    std::erase_if(planned, [&](const Candidate& c) {
      return !c.remedy.plan.fits && worst_peak(c.remedy.plan) > now - now / 100;
    });
  } catch (const Error&) {
    // The config itself cannot be planned: every remedy that can is worth showing.
  }
  std::stable_sort(planned.begin(), planned.end(), [](const Candidate& a, const Candidate& b) {
    if (a.remedy.plan.fits != b.remedy.plan.fits) return a.remedy.plan.fits;
    if (a.remedy.plan.fits) return a.rank < b.rank;
    return worst_peak(a.remedy.plan) < worst_peak(b.remedy.plan);
  });
  std::vector<Remedy> out;
  out.reserve(planned.size());
  for (Candidate& c : planned) out.push_back(std::move(c.remedy));
  return out;
}

namespace {

// Attributes each activation block to the layer whose forward pass allocated it.
class LayerAttribution final : public AllocationObserver {
 public:
  void on_allocate(const void* ptr, std::size_t bytes, MemoryCategory category) override {
    if (category == MemoryCategory::activations)
      live_[ptr] = {static_cast<std::int64_t>(bytes), layers_.size()};
  }
  void on_release(const void* ptr) override { live_.erase(ptr); }
  // The layer that just finished owns what was allocated since the previous one finished (blocks allocated
  // meanwhile were given the index it now takes).
  void layer_done(const std::string& name) { layers_.push_back(name); }
  // Bytes alive now, by owning layer.
  std::vector<LayerMemory> alive() const {
    std::vector<LayerMemory> out;
    out.reserve(layers_.size());
    for (const std::string& name : layers_) out.push_back({name, 0});
    for (const auto& [ptr, block] : live_)
      if (block.owner < out.size()) out[block.owner].activation_bytes += block.bytes;
    return out;
  }

 private:
  struct Block {
    std::int64_t bytes;
    std::size_t owner;  // index into layers_: blocks allocated during layer k's forward get k
  };
  std::map<const void*, Block> live_;
  std::vector<std::string> layers_;
};

}  // namespace

LayerPlan plan_layers(const Config& config) {
  const DeviceId id = config.devices.front();
  // The oracle answers with the run's cuDNN choices (algorithms and workspaces follow cuda.tf32 and
  // cuda.deterministic), as run_planned's does.
  std::unique_ptr<Backend> oracle = create_backend(id, {.cuda = config.cuda});
  DeviceInfo info = oracle->info();
  PlanningBackend backend(std::move(oracle), info, 0);
  auto stream = backend.create_stream();
  ExecContext ctx{backend, *stream, compute_dtype(config.precision), Layout::nhwc};
  UNet model(config.model, backend.allocator());
  model.set_checkpointing(config.memory.checkpointing);
  const std::int64_t batch =
      replica_split(config.train.batch_size, static_cast<int>(config.devices.size()))[0];
  const auto act = static_cast<std::size_t>(MemoryCategory::activations);
  Allocator& alloc = backend.allocator();
  const Tensor pixels = Tensor::empty(
      alloc, Shape{batch, config.data.input_height(), config.data.input_width(), config.model.in_channels},
      DType::f32, MemoryCategory::input_batch);
  LayerAttribution attribution;
  alloc.set_observer(&attribution);
  ctx.after_layer = [&](const std::string& name) { attribution.layer_done(name); };
  alloc.reset_peak();
  const std::int64_t before = alloc.stats().in_use_by[act];
  LayerPlan plan;
  UNet::Pass pass = model.forward(ctx, pixels, true);
  ctx.after_layer = nullptr;
  alloc.set_observer(nullptr);
  plan.layers = attribution.alive();
  plan.kept_bytes = alloc.stats().in_use_by[act] - before;
  Tensor dlogits = ctx.activation(pass.logits.act());
  model.backward(ctx, pass, std::move(dlogits), false);
  plan.peak_bytes = alloc.stats().peak_by[act] - before;
  return plan;
}

ModelSummary summarize_model(const Config& config) {
  ModelSummary summary;
  CountingAllocator shapes_only("summary", 0);
  const UNet model(config.model, shapes_only);
  summary.parameters = model.parameter_count();
  summary.batch_per_device =
      replica_split(config.train.batch_size, static_cast<int>(config.devices.size()))[0];
  summary.layers = model.summarize({summary.batch_per_device, config.model.in_channels,
                                    config.data.input_height(), config.data.input_width()},
                                   compute_dtype(config.precision));
  const LayerPlan plan = plan_layers(config);
  for (auto& row : summary.layers) {
    row.saved_bytes = 0;
    for (const LayerMemory& l : plan.layers)
      if (l.name == row.name || l.name.rfind(row.name + ".", 0) == 0) row.saved_bytes += l.activation_bytes;
  }
  summary.kept_bytes = plan.kept_bytes;
  summary.peak_bytes = plan.peak_bytes;
  return summary;
}

}  // namespace unet
