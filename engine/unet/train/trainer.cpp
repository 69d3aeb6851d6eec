#include "unet/train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "unet/backend/address_space.h"
#include "unet/core/number_text.h"
#include "unet/data/open_dataset.h"
#include "unet/io/checkpoint.h"
#include "unet/plan/device_overhead.h"
#include "unet/plan/memory_planner.h"
#include "unet/step/data_parallel.h"
#include "unet/train/checkpoint_policy.h"
#include "unet/train/early_stopping.h"
#include "unet/train/epoch_plan.h"
#include "unet/train/lr_schedule.h"
#include "unet/train/memory_sampler.h"
#include "unet/train/monitor.h"
#include "unet/train/prefetcher.h"
#include "unet/train/process_agreement.h"
#include "unet/train/replicas.h"
#include "unet/train/run_commands.h"
#include "unet/train/run_failures.h"
#include "unet/train/run_folder.h"
#include "unet/train/run_folder_claim.h"
#include "unet/train/run_outputs.h"
#include "unet/train/run_rules.h"
#include "unet/train/run_start.h"
#include "unet/train/step_update.h"
#include "unet/train/throughput.h"
#include "unet/train/validation.h"

namespace unet {

std::shared_ptr<const Dataset> make_dataset(const Config& config) {
  return open_dataset(config);
}

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct Trainer::Impl {
  Config config;
  TrainerObserver* user = nullptr;
  TrainerOptions options;
  RunStart start;

  RunCommands commands;
  std::atomic<TrainerState> state{TrainerState::idle};

  ObserverFanout out;
  RunOutputs outputs;  // the folder's lock and what the run writes there, from prepare() to run()'s end
  std::filesystem::path run_dir;
  std::shared_ptr<const Dataset> dataset;
  DataSplit split;
  BatchRecipe recipe;                      // how samples become the training batches
  std::int64_t epoch_samples = 0;          // samples (patch mode: patches) an epoch takes
  std::unique_ptr<Validation> validation;  // of split.val
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<OverheadRecorder> overhead;  // GPU runs: what the devices hold beyond the allocator
  std::unique_ptr<MemorySampler> memory;       // after dp: it samples dp's replicas
  RunInfo info;

  std::int64_t step = 0, epoch = 0, epoch_step = 0;
  // Samples per optimizer step and the micro-batches they are split into; out-of-memory recovery doubles the
  // latter, never changes the former.
  std::int64_t effective_batch = 0, accumulation = 1;
  bool error_reported = false;  // the error that ends the run was reported in detail already
  StepUpdate update{LossScaler(LossScaling{}), 0, 0};  // the loss scale and the skipped steps with it
  nlohmann::json last_metrics = nlohmann::json::object();
  LabelCheck labels{LossConfig{}};

  Clock::time_point run_started;
  double earlier_seconds = 0;  // the run's time before this start (its checkpoint's training_seconds)
  Throughput throughput;

  std::optional<LearningRateSchedule> schedule;
  EarlyStopping early_stopping{EarlyStoppingConfig{}};

  void set_state(TrainerState s) {
    state = s;
    out.on_state(s);
  }

  void prepare();
  void loop();
  bool handle_commands();  // false: stop
  // The run folder's last.safetensors when this run continues one and it exists, else "": what a report
  // made before training saved anything can offer to resume from.
  std::string earlier_last_checkpoint() const {
    const auto last = run_dir / kLastCheckpointName;
    return step > 0 && std::filesystem::exists(last) ? last.string() : std::string();
  }
  // After the split: the effective batch, the position, the steps per epoch and the run's total steps (into
  // info), mapping a resumed position that no longer fits.
  void plan_run_length();
  bool recover_from(const StepOutcome& outcome);  // true: retry the step
  // Before anything is allocated: a run whose planned peak cannot fit a device is refused at once
  // (out_of_memory.h).
  void refuse_if_plan_cannot_fit(const MemoryPlan& plan) {
    unet::refuse_if_plan_cannot_fit(plan, config, step, earlier_last_checkpoint(),
                                    options.write_metrics ? run_dir : std::filesystem::path(), out,
                                    error_reported);
  }
  // Ends the run for inf/NaN values no loss scaling absorbs (`what` says which) and throws. When the model's
  // state is still finite (the step was not applied) it is saved as last.safetensors; when it is not, nothing
  // is saved and the last finite checkpoint stays as it was.
  [[noreturn]] void stop_diverged(const std::string& what, bool state_is_finite);
  EpochReport validate(double epoch_loss, double epoch_seconds);
  // Samples in one micro-batch: what training fits now, and so validation and predictions too.
  std::int64_t micro_batch() const { return (effective_batch + accumulation - 1) / accumulation; }
  nlohmann::json training_state() const;
  void restore_training_state(const nlohmann::json& saved);
  // After an epoch's validation: the plateau schedule and early stopping see the metrics. Returns true when
  // early stopping ends the run (r.early_stop says why).
  bool after_validation(EpochReport& r);
  // Early stopping with restore_best: back to the best epoch's state, saved as last.safetensors.
  void restore_best_epoch();
  TrainingSnapshot take_snapshot();
  void report_memory() { memory->report(out); }
  void stop_memory_sampler() noexcept {
    if (memory) memory->stop();
  }
  void measure_overhead();
  void report_predictions(std::int64_t at_epoch) {
    const PredictionsReport r =
        validation->predictions(*dp, micro_batch(), options.prediction_samples, at_epoch, step);
    if (!r.samples.empty()) out.on_predictions(r);
  }
  void save(std::vector<CheckpointWriter::Target> targets);
  // last.safetensors now (out-of-memory, divergence, restore_best, the run's end), when the run writes any.
  void save_last() { save({{run_dir / kLastCheckpointName, "last", false}}); }
  // After a validation: the checkpoints the policy asks for (CheckpointPolicy::targets_after).
  void save_at_epoch_end(const EpochReport& r, bool epoch_end = true) {
    if (outputs.checkpoints()) save(outputs.checkpoints()->targets_after(r, epoch_end));
  }
  // Sets run_dir and, when the run writes into it, claims it (claim_run_folder()).
  void claim_run_folder() {
    run_dir = std::filesystem::absolute(config.resolve(config.checkpoint.dir)).lexically_normal();
    if (!options.write_metrics && !options.write_checkpoints) return;
    // A set_start() with a run in progress continues it here.
    outputs.claim(config, run_dir, start.resuming() || start.position().step == 0, start.resumed_run(),
                  options.replace_previous_run, out);
  }
};

Trainer::Trainer(Config config, TrainerObserver* observer, TrainerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->user = observer;
  impl_->options = std::move(options);
}

Trainer::~Trainer() = default;

void Trainer::set_start(RunState start) {
  impl_->start.set(std::move(start));
}

void Trainer::resume_from(const Checkpoint& c, const std::filesystem::path& file) {
  impl_->start.resume(c, file, impl_->config.model);
}

void Trainer::pause() {
  impl_->commands.pause();
}

void Trainer::resume() {
  impl_->commands.resume();
}

void Trainer::stop() {
  impl_->commands.stop();
}

void Trainer::request_checkpoint() {
  impl_->commands.request_checkpoint();
}

TrainerState Trainer::state() const {
  return impl_->state;
}

TrainingSnapshot Trainer::snapshot() const {
  UNET_CHECK(impl_->dp != nullptr, usage, "Trainer::snapshot: nothing has been trained");
  return impl_->take_snapshot();
}

void Trainer::run() {
  Impl& t = *impl_;
  if (t.user) t.out.targets = {t.user};
  t.run_started = Clock::now();
  struct FolderRelease {
    Impl& t;
    ~FolderRelease() { t.outputs.close(); }  // however run() ends
  } release{t};
  t.set_state(TrainerState::preparing);
  try {
    try {
      // A run that cannot learn, or a setting it would never read, is refused before any work
      // (docs/CONFIG.md, "Rules a run adds"); prepare() adds the rules that need the data.
      throw_config_problems(training_problems(t.config));
      t.prepare();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::cancelled || !t.commands.stop_requested()) throw;
      // A stop before the first step: nothing to save, and not a failure.
      t.out.on_log(LogLevel::info, e.message() + " before training began: nothing was trained or saved");
      t.set_state(TrainerState::stopped);
      return;
    }
    t.loop();
  } catch (const Error& e) {
    t.stop_memory_sampler();
    if (!t.error_reported) t.out.on_error(error_report(e));
    t.set_state(TrainerState::failed);
    throw;
  } catch (const std::exception& e) {
    t.stop_memory_sampler();
    t.out.on_error(error_report(e));
    t.set_state(TrainerState::failed);
    throw;
  }
}

