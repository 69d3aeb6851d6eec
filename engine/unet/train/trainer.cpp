#include "unet/train/trainer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>

#include "unet/backend/address_space.h"
#include "unet/core/checked_math.h"
#include "unet/core/json_limits.h"
#include "unet/core/number_text.h"
#include "unet/core/utf8.h"
#include "unet/data/cached_dataset.h"
#include "unet/data/file_dataset.h"
#include "unet/data/open_dataset.h"
#include "unet/distributed/process_communicator.h"
#include "unet/distributed/run_agreement.h"
#include "unet/io/atomic_file.h"
#include "unet/io/checkpoint.h"
#include "unet/plan/device_overhead.h"
#include "unet/plan/memory_planner.h"
#include "unet/step/data_parallel.h"
#include "unet/step/step_options.h"
#include "unet/train/checkpoint_policy.h"
#include "unet/train/early_stopping.h"
#include "unet/train/lr_schedule.h"
#include "unet/train/metrics_log.h"
#include "unet/train/prefetcher.h"
#include "unet/train/run_folder.h"
#include "unet/train/throughput.h"

namespace unet {

std::shared_ptr<const Dataset> make_dataset(const Config& config) {
  return open_dataset(config);
}

SegmentationMetrics segmentation_metrics(const std::vector<std::int64_t>& counts, int classes) {
  UNET_CHECK(classes >= 1 && static_cast<std::int64_t>(counts.size()) == segmentation_counts_size(classes),
             usage,
             "segmentation_metrics: " + std::to_string(counts.size()) + " counts for " +
                 std::to_string(classes) + " classes; segmentation_counts_size gives " +
                 std::to_string(classes >= 1 ? segmentation_counts_size(classes) : 0));
  const int k = classes > 1 ? classes : 2;
  SegmentationMetrics m;
  double iou = 0, dice = 0;
  int present = 0;  // foreground classes in the truth or the prediction
  for (int c = 0; c < k; ++c) {
    const auto tp = static_cast<double>(counts[3 * static_cast<std::size_t>(c)]);
    const auto fp = static_cast<double>(counts[3 * static_cast<std::size_t>(c) + 1]);
    const auto fn = static_cast<double>(counts[3 * static_cast<std::size_t>(c) + 2]);
    // A class neither labelled nor predicted on any labelled pixel has no score: absent, never perfect.
    const bool seen = tp + fp + fn > 0;
    m.class_iou.push_back(seen ? tp / (tp + fp + fn) : NAN);
    m.class_dice.push_back(seen ? 2 * tp / (2 * tp + fp + fn) : NAN);
    if (c == 0 || !seen) continue;  // the means are over the foreground classes present
    iou += m.class_iou.back();
    dice += m.class_dice.back();
    ++present;
  }
  m.iou = present > 0 ? iou / present : NAN;
  m.dice = present > 0 ? dice / present : NAN;
  const auto total = static_cast<double>(counts[3 * static_cast<std::size_t>(k) + 1]);
  m.accuracy = total > 0 ? static_cast<double>(counts[3 * static_cast<std::size_t>(k)]) / total : NAN;
  return m;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sends each report to every observer: the front end's and the metrics log.
class Fanout final : public TrainerObserver {
 public:
  std::vector<TrainerObserver*> targets;
  void on_start(const RunInfo& i) override {
    for (auto* t : targets) t->on_start(i);
  }
  void on_state(TrainerState s) override {
    for (auto* t : targets) t->on_state(s);
  }
  void on_step(const StepReport& r) override {
    for (auto* t : targets) t->on_step(r);
  }
  void on_epoch(const EpochReport& r) override {
    for (auto* t : targets) t->on_epoch(r);
  }
  void on_memory(const MemoryReport& r) override {
    for (auto* t : targets) t->on_memory(r);
  }
  void on_checkpoint(const CheckpointReport& r) override {
    for (auto* t : targets) t->on_checkpoint(r);
  }
  void on_error(const ErrorReport& r) override {
    for (auto* t : targets) t->on_error(r);
  }
  void on_log(LogLevel l, const std::string& m) override {
    for (auto* t : targets) t->on_log(l, m);
  }
  void on_predictions(const PredictionsReport& r) override {
    for (auto* t : targets) t->on_predictions(r);
  }
};

}  // namespace

struct Trainer::Impl {
  Config config;
  TrainerObserver* user = nullptr;
  TrainerOptions options;
  // Where the run starts: a fresh model (parameters empty: from train.seed) or a checkpoint's state, the
  // optimizer.kind that made its optimizer state (state another optimizer made is not used: the config's
  // starts afresh), and the samples per step of the run that reached its position (a run resumed with
  // another batch maps its position by samples, not steps).
  RunState start;
  std::string start_optimizer;         // "": the config's
  std::int64_t start_saved_batch = 0;  // 0: the effective batch of this run

  mutable std::mutex mutex;
  std::condition_variable commands;
  bool pause_requested = false, stop_requested = false, checkpoint_requested = false;
  std::atomic<TrainerState> state{TrainerState::idle};
  // stop() also ends the preparation's long parts (the data scan, generating synthetic samples) at once.
  std::stop_source preparation_stop;

  bool resuming = false;  // resume_from() was called: the run continues one in its folder
  // The folders the resumed run's files are in: the checkpoint's own checkpoint.dir and the checkpoint
  // file's folder (a run folder moved or copied elsewhere).
  std::vector<std::filesystem::path> resumed_run_dirs;
  std::filesystem::path resumed_checkpoint;  // the file resume_from() read (empty: unknown)

  Fanout out;
  // Held from prepare() until the Trainer is gone: declared before what writes into the folder, so that it is
  // released after them.
  std::optional<RunLock> run_lock;
  std::unique_ptr<MetricsLog> metrics_log;
  std::unique_ptr<CheckpointPolicy> checkpoints;  // null: this run writes none
  std::filesystem::path run_dir;
  Config saved_config;  // the config checkpoints hold: paths made absolute
  std::shared_ptr<const Dataset> dataset;
  DataSplit split;
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<OverheadRecorder> overhead;  // GPU runs: what the devices hold beyond the allocator
  RunInfo info;

  std::int64_t step = 0, epoch = 0, epoch_step = 0;
  // Samples per optimizer step and the micro-batches they are split into; out-of-memory recovery doubles the
  // latter, never changes the former.
  std::int64_t effective_batch = 0, accumulation = 1;
  bool error_reported = false;  // the error that ends the run was reported in detail already
  LossScaler scaler{LossScaling{}};
  std::int64_t skipped_steps = 0;
  nlohmann::json last_metrics = nlohmann::json::object();
  // The training masks were checked for labelled pixels (refuse_what_cannot_learn); until then the steps
  // count them: the labelled pixels this process's run trained on, and their class weights.
  bool masks_checked = false;
  std::int64_t trained_labelled_pixels = 0;
  double trained_class_weight_sum = 0;
  bool warned_unlabelled_validation = false;

