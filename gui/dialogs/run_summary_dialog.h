// The summary at a run's end (finished or stopped): steps and the run's whole time (over its resumes), the
// best validation IoU (and with task instances the best DSB 2018 score), what best.safetensors and
// last.safetensors really hold (the epoch and step the trainer saved in them, and the monitored value best
// was chosen by), throughput, each device's peak memory and the run folder. The window gathers a RunSummary
// as the run reports; this file turns it into lines (for the log too) and shows them in a box that is not
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
  QElapsedTimer clock;         // since this start
  double earlier_seconds = 0;  // the run's time before this start (RunInfo::earlier_seconds)
  std::int64_t steps = 0;
  double best_iou = 0;
  std::int64_t best_epoch = 0;  // 0: no validation yet
  // task instances: the best DSB 2018 score, its epoch (0: none yet) and the object F1 of that epoch.
  double best_dsb = 0, best_dsb_f1 = 0;
  std::int64_t best_dsb_epoch = 0;
  // What best.safetensors and last.safetensors hold, by reason ("best", "last"): the run folder's at the
  // start, then each save the trainer reported.
  std::map<std::string, CheckpointReport> files;
  double img_per_s = 0;
  std::map<QString, std::int64_t> peak_by_device;

  // The run's start: its earlier time and the checkpoints its folder holds.
  void add_start(const RunInfo& info);
  // A checkpoint saved; best and last are remembered.
  void add_checkpoint(const CheckpointReport& c);
  // An epoch's validation: the best IoU and (task instances) the best DSB score are remembered.
  void add_epoch(const EpochReport& r);
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