void Trainer::Impl::plan_run_length() {
  const RunLength length = unet::plan_run_length(config, static_cast<std::size_t>(epoch_samples),
                                                 start.position(), start.saved_batch(), out);
  effective_batch = length.effective_batch;
  accumulation = config.train.accumulation;
  step = start.position().step;
  epoch = length.epoch;
  epoch_step = length.epoch_step;
  update.set_skipped_steps(start.position().skipped_steps);
  info = {};
  info.train_samples = static_cast<std::int64_t>(split.train.size());
  info.val_samples = static_cast<std::int64_t>(split.val.size());
  info.steps_per_epoch = length.steps_per_epoch;
  info.epochs = length.epochs;
  info.total_steps = length.total_steps;
}

void Trainer::Impl::prepare() {
  const Config& c = config;
  // The processes of a run check first that they train the same thing, from the same state.
  if (options.process_group)
    agree_on_run_start(*options.process_group, c, start.state(), start.resuming(), start.optimizer_name(),
                       start.checkpoint_file());
  // Then the folder (it sets run_dir): one in use or holding another run is refused before anything is
  // loaded, and a refused plan below writes its report into a folder this run holds.
  claim_run_folder();
  step = start.position().step;
  // The planner models the real backends; a test's own backend (fault injection) is not planned.
  std::optional<MemoryPlan> plan;
  if (!options.make_backend || !c.memory.growth) plan = plan_memory(c);
  if (plan && !options.make_backend) refuse_if_plan_cannot_fit(*plan);
  std::vector<SampleDigest> content;  // the files' bytes, for the processes to compare
  if (options.dataset) {
    dataset = options.dataset;
  } else {
    PreflightReport report;
    dataset = open_dataset(c, &report, commands.preparation_stop(), options.process_group != nullptr);
    if (c.data.source != DataSource::synthetic) out.on_log(LogLevel::info, report.summary());
    for (PreflightReport::SampleDigest& d : report.content) content.push_back({std::move(d.name), d.sha256});
  }
  // A zscore over the dataset measured by the scan: the checkpoints hold its mean and std, for prediction.
  if (const std::optional<NormalizeDesc> measured = dataset->measured_normalization()) {
    config.data.normalize = *measured;
    out.on_log(LogLevel::info, "normalisation: " + describe(config.data.normalize));
  }
  refuse_images_the_model_cannot_take(c.model, *dataset);
  // Under an address-space limit (ulimit -v), the plan must also fit what the limit leaves now that the data
  // is in memory: past it, oneDNN's code generator dies of the failed mapping instead of reporting it.
  if (plan && !options.make_backend && fit_address_space_limit(*plan, c, read_address_space()))
    refuse_if_plan_cannot_fit(*plan);
  if (c.data.val_path.empty()) {
    split = split_dataset(dataset->size(), c.data.val_fraction, c.data.seed);
    split = choose_validation_split(c, *dataset, std::move(split), run_dir, start.continues(),
                                    options.write_metrics || options.write_checkpoints, out);
    validation = std::make_unique<Validation>(c, dataset, split.val);
  } else {
    // data.val_path: every sample of data.path trains, every one of the validation folder validates
    // (split.val indexes that folder's dataset), normalised as the training data is.
    split = validation_folder_split(c, *dataset, commands.preparation_stop(), out, validation);
  }
  recipe = training_recipe(c);
  epoch_samples = samples_per_epoch(c, *dataset, split.train);
  // Every process splits its own copy of the data: the copies, and the splits (a resumed run's comes from its
  // folder's validation.json), must be the same.
  if (options.process_group) agree_on_run_data(*options.process_group, *dataset, split, content);

  DataParallelOptions dpo = replica_options(c, options.process_group, out);
  // The data, the split and the run's length are known: a run that cannot learn, or a setting it would never
  // read, is refused here, before any device memory, checkpoint, log or step.
  try {
    plan_run_length();
    refuse_what_the_run_cannot_use(c, *dataset, split, info, run_dir);
    labels = LabelCheck(c.loss);
    labels.check_in_memory(c, *dataset, split.train);
  } catch (const Error&) {
    // A new run refused here has written only its validation.json: take it back, so that the folder does
    // not hold "a previous run" the corrected config would be refused for.
    if (!start.resuming() && start.position().step == 0 &&
        (options.write_metrics || options.write_checkpoints)) {
      try {
        remove_run_file(run_dir, kValidationSplitName);
      } catch (const Error& e) {
        out.on_log(LogLevel::warning, e.what());
      }
    }
    throw;
  }
  dpo.make_backend = options.make_backend;
  dp = make_replicas(std::move(dpo), c, plan ? &*plan : nullptr, step, earlier_last_checkpoint(), out,
                     error_reported);
  {
    std::vector<Backend*> replicas;
    replicas.reserve(static_cast<std::size_t>(dp->replicas()));
    for (int r = 0; r < dp->replicas(); ++r) replicas.push_back(&dp->backend(r));
    overhead = std::make_unique<OverheadRecorder>(replicas, c.precision);
  }
  memory = std::make_unique<MemorySampler>(*dp, run_started);

  const LossScaling scaling = options.loss_scaling.value_or(loss_scaling_for(c.precision));
  // A dynamic scale continues from the checkpoint's; one saved by a run that did not scale (1) starts over.
  const TrainingPosition& from = start.position();
  update = StepUpdate(scaling.dynamic && from.step > 0 && from.loss_scale != 1.0
                          ? LossScaler(scaling, from.loss_scale, from.clean_steps)
                          : LossScaler(scaling),
                      update.skipped_steps(), c.optimizer.clip_grad_norm);
  last_metrics = from.metrics;
  const RunState& from_state = start.state();
  earlier_seconds = from_state.training_seconds;
  dp->set_parameters(from_state.parameters.empty() ? UNet::initial_slab(c.model, c.train.seed)
                                                   : from_state.parameters);
  // The optimizer counts the steps it took (Adam's bias correction): skipped steps are not among them.
  if (auto restored = start.optimizer_state(c.optimizer, out); !restored.empty())
    dp->set_optimizer_state(restored, from.step - update.skipped_steps());

  // The last point to stop at before the run writes into its folder.
  if (commands.stop_requested()) throw Error(ErrorKind::cancelled, "the preparation was stopped");
  outputs.open(c, run_dir, options.write_metrics, options.write_checkpoints, start.continues(), step, epoch,
               out);

  for (int r = 0; r < dp->replicas(); ++r) info.devices.push_back(dp->backend(r).info());
  const std::vector<std::int64_t> world_batch = replica_split(c.train.batch_size, dp->world_replicas());
  info.device_batch.assign(world_batch.begin() + dp->first_replica(),
                           world_batch.begin() + dp->first_replica() + dp->replicas());
  info.global_batch = c.train.batch_size;
  info.accumulation = c.train.accumulation;
  const std::int64_t spe = info.steps_per_epoch;
  schedule.emplace(c.schedule, c.train.lr, info.total_steps, spe, c.checkpoint.monitor_class);
  early_stopping = EarlyStopping(c.early_stopping, c.checkpoint.monitor_class);
  restore_training_state(from.training_state);
  info.start_step = step;
  info.start_epoch = epoch;
  info.parameter_count = dp->model(0).parameter_count();
  info.dataset = dataset->describe();
  info.precision = to_string(c.precision);
  info.run_dir = run_dir.string();
  info.earlier_seconds = earlier_seconds;
  if (outputs.checkpoints()) info.saved_checkpoints = outputs.checkpoints()->found_at_start();
  out.on_start(info);
  memory->sample();
  report_memory();
  memory->start(options.memory_report_seconds);
}