  Clock::time_point run_started;
  // Memory samples: taken by a sampler thread at options.memory_report_seconds (so that they see the inside
  // of a step, not only its boundaries), handed to the observers on the run thread.
  std::mutex samples_mutex;
  std::vector<MemoryReport> memory_samples;
  std::jthread sampler;
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
  // The batches of step `epoch_step` of epoch `epoch` (whose sample order is `order`), in `micro`
  // micro-batches.
  StepBatches build_step(const std::vector<std::size_t>& order, std::int64_t at_epoch, std::int64_t at_step,
                         std::int64_t micro) const;
  // A resumed position that no longer fits the data (another batch, a smaller training set) mapped by the
  // rule docs/CLI.md gives under --resume.
  void map_start_position(std::int64_t spe);
  // The run folder's last.safetensors when this run continues one and it exists, else "": what a report
  // made before training saved anything can offer to resume from.
  std::string earlier_last_checkpoint() const {
    const auto last = run_dir / kLastCheckpointName;
    return step > 0 && std::filesystem::exists(last) ? last.string() : std::string();
  }
  // After the split: the effective batch, the position, the steps per epoch and the run's total steps (into
  // info), mapping a resumed position that no longer fits.
  void plan_run_length();
  // The rules that need the data or the run's length (docs/CONFIG.md, "Rules a run adds"): settings that
  // watch validation without validation samples, a warm-up as long as the run, and training masks with no
  // labelled pixel or none of a class weighed above 0 (read here when the dataset holds them in memory; else
  // the first epoch counts them as it trains). Throws ConfigError naming the keys.
  void refuse_what_cannot_learn();
  // The labelled-pixel rule on `labelled` pixels whose class weights sum to `weight_sum`, over `masks`
  // ("the 18 training masks"); `classes` names the classes they hold, when known.
  void refuse_unlabelled(std::int64_t labelled, double weight_sum, const std::string& masks,
                         const std::string& classes) const;
  bool recover_from(const StepOutcome& outcome);  // true: retry the step
  // The planner's remedies for `failing`; `fitting` gets the names of those that fit, for a message.
  std::vector<RemedyReport> remedies_for(const Config& failing, std::string& fitting);
  // Before anything is allocated: a run whose planned peak cannot fit a device is refused at once, with the
  // out-of-memory report a failed step gives, instead of failing after minutes of work.
  void refuse_if_plan_cannot_fit(const MemoryPlan& plan);
  // Ends the run for inf/NaN values no loss scaling absorbs (`what` says which) and throws. When the model's
  // state is still finite (the step was not applied) it is saved as last.safetensors; when it is not, nothing
  // is saved and the last finite checkpoint stays as it was.
  [[noreturn]] void stop_diverged(const std::string& what, bool state_is_finite);
  EpochReport validate(double epoch_loss, double epoch_seconds);
  // The validation samples: data.validation_split's, a resumed run's own validation.json, or the split of
  // val_fraction and seed; the choice is written to the run's validation.json.
  void choose_validation_split();
  // The start's optimizer state, one slab per Optimizer::state() tensor; empty (with a log line) when it was
  // made by an optimizer whose state the config's cannot use.
  std::vector<std::vector<float>> starting_optimizer_state();
  nlohmann::json training_state() const;
  void restore_training_state(const nlohmann::json& saved);
  // After an epoch's validation: the plateau schedule and early stopping see the metrics. Returns true when
  // early stopping ends the run (r.early_stop says why).
  bool after_validation(EpochReport& r);
  // Early stopping with restore_best: back to the best epoch's state, saved as last.safetensors.
  void restore_best_epoch();
  TrainingSnapshot take_snapshot();
  void sample_memory();
  void report_memory();
  void measure_overhead();
  void report_predictions(std::int64_t at_epoch);
  void save(std::vector<CheckpointWriter::Target> targets);
  // last.safetensors now (out-of-memory, divergence, restore_best, the run's end), when the run writes any.
  void save_last() { save({{run_dir / kLastCheckpointName, "last", false}}); }
  // After a validation: the checkpoints the policy asks for (CheckpointPolicy::targets_after).
  void save_at_epoch_end(const EpochReport& r, bool epoch_end = true);
  void report_saves() {
    if (checkpoints) checkpoints->report_saves();
  }
  void finish_saves() {
    if (checkpoints) checkpoints->finish_saves();
  }
  const std::optional<std::pair<std::filesystem::path, std::int64_t>>& last_saved() const {
    static const std::optional<std::pair<std::filesystem::path, std::int64_t>> none;
    return checkpoints ? checkpoints->last_saved() : none;
  }
  void claim_run_folder();
  // At the end of run(), however it ends: finishes the saves asked for, closes the log, unlocks the folder.
  void release_run_folder() noexcept;
};

Trainer::Trainer(Config config, TrainerObserver* observer, TrainerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->user = observer;
  impl_->options = std::move(options);
}

Trainer::~Trainer() = default;

void Trainer::set_start(RunState start) {
  impl_->start = std::move(start);
  impl_->start_optimizer.clear();
  impl_->start_saved_batch = 0;
}

void Trainer::resume_from(const Checkpoint& c, const std::filesystem::path& file) {
  const UNetSpec& have = c.config.model;
  const UNetSpec& want = impl_->config.model;
  auto differ = [](const char* key, auto a, auto b) {
    throw ConfigError(key, "the checkpoint's model has " + std::to_string(a) + ", the config " +
                               std::to_string(b) + "; a run resumes with the model it was saved with");
  };
  if (have.in_channels != want.in_channels) differ("model.in_channels", have.in_channels, want.in_channels);
  if (have.classes != want.classes) differ("model.classes", have.classes, want.classes);
  if (have.width != want.width) differ("model.width", have.width, want.width);
  if (have.depth != want.depth) differ("model.depth", have.depth, want.depth);
  if (have.separable != want.separable) differ("model.separable", have.separable, want.separable);
  impl_->start = static_cast<const RunState&>(c);
  impl_->start_optimizer = c.config.optimizer.kind;
  impl_->start_saved_batch =
      c.position.effective_batch > 0
          ? c.position.effective_batch
          : checked_mul(c.config.train.batch_size, c.config.train.accumulation, "the checkpoint's batch");
  impl_->resuming = true;
  impl_->resumed_checkpoint = file.empty() ? file : std::filesystem::absolute(file);
  impl_->resumed_run_dirs.clear();
  impl_->resumed_run_dirs.push_back(c.config.resolve(c.config.checkpoint.dir));
  if (!file.empty()) impl_->resumed_run_dirs.push_back(std::filesystem::absolute(file).parent_path());
}

void Trainer::pause() {
  std::lock_guard lock(impl_->mutex);
  impl_->pause_requested = true;
  impl_->commands.notify_all();
}

void Trainer::resume() {
  std::lock_guard lock(impl_->mutex);
  impl_->pause_requested = false;
  impl_->commands.notify_all();
}

void Trainer::stop() {
  std::lock_guard lock(impl_->mutex);
  impl_->stop_requested = true;
  impl_->preparation_stop.request_stop();
  impl_->commands.notify_all();
}

void Trainer::request_checkpoint() {
  std::lock_guard lock(impl_->mutex);
  impl_->checkpoint_requested = true;
  impl_->commands.notify_all();
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
    ~FolderRelease() { t.release_run_folder(); }
  } release{t};
  t.set_state(TrainerState::preparing);
  try {
    try {
      // A run that cannot learn, or a setting it would never read, is refused before any work
      // (docs/CONFIG.md, "Rules a run adds"); prepare() adds the rules that need the data.
      throw_config_problems(training_problems(t.config));
      t.prepare();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::cancelled || !t.preparation_stop.stop_requested()) throw;
      // A stop before the first step: nothing to save, and not a failure.
      t.out.on_log(LogLevel::info, e.message() + " before training began: nothing was trained or saved");
      t.set_state(TrainerState::stopped);
      return;
    }
    t.loop();
  } catch (const Error& e) {
    t.sampler = {};
    if (!t.error_reported)
      t.out.on_error({.type = to_string(e.kind()),
                      .device = e.device(),
                      .message = e.what(),
                      .fatal = true,
                      .where = e.location(),
                      .out_of_memory = {}});
    t.set_state(TrainerState::failed);
    throw;
  } catch (const std::exception& e) {
    t.sampler = {};
    t.out.on_error({.type = "internal",
                    .device = {},
                    .message = e.what(),
                    .fatal = true,
                    .where = {},
                    .out_of_memory = {}});
    t.set_state(TrainerState::failed);
    throw;
  }
}

namespace {

// Checkpoints store the run's paths resolved to absolute ones, as JSON text: each must be UTF-8, which the
// config's values are (config.cpp), but the config file's folder or the working directory a relative value
// is resolved against may not be. Refused before any work, rather than failing every save after training.
void refuse_recorded_paths_not_utf8(const Config& c, const std::filesystem::path& run_dir) {
  const auto check = [](const char* key, const std::string& path) {
    if (!is_valid_utf8(path))
      throw ConfigError(key, "resolves to a path that " + not_utf8_problem(path) +
                                 ": checkpoints record it as UTF-8 text; give an absolute UTF-8 path, or run "
                                 "from a folder whose path is UTF-8");
  };
  check("checkpoint.dir", run_dir.native());
  for (const auto& [key, value] :
       {std::pair{"data.path", &c.data.path}, std::pair{"data.validation_split", &c.data.validation_split}})
    if (!value->empty()) check(key, std::filesystem::absolute(c.resolve(*value)).lexically_normal().native());
}

}  // namespace

void Trainer::Impl::claim_run_folder() {
  run_dir = std::filesystem::absolute(config.resolve(config.checkpoint.dir)).lexically_normal();
  if (!options.write_metrics && !options.write_checkpoints) return;
  refuse_recorded_paths_not_utf8(config, run_dir);
  check_run_folder_location(run_dir);
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec)
    throw Error(ErrorKind::io, "cannot create the run folder " + run_dir.string() + ": " + ec.message());
  run_lock.emplace(run_dir);
  if (!resuming && start.position.step > 0) return;  // set_start() with a run in progress: it continues here
  std::optional<ResumedRun> resumed_run;
  if (resuming) resumed_run = ResumedRun{resumed_run_dirs, resumed_checkpoint, start.position.step};
  const std::optional<RunFolderConflict> conflict =
      run_folder_conflict(run_dir, config.checkpoint.filename_template, resumed_run);
  if (!conflict) return;
  if (!options.replace_previous_run) throw RunFolderTaken(*conflict);
  if (conflict->kind == RunFolderConflict::Kind::later_state) {
    out.on_log(LogLevel::info,
               "going on in " + run_dir.string() + " from step " + std::to_string(conflict->resumed_step) +
                   ", as asked: its checkpoints of later steps (last.safetensors at step " +
                   std::to_string(conflict->later_step) + ") are replaced as this run writes its own");
    return;
  }
  // Only what the previous run can be shown to have written (run_folder.h): a file the template's pattern
  // merely matches may be the user's, and stays.
  for (const auto& file : conflict->files) {
    if (std::find(conflict->removable.begin(), conflict->removable.end(), file) ==
        conflict->removable.end()) {
      out.on_log(LogLevel::info, "kept " + file.string() +
                                     ": its name fits checkpoint.template, but the previous run's log does "
                                     "not record it as that run's");
      continue;
    }
    try {
      if (remove_run_file(run_dir, file.filename().string()))
        out.on_log(LogLevel::info,
                   "removed " + file.string() + " (the previous run in this folder, as asked)");
    } catch (const Error& e) {
      throw Error(ErrorKind::io, std::string(e.what()) + " (a file of the previous run)");
    }
  }
}

