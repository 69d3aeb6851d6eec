#include "gui/training_task.h"

#include <stdexcept>
#include <stop_token>

namespace unet::gui {

// Relays the trainer's reports (on the task's thread) as the task's signals, and the steps as its progress.
class TrainingTask::Relay final : public TrainerObserver {
 public:
  explicit Relay(TrainingTask& t) : t_(t) {}
  void on_start(const RunInfo& i) override { emit t_.started(i); }
  void on_state(TrainerState s) override { emit t_.state_changed(s); }
  void on_step(const StepReport& r) override {
    emit t_.step(r);
    t_.report_progress(r.step, r.total_steps);
  }
  void on_epoch(const EpochReport& r) override { emit t_.epoch(r); }
  void on_memory(const MemoryReport& r) override { emit t_.memory(r); }
  void on_checkpoint(const CheckpointReport& r) override { emit t_.checkpoint_saved(r); }
  void on_error(const ErrorReport& r) override { emit t_.error(r); }
  void on_log(LogLevel l, const std::string& m) override { emit t_.log(l, QString::fromStdString(m)); }
  void on_predictions(const PredictionsReport& r) override { emit t_.predictions(r); }

 private:
  TrainingTask& t_;
};

TrainingTask::TrainingTask(Config config, QString resume_from, bool replace_previous_run, QObject* parent)
    : Task(parent),
      config_(std::move(config)),
      resume_from_(std::move(resume_from)),
      replace_previous_run_(replace_previous_run) {}

TrainingTask::~TrainingTask() {
  end_work();
}

void TrainingTask::pause() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->pause();
}

void TrainingTask::resume() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->resume();
}

void TrainingTask::save_now() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->request_checkpoint();
}

void TrainingTask::execute() {
  Relay relay(*this);
  TrainerOptions options;
  options.prediction_samples = 4;
  options.replace_previous_run = replace_previous_run_;
  final_state_ = TrainerState::failed;
  // The error that ends a run throws out of here; the trainer has reported it through on_error already when
  // it got that far.
  Trainer trainer(config_, &relay, options);
  // The commands reach the trainer while it exists: published here, withdrawn before it is destroyed.
  struct Published {
    TrainingTask& task;
    Published(TrainingTask& t, Trainer* trainer) : task(t) { set(trainer); }
    ~Published() { set(nullptr); }
    Published(const Published&) = delete;
    Published& operator=(const Published&) = delete;
    void set(Trainer* trainer) {
      std::lock_guard lock(task.mutex_);
      task.trainer_ = trainer;
    }
  } published(*this, &trainer);
  // Registered before the checkpoint loads (a large one takes a while): an abort meanwhile, or one given
  // before (the callback then runs at once), reaches the trainer, whose preparation then ends before the
  // first step.
  const std::stop_callback stop_on_abort(stop_token(), [&trainer] { trainer.stop(); });
  if (!resume_from_.isEmpty())
    trainer.resume_from(load_checkpoint_(resume_from_.toStdString()), resume_from_.toStdString());
  trainer.run();
  final_state_ = trainer.state();
  if (final_state_ == TrainerState::stopped) ended_aborted();
  if (final_state_ == TrainerState::failed) throw std::runtime_error("");  // said through on_error
}

}  // namespace unet::gui