bool Trainer::Impl::handle_commands() {
  for (;;) {
    const RunCommands::Next next = commands.next(state == TrainerState::paused);
    switch (next.command) {
      case RunCommands::Command::checkpoint:
        if (outputs.checkpoints()) {
          save({outputs.checkpoints()->requested_at(step)});
          // No step reports it while paused: wait for the save and say so now, not after the resume.
          if (next.pause_requested) outputs.finish_saves();
        } else {
          out.on_log(LogLevel::warning, "a checkpoint was requested but this run writes none");
        }
        continue;
      case RunCommands::Command::stop:
        return false;
      case RunCommands::Command::pause:
        set_state(TrainerState::paused);
        continue;
      case RunCommands::Command::run:
        break;
    }
    break;
  }
  if (state != TrainerState::running) set_state(TrainerState::running);
  return true;
}

bool Trainer::Impl::recover_from(const StepOutcome& outcome) {
  try {
    std::rethrow_exception(outcome.error);
  } catch (const OutOfMemoryError& e) {
    OutOfMemoryVerdict verdict = judge_out_of_memory(e, config, step, effective_batch, accumulation, out);
    if (verdict.report.recovered) {
      accumulation = verdict.report.accumulation;
      outputs.saved_config().train.batch_size = verdict.report.batch_size;
      outputs.saved_config().train.accumulation = accumulation;
      out.on_error(verdict.error(false));
      out.on_log(LogLevel::warning, verdict.message);
      return true;
    }
    // The step changed nothing: save where training stands, so that the run can be resumed with a remedy.
    if (step > 0) save_last();
    outputs.finish_saves();
    if (outputs.last_saved()) verdict.report.resume_from = outputs.last_saved()->first.string();
    out.on_error(verdict.error(true));
    error_reported = true;
    return false;
  } catch (...) {
    return false;
  }
}

