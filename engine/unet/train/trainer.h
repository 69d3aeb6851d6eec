// The training loop: data, steps, validation, reporting, checkpoints and commands. A Trainer is built from a
// Config, runs on the thread that calls run() (the CLI's main thread, the GUI's worker thread), and takes
// pause/resume/stop and save-now requests from any other thread; they act at the next step boundary.
//
// Checkpoints go to checkpoint.dir: last.safetensors at each epoch's end and when the run ends (finished or
// stopped), best.safetensors whenever checkpoint.monitor improves, the periodic files of checkpoint.template
// every checkpoint.every_epochs epochs (only improvements with save_best_only; the newest keep_last kept, 0
// keeps all), and manual-step-NNNNNN.safetensors on request. They are written by a background thread from a
// copy of replica 0's model taken at a step boundary; a failed save is reported and training goes on, and a
// run that ends with a checkpoint whose latest save failed throws Error(io) naming it.
//
// The folder belongs to one run at a time (RunLock, run_folder.h); a new run is refused a folder that holds
// another run's files unless TrainerOptions::replace_previous_run, and a resumed one appends to its log.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "unet/backend/devices.h"
#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/io/run_state.h"
#include "unet/train/loss_scaler.h"
#include "unet/train/observer.h"
#include "unet/train/segmentation_metrics.h"

namespace unet {

// A consistent copy of the run's state (replica 0's model and optimizer) at a step boundary. Its
// position.effective_batch is always the samples per step (never 0), and `accumulation` the micro-batches
// they are split into now (out-of-memory recovery may have raised it).
struct TrainingSnapshot : RunState {
  std::int64_t accumulation = 1;
};

class ProcessGroup;

struct TrainerOptions {
  std::shared_ptr<const Dataset>
      dataset;                    // instead of the one the config describes (tests, the GUI's preview)
  bool write_metrics = true;      // <checkpoint.dir>/metrics.jsonl
  bool write_checkpoints = true;  // checkpoint files in <checkpoint.dir>
  // A run whose folder holds another run's files (metrics.jsonl, checkpoints), or, resumed, its own run
  // further along (run_folder_conflict(), run_folder.h): false refuses with RunFolderTaken (a ConfigError of
  // checkpoint.dir); true removes the other run's files first, logging each, or goes on from the checkpoint's
  // step, replacing the later checkpoints as it writes its own.
  bool replace_previous_run = false;
  double memory_report_seconds = 0.1;  // how often memory is sampled (10 Hz)
  int prediction_samples = 0;          // validation samples predicted after each epoch for on_predictions
  // Loss scaling instead of what config.precision implies (loss_scaling_for): lets a test drive dynamic
  // scaling on a CPU, which has no fp16.
  std::optional<LossScaling> loss_scaling;
  // A run over several processes (dist/process_group.h): this one drives its share of the config's devices,
  // and steps, validation and stopping are the whole run's. Not owned; it must outlive the Trainer. Only one
  // process (rank 0) should write metrics and checkpoints.
  ProcessGroup* process_group = nullptr;
  // Makes each replica's backend instead of create_backend() (tests wrap a backend to inject faults).
  std::function<std::unique_ptr<Backend>(const DeviceId&, const BackendOptions&)> make_backend;
};

struct Checkpoint;

class Trainer {
 public:
  Trainer(Config config, TrainerObserver* observer = nullptr, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Start from `start` instead of a fresh model from train.seed: a state of this config's model and
  // optimizer (position.effective_batch 0: the config's batch). A start at a step > 0 continues a run in the
  // config's checkpoint.dir.
  void set_start(RunState start);
  // Continue from a checkpoint: its weights, optimizer state and position. Its model must be the config's
  // (ConfigError naming the model key otherwise); devices, their number and kind may differ. `file`, where
  // the checkpoint was read from (empty: unknown), and the checkpoint's own checkpoint.dir tell whether the
  // config's checkpoint.dir holds this run: resuming into a folder that holds another run, or this run at a
  // later step than the checkpoint's, is refused (see TrainerOptions::replace_previous_run).
  void resume_from(const Checkpoint& checkpoint, const std::filesystem::path& file = {});

  // Trains to the end (epochs or steps), or until stop(). Throws the error that ended the run, after
  // reporting it to the observer. A stop() during the preparation (the data scan) ends it at once: the state
  // becomes stopped without on_start(), and nothing is written into the run folder.
  void run();

  // Thread-safe.
  void pause();
  void resume();
  void stop();
  // Saves the base model as manual-step-NNNNNN.safetensors at the next step boundary, also while paused.
  void request_checkpoint();
  TrainerState state() const;

  // After run(): the base model and where training stopped.
  TrainingSnapshot snapshot() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The dataset a config describes: open_dataset() (data/open_dataset.h), which scans file sources first.
std::shared_ptr<const Dataset> make_dataset(const Config& config);

}  // namespace unet
