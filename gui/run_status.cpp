#include "gui/run_status.h"

#include <cmath>

#include "gui/dialogs/run_summary_dialog.h"

namespace unet::gui {
namespace {

// A validation metric in the log: 4 decimals, or "—" where it is absent (NaN: no labelled pixel, no class
// present; docs/METRICS.md).
QString metric_cell(double v) {
  return std::isfinite(v) ? QString::number(v, 'f', 4) : QStringLiteral("\u2014");
}

const char* state_text(TrainerState s) {
  switch (s) {
    case TrainerState::idle:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Ready");
    case TrainerState::preparing:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Preparing");
    case TrainerState::running:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Training");
    case TrainerState::paused:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Paused");
    case TrainerState::stopping:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Stopping");
    case TrainerState::finished:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Finished");
    case TrainerState::stopped:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Stopped");
    case TrainerState::failed:
      return QT_TRANSLATE_NOOP("unet::gui::RunStatus", "Failed");
  }
  return "";
}

}  // namespace

RunStatus::RunStatus(QStatusBar* bar)
    : QObject(bar),
      bar_(bar),
      progress_(new QProgressBar(bar)),
      run_label_(new QLabel(bar)),
      speed_label_(new QLabel(bar)),
      eta_label_(new QLabel(bar)),
      state_label_(new QLabel(bar)) {
  progress_->setMaximumWidth(260);
  progress_->setFormat(tr("step %v / %m"));
  bar->addPermanentWidget(run_label_);
  bar->addPermanentWidget(speed_label_);
  bar->addPermanentWidget(eta_label_);
  bar->addPermanentWidget(progress_);
  bar->addPermanentWidget(state_label_);
  progress_->hide();  // until a run starts
}

void RunStatus::clear_run_figures() {
  for (QLabel* label : {run_label_, speed_label_, eta_label_}) label->clear();
  progress_->hide();
  progress_->reset();
  state_label_->setToolTip({});
}

void RunStatus::show_new_start() {
  clear_run_figures();
  show_state(TrainerState::preparing);
}

void RunStatus::show_state(TrainerState state) {
  state_label_->setText(tr(state_text(state)));
}

void RunStatus::show_start(const RunInfo& info) {
  progress_->setRange(0, static_cast<int>(info.total_steps));
  progress_->setValue(static_cast<int>(info.start_step));
  progress_->show();
}

void RunStatus::show_refused(const QString& why) {
  clear_run_figures();
  state_label_->setText(tr("Refused before training"));
  state_label_->setToolTip(why);
  QString headline = why.section('\n', 0, 0);
  if (headline.size() < why.size()) headline += tr(" … (all of it in the log)");
  bar_->showMessage(tr("Not started: %1").arg(headline));
}

void RunStatus::show_step(const StepReport& r, std::int64_t epochs) {
  progress_->setValue(static_cast<int>(r.step));
  run_label_->setText(tr("epoch %1/%2").arg(r.epoch + 1).arg(epochs));
  speed_label_->setText(tr("%1 img/s").arg(r.img_per_s_avg, 0, 'f', 1));
  eta_label_->setText(tr("ETA %1").arg(duration_text(r.eta_seconds)));
}

QString RunStatus::text() const {
  QStringList parts{run_label_->text(), speed_label_->text(), eta_label_->text()};
  if (!progress_->isHidden()) parts << progress_->text();
  parts << state_label_->text();
  parts.removeAll(QString());
  return parts.join("  ");
}

QString epoch_log_line(const EpochReport& r) {
  return (r.within_epoch
              ? RunStatus::tr("step %1 (epoch %2 under way): loss %3, val_loss %4, val_iou %5, "
                              "val_dice %6, val_acc %7")
                    .arg(r.step)
              : RunStatus::tr("epoch %1: loss %2, val_loss %3, val_iou %4, val_dice %5, val_acc %6"))
      .arg(r.epoch)
      .arg(metric_cell(r.loss))
      .arg(metric_cell(r.val_loss))
      .arg(metric_cell(r.val_iou))
      .arg(metric_cell(r.val_dice))
      .arg(metric_cell(r.val_acc));
}

}  // namespace unet::gui