void Trainer::Impl::stop_diverged(const std::string& what, bool state_is_finite) {
  const std::string cause = update.scaler().dynamic()
                                ? "even at the smallest loss scale (" + number_text(update.scale()) + ")"
                                : "in " + std::string(to_string(config.precision)) + ", which scales no loss";
  // A finite state is where training stands (the step changed nothing): save it, as for out-of-memory. A
  // non-finite one is never saved, so the last finite checkpoint stays as it was.
  if (state_is_finite && step > 0) save_last();
  outputs.finish_saves();
  const Error error =
      diverged_error(step + 1, what, cause, !state_is_finite, config.train.lr, outputs.last_saved());
  out.on_error(error_report(error));
  error_reported = true;
  throw error;
}

nlohmann::json Trainer::Impl::training_state() const {
  nlohmann::json j = nlohmann::json::object();
  if (schedule) {
    if (nlohmann::json kept = schedule->state(); !kept.empty()) j["schedule"] = std::move(kept);
  }
  if (nlohmann::json kept = early_stopping.state(); !kept.is_null()) j["early_stopping"] = std::move(kept);
  return j;
}

void Trainer::Impl::restore_training_state(const nlohmann::json& saved) {
  if (!saved.is_object()) return;
  if (const auto it = saved.find("schedule"); it != saved.end() && schedule) schedule->set_state(*it);
  if (const auto it = saved.find("early_stopping"); it != saved.end()) early_stopping.restore(*it);
}