void Trainer::Impl::release_run_folder() noexcept {
  checkpoints.reset();  // waits for the saves in flight
  std::erase(out.targets, metrics_log.get());
  metrics_log.reset();
  run_lock.reset();
}

void Trainer::Impl::prepare() {
  const Config& c = config;
  // The processes of a run check first that they train the same thing, from the same state.
  if (options.process_group) {
    agree_on_config(*options.process_group, c);
    // What this process starts from: its kind, step and a hash of the whole state (what training continues
    // from, so a byte-identical copy of the checkpoint agrees and another step or run does not).
    StartState from;
    const bool has_state = !start.adam_m.empty() || !start.sgd_momentum.empty();
    from.kind = !resuming   ? (start.parameters.empty() ? "a fresh model" : "a model set by the caller")
                : has_state ? "a full checkpoint"
                            : "a checkpoint without optimizer state (weights only)";
    from.step = start.position.step;
    from.file = resumed_checkpoint.string();
    from.sha256 =
        hash_of_state({&start.parameters, &start.adam_m, &start.adam_v, &start.sgd_momentum},
                      std::to_string(start.position.step) + " " + std::to_string(start.position.epoch) + " " +
                          std::to_string(start.position.epoch_step) + " " + start_optimizer);
    agree_on_start(*options.process_group, from);
  }
  // Then the folder (it sets run_dir): one in use or holding another run is refused before anything is
  // loaded, and a refused plan below writes its report into a folder this run holds.
  claim_run_folder();
  step = start.position.step;
  // The planner models the real backends; a test's own backend (fault injection) is not planned.
  std::optional<MemoryPlan> plan;
  if (!options.make_backend || !c.memory.growth) plan = plan_memory(c);
  if (plan && !options.make_backend) refuse_if_plan_cannot_fit(*plan);
  std::vector<SampleDigest> content;  // the files' bytes, for the processes to compare
  if (options.dataset) {
    dataset = options.dataset;
  } else {
    PreflightReport report;
    dataset = open_dataset(c, &report, preparation_stop.get_token(), options.process_group != nullptr);
    if (c.data.source != "synthetic") out.on_log(LogLevel::info, report.summary());
    for (PreflightReport::SampleDigest& d : report.content) content.push_back({std::move(d.name), d.sha256});
  }
  if (dataset->channels() != c.model.in_channels)
    throw ConfigError("model.in_channels", "is " + std::to_string(c.model.in_channels) +
                                               " but the images have " + std::to_string(dataset->channels()) +
                                               " channels");
  if (dataset->height() % c.model.size_multiple() != 0 || dataset->width() % c.model.size_multiple() != 0)
    throw ConfigError("data.image_size", "images of " + std::to_string(dataset->height()) + "x" +
                                             std::to_string(dataset->width()) +
                                             " are not multiples of 2^depth");
  // Under an address-space limit (ulimit -v), the plan must also fit what the limit leaves now that the data
  // is in memory: past it, oneDNN's code generator dies of the failed mapping instead of reporting it.
  if (plan && !options.make_backend && fit_address_space_limit(*plan, c, read_address_space()))
    refuse_if_plan_cannot_fit(*plan);
  split = split_dataset(dataset->size(), c.data.val_fraction, c.data.seed);
  choose_validation_split();
  // Every process splits its own copy of the data: the copies, and the splits (a resumed run's comes from its
  // folder's validation.json), must be the same.
  if (options.process_group) {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the split's sample indices
    for (const auto* part : {&split.train, &split.val})
      for (const std::size_t i : *part) hash = (hash ^ i) * 1099511628211ull;
    agree_on_dataset(*options.process_group,
                     std::to_string(dataset->size()) + " samples of " + std::to_string(dataset->height()) +
                         "x" + std::to_string(dataset->width()) + "x" + std::to_string(dataset->channels()) +
                         " (" + std::to_string(split.train.size()) + " train, " +
                         std::to_string(split.val.size()) + " validation, split " + std::to_string(hash) +
                         ")");
    agree_on_content(*options.process_group, content);
  }

  // The step as the config sets it (the planner plans the same, step/step_options.h); this run adds its
  // seams: the communicator between processes, the backends of options.make_backend, the reservations.
  DataParallelOptions dpo = step_options(
      c, device_ids(options.process_group ? local_devices(*options.process_group, c.devices) : c.devices));
  if (ProcessGroup* group = options.process_group) {
    // This process's replicas are the run's first.. first + local - 1, of every process's in rank order.
    const ReplicaRange range = replica_range(*group, static_cast<int>(dpo.devices.size()));
    // The processes on this host share its devices list, and with it its cores.
    dpo.cpu_replicas_on_host = static_cast<int>(std::count_if(
        c.devices.begin(), c.devices.end(), [](const std::string& d) { return d.starts_with("cpu"); }));
    dpo.make_communicator = [this, group, range](std::span<Backend* const> ranks) {
      std::string how;
      std::unique_ptr<Communicator> joined =
          join_replicas(*group, ranks, range.first, range.world, config.cuda, how);
      out.on_log(LogLevel::info, "gradients between the processes: " + how);
      return joined;
    };
    out.on_log(LogLevel::info, group->describe(group->rank()) + " of " + std::to_string(group->size()) +
                                   " processes: replicas " + std::to_string(range.first) + " to " +
                                   std::to_string(range.first + static_cast<int>(dpo.devices.size()) - 1) +
                                   " of the run's " + std::to_string(range.world));
  }
  // The data, the split and the run's length are known: a run that cannot learn, or a setting it would never
  // read, is refused here, before any device memory, checkpoint, log or step.
  try {
    plan_run_length();
    refuse_what_cannot_learn();
  } catch (const Error&) {
    // A new run refused here has written only its validation.json: take it back, so that the folder does
    // not hold "a previous run" the corrected config would be refused for.
    if (!resuming && start.position.step == 0 && (options.write_metrics || options.write_checkpoints)) {
      try {
        remove_run_file(run_dir, kValidationSplitName);
      } catch (const Error& e) {
        out.on_log(LogLevel::warning, e.what());
      }
    }
    throw;
  }
  dpo.make_backend = options.make_backend;
  if (!c.memory.growth) {
    // Preallocation: each device reserves what the planner says this run will hold at its peak.
    for (const DevicePlan& d : plan->devices) {
      dpo.reserve_bytes.push_back(d.peak_reserved);
      out.on_log(LogLevel::info, d.device + ": reserving " + format_bytes(d.peak_reserved) +
                                     " up front (memory.growth false: the planned peak)");
    }
  }
  try {
    dp = std::make_unique<DataParallel>(dpo);
  } catch (const OutOfMemoryError& e) {
    // A reservation (memory.growth false) or the parameters themselves do not fit: the same typed report
    // as for a failed step, with the remedies, not a bare message.
    std::string fitting;
    OutOfMemoryReport report{.step = step + 1,
                             .requested_bytes = e.requested(),
                             .category = e.category(),
                             .capacity_bytes = e.stats().capacity,
                             .in_use_bytes = e.stats().in_use,
                             .in_use_by = e.stats().in_use_by,
                             .remedies = remedies_for(c, fitting),
                             .recovered = false,
                             .batch_size = 0,
                             .accumulation = 0,
                             .planned = false,
                             .resume_from = {}};
    report.resume_from = earlier_last_checkpoint();
    out.on_error({.type = to_string(ErrorKind::out_of_memory),
                  .device = e.device(),
                  .message = std::string(e.what()) + (fitting.empty() ? "" : "; what fits: " + fitting),
                  .fatal = true,
                  .where = e.location(),
                  .out_of_memory = report});
    error_reported = true;
    throw;
  }
  {
    std::vector<Backend*> replicas;
    replicas.reserve(static_cast<std::size_t>(dp->replicas()));
    for (int r = 0; r < dp->replicas(); ++r) replicas.push_back(&dp->backend(r));
    overhead = std::make_unique<OverheadRecorder>(replicas, c.precision);
  }

  const LossScaling scaling = options.loss_scaling.value_or(loss_scaling_for(c.precision));
  // A dynamic scale continues from the checkpoint's; one saved by a run that did not scale (1) starts over.
  const TrainingPosition& from = start.position;
  scaler = scaling.dynamic && from.step > 0 && from.loss_scale != 1.0
               ? LossScaler(scaling, from.loss_scale, from.clean_steps)
               : LossScaler(scaling);
  last_metrics = from.metrics;
  dp->set_parameters(start.parameters.empty() ? UNet::initial_slab(c.model, c.train.seed) : start.parameters);
  // The optimizer counts the steps it took (Adam's bias correction): skipped steps are not among them.
  if (auto restored = starting_optimizer_state(); !restored.empty())
    dp->set_optimizer_state(restored, from.step - skipped_steps);

  // The last point to stop at before the run writes into its folder.
  if (preparation_stop.stop_requested()) throw Error(ErrorKind::cancelled, "the preparation was stopped");
  const bool resumed = resuming || from.step > 0;
  if (options.write_metrics) {
    metrics_log = std::make_unique<MetricsLog>(run_dir / kMetricsFileName, resumed);
    if (metrics_log->cut_bytes() > 0)
      out.on_log(LogLevel::info, "cut " + std::to_string(metrics_log->cut_bytes()) +
                                     " bytes of a partial last record off " +
                                     (run_dir / kMetricsFileName).string());
    metrics_log->write_start(resumed, step, epoch);
    out.targets.push_back(metrics_log.get());
  }
  if (options.write_checkpoints) {
    // A crash during a save leaves a temp file beside the checkpoints (the checkpoint itself stays whole).
    // Only this run writes into the folder now (run_lock), so any temp file here is a leftover.
    for (const auto& stale : remove_stale_temp_files(run_dir))
      out.on_log(LogLevel::info, "removed " + stale.string() + ", left by an interrupted save");
    saved_config = c;
    if (!c.data.path.empty())
      saved_config.data.path = std::filesystem::absolute(c.resolve(c.data.path)).lexically_normal().string();
    if (!c.data.validation_split.empty())
      saved_config.data.validation_split =
          std::filesystem::absolute(c.resolve(c.data.validation_split)).lexically_normal().string();
    saved_config.checkpoint.dir = run_dir.string();
    saved_config.base_dir.clear();
    checkpoints = std::make_unique<CheckpointPolicy>(c.checkpoint, run_dir, resumed, step, out);
  }

  for (int r = 0; r < dp->replicas(); ++r) info.devices.push_back(dp->backend(r).info());
  const std::vector<std::int64_t> world_batch = replica_split(c.train.batch_size, dp->world_replicas());
  info.device_batch.assign(world_batch.begin() + dp->first_replica(),
                           world_batch.begin() + dp->first_replica() + dp->replicas());
  info.global_batch = c.train.batch_size;
  info.accumulation = c.train.accumulation;
  const std::int64_t spe = info.steps_per_epoch;
  schedule.emplace(c.schedule, c.train.lr, info.total_steps, spe);
  early_stopping = EarlyStopping(c.early_stopping);
  restore_training_state(from.training_state);
  info.start_step = step;
  info.start_epoch = epoch;
  info.parameter_count = dp->model(0).parameter_count();
  info.dataset = dataset->describe();
  info.precision = to_string(c.precision);
  info.run_dir = run_dir.string();
  out.on_start(info);
  sample_memory();
  report_memory();
  // Samples come from this thread, while the replicas work: Backend allows sample_device() and
  // allocator().stats() from any thread.
  sampler = std::jthread([this](const std::stop_token& stop) {
    std::mutex wait_mutex;
    std::condition_variable_any wake;
    const auto period = std::chrono::duration<double>(options.memory_report_seconds);
    for (;;) {
      std::unique_lock lock(wait_mutex);
      if (wake.wait_for(lock, stop, period, [] { return false; })) return;
      if (stop.stop_requested()) return;
      sample_memory();
    }
  });
}

