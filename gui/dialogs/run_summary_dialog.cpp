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

QStringList run_summary_lines(const RunSummary& summary, TrainerState state, const QString& run_dir) {
  QStringList lines;
  lines << (state == TrainerState::finished ? RunSummaryDialog::tr("The run finished at step %1 after %2.")
                                            : RunSummaryDialog::tr("The run stopped at step %1 after %2."))
               .arg(summary.steps)
               .arg(duration_text(static_cast<double>(summary.clock.elapsed()) / 1000.0));
  if (summary.best_epoch > 0)
    lines << RunSummaryDialog::tr("Best validation IoU: %1 (epoch %2)%3")
                 .arg(summary.best_iou, 0, 'f', 4)
                 .arg(summary.best_epoch)
                 .arg(summary.best_checkpoint.isEmpty()
                          ? QString()
                          : RunSummaryDialog::tr(", saved as %1").arg(summary.best_checkpoint));
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
