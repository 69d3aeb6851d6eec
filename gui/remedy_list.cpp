#include "gui/remedy_list.h"

#include <QHBoxLayout>

#include "gui/estimate_panel.h"
#include "unet/plan/remedy_search.h"
#include "unet/train/observer.h"

namespace unet::gui {

RemedyRow RemedyRow::of(const Remedy& r) {
  std::int64_t worst = 0;
  for (const DevicePlan& d : r.plan.devices) worst = std::max(worst, d.peak);
  return {QString::fromStdString(r.name),
          QString::fromStdString(r.description),
          r.changes,
          r.changes_model,
          worst,
          shortfall(r.plan),
          r.plan.fits};
}

RemedyRow RemedyRow::of(const RemedyReport& r) {
  return {QString::fromStdString(r.name),
          QString::fromStdString(r.description),
          r.changes,
          r.changes_model,
          r.peak_bytes,
          r.shortfall_bytes,
          r.fits};
}

RemedyList::RemedyList(QWidget* parent) : QWidget(parent) {
  rows_ = new QVBoxLayout(this);
  rows_->setContentsMargins(0, 0, 0, 0);
}

QLabel* RemedyList::add_label(const QString& text, QLayout* into) {
  auto* label = new QLabel(text, this);
  // A long remedy wraps rather than widening the dock.
  label->setWordWrap(true);
  label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  into->addWidget(label);
  return label;
}

void RemedyList::clear() {
  for (QWidget* w : row_widgets_) w->deleteLater();
  row_widgets_.clear();
  apply_buttons_.clear();
  missing_.clear();
}

void RemedyList::show_remedies(const std::vector<RemedyRow>& remedies) {
  clear();
  auto* box = new QWidget(this);  // one widget for the rows, so that clear() removes them at once
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  rows_->addWidget(box);
  row_widgets_.push_back(box);
  const auto fitting =
      std::count_if(remedies.begin(), remedies.end(), [](const RemedyRow& r) { return r.fits; });
  add_label(fitting > 0 ? tr("<b>What would fit, best first:</b>") : tr("<b>Nothing alone fits.</b>"),
            layout);
  for (const RemedyRow& r : remedies) {
    if (!r.fits) continue;
    auto* row = new QHBoxLayout;
    QLabel* label = add_label(tr("%1 — peak %2").arg(r.name, bytes_text(r.peak_bytes)), row);
    label->setToolTip(r.description + (r.changes_model
                                           ? tr("\n(changes the model: a fresh start, not a resume)")
                                           : QString()));
    auto* apply = new QPushButton(tr("Apply"), box);
    const QString changes = QString::fromStdString(r.changes.dump());
    apply->setToolTip(changes);
    connect(apply, &QPushButton::clicked, this, [this, changes] { emit apply_requested(changes); });
    row->addWidget(apply);
    layout->addLayout(row);
    apply_buttons_.push_back(apply);
  }
  if (fitting == static_cast<std::ptrdiff_t>(remedies.size())) return;
  add_label(tr("Would not fit (closest first; no Apply):"), layout);
  for (const RemedyRow& r : remedies) {
    if (r.fits) continue;
    const QString miss = r.shortfall_bytes > 0 ? tr("misses by %1").arg(bytes_text(r.shortfall_bytes))
                                               : tr("misses by the allocator's cached blocks");
    QLabel* label = add_label(tr("%1 — peak %2, %3").arg(r.name, bytes_text(r.peak_bytes), miss), layout);
    label->setToolTip(r.description);
    label->setEnabled(false);
    missing_.push_back(label);
  }
}

void RemedyList::set_actions_enabled(bool enabled) {
  for (QPushButton* b : apply_buttons_) b->setEnabled(enabled);
}

QStringList RemedyList::missing_texts() const {
  QStringList out;
  for (const QLabel* l : missing_) out << l->text();
  return out;
}

}  // namespace unet::gui
