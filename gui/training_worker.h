// The training engine on its own thread. The main window asks this worker (living on a QThread) to run; the
// worker builds a Trainer and runs it there, and re-emits every engine report as a signal carrying a value
// type, so that the window updates on the GUI thread through queued connections and never blocks on the
// engine. Commands (pause, resume, stop, save now) go straight to the trainer, which takes them from any
// thread and acts at the next step boundary.
#pragma once

#include <QObject>
#include <QString>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

#include "gui/qt_types.h"
#include "unet/io/checkpoint.h"
#include "unet/train/trainer.h"

namespace unet::gui {

class TrainingWorker : public QObject {
  Q_OBJECT
 public:
  explicit TrainingWorker(QObject* parent = nullptr);
  ~TrainingWorker() override;

  // Thread-safe: called from the GUI thread while a run goes on (no effect when none does). A stop() between
  // the window's request and the run's beginning ends that run before its first step.
  void pause();
  void resume();
  void stop();
  void save_now();
  bool running() const;
  // How run() reads the checkpoint it resumes from (load_checkpoint unless set). The tests' seam: a loader
  // that holds the load shows what a command given during a long load does. Set it before a run.
  using CheckpointLoader = std::function<Checkpoint(const std::filesystem::path&)>;
  void set_checkpoint_loader(CheckpointLoader load) { load_checkpoint_ = std::move(load); }

 public slots:
  // Runs a whole training on the worker's thread. `resume_from`: a checkpoint path, or empty for a fresh
  // start. `replace_previous_run`: a fresh start may remove the files of a run in checkpoint.dir (the user
  // agreed); otherwise such a folder is refused.
  void run(const unet::Config& config, const QString& resume_from, bool replace_previous_run);

 signals:
  void started(const unet::RunInfo& info);
  void state_changed(unet::TrainerState state);
  void step(const unet::StepReport& report);
  void epoch(const unet::EpochReport& report);
  void memory(const unet::MemoryReport& report);
  void checkpoint_saved(const unet::CheckpointReport& report);
  void error(const unet::ErrorReport& report);
  void log(unet::LogLevel level, const QString& message);
  void predictions(const unet::PredictionsReport& report);
  // The run is over: finished, stopped or failed (then `message` says why).
  void finished(unet::TrainerState final_state, const QString& message);

 private:
  class Relay;
  mutable std::mutex mutex_;
  std::unique_ptr<Trainer> trainer_;  // while a run goes on
  // stop() came while no trainer was there (the window asks only while a run is requested or under way).
  bool stop_before_start_ = false;
  CheckpointLoader load_checkpoint_ = [](const std::filesystem::path& file) { return load_checkpoint(file); };
};

}  // namespace unet::gui