void Trainer::Impl::plan_run_length() {
  const Config& c = config;
  effective_batch = start.position.effective_batch > 0 ? start.position.effective_batch
                                                       : c.train.batch_size * c.train.accumulation;
  accumulation = c.train.accumulation;
  step = start.position.step;
  epoch = start.position.epoch;
  epoch_step = start.position.epoch_step;
  skipped_steps = start.position.skipped_steps;
  info = {};
  info.train_samples = static_cast<std::int64_t>(split.train.size());
  info.val_samples = static_cast<std::int64_t>(split.val.size());
  info.steps_per_epoch = steps_per_epoch(split.train.size(), effective_batch, 1);
  if (effective_batch > static_cast<std::int64_t>(split.train.size()))
    out.on_log(LogLevel::warning,
               "train.batch_size " + std::to_string(c.train.batch_size) +
                   (c.train.accumulation > 1 ? " x train.accumulation " + std::to_string(c.train.accumulation)
                                             : std::string()) +
                   " is more than the " + std::to_string(split.train.size()) +
                   " training samples: each step takes all " + std::to_string(split.train.size()) +
                   " (one step per epoch)");
  map_start_position(info.steps_per_epoch);
  const std::int64_t spe = info.steps_per_epoch;
  info.epochs = c.train.steps > 0 ? c.train.steps / spe + (c.train.steps % spe ? 1 : 0) : c.train.epochs;
  if (c.train.steps > 0) {
    info.total_steps = c.train.steps;
  } else {
    // To the end of epoch train.epochs: for a fresh or unchanged run epochs x steps per epoch; a resumed run
    // whose steps per epoch changed finishes its epochs at the new size.
    const std::int64_t left = checked_mul(std::max<std::int64_t>(0, c.train.epochs - epoch), spe,
                                          "train.epochs x steps per epoch") -
                              epoch_step;
    info.total_steps = checked_add(step, std::max<std::int64_t>(0, left), "the run's steps");
  }
  if (step > 0 && step >= info.total_steps)
    out.on_log(LogLevel::warning, "the checkpoint is at step " + std::to_string(step) + " (epoch " +
                                      std::to_string(epoch) + "), already at the end this config sets (" +
                                      (c.train.steps > 0 ? "train.steps " + std::to_string(c.train.steps)
                                                         : "train.epochs " + std::to_string(c.train.epochs)) +
                                      "): nothing is trained; raise it to train on");
}

void Trainer::Impl::refuse_what_cannot_learn() {
  const Config& c = config;
  std::vector<ConfigProblem> problems;
  // No validation sample although the config asked for some (data.val_fraction 0 is training_problems'):
  // a data.validation_split, or a resumed run's own validation.json, that lists none.
  if (split.val.empty() && (c.data.val_fraction > 0 || !c.data.validation_split.empty()))
    problems = validation_problems(
        c, "the run has no validation sample (" +
               (c.data.validation_split.empty()
                    ? (run_dir / kValidationSplitName).string() + ", the split this run keeps, lists none"
                    : "data.validation_split lists none of " + dataset->describe()) +
               ")");
  const std::string steps_text = c.train.steps > 0
                                     ? "train.steps " + std::to_string(c.train.steps)
                                     : "train.epochs " + std::to_string(c.train.epochs) + " x " +
                                           std::to_string(info.steps_per_epoch) + " steps per epoch of " +
                                           std::to_string(split.train.size()) + " training samples";
  if (auto p = warmup_problem(c, info.total_steps, steps_text)) problems.push_back(std::move(*p));
  throw_config_problems(problems);

  // The training masks, when reading them costs a copy each (the dataset holds every sample in memory); a
  // dataset decoded on demand is counted by the first epoch instead (loop()), so that the start does not
  // decode everything twice.
  const auto* files = dynamic_cast<const FileDataset*>(dataset.get());
  const bool in_memory = dynamic_cast<const CachedDataset*>(dataset.get()) != nullptr ||
                         (files && files->cached_count() == files->size());
  if (!in_memory) return;
  std::array<std::int64_t, 256> pixels_of{};  // pixels per mask value
  for (const std::size_t i : split.train)
    for (const std::uint8_t v : dataset->get(i).mask) ++pixels_of[v];
  std::int64_t labelled = 0;
  double weight_sum = 0;
  std::vector<std::string> present;
  for (int v = 0; v < 256; ++v) {
    const std::int64_t n = pixels_of[static_cast<std::size_t>(v)];
    if (n == 0 || v == c.loss.ignore_index) continue;
    // A binary model's masks are binarised around the ignore label: any other value than 0 is foreground.
    const int cls = c.model.classes == 1 ? (v ? 1 : 0) : v;
    if (cls >= std::max(c.model.classes, 2)) continue;  // refused by the backend, naming the file
    labelled += n;
    weight_sum += static_cast<double>(n) * c.loss.class_weight(cls);
    if (std::find(present.begin(), present.end(), std::to_string(cls)) == present.end())
      present.push_back(std::to_string(cls));
  }
  std::string classes;
  for (std::size_t i = 0; i < present.size(); ++i)
    classes += (i == 0 ? "" : i + 1 == present.size() ? " and " : ", ") + present[i];
  refuse_unlabelled(
      labelled, weight_sum,
      "the " + std::to_string(split.train.size()) + " training mask" + (split.train.size() == 1 ? "" : "s"),
      present.empty() ? std::string() : (present.size() == 1 ? "class " : "classes ") + classes);
  masks_checked = true;
}