bool Trainer::Impl::after_validation(EpochReport& r) {
  const std::string& monitor_class = config.checkpoint.monitor_class;
  if (const auto lowered = schedule->on_validation(Monitor(config.schedule.monitor, monitor_class).value(r)))
    out.on_log(LogLevel::info, "epoch " + std::to_string(r.epoch) + ": " + *lowered);
  const EarlyStopping::Verdict verdict =
      early_stopping.update(Monitor(config.early_stopping.monitor, monitor_class).value(r), r.epoch, r.step);
  if (verdict == EarlyStopping::Verdict::improved && early_stopping.restores_best())
    early_stopping.keep_best_state(take_snapshot());
  if (verdict != EarlyStopping::Verdict::stop) return false;
  r.early_stop = early_stopping.stop_reason(r.epoch);
  return true;
}

void Trainer::Impl::restore_best_epoch() {
  if (!early_stopping.best()) return;
  std::optional<RunState> best_state = early_stopping.take_best_state();
  // Resumed since the best validation: its weights are best.safetensors when that file watches the same
  // metric and holds that epoch.
  if (!best_state && outputs.checkpoints() && config.checkpoint.monitor == config.early_stopping.monitor)
    best_state = outputs.checkpoints()->saved_best_at(early_stopping.best_step());
  if (!best_state) {
    out.on_log(LogLevel::warning, "early stopping cannot restore the weights of epoch " +
                                      std::to_string(early_stopping.best_epoch()) +
                                      ": this process has not seen it since the resume and " +
                                      std::string(kBestCheckpointName) +
                                      " does not hold it; the run keeps its last weights");
    return;
  }
  const RunState& b = *best_state;
  dp->set_parameters(b.parameters);
  const TrainingPosition& at = b.position;
  if (auto kept = b.optimizer_state(optimizer_slabs(config.optimizer)); !kept.empty())
    dp->set_optimizer_state(kept, at.step - at.skipped_steps);
  step = at.step;
  epoch = at.epoch;
  epoch_step = at.epoch_step;
  update.set_skipped_steps(at.skipped_steps);
  last_metrics = at.metrics;
  out.on_log(
      LogLevel::info,
      "early stopping: restored the weights of epoch " + std::to_string(at.epoch) + " (step " +
          std::to_string(at.step) + ", " + config.early_stopping.monitor + " " +
          metric_text(*early_stopping.best()) + ")" +
          (outputs.checkpoints() ? "; " + (run_dir / kLastCheckpointName).string() + " holds them" : ""));
  save_last();
  if (outputs.checkpoints()) outputs.checkpoints()->mark_last_written(step);
}

