#include "gui/estimate_panel.h"

#include <QGroupBox>
#include <QHBoxLayout>
#include <QPainter>

namespace unet::gui {

QString bytes_text(std::int64_t bytes) {
  return QString::fromStdString(format_bytes(bytes));
}

MemoryBar::MemoryBar(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(22);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void MemoryBar::set(const DevicePlan& plan) {
  fraction_ = plan.capacity > 0 ? static_cast<double>(plan.peak) / static_cast<double>(plan.capacity) : 0.0;
  // The device's share of the batch is in the text: an uneven split shows at a glance which device holds
  // more.
  text_ = QString("%1  %2 img  %3 of %4 (%5 %)")
              .arg(QString::fromStdString(plan.device))
              .arg(plan.batch)
              .arg(bytes_text(plan.peak), bytes_text(plan.capacity))
              .arg(100.0 * fraction_, 0, 'f', fraction_ < 0.1 ? 1 : 0);
  QString tip =
      QString("%1 (%2), %3 images per step\nplanned peak %4, reserved %5, capacity %6\nat the peak:")
          .arg(QString::fromStdString(plan.device), QString::fromStdString(plan.name))
          .arg(plan.batch)
          .arg(bytes_text(plan.peak), bytes_text(plan.peak_reserved), bytes_text(plan.capacity));
  for (int k = 0; k < memory_category_count; ++k) {
    const std::int64_t b = plan.at_peak[static_cast<std::size_t>(k)];
    if (b > 0)
      tip += QString("\n  %1: %2")
                 .arg(QString::fromStdString(std::string(to_string(static_cast<MemoryCategory>(k)))),
                      bytes_text(b));
  }
  if (plan.overhead > 0)
    tip += QString("\non the device %1: reserved + runtime overhead %2 (CUDA context, cuDNN), measured %3")
               .arg(bytes_text(plan.device_peak), bytes_text(plan.overhead),
                    QString::fromStdString(plan.overhead_measured));
  else if (plan.overhead < 0)
    tip += "\nruntime overhead (CUDA context, cuDNN) not measured yet: the first run on this GPU measures it";
  setToolTip(tip);
  update();
}

QColor MemoryBar::color() const {
  if (fraction_ > 1.0) return {0xd6, 0x45, 0x45};  // does not fit
  if (fraction_ > 0.8) return {0xe8, 0xa3, 0x2e};  // close to the limit
  return {0x3f, 0xa3, 0x5b};
}

void MemoryBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF track = QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5);
  p.setPen(palette().mid().color());
  p.setBrush(palette().base());
  p.drawRoundedRect(track, 4, 4);
  QRectF fill = track.adjusted(1, 1, -1, -1);
  fill.setWidth(fill.width() * std::min(1.0, fraction_));
  p.setPen(Qt::NoPen);
  p.setBrush(color());
  p.drawRoundedRect(fill, 3, 3);
  p.setPen(palette().text().color());
  p.drawText(track.adjusted(6, 0, -6, 0), Qt::AlignVCenter | Qt::AlignLeft, text_);
}

EstimatePanel::EstimatePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  status_ = new QLabel(tr("Estimating…"), this);
  status_->setWordWrap(true);
  status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(status_);
  // Busy, not a fraction: how many plans an estimate takes is known only as it goes (searches, remedies).
  busy_ = new QProgressBar(this);
  busy_->setObjectName("estimate_busy");
  busy_->setRange(0, 0);
  busy_->setTextVisible(true);
  busy_->setVisible(false);
  layout->addWidget(busy_);
  bars_layout_ = new QVBoxLayout;
  layout->addLayout(bars_layout_);
  auto* fit_row = new QHBoxLayout;
  fit_button_ = new QPushButton(tr("Fit batch"), this);
  fit_button_->setToolTip(
      tr("The largest batch that fits every selected device (or the cap), from the planner"));
  fit_patch_button_ = new QPushButton(tr("Fit patch"), this);
  fit_patch_button_->setObjectName("fit_patch");
  fit_result_ = new QLabel(this);
  fit_result_->setWordWrap(true);
  fit_result_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  fit_row->addWidget(fit_button_);
  fit_row->addWidget(fit_patch_button_);
  fit_row->addWidget(fit_result_, 1);
  layout->addLayout(fit_row);
  remedies_ = new RemedyList(this);
  layout->addWidget(remedies_);
  connect(remedies_, &RemedyList::apply_requested, this, &EstimatePanel::apply_requested);
  layout->addStretch(1);  // rows stay packed at the top of the room the window gives
  connect(fit_button_, &QPushButton::clicked, this, [this] {
    fit_result_->setText(tr("searching…"));
    emit fit_requested();
  });
  connect(fit_patch_button_, &QPushButton::clicked, this, [this] {
    fit_result_->setText(tr("searching…"));
    emit fit_patch_requested();
  });
  update_fit_patch_button();
}