void Trainer::Impl::refuse_unlabelled(std::int64_t labelled, double weight_sum, const std::string& masks,
                                      const std::string& classes) const {
  const LossConfig& loss = config.loss;
  if (labelled == 0 && loss.ignore_index >= 0)
    throw ConfigError("loss.ignore_index",
                      "is " + std::to_string(loss.ignore_index) + ", and it marks every pixel of " + masks +
                          ": no pixel is labelled, so the run cannot learn, and its metrics would be over "
                          "nothing; set it to the value that marks only the unlabelled pixels (-1: none)");
  if (labelled > 0 && weight_sum <= 0 && !loss.class_weights.empty()) {
    nlohmann::json weights = loss.class_weights;
    throw ConfigError(
        "loss.class_weights",
        weights.dump() + " weighs 0 every class " + masks + " label" +
            (classes.empty() ? std::string() : " (" + classes + ")") +
            ": no labelled pixel counts in the loss, so the run cannot learn; weigh a class the "
            "masks hold above 0");
  }
}

bool Trainer::Impl::handle_commands() {
  std::unique_lock lock(mutex);
  for (;;) {
    if (checkpoint_requested) {
      checkpoint_requested = false;
      const bool paused = pause_requested;
      lock.unlock();
      if (checkpoints) {
        char name[64];
        std::snprintf(name, sizeof name, "manual-step-%06lld.safetensors", static_cast<long long>(step));
        save({{run_dir / name, "requested", false}});
        // No step reports it while paused: wait for the save and say so now, not after the resume.
        if (paused) finish_saves();
      } else {
        out.on_log(LogLevel::warning, "a checkpoint was requested but this run writes none");
      }
      lock.lock();
      continue;
    }
    if (stop_requested) return false;
    if (!pause_requested) break;
    if (state != TrainerState::paused) {
      lock.unlock();
      set_state(TrainerState::paused);
      lock.lock();
      continue;
    }
    commands.wait(lock, [&] { return !pause_requested || stop_requested || checkpoint_requested; });
  }
  if (state != TrainerState::running) {
    lock.unlock();
    set_state(TrainerState::running);
  }
  return true;
}

StepBatches Trainer::Impl::build_step(const std::vector<std::size_t>& order, std::int64_t at_epoch,
                                      std::int64_t at_step, std::int64_t micro_batches) const {
  // The step's samples are the next `effective_batch` of the epoch's order, split into `micro_batches`
  // micro-batches (as evenly as they go), each split over the replicas.
  // Each micro-batch is split over the run's replicas (of every process); this process builds its own
  // replicas' shares.
  const auto n = static_cast<std::int64_t>(order.size());
  const int world = dp->world_replicas(), first_replica = dp->first_replica(), local = dp->replicas();
  const std::int64_t first = at_step * effective_batch;
  const std::int64_t count = std::min(n, first + effective_batch) - first;
  StepBatches step_batches;
  std::int64_t at = first;
  for (const std::int64_t micro : replica_split(count, static_cast<int>(micro_batches))) {
    if (micro == 0) break;
    std::vector<HostBatch> shares(static_cast<std::size_t>(local));
    const std::vector<std::int64_t> split_sizes = replica_split(micro, world);
    for (int r = 0; r < world; ++r) {
      const std::int64_t share = split_sizes[static_cast<std::size_t>(r)];
      if (r >= first_replica && r < first_replica + local) {
        std::vector<std::size_t> samples;
        std::vector<std::int64_t> positions;
        for (std::int64_t p = at; p < at + share; ++p) {
          samples.push_back(order[static_cast<std::size_t>(p)]);
          positions.push_back(p);
        }
        assemble_batch(*dataset, samples, positions, at_epoch, config.data.augment, config.data.seed,
                       shares[static_cast<std::size_t>(r - first_replica)]);
      }
      at += share;
    }
    step_batches.micro.push_back(std::move(shares));
  }
  return step_batches;
}

// A checkpoint's position is a count of steps into its epoch, each of the samples per step its run took. A
// run resumed with another batch (or accumulation) continues at the same sample of the epoch's order, rounded
// up to its own next step, so that no sample is taken twice in an epoch; a position at or past the end of the
// epoch (a larger batch, a training set that shrank) continues at the start of the next epoch.
void Trainer::Impl::map_start_position(std::int64_t spe) {
  if (epoch_step == 0) return;
  const std::int64_t was_batch = start_saved_batch > 0 ? start_saved_batch : effective_batch;
  if (was_batch == effective_batch && epoch_step < spe) return;
  const std::int64_t samples = checked_mul(epoch_step, was_batch, "the checkpoint's position");
  const std::int64_t mapped = samples / effective_batch + (samples % effective_batch ? 1 : 0);
  const std::string from = "the checkpoint's position, step " + std::to_string(epoch_step) + " of epoch " +
                           std::to_string(epoch + 1) + " at " + std::to_string(was_batch) +
                           " samples per step (" + std::to_string(samples) + " samples into the epoch),";
  const std::string now = std::to_string(split.train.size()) + " training samples at " +
                          std::to_string(effective_batch) + " per step (" + std::to_string(spe) +
                          " steps per epoch)";
  if (mapped >= spe) {
    out.on_log(LogLevel::warning, from + " is at or past the end of an epoch of " + now +
                                      ": the run continues at the start of epoch " +
                                      std::to_string(epoch + 2));
    ++epoch;
    epoch_step = 0;
    return;
  }
  out.on_log(LogLevel::warning,
             from + " continues at step " + std::to_string(mapped + 1) + " of an epoch of " + now);
  epoch_step = mapped;
}

bool Trainer::Impl::recover_from(const StepOutcome& outcome) {
  try {
    std::rethrow_exception(outcome.error);
  } catch (const OutOfMemoryError& e) {
    const MemoryStats& s = e.stats();
    OutOfMemoryReport report{.step = step + 1,
                             .requested_bytes = e.requested(),
                             .category = e.category(),
                             .capacity_bytes = s.capacity,
                             .in_use_bytes = s.in_use,
                             .in_use_by = s.in_use_by,
                             .remedies = {},
                             .recovered = false,
                             .batch_size = 0,
                             .accumulation = 0,
                             .planned = false,
                             .resume_from = {}};
    // The planner's remedies for the settings that just failed.
    Config failing = config;
    failing.train.batch_size = (effective_batch + accumulation - 1) / accumulation;
    failing.train.accumulation = accumulation;
    std::string remedy_names;
    report.remedies = remedies_for(failing, remedy_names);
    const std::int64_t micro = (effective_batch + accumulation - 1) / accumulation;
    const bool can_recover = config.memory.auto_recover_oom && micro > 1;
    report.recovered = can_recover;
    std::string message =
        std::string(e.what()) + (remedy_names.empty() ? "" : "; what fits: " + remedy_names);
    const auto oom_error = [&](bool fatal) {
      return ErrorReport{.type = to_string(ErrorKind::out_of_memory),
                         .device = e.device(),
                         .message = message,
                         .fatal = fatal,
                         .where = e.location(),
                         .out_of_memory = report};
    };
    if (can_recover) {
      accumulation *= 2;
      const std::int64_t new_micro = (effective_batch + accumulation - 1) / accumulation;
      report.batch_size = new_micro;
      report.accumulation = accumulation;
      saved_config.train.batch_size = new_micro;
      saved_config.train.accumulation = accumulation;
      message += "; recovering: micro-batch " + std::to_string(micro) + " -> " + std::to_string(new_micro) +
                 ", accumulation " + std::to_string(accumulation / 2) + " -> " +
                 std::to_string(accumulation) + ", the same " + std::to_string(effective_batch) +
                 " samples per step";
      out.on_error(oom_error(false));
      out.on_log(LogLevel::warning, message);
      return true;
    }
    // The step changed nothing: save where training stands, so that the run can be resumed with a remedy.
    if (step > 0) save_last();
    finish_saves();
    if (last_saved()) report.resume_from = last_saved()->first.string();
    out.on_error(oom_error(true));
    error_reported = true;
    return false;
  } catch (...) {
    return false;
  }
}

std::vector<RemedyReport> Trainer::Impl::remedies_for(const Config& failing, std::string& fitting) {
  std::vector<RemedyReport> remedies;
  try {
    std::vector<Remedy> ranked = rank_remedies(failing);
    // Under an address-space limit, a remedy fits only what the limit leaves, as the plan did.
    if (const AddressSpace space = read_address_space(); space.limited()) {
      for (Remedy& r : ranked) fit_address_space_limit(r.plan, failing, space);
      std::stable_partition(ranked.begin(), ranked.end(), [](const Remedy& r) { return r.plan.fits; });
    }
    for (const Remedy& r : ranked) {
      std::int64_t peak = 0;
      for (const DevicePlan& d : r.plan.devices) peak = std::max(peak, d.peak);
      remedies.push_back({r.name, r.description, r.changes, r.changes_model, peak, r.plan.fits});
      if (r.plan.fits && fitting.size() < 200) fitting += (fitting.empty() ? "" : "; ") + r.name;
    }
  } catch (const Error& planning) {
    out.on_log(LogLevel::warning, std::string("could not rank remedies: ") + planning.what());
  }
  return remedies;
}

