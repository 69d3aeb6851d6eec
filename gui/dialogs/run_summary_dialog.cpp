#include "gui/dialogs/run_summary_dialog.h"

#include <cmath>

#include "gui/estimate_panel.h"

namespace unet::gui {

QString duration_text(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return QStringLiteral("?");
  const long long s = std::llround(seconds);
  if (s >= 3600) return QString("%1h%2m").arg(s / 3600).arg(s / 60 % 60, 2, 10, QChar('0'));
  if (s >= 60) return QString("%1m%2s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
  return QString("%1s").arg(s);
}

void RunSummary::add_start(const RunInfo& info) {
  earlier_seconds = info.earlier_seconds;
  for (const CheckpointReport& c : info.saved_checkpoints) add_checkpoint(c);
}

void RunSummary::add_checkpoint(const CheckpointReport& c) {
  if (c.reason == "best" || c.reason == "last") files[c.reason] = c;
}

void RunSummary::add_epoch(const EpochReport& r) {
  if (std::isfinite(r.val_iou) && (best_epoch == 0 || r.val_iou > best_iou)) {
    best_iou = r.val_iou;
    best_epoch = r.epoch;
  }
  if (r.objects && std::isfinite(r.val_dsb) && (best_dsb_epoch == 0 || r.val_dsb > best_dsb)) {
    best_dsb = r.val_dsb;
    best_dsb_f1 = r.val_f1;
    best_dsb_epoch = r.epoch;
  }
}

QStringList run_summary_lines(const RunSummary& summary, TrainerState state, const QString& run_dir) {
  QStringList lines;
  const double this_part = static_cast<double>(summary.clock.elapsed()) / 1000.0;
  const QString time =
      summary.earlier_seconds > 0
          ? RunSummaryDialog::tr("%1 (%2 of it since the resume)")
                .arg(duration_text(summary.earlier_seconds + this_part), duration_text(this_part))
          : duration_text(this_part);
  lines << (state == TrainerState::finished ? RunSummaryDialog::tr("The run finished at step %1 after %2.")
                                            : RunSummaryDialog::tr("The run stopped at step %1 after %2."))
               .arg(summary.steps)
               .arg(time);
  if (summary.best_epoch > 0)
    lines << RunSummaryDialog::tr("Best validation IoU: %1 (epoch %2)")
                 .arg(summary.best_iou, 0, 'f', 4)
                 .arg(summary.best_epoch);
  if (summary.best_dsb_epoch > 0)
    lines << RunSummaryDialog::tr("Best DSB 2018 score: %1 (epoch %2; object F1 %3)")
                 .arg(summary.best_dsb, 0, 'f', 4)
                 .arg(summary.best_dsb_epoch)
                 .arg(summary.best_dsb_f1, 0, 'f', 4);
  // What the files hold, as the trainer saved them: best follows checkpoint.monitor, which need not be IoU.
  for (const char* reason : {"best", "last"}) {
    const auto file = summary.files.find(reason);
    if (file == summary.files.end()) continue;
    const CheckpointReport& c = file->second;
    QString line = RunSummaryDialog::tr("%1 holds epoch %2 (step %3)")
                       .arg(QString::fromStdString(c.path))
                       .arg(c.epoch)
                       .arg(c.step);
    if (c.reason == "best")
      line += std::isfinite(c.monitor_value) ? RunSummaryDialog::tr(": the best %1, %2")
                                                   .arg(QString::fromStdString(c.monitor))
                                                   .arg(c.monitor_value, 0, 'f', 4)
                                             : RunSummaryDialog::tr(", chosen by another monitor than %1")
                                                   .arg(QString::fromStdString(c.monitor));
    lines << line;
  }
  lines << RunSummaryDialog::tr("Throughput: %1 images/s").arg(summary.img_per_s, 0, 'f', 1);
  for (const auto& [device, peak] : summary.peak_by_device)
    lines << RunSummaryDialog::tr("Peak memory on %1: %2").arg(device, bytes_text(peak));
  lines << RunSummaryDialog::tr("Run folder: %1").arg(run_dir);
  return lines;
}

RunSummaryDialog::RunSummaryDialog(const QStringList& lines, QWidget* parent)
    : QMessageBox(QMessageBox::Information, tr("Run summary"), lines.join("\n"), QMessageBox::Close, parent) {
  setObjectName("run_summary");
  setAttribute(Qt::WA_DeleteOnClose);
  setModal(false);
}

}  // namespace unet::gui