void EstimatePanel::clear_rows() {
  for (MemoryBar* b : bars_) b->deleteLater();
  bars_.clear();
  remedies_->clear();
}

void EstimatePanel::set_busy(const QString& what) {
  // The format is the bar's text; a busy bar shows no percentage.
  busy_->setFormat(what);
  busy_->setToolTip(what);
  busy_->setVisible(!what.isEmpty());
}

void EstimatePanel::show_pending() {
  status_->setText(tr("Estimating…"));
  set_busy(tr("waiting for the planner"));
  fit_result_->clear();
}

void EstimatePanel::show_progress(const QString& what) {
  set_busy(tr("planning %1").arg(what));
}

void EstimatePanel::show_unavailable(const QString& why) {
  clear_rows();
  set_busy({});
  fit_result_->clear();
  status_->setText(why);
}

void EstimatePanel::show_estimate(const Estimate& e) {
  clear_rows();
  set_busy({});
  if (!e.error.isEmpty()) {
    status_->setText(tr("Cannot estimate: %1").arg(e.error));
    return;
  }
  for (const DevicePlan& d : e.plan.devices) {
    auto* bar = new MemoryBar(this);
    bar->set(d);
    bars_layout_->addWidget(bar);
    bars_.push_back(bar);
  }
  if (e.plan.fits) {
    status_->setText(
        tr("Fits: planned peak per device (planned in %1 ms)").arg(e.plan.seconds * 1e3, 0, 'f', 0));
    return;
  }
  status_->setText(tr("Does not fit."));
  remedies_->show_remedies(remedy_rows(e.remedies));
}

void EstimatePanel::show_fit(const BatchFitResult& r) {
  if (!r.error.isEmpty()) {
    fit_result_->setText(tr("cannot fit: %1").arg(r.error));
    return;
  }
  QString text = tr("largest batch: %1").arg(r.fit.global_batch);
  if (r.fit.devices.size() > 1) {
    QStringList parts;
    for (const auto& d : r.fit.devices)
      parts << QString("%1 alone %2").arg(QString::fromStdString(d.device)).arg(d.max_batch);
    text += " (" + parts.join(", ") + ")";
  }
  // Which limit set it, with its figures: the training set, the free memory less the margin, the cap.
  fit_result_->setText(text + "\n" + QString::fromStdString(r.fit.reason));
}

void EstimatePanel::show_fit(const PatchFitResult& r) {
  if (!r.error.isEmpty()) {
    fit_result_->setText(tr("cannot fit: %1").arg(r.error));
    return;
  }
  // The proposal, which limit set it with its figures, and what the search cost.
  if (r.fit.batch == 0) {
    fit_result_->setText(tr("no patch fits: %1").arg(QString::fromStdString(r.fit.reason)));
    return;
  }
  fit_result_->setText(tr("largest patch: %1x%2, batch %3\n%4\n(searched in %5)")
                           .arg(r.fit.patch_height)
                           .arg(r.fit.patch_width)
                           .arg(r.fit.batch)
                           .arg(QString::fromStdString(r.fit.reason),
                                r.fit.plans == 1 ? tr("1 plan") : tr("%1 plans").arg(r.fit.plans)));
}

void EstimatePanel::set_enabled_actions(bool enabled) {
  actions_enabled_ = enabled;
  fit_button_->setEnabled(enabled);
  update_fit_patch_button();
  remedies_->set_actions_enabled(enabled);
}

void EstimatePanel::set_patch_mode(bool patches, const QString& why_not) {
  patch_mode_ = patches;
  no_patch_why_ = why_not;
  update_fit_patch_button();
}

void EstimatePanel::update_fit_patch_button() {
  fit_patch_button_->setEnabled(actions_enabled_ && patch_mode_);
  const QString what =
      tr("The largest training patch (data.patch_size) and a batch that fit every selected device with a "
         "margin, from the planner; no larger than the largest training image");
  fit_patch_button_->setToolTip(
      patch_mode_ ? what
                  : what + tr("\n\nUnavailable: %1")
                               .arg(no_patch_why_.isEmpty()
                                        ? tr("the settings train on patches only in data.mode \"patch\"")
                                        : no_patch_why_));
}

}  // namespace unet::gui
