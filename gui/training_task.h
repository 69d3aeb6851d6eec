// A training run as a Task (gui/task.h), the one shape of the window's long work: execute() builds a Trainer
// on the task's thread and runs it there, and re-emits every engine report as a signal carrying a value type,
// so that the window updates on the GUI thread through queued connections and never blocks on the engine.
// The run ends Succeeded (finished), Aborted (stopped) or Failed (the error that ended it); final_state()
// says it as the trainer does.
//
// Stop is the Task's abort(): it reaches the trainer through a stop callback, also while the checkpoint it
// resumes from is still being read, and a task aborted before its work began never trains. Pause, resume and
// save now go straight to the trainer, which takes them from any thread and acts at the next step boundary.
#pragma once

#include <QString>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

#include "gui/qt_types.h"
#include "gui/task.h"
#include "unet/io/checkpoint.h"
#include "unet/train/trainer.h"

namespace unet::gui {

class TrainingTask : public Task {
  Q_OBJECT
 public:
  // `resume_from`: a checkpoint path, or empty for a fresh start. `replace_previous_run`: a fresh start may
  // remove the files of a run in checkpoint.dir (the user agreed); otherwise such a folder is refused.
  TrainingTask(Config config, QString resume_from, bool replace_previous_run, QObject* parent = nullptr);
  ~TrainingTask() override;

  // Thread-safe: called from the GUI thread while the run goes on (no effect before the trainer exists or
  // after it has gone). Stop is abort().
  void pause();
  void resume();
  void save_now();
  // How the run ended, once the task has: finished, stopped (also when aborted before it began) or failed.
  TrainerState final_state() const { return final_state_; }
  // How execute() reads the checkpoint it resumes from (load_checkpoint unless set). The tests' seam: a
  // loader that holds the load shows what a command given during a long load does. Set it before start().
  using CheckpointLoader = std::function<Checkpoint(const std::filesystem::path&)>;
  void set_checkpoint_loader(CheckpointLoader load) { load_checkpoint_ = std::move(load); }

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

 protected:
  void execute() override;

 private:
  class Relay;
  const Config config_;
  const QString resume_from_;
  const bool replace_previous_run_;
  TrainerState final_state_ = TrainerState::stopped;  // written by execute() before the end is posted
  mutable std::mutex mutex_;
  Trainer* trainer_ = nullptr;  // while execute() runs one
  CheckpointLoader load_checkpoint_ = [](const std::filesystem::path& file) { return load_checkpoint(file); };
};

}  // namespace unet::gui