TrainingSnapshot Trainer::Impl::take_snapshot() {
  TrainingSnapshot s;
  s.parameters = dp->parameters(0);
  s.set_optimizer_state(optimizer_slabs(config.optimizer), dp->optimizer_state(0));
  s.position = {.step = step,
                .epoch = epoch,
                .epoch_step = epoch_step,
                .loss_scale = update.scale(),
                .clean_steps = update.scaler().clean_steps(),
                .skipped_steps = update.skipped_steps(),
                .effective_batch = effective_batch,
                .metrics = last_metrics,
                .training_state = training_state()};
  s.training_seconds = earlier_seconds + seconds_since(run_started);
  s.accumulation = accumulation;
  return s;
}

EpochReport Trainer::Impl::validate(double epoch_loss, double epoch_seconds) {
  const auto started = Clock::now();
  EpochReport r = validation->run(*dp, micro_batch(), out);
  // Thresholds found on this validation go with the model: the checkpoints written after it hold them.
  if (r.objects && config.instances.tune_thresholds && std::isfinite(r.val_dsb)) {
    outputs.saved_config().instances.seed_threshold = r.val_seed_threshold;
    outputs.saved_config().instances.foreground_threshold = r.val_foreground_threshold;
  }
  r.step = step;
  r.loss = epoch_loss;
  const double seconds = seconds_since(started);
  throughput.add_validation(seconds);
  r.seconds = epoch_seconds + seconds;
  last_metrics = monitored_metrics(r);
  return r;
}