void Trainer::Impl::refuse_if_plan_cannot_fit(const MemoryPlan& plan) {
  for (const DevicePlan& d : plan.devices) {
    // The planner replays the engine's allocations block for block, so on a CPU its peak is exact; on a GPU
    // the library's own workspaces may differ a little, so only a clear excess is refused there.
    const double margin = d.device.starts_with("cpu") ? 1.0 : 1.1;
    // Under an address-space limit what the allocator reserves is mapped, and must fit.
    const std::int64_t need = d.capacity_note.empty() ? d.peak : d.peak_reserved;
    if (d.fits || static_cast<double>(need) <= margin * static_cast<double>(d.capacity)) continue;
    if (config.memory.auto_recover_oom) {
      out.on_log(LogLevel::info, d.device + ": the planned peak " + format_bytes(d.peak) + " is over the " +
                                     format_bytes(d.capacity) +
                                     " there is; memory.auto_recover_oom will shrink the micro-batch");
      return;
    }
    std::string fitting;
    OutOfMemoryReport report{.step = step + 1,
                             .requested_bytes = need,
                             .category = MemoryCategory::other,
                             .capacity_bytes = d.capacity,
                             .in_use_bytes = 0,
                             .in_use_by = d.at_peak,
                             .remedies = remedies_for(config, fitting),
                             .recovered = false,
                             .batch_size = 0,
                             .accumulation = 0,
                             .planned = true,
                             .resume_from = {}};
    // The category that holds the most at the peak is the one to name.
    for (int k = 0; k < memory_category_count; ++k)
      if (d.at_peak[static_cast<std::size_t>(k)] > d.at_peak[static_cast<std::size_t>(report.category)])
        report.category = static_cast<MemoryCategory>(k);
    report.resume_from = earlier_last_checkpoint();
    MemoryStats stats;
    stats.capacity = d.capacity;
    stats.cap = config.memory.cap_bytes();
    stats.at_peak_by = d.at_peak;
    const OutOfMemoryError error(
        d.device,
        "out of memory: refused before training: the memory plan for this run peaks at " +
            format_bytes(need) + (d.capacity_note.empty() ? "" : " reserved") + " on " + d.device +
            (!d.capacity_note.empty() ? ", over the " + format_bytes(d.capacity) + " " + d.capacity_note
             : stats.cap > 0          ? ", over its cap of " + format_bytes(d.capacity) + " (memory.cap_mib)"
                                      : ", over its " + format_bytes(d.capacity)) +
            "; nothing was allocated" + (fitting.empty() ? "" : "; what fits: " + fitting),
        d.peak, report.category, stats);
    // The report goes to metrics.jsonl as well, although the run never got as far as opening it.
    std::unique_ptr<MetricsLog> log;
    if (options.write_metrics) {
      std::error_code ec;
      std::filesystem::create_directories(run_dir, ec);
      if (!ec) {
        log = std::make_unique<MetricsLog>(run_dir / kMetricsFileName, true);
        out.targets.push_back(log.get());
      }
    }
    out.on_error({.type = to_string(ErrorKind::out_of_memory),
                  .device = d.device,
                  .message = error.what(),
                  .fatal = true,
                  .where = error.location(),
                  .out_of_memory = report});
    if (log) out.targets.pop_back();
    error_reported = true;
    throw error;
  }
}

void Trainer::Impl::stop_diverged(const std::string& what, bool state_is_finite) {
  const std::string cause = scaler.dynamic()
                                ? "even at the smallest loss scale (" + number_text(scaler.scale()) + ")"
                                : "in " + std::string(to_string(config.precision)) + ", which scales no loss";
  // A finite state is where training stands (the step changed nothing): save it, as for out-of-memory. A
  // non-finite one is never saved, so the last finite checkpoint stays as it was.
  if (state_is_finite && step > 0) save_last();
  finish_saves();
  const auto& last_saved = this->last_saved();
  const std::string resume_from =
      last_saved ? last_saved->first.string() + " (step " + std::to_string(last_saved->second) +
                       ") holds the last finite state"
                 : std::string(
                       "no checkpoint of this run was saved before it diverged, so there is none to "
                       "resume: start again");
  const Error error(ErrorKind::diverged,
                    "training diverged at step " + std::to_string(step + 1) + ": " + what + " " + cause +
                        (state_is_finite ? "; the step was not applied" : "") +
                        "; the likely cause is a learning rate too high for this model (train.lr " +
                        number_text(config.train.lr) + "); " + resume_from,
                    {},
                    "lower train.lr (now " + number_text(config.train.lr) + ", try " +
                        number_text(config.train.lr / 10) + " or less)" +
                        (last_saved ? " and resume from " + last_saved->first.string() : ""));
  out.on_error({.type = to_string(error.kind()),
                .device = {},
                .message = error.what(),
                .fatal = true,
                .where = error.location(),
                .out_of_memory = {}});
  error_reported = true;
  throw error;
}

EpochReport Trainer::Impl::validate(double epoch_loss, double epoch_seconds) {
  const auto started = Clock::now();
  // Batches of the current micro-batch size: what training fits, forward-only validation fits too.
  const std::int64_t batch = (effective_batch + accumulation - 1) / accumulation;
  // Split over the run's replicas; this process loads its own replicas' shares.
  const int world = dp->world_replicas(), first = dp->first_replica(), local = dp->replicas();
  std::vector<std::vector<HostBatch>> per_replica(static_cast<std::size_t>(local));
  const auto n = static_cast<std::int64_t>(split.val.size());
  for (std::int64_t begin = 0; begin < n; begin += batch) {
    const std::int64_t end = std::min(n, begin + batch);
    const std::vector<std::int64_t> sizes = replica_split(end - begin, world);
    std::int64_t at = begin;
    for (int r = 0; r < world; ++r) {
      const std::int64_t count = sizes[static_cast<std::size_t>(r)];
      const bool mine = r >= first && r < first + local;
      if (count > 0 && mine) {
        std::vector<std::size_t> samples(split.val.begin() + at, split.val.begin() + at + count);
        std::vector<std::int64_t> positions(static_cast<std::size_t>(count), 0);
        HostBatch b;
        assemble_batch(*dataset, samples, positions, 0, false, 0, b);
        per_replica[static_cast<std::size_t>(r - first)].push_back(std::move(b));
      }
      at += count;
    }
  }
  EpochReport r;
  r.step = step;
  r.loss = epoch_loss;
  if (n > 0) {
    const EvalOutcome e = dp->evaluate(per_replica);
    const SegmentationMetrics m = segmentation_metrics(e.counts, config.model.classes);
    // A loss over no labelled pixel is absent as the metrics are: the cross-entropy/focal term's denominator
    // is the labelled pixels' class weights, and an image without labelled pixels has no Dice to speak of.
    const LossDesc& d = config.loss;
    const bool term_over_nothing =
        d.has_cross_entropy() && d.cross_entropy_weight > 0 && e.loss.class_weight_sum <= 0;
    r.val_loss = e.loss.labelled_pixels > 0 && !term_over_nothing ? e.loss_value : NAN;
    if (e.loss.labelled_pixels == 0 && !warned_unlabelled_validation) {
      warned_unlabelled_validation = true;
      out.on_log(LogLevel::warning,
                 "the " + std::to_string(n) + " validation sample" + (n == 1 ? " has" : "s have") +
                     " no labelled pixel (loss.ignore_index " + std::to_string(d.ignore_index) +
                     " marks them all): val_loss, val_iou, val_dice and val_acc are absent, and no "
                     "checkpoint, schedule or early stopping that watches them sees an improvement");
    }
    r.val_iou = m.iou;
    r.val_dice = m.dice;
    r.val_acc = m.accuracy;
    r.val_class_iou = m.class_iou;
    r.val_class_dice = m.class_dice;
  } else {
    r.val_loss = r.val_iou = r.val_dice = r.val_acc = NAN;
  }
  const double seconds = seconds_since(started);
  throughput.add_validation(seconds);
  r.seconds = epoch_seconds + seconds;
  last_metrics = monitored_metrics(r);
  return r;
}

namespace {
constexpr std::string_view kValidationSplitFormat = "unet-workbench-validation/1";
}  // namespace

