// The run's words outside the charts: the status bar's permanent part (epoch, throughput, ETA, the step
// progress and the trainer's state) and the log line of each validation. Out of the window so that it keeps
// its layout and wiring only. It describes one start at a time: a new start clears the previous run's
// figures, and a start refused before training says so instead of showing them.
#pragma once

#include <QLabel>
#include <QObject>
#include <QProgressBar>
#include <QStatusBar>

#include "unet/train/observer.h"

namespace unet::gui {

class RunStatus : public QObject {
  Q_OBJECT
 public:
  // Adds its widgets to `bar`, as permanent ones.
  explicit RunStatus(QStatusBar* bar);

  // A new start: the previous run's epoch, speed, ETA and progress go; the state reads "Preparing".
  void show_new_start();
  void show_state(TrainerState state);
  void show_start(const RunInfo& info);
  void show_step(const StepReport& r, std::int64_t epochs);
  // A start refused before it trained (`why`: the reason, its first line in the bar's message, all of it in
  // the state's tooltip): nothing of a run, and "Refused before training".
  void show_refused(const QString& why);
  // Epoch, speed, ETA, the step progress (while shown) and state, as shown; for the GUI tests.
  QString text() const;

 private:
  void clear_run_figures();

  QStatusBar* bar_;
  QProgressBar* progress_;
  QLabel *run_label_, *speed_label_, *eta_label_, *state_label_;
};

// "epoch 3: loss …, val_loss …, …" (or "step N (epoch 3 under way): …" for a validation within an epoch);
// an absent metric (NaN, docs/METRICS.md) reads "—".
QString epoch_log_line(const EpochReport& r);

}  // namespace unet::gui