void Trainer::Impl::save(std::vector<CheckpointWriter::Target> targets) {
  if (outputs.checkpoints() && !targets.empty()) outputs.save(take_snapshot(), std::move(targets));
}

void Trainer::Impl::measure_overhead() {
  for (const std::string& line : overhead->measure()) out.on_log(LogLevel::info, line);
}

void Trainer::Impl::loop() {
  const Config& c = config;
  const std::int64_t spe = info.steps_per_epoch, total = info.total_steps;
  set_state(TrainerState::running);
  bool stopped = false;
  const std::int64_t first_step = step;  // where this process began (a resume starts later)
  bool validated_once = false;
  bool stopped_early = false;  // by early stopping, after a validation within an epoch
  std::string early_stop_reason;
  // The run's steps, built by the loader's workers ahead of training (and again here after out-of-memory
  // recovery).
  const TrainingSteps steps(c, *dataset, recipe, split.train, epoch_samples, effective_batch,
                            {dp->world_replicas(), dp->first_replica(), dp->replicas()});
  BatchPrefetcher prefetcher([&](std::int64_t at_epoch, std::int64_t at_step,
                                 std::int64_t micro) { return steps.build(at_epoch, at_step, micro); },
                             prefetch_limits(c.data), epoch, epoch_step, spe,
                             std::max<std::int64_t>(0, total - step), accumulation);
  std::optional<StepBatches> retry;  // a step to run again after out-of-memory recovery
  while (step < total && !stopped) {
    // map_start_position keeps the position inside an epoch; were it not, the steps below would never run
    // and this loop would spin.
    UNET_CHECK(
        epoch_step < spe, usage,
        "position step " + std::to_string(epoch_step) + " of an epoch of " + std::to_string(spe) + " steps");
    const auto epoch_started = Clock::now();
    LossTotals epoch_loss_totals;
    const std::int64_t epoch_first_step = epoch_step;  // 0 unless a resumed run starts inside the epoch
    while (epoch_step < spe && step < total) {
      // The processes of a run stop together, at the same step, when any of them is asked to.
      const bool stop_here = !handle_commands();
      if (options.process_group ? dp->any_replica(stop_here) : stop_here) {
        stopped = true;
        break;
      }
      const auto step_started = Clock::now();
      double data_wait = 0;
      StepBatches batches;
      if (retry) {
        batches = std::move(*retry);
        retry.reset();
      } else {
        PreparedStep prepared = prefetcher.pop(data_wait);
        UNET_CHECK(prepared.epoch == epoch && prepared.epoch_step == epoch_step, usage,
                   "the prefetch thread is out of step with training");
        batches = prepared.accumulation == accumulation ? std::move(prepared.batches)
                                                        : steps.build(epoch, epoch_step, accumulation);
      }
      const StepOutcome outcome = dp->compute_gradients(batches, static_cast<float>(update.scale()));
      if (!outcome.ok) {
        if (recover_from(outcome)) {  // the same step again, in smaller micro-batches
          prefetcher.set_accumulation(accumulation);
          retry = steps.build(epoch, epoch_step, accumulation);
          continue;
        }
        std::rethrow_exception(outcome.error);
      }
      const StepUpdate::Result updated = update.update(outcome, *dp, schedule->at(step), step);
      if (!updated.diverged.empty()) stop_diverged(updated.diverged, updated.state_is_finite);
      if (updated.skipped) out.on_log(LogLevel::info, updated.skip_log);
      ++step;
      ++epoch_step;
      epoch_loss_totals.add(outcome.loss);
      labels.count(outcome.loss.labelled_pixels, outcome.loss.class_weight_sum);

      StepReport r = updated.report();  // the loss, rate, gradient norm, clipping, scale and skips
      r.step = step;
      r.epoch = epoch;
      r.epoch_step = epoch_step;
      r.steps_per_epoch = spe;
      r.total_steps = total;
      r.data_wait_seconds = data_wait;
      throughput.report_step(r, batches.samples(), seconds_since(step_started));
      out.on_step(r);
      if (step == first_step + 1 && overhead->active()) measure_overhead();
      report_memory();
      outputs.report_saves();
      // Validation within the epoch (train.val_every_steps): the epoch's end validates anyway.
      if (c.train.val_every_steps > 0 && step % c.train.val_every_steps == 0 && epoch_step < spe &&
          step < total) {
        const double loss_so_far =
            epoch_loss_totals.images ? epoch_loss_totals.mean(dp->options().loss) : NAN;
        EpochReport v = validate(loss_so_far, seconds_since(epoch_started));
        v.epoch = epoch + 1;  // the epoch under way
        v.within_epoch = true;
        v.epochs_done =
            static_cast<double>(epoch) + static_cast<double>(epoch_step) / static_cast<double>(spe);
        stopped_early = after_validation(v);
        out.on_epoch(v);
        save_at_epoch_end(v, false);
        if (stopped_early) {
          early_stop_reason = v.early_stop;
          break;
        }
      }
    }
    if (stopped) break;
    if (stopped_early) {
      out.on_log(LogLevel::info, "early stopping: " + early_stop_reason);
      if (c.early_stopping.restore_best) restore_best_epoch();
      break;
    }
    if (epoch_step == spe || step == total) {
      // The training masks not read before the run (a dataset decoded on demand) are checked once a whole
      // epoch, or the whole run, has seen them, before anything is validated or saved.
      labels.check_after_epoch(epoch_first_step == 0 && epoch_step == spe, step == total, split.train.size());
      // The epoch's loss over all its labelled pixels and images, as a step's is over its own.
      const double epoch_loss = epoch_loss_totals.images ? epoch_loss_totals.mean(dp->options().loss) : NAN;
      EpochReport r = validate(epoch_loss, seconds_since(epoch_started));
      if (!validated_once && overhead->active()) measure_overhead();
      validated_once = true;
      if (epoch_step == spe) {
        ++epoch;
        epoch_step = 0;
      }
      r.epoch = epoch_step == 0 ? epoch : epoch + 1;
      r.epochs_done = static_cast<double>(epoch) + static_cast<double>(epoch_step) / static_cast<double>(spe);
      const bool stop_early = after_validation(r);
      out.on_epoch(r);
      report_predictions(r.epoch);
      save_at_epoch_end(r);
      report_memory();
      if (stop_early) {
        out.on_log(LogLevel::info, "early stopping: " + r.early_stop);
        if (c.early_stopping.restore_best) restore_best_epoch();
        break;
      }
    }
  }
  memory->stop();
  memory->sample();
  report_memory();
  set_state(TrainerState::stopping);
  // The end of the run: last.safetensors, unless the epoch's end just wrote it.
  if (outputs.checkpoints() && !outputs.checkpoints()->last_written_at(step)) save_last();
  outputs.finish_saves();
  if (outputs.checkpoints() && outputs.checkpoints()->has_unsaved())
    outputs.checkpoints()->throw_unsaved(step);
  set_state(stopped ? TrainerState::stopped : TrainerState::finished);
}

}  // namespace unet