void Trainer::Impl::choose_validation_split() {
  const Config& c = config;
  const std::filesystem::path own = run_dir / kValidationSplitName;
  std::filesystem::path from;
  bool required = false;  // a split the config names must be usable; a resumed run's own falls back
  if (!c.data.validation_split.empty()) {
    from = c.resolve(c.data.validation_split);
    if (std::filesystem::is_directory(from)) from /= kValidationSplitName;
    required = true;
  } else if ((resuming || start.position.step > 0) && std::filesystem::exists(own)) {
    from = own;
  }
  if (!from.empty()) {
    const auto refuse = [&](const std::string& why) {
      if (required) throw ConfigError("data.validation_split", from.string() + ": " + why);
      out.on_log(LogLevel::warning,
                 from.string() + ": " + why + "; validating on the split of data.val_fraction and data.seed");
    };
    // Size and nesting bounded (unet/core/json_limits.h) before anything is parsed or held.
    std::string text;
    const std::optional<std::string> unreadable = read_capped_file(from, kMaxValidationSplitBytes, text);
    nlohmann::json j;
    try {
      if (!unreadable) j = parse_json_bounded(text, /*allow_exceptions=*/false);
    } catch (const JsonTooDeep&) {
      j = nlohmann::json::value_t::discarded;  // refused below as not a split this program wrote
    }
    std::string().swap(text);
    if (unreadable) {
      refuse(*unreadable);
    } else if (!j.is_object() || j.value("format", "") != kValidationSplitFormat || !j.contains("samples") ||
               !j["samples"].is_array()) {
      refuse("not a validation split written by unet-workbench (no \"format\": \"" +
             std::string(kValidationSplitFormat) + "\" with a \"samples\" list)");
    } else {
      std::map<std::string, std::size_t> index;
      for (std::size_t i = 0; i < dataset->size(); ++i) index.emplace(dataset->sample_name(i), i);
      std::vector<bool> is_val(dataset->size(), false);
      std::size_t listed = 0, missing = 0;
      for (const auto& name : j["samples"]) {
        ++listed;
        const auto it = name.is_string() ? index.find(name.get<std::string>()) : index.end();
        if (it == index.end()) {
          ++missing;
        } else {
          is_val[it->second] = true;
        }
      }
      if (listed > 0 && missing == listed) {
        refuse("names none of the " + std::to_string(dataset->size()) + " samples of " + dataset->describe());
      } else {
        // Training keeps the order of the computed split (the data order follows from it, so a resume whose
        // validation set is unchanged trains exactly as before); validation runs in index order.
        DataSplit chosen;
        for (const auto* part : {&split.train, &split.val})
          for (const std::size_t i : *part)
            if (!is_val[i]) chosen.train.push_back(i);
        for (std::size_t i = 0; i < is_val.size(); ++i)
          if (is_val[i]) chosen.val.push_back(i);
        split = std::move(chosen);
        out.on_log(LogLevel::info,
                   "validating on the " + std::to_string(split.val.size()) + " samples " + from.string() +
                       " lists" +
                       (missing ? " (" + std::to_string(missing) + " of its " + std::to_string(listed) +
                                      " are no longer in the dataset)"
                                : std::string()));
        if (split.train.empty())
          throw ConfigError(required ? "data.validation_split" : "data.val_fraction",
                            from.string() + " leaves no sample of " + dataset->describe() + " to train on");
        if (from == own) return;  // the run's own file stays as it was
      }
    }
  }
  if (!options.write_metrics && !options.write_checkpoints) return;
  nlohmann::json names = nlohmann::json::array();
  for (const std::size_t i : split.val) names.push_back(dataset->sample_name(i));
  const nlohmann::json file{
      {"format", kValidationSplitFormat}, {"dataset", dataset->describe()}, {"samples", std::move(names)}};
  // The names are UTF-8 (preflight refuses others); the dataset's description holds its folder, which may
  // not be, and is only shown.
  const std::string text = file.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_file_atomically(own, std::as_bytes(std::span(text.data(), text.size())));
}

std::vector<std::vector<float>> Trainer::Impl::starting_optimizer_state() {
  if (start.adam_m.empty() && start.adam_v.empty() && start.sgd_momentum.empty()) return {};
  const OptimizerConfig& o = config.optimizer;
  const std::string& made_by = start_optimizer.empty() ? o.kind : start_optimizer;
  // Adam's and AdamW's moments mean the same; SGD's buffer is another thing.
  if ((o.kind == "sgd") == (made_by == "sgd")) {
    if (auto kept = start.optimizer_state(optimizer_slabs(o)); !kept.empty()) return kept;
  }
  out.on_log(LogLevel::warning,
             "the checkpoint's optimizer state (" + made_by + ") does not apply to optimizer.kind " + o.kind +
                 (o.kind == "sgd" && o.momentum == 0 ? " without momentum" : "") +
                 ": the optimizer starts afresh at step " + std::to_string(start.position.step));
  return {};
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
  const std::map<std::string, double> metrics = monitored_metrics(r);
  if (const auto lowered = schedule->on_validation(metrics.at(config.schedule.monitor)))
    out.on_log(LogLevel::info, "epoch " + std::to_string(r.epoch) + ": " + *lowered);
  const EarlyStopping::Verdict verdict =
      early_stopping.update(metrics.at(config.early_stopping.monitor), r.epoch, r.step);
  if (verdict == EarlyStopping::Verdict::improved && early_stopping.restores_best())
    early_stopping.keep_best_state(take_snapshot());
  if (verdict != EarlyStopping::Verdict::stop) return false;
  r.early_stop = early_stopping.stop_reason(r.epoch);
  return true;
}

void Trainer::Impl::restore_best_epoch() {
  if (!early_stopping.best()) return;
  std::optional<TrainingSnapshot> best_state = early_stopping.take_best_state();
  if (!best_state && checkpoints) {
    // Resumed since the best validation: its weights are best.safetensors when that file watches the same
    // metric and holds that epoch.
    const std::filesystem::path file = run_dir / kBestCheckpointName;
    try {
      if (config.checkpoint.monitor == config.early_stopping.monitor && std::filesystem::exists(file)) {
        finish_saves();
        Checkpoint cp = load_checkpoint(file);
        if (cp.position.step == early_stopping.best_step()) {
          TrainingSnapshot snap;
          static_cast<RunState&>(snap) = std::move(cp);
          best_state = std::move(snap);
        }
      }
    } catch (const Error& e) {
      out.on_log(LogLevel::warning, "cannot read " + file.string() + ": " + e.what());
    }
  }
  if (!best_state) {
    out.on_log(LogLevel::warning, "early stopping cannot restore the weights of epoch " +
                                      std::to_string(early_stopping.best_epoch()) +
                                      ": this process has not seen it since the resume and " +
                                      std::string(kBestCheckpointName) +
                                      " does not hold it; the run keeps its last weights");
    return;
  }
  const TrainingSnapshot& b = *best_state;
  dp->set_parameters(b.parameters);
  const TrainingPosition& at = b.position;
  if (auto kept = b.optimizer_state(optimizer_slabs(config.optimizer)); !kept.empty())
    dp->set_optimizer_state(kept, at.step - at.skipped_steps);
  step = at.step;
  epoch = at.epoch;
  epoch_step = at.epoch_step;
  skipped_steps = at.skipped_steps;
  last_metrics = at.metrics;
  out.on_log(LogLevel::info,
             "early stopping: restored the weights of epoch " + std::to_string(at.epoch) + " (step " +
                 std::to_string(at.step) + ", " + config.early_stopping.monitor + " " +
                 metric_text(*early_stopping.best()) + ")" +
                 (checkpoints ? "; " + (run_dir / kLastCheckpointName).string() + " holds them" : ""));
  save_last();
  if (checkpoints) checkpoints->mark_last_written(step);
}

TrainingSnapshot Trainer::Impl::take_snapshot() {
  TrainingSnapshot s;
  s.parameters = dp->parameters(0);
  s.set_optimizer_state(optimizer_slabs(config.optimizer), dp->optimizer_state(0));
  s.position = {.step = step,
                .epoch = epoch,
                .epoch_step = epoch_step,
                .loss_scale = scaler.scale(),
                .clean_steps = scaler.clean_steps(),
                .skipped_steps = skipped_steps,
                .effective_batch = effective_batch,
                .metrics = last_metrics,
                .training_state = training_state()};
  s.accumulation = accumulation;
  return s;
}

void Trainer::Impl::report_predictions(std::int64_t at_epoch) {
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(std::max(0, options.prediction_samples)),
                                       split.val.size());
  if (n == 0) return;
  // In chunks no larger than a training micro-batch on one device: the predictions must not need more
  // memory than the run the planner planned (under a tight cap, four images at once once ran out of it).
  const std::int64_t micro = (effective_batch + accumulation - 1) / accumulation;
  const auto chunk =
      static_cast<std::size_t>(std::max<std::int64_t>(1, (micro + dp->replicas() - 1) / dp->replicas()));
  const std::int64_t classes = config.model.classes;
  PredictionsReport report{at_epoch, step, {}};
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t count = std::min(chunk, n - first);
    HostBatch batch;
    const std::vector<std::size_t> samples(split.val.begin() + static_cast<std::ptrdiff_t>(first),
                                           split.val.begin() + static_cast<std::ptrdiff_t>(first + count));
    assemble_batch(*dataset, samples, std::vector<std::int64_t>(count, 0), 0, false, 0, batch);
    const std::vector<float> probs = dp->probabilities(batch);
    const std::int64_t pixels = batch.height * batch.width;
    for (std::size_t i = 0; i < count; ++i) {
      PredictionSample p;
      p.height = batch.height;
      p.width = batch.width;
      p.channels = batch.channels;
      p.classes = classes;
      const auto px = static_cast<std::ptrdiff_t>(pixels * batch.channels),
                 mk = static_cast<std::ptrdiff_t>(pixels);
      const auto at = static_cast<std::ptrdiff_t>(i);
      p.image.assign(batch.pixels.begin() + at * px, batch.pixels.begin() + (at + 1) * px);
      p.mask.assign(batch.masks.begin() + at * mk, batch.masks.begin() + (at + 1) * mk);
      const auto pr = static_cast<std::ptrdiff_t>(pixels * classes);
      p.probabilities.assign(probs.begin() + at * pr, probs.begin() + (at + 1) * pr);
      report.samples.push_back(std::move(p));
    }
  }
  out.on_predictions(report);
}

