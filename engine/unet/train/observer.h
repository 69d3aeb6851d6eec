// How the trainer reports: a plain observer interface, called on the thread that runs Trainer::run(). Front
// ends adapt it (the CLI prints, the GUI re-emits Qt signals from its worker thread); the trainer itself
// writes metrics.jsonl through one. Every method has a do-nothing default.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/core/memory.h"

namespace unet {

enum class TrainerState : std::uint8_t {
  idle,
  preparing,
  running,
  paused,
  stopping,
  finished,
  stopped,
  failed
};
const char* to_string(TrainerState s) noexcept;

enum class LogLevel : std::uint8_t { info, warning, error };

struct CheckpointReport {
  std::string path;
  std::int64_t step = 0, epoch = 0;  // of the state the file holds
  std::string reason;                // "requested", "periodic", "best", "last"
  // "best": the monitor that chose it (Monitor::describe(): "val_loss", "val_iou of class 1") and the value
  // the file holds; NaN when the file does not record it (saved by a run watching another monitor).
  std::string monitor{};
  double monitor_value = NAN;
};

struct RunInfo {
  std::vector<DeviceInfo> devices;
  std::vector<std::int64_t> device_batch;  // each replica's share of a global micro-batch
  std::int64_t global_batch = 0, accumulation = 1;
  std::int64_t train_samples = 0, val_samples = 0;
  std::int64_t steps_per_epoch = 0, total_steps = 0, epochs = 0;
  std::int64_t start_step = 0, start_epoch = 0;
  std::int64_t parameter_count = 0;
  std::string dataset, precision, run_dir;
  // The run's time before this start (a resumed run: its checkpoint's TrainingPosition::training_seconds).
  double earlier_seconds = 0;
  // What the run folder's best.safetensors and last.safetensors hold at this start (a run continued in its
  // folder), as on_checkpoint reports their saves.
  std::vector<CheckpointReport> saved_checkpoints;
};

struct StepReport {
  std::int64_t step = 0;        // optimizer steps taken, this one included
  std::int64_t epoch = 0;       // 0-based epoch this step belongs to
  std::int64_t epoch_step = 0;  // steps taken in this epoch, this one included
  std::int64_t steps_per_epoch = 0, total_steps = 0;
  double loss = 0;           // mean training loss of the step
  double lr = 0;             // the learning rate this step ran with (the schedule's)
  double grad_norm = 0;      // the global L2 norm of the step's gradients, before any clipping
  bool clipped = false;      // optimizer.clip_grad_norm scaled them down
  double img_per_s = 0;      // this step's throughput
  double img_per_s_avg = 0;  // smoothed
  double loss_scale = 1;     // the scale this step ran with
  // The step's summed gradients held inf/NaN values, so it changed no weight (dynamic loss scaling).
  bool skipped = false;
  std::int64_t skipped_steps = 0;  // in the run so far, this one included
  double step_seconds = 0;
  double data_wait_seconds = 0;  // of which waiting for the data
  double eta_seconds = 0;        // to the end of the run
};

struct EpochReport {
  std::int64_t epoch = 0;  // 1-based: epochs completed
  std::int64_t step = 0;
  double loss = 0;  // mean training loss over the epoch
  // NaN where absent: no validation sample, no labelled pixel among them, or (IoU, Dice) no foreground class
  // in their truth or prediction (segmentation_metrics in trainer.h); metrics.jsonl writes null.
  double val_loss = 0, val_iou = 0, val_dice = 0, val_acc = 0;
  // Each class's IoU and Dice on the validation set, background first (empty without validation); NaN for a
  // class neither labelled nor predicted there.
  std::vector<double> val_class_iou, val_class_dice;
  // task "instances" only (absent otherwise: `objects` false): the object metrics of the validation set
  // (docs/METRICS.md, "Object metrics") at the thresholds this validation chose (instances.tune_thresholds)
  // or the config's; NaN where absent.
  bool objects = false;
  double val_dsb = 0, val_f1 = 0, val_precision = 0, val_recall = 0, val_pq = 0;
  std::int64_t val_merges = 0, val_splits = 0;
  double val_seed_threshold = 0, val_foreground_threshold = 0;
  double seconds = 0;  // training and validation of this epoch
  // Non-empty when early stopping ends the run after this epoch: why, with the best value and its epoch.
  std::string early_stop;
  // A validation within the epoch (train.val_every_steps): `epoch` is the epoch under way, `loss` its mean so
  // far.
  bool within_epoch = false;
  double epochs_done = 0;  // the epochs completed at this validation, with the share of the epoch under way
};

// The metrics a monitor watches (schedule.monitor, early_stopping.monitor, checkpoint.monitor with
// checkpoint.monitor_class: monitor.h), by name: "loss", "val_loss", "val_iou", "val_dice", "val_acc", and
// each class's IoU and Dice, "val_iou_class0", "val_dice_class0", ... (what a checkpoint's metrics hold);
// with object metrics also "val_dsb", "val_f1" and "val_pq".
std::map<std::string, double> monitored_metrics(const EpochReport& r);

struct MemoryReport {
  double t = 0;  // seconds since the run started
  std::string device;
  MemoryStats stats;
  std::int64_t device_used = 0;  // the whole device, other processes included (CPU: the host)
  std::int64_t device_total = 0;
  std::int64_t used_by_others = -1;      // other processes' share of device_used; -1: unknown
  bool others_not_attributable = false;  // NVML cannot tell this process's share from others' (DeviceSample)
  double utilisation_percent = -1;       // GPUs; -1: unknown
  double temperature_celsius = -1;
  double power_watts = -1;
};

// A change of settings that would make a failed step fit, as the memory planner ranks them.
struct RemedyReport {
  std::string name;         // "mixed-bf16", "accumulation x2", ...
  std::string description;  // one line for a user
  nlohmann::json changes;   // dotted key -> value, as --set takes them
  bool changes_model = false;
  std::int64_t peak_bytes = 0;  // the planned peak with the change, on the fullest device
  bool fits = false;
  std::int64_t shortfall_bytes = 0;  // how far it misses (plan/remedy_search.h, shortfall); 0 when it fits
};

struct OutOfMemoryReport {
  std::int64_t step = 0;  // the step that failed, 1-based
  std::int64_t requested_bytes = 0;
  MemoryCategory category = MemoryCategory::other;  // of the failed request
  std::int64_t capacity_bytes = 0, in_use_bytes = 0;
  CategoryBytes in_use_by{};
  std::vector<RemedyReport> remedies;  // best first
  // Training went on in smaller micro-batches (memory.auto_recover_oom): these, for the same samples per
  // step.
  bool recovered = false;
  std::int64_t batch_size = 0, accumulation = 0;
  // The memory planner refused the run before anything was allocated (the peak it predicts does not fit).
  bool planned = false;
  // The checkpoint to resume from with a remedy: this run's last.safetensors; empty when this run saved none.
  std::string resume_from;
};

struct ErrorReport {
  std::string type;    // ErrorKind name: "out_of_memory", "data", ..., or "internal"
  std::string device;  // where it happened, if on a device
  std::string message;
  bool fatal = true;  // the run stops
  // Where the engine raised it ("trainer.cpp:123"), for a bug report; empty when unknown.
  std::string where;
  std::optional<OutOfMemoryReport> out_of_memory;  // with type "out_of_memory"
};

// A validation image as the model sees it, its ground truth and the model's prediction, for a front end to
// show.
struct PredictionSample {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<std::uint8_t> image;   // [height, width, channels]
  std::vector<std::uint8_t> mask;    // [height, width], class indices
  std::int64_t classes = 1;          // channels of `probabilities`: 1 (foreground) or the model's classes
  std::vector<float> probabilities;  // [height, width, classes]
};

struct PredictionsReport {
  std::int64_t epoch = 0, step = 0;
  std::vector<PredictionSample> samples;
};

class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void on_start(const RunInfo&) {}
  virtual void on_state(TrainerState) {}
  virtual void on_step(const StepReport&) {}
  virtual void on_epoch(const EpochReport&) {}
  virtual void on_memory(const MemoryReport&) {}
  virtual void on_checkpoint(const CheckpointReport&) {}
  // Every error, for the record (metrics.jsonl). One that is not fatal (a failed save, a recovered
  // out-of-memory) also comes as an on_log warning, which is what a person should read: a front end that
  // shows both would show it twice.
  virtual void on_error(const ErrorReport&) {}
  virtual void on_log(LogLevel, const std::string&) {}
  // After each epoch's validation, for the first few validation samples (TrainerOptions::prediction_samples).
  virtual void on_predictions(const PredictionsReport&) {}
};

// Sends each report to every observer: the front end's and the metrics log.
class ObserverFanout final : public TrainerObserver {
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

}  // namespace unet
