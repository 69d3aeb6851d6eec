// The summary at a run's end (finished or stopped): steps and time, the best validation IoU and its
// checkpoint, throughput, each device's peak memory and the run folder. The window gathers a RunSummary as
// the run reports; this file turns it into lines (for the log too) and shows them in a box that is not
// modal.
#pragma once

#include <QElapsedTimer>
#include <QMessageBox>
#include <QStringList>

#include <cstdint>
#include <map>

#include "unet/train/observer.h"

namespace unet::gui {

// What the summary says, gathered as the run reports.
struct RunSummary {
  QElapsedTimer clock;
  std::int64_t steps = 0;
  double best_iou = 0;
  std::int64_t best_epoch = 0;  // 0: no validation yet
  QString best_checkpoint;
  double img_per_s = 0;
  std::map<QString, std::int64_t> peak_by_device;
};

// "1h05m", "3m07s", "42s"; "?" for a negative or absurd duration (an ETA not known yet).
QString duration_text(double seconds);

// The summary's lines: `state` is finished or stopped.
QStringList run_summary_lines(const RunSummary& summary, TrainerState state, const QString& run_dir);

class RunSummaryDialog : public QMessageBox {
  Q_OBJECT
 public:
  RunSummaryDialog(const QStringList& lines, QWidget* parent);
};

}  // namespace unet::gui
