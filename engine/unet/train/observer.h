// How the trainer reports: a plain observer interface, called on the thread that runs Trainer::run(). Front
// ends adapt it (the CLI prints, the GUI re-emits Qt signals from its worker thread); the trainer itself
// writes metrics.jsonl through one. Every method has a do-nothing default.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
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

struct RunInfo {
  std::vector<DeviceInfo> devices;
  std::vector<std::int64_t> device_batch;  // each replica's share of a global micro-batch
  std::int64_t global_batch = 0, accumulation = 1;
  std::int64_t train_samples = 0, val_samples = 0;
  std::int64_t steps_per_epoch = 0, total_steps = 0, epochs = 0;
  std::int64_t start_step = 0, start_epoch = 0;
  std::int64_t parameter_count = 0;
  std::string dataset, precision, run_dir;
};

struct StepReport {
  std::int64_t step = 0;        // optimizer steps taken, this one included
  std::int64_t epoch = 0;       // 0-based epoch this step belongs to
  std::int64_t epoch_step = 0;  // steps taken in this epoch, this one included
  std::int64_t steps_per_epoch = 0, total_steps = 0;
  double loss = 0;  // mean training loss of the step
  double lr = 0;
  double img_per_s = 0;      // this step's throughput
  double img_per_s_avg = 0;  // smoothed
  double loss_scale = 1;
  double step_seconds = 0;
  double data_wait_seconds = 0;  // of which waiting for the data
  double eta_seconds = 0;        // to the end of the run
};

struct EpochReport {
  std::int64_t epoch = 0;  // 1-based: epochs completed
  std::int64_t step = 0;
  double loss = 0;  // mean training loss over the epoch
  double val_loss = 0, val_iou = 0, val_dice = 0, val_acc = 0;
  double seconds = 0;  // training and validation of this epoch
};

struct MemoryReport {
  double t = 0;  // seconds since the run started
  std::string device;
  MemoryStats stats;
  std::int64_t device_used = 0;  // the whole device, other processes included (CPU: the host)
  std::int64_t device_total = 0;
};

struct CheckpointReport {
  std::string path;
  std::int64_t step = 0, epoch = 0;
  std::string reason;  // "requested", "periodic", "best", "last"
};

struct ErrorReport {
  std::string type;    // ErrorKind name: "out_of_memory", "data", ...
  std::string device;  // where it happened, if on a device
  std::string message;
  bool fatal = true;  // the run stops
  // More, by type. out_of_memory: requested_bytes, capacity_bytes, in_use_bytes, in_use_by_category, remedies
  // [{name, description, changes, peak_bytes, fits}], recovered (and batch_size / accumulation when it was).
  nlohmann::json details = nlohmann::json::object();
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
  virtual void on_error(const ErrorReport&) {}
  virtual void on_log(LogLevel, const std::string&) {}
  // After each epoch's validation, for the first few validation samples (TrainerOptions::prediction_samples).
  virtual void on_predictions(const PredictionsReport&) {}
};

}  // namespace unet
