// The run's words outside the charts: the status bar's permanent part (epoch, throughput, ETA, the step
// progress and the trainer's state) and the log line of each validation. Out of the window so that it keeps
// its layout and wiring only.
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

  void show_state(TrainerState state);
  void show_start(const RunInfo& info);
  void show_step(const StepReport& r, std::int64_t epochs);
  // Epoch, speed, ETA and state, as shown; for the GUI tests.
  QString text() const;

 private:
  QProgressBar* progress_;
  QLabel *run_label_, *speed_label_, *eta_label_, *state_label_;
};

// "epoch 3: loss …, val_loss …, …" (or "step N (epoch 3 under way): …" for a validation within an epoch);
// an absent metric (NaN, docs/METRICS.md) reads "—".
QString epoch_log_line(const EpochReport& r);

}  // namespace unet::gui
