#include "gui/training_worker.h"

namespace unet::gui {

// Relays the trainer's reports (on the worker's thread) as the worker's signals.
class TrainingWorker::Relay final : public TrainerObserver {
 public:
  explicit Relay(TrainingWorker& w) : w_(w) {}
  void on_start(const RunInfo& i) override { emit w_.started(i); }
  void on_state(TrainerState s) override { emit w_.state_changed(s); }
  void on_step(const StepReport& r) override { emit w_.step(r); }
  void on_epoch(const EpochReport& r) override { emit w_.epoch(r); }
  void on_memory(const MemoryReport& r) override { emit w_.memory(r); }
  void on_checkpoint(const CheckpointReport& r) override { emit w_.checkpoint_saved(r); }
  void on_error(const ErrorReport& r) override { emit w_.error(r); }
  void on_log(LogLevel l, const std::string& m) override { emit w_.log(l, QString::fromStdString(m)); }
  void on_predictions(const PredictionsReport& r) override { emit w_.predictions(r); }

 private:
  TrainingWorker& w_;
};

TrainingWorker::TrainingWorker(QObject* parent) : QObject(parent) {}
TrainingWorker::~TrainingWorker() = default;

void TrainingWorker::pause() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->pause();
}

void TrainingWorker::resume() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->resume();
}

void TrainingWorker::stop() {
  std::lock_guard lock(mutex_);
  if (trainer_)
    trainer_->stop();
  else
    stop_before_start_ = true;  // a run requested and not begun yet ends before it trains
}

void TrainingWorker::save_now() {
  std::lock_guard lock(mutex_);
  if (trainer_) trainer_->request_checkpoint();
}

bool TrainingWorker::running() const {
  std::lock_guard lock(mutex_);
  return trainer_ != nullptr;
}

void TrainingWorker::run(const Config& config, const QString& resume_from, bool replace_previous_run) {
  Relay relay(*this);
  TrainerState final_state = TrainerState::failed;
  QString message;
  try {
    TrainerOptions options;
    options.prediction_samples = 4;
    options.replace_previous_run = replace_previous_run;
    auto trainer = std::make_unique<Trainer>(config, &relay, options);
    Trainer* t = trainer.get();
    {
      // Published before the checkpoint loads (a large one takes a while): a Stop meanwhile, or one given
      // before this run began, reaches the trainer, whose preparation then ends before the first step.
      std::lock_guard lock(mutex_);
      trainer_ = std::move(trainer);
      if (stop_before_start_) t->stop();
    }
    if (!resume_from.isEmpty())
      t->resume_from(load_checkpoint_(resume_from.toStdString()), resume_from.toStdString());
    t->run();
    final_state = t->state();
  } catch (const std::exception& e) {
    // The trainer reported it through on_error already when it got that far; here it only ends the run.
    message = QString::fromUtf8(e.what());
  }
  {
    std::lock_guard lock(mutex_);
    trainer_.reset();
    stop_before_start_ = false;
  }
  emit finished(final_state, message);
}

}  // namespace unet::gui