void Trainer::Impl::save(std::vector<CheckpointWriter::Target> targets) {
  if (!checkpoints || targets.empty()) return;
  Checkpoint cp;
  static_cast<RunState&>(cp) = take_snapshot();
  cp.config = saved_config;
  // The checkpoint names the samples per step only when they are not its config's.
  if (cp.position.effective_batch == saved_config.train.batch_size * saved_config.train.accumulation)
    cp.position.effective_batch = 0;
  checkpoints->submit(std::move(cp), std::move(targets));
}

void Trainer::Impl::save_at_epoch_end(const EpochReport& r, bool epoch_end) {
  if (checkpoints) save(checkpoints->targets_after(r, epoch_end));
}

void Trainer::Impl::sample_memory() {
  const double t = seconds_since(run_started);
  std::vector<MemoryReport> taken;
  for (int r = 0; r < dp->replicas(); ++r) {
    Backend& be = dp->backend(r);
    // Both calls are safe from this thread while the replica works (Backend's thread contract).
    const DeviceSample now = be.sample_device();
    taken.push_back({.t = t,
                     .device = be.info().id,
                     .stats = be.allocator().stats(),
                     .device_used = now.total_bytes - now.free_bytes,
                     .device_total = now.total_bytes,
                     .used_by_others = now.used_by_others_bytes,
                     .others_not_attributable = now.others_not_attributable,
                     .utilisation_percent = now.utilisation_percent,
                     .temperature_celsius = now.temperature_celsius,
                     .power_watts = now.power_watts});
  }
  std::lock_guard lock(samples_mutex);
  memory_samples.insert(memory_samples.end(), taken.begin(), taken.end());
}

void Trainer::Impl::report_memory() {
  std::vector<MemoryReport> taken;
  {
    std::lock_guard lock(samples_mutex);
    taken.swap(memory_samples);
  }
  for (const MemoryReport& r : taken) out.on_memory(r);
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
  // The prefetch thread walks the same steps; it keeps the current epoch's order to itself.
  std::int64_t prefetch_epoch = -1;
  std::vector<std::size_t> prefetch_order;
  BatchPrefetcher prefetcher(
      [&](std::int64_t at_epoch, std::int64_t at_step, std::int64_t micro) {
        if (at_epoch != prefetch_epoch) {
          prefetch_order = epoch_order(split.train, c.data.seed, at_epoch, c.data.shuffle);
          prefetch_epoch = at_epoch;
        }
        return build_step(prefetch_order, at_epoch, at_step, micro);
      },
      c.data.prefetch, epoch, epoch_step, spe, std::max<std::int64_t>(0, total - step), accumulation);
  std::optional<StepBatches> retry;  // a step to run again after out-of-memory recovery
  while (step < total && !stopped) {
    // map_start_position keeps the position inside an epoch; were it not, the steps below would never run
    // and this loop would spin.
    UNET_CHECK(
        epoch_step < spe, usage,
        "position step " + std::to_string(epoch_step) + " of an epoch of " + std::to_string(spe) + " steps");
    const std::vector<std::size_t> order = epoch_order(split.train, c.data.seed, epoch, c.data.shuffle);
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
                                                        : build_step(order, epoch, epoch_step, accumulation);
      }
      const double loss_scale = scaler.scale();
      const StepOutcome outcome = dp->compute_gradients(batches, static_cast<float>(loss_scale));
      if (!outcome.ok) {
        if (recover_from(outcome)) {  // the same step again, in smaller micro-batches
          prefetcher.set_accumulation(accumulation);
          retry = build_step(order, epoch, epoch_step, accumulation);
          continue;
        }
        std::rethrow_exception(outcome.error);
      }
      // A non-finite loss counts as a non-finite gradient: dynamic scaling skips the step, fp32 and bf16
      // stop.
      const bool loss_finite = std::isfinite(outcome.mean_loss());
      const LossScaler::Verdict verdict = scaler.update(outcome.non_finite_gradients + (loss_finite ? 0 : 1));
      if (verdict == LossScaler::Verdict::diverged)
        stop_diverged(outcome.non_finite_gradients > 0
                          ? std::to_string(outcome.non_finite_gradients) + " gradients are inf or NaN"
                          : "the loss is " + number_text(outcome.mean_loss()),
                      true);
      const bool skipped = verdict == LossScaler::Verdict::skip;
      const ScheduledValues scheduled = schedule->at(step);
      double clip_factor = 1.0;
      if (skipped) {
        ++skipped_steps;
        out.on_log(LogLevel::info, "step " + std::to_string(step + 1) +
                                       " skipped: " + std::to_string(outcome.non_finite_gradients) +
                                       " gradients were inf/NaN at loss scale " + number_text(loss_scale) +
                                       "; the scale is now " + number_text(scaler.scale()));
      } else {
        // torch.nn.utils.clip_grad_norm_'s factor, folded into the gradients' scale.
        if (c.optimizer.clip_grad_norm > 0)
          clip_factor = std::min(1.0, c.optimizer.clip_grad_norm / (outcome.gradient_norm + 1e-6));
        dp->apply_optimizer({.lr = static_cast<float>(scheduled.lr),
                             .momentum = scheduled.momentum
                                             ? std::optional<float>(static_cast<float>(*scheduled.momentum))
                                             : std::nullopt,
                             .grad_scale = static_cast<float>(clip_factor / loss_scale)});
        // Finite gradients can still overflow the weights or Adam's moments when the step size is far too
        // large; that state must neither train on nor be saved.
        if (const std::int64_t bad = dp->non_finite_state(); bad > 0)
          stop_diverged(std::to_string(bad) + " weights or optimizer moments became inf or NaN in the update",
                        false);
      }
      ++step;
      ++epoch_step;
      epoch_loss_totals.add(outcome.loss);
      trained_labelled_pixels += outcome.loss.labelled_pixels;
      trained_class_weight_sum += outcome.loss.class_weight_sum;

      const double dt = seconds_since(step_started);
      const std::int64_t samples = batches.samples();
      throughput.add_step(samples, dt);
      StepReport r;
      r.step = step;
      r.epoch = epoch;
      r.epoch_step = epoch_step;
      r.steps_per_epoch = spe;
      r.total_steps = total;
      r.loss = outcome.mean_loss();
      r.lr = scheduled.lr;
      r.grad_norm = outcome.gradient_norm;
      r.clipped = clip_factor < 1.0;
      r.img_per_s = dt > 0 ? static_cast<double>(samples) / dt : 0.0;
      r.img_per_s_avg = throughput.images_per_second();
      r.loss_scale = loss_scale;
      r.skipped = skipped;
      r.skipped_steps = skipped_steps;
      r.step_seconds = dt;
      r.data_wait_seconds = data_wait;
      r.eta_seconds = throughput.eta_seconds(step, epoch_step, spe, total);
      out.on_step(r);
      if (step == first_step + 1 && overhead->active()) measure_overhead();
      report_memory();
      report_saves();
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
      if (!masks_checked) {
        // The training masks were not read before the run (a dataset decoded on demand): a whole epoch, or
        // the whole run, has now seen them, before anything is validated or saved.
        const bool whole_epoch = epoch_first_step == 0 && epoch_step == spe;
        if (whole_epoch || step == total) {
          refuse_unlabelled(trained_labelled_pixels, trained_class_weight_sum,
                            whole_epoch ? "the " + std::to_string(split.train.size()) + " training masks"
                                        : "the training samples this run trained on",
                            {});
          masks_checked = true;
        }
      }
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
  sampler = {};  // stops and joins the sampler
  sample_memory();
  report_memory();
  set_state(TrainerState::stopping);
  // The end of the run: last.safetensors, unless the epoch's end just wrote it.
  if (checkpoints && !checkpoints->last_written_at(step)) save_last();
  finish_saves();
  if (checkpoints && checkpoints->has_unsaved()) checkpoints->throw_unsaved(step);
  set_state(stopped ? TrainerState::stopped : TrainerState::finished);
}

}  // namespace unet
