// "Will it fit?": for each selected device, a bar of the planned peak against the device's capacity (or cap),
// green with room to spare, amber when close, red when it does not fit; under it, when it does not fit, the
// planner's remedies (gui/remedy_list.h: those that fit best first, each applied with one click, then those
// that would not, by how much they miss); a Fit batch button and beside it Fit patch (patch mode only); and
// while an estimate is made, a busy bar saying what the planner is doing.
#pragma once

#include <QColor>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>
#include <QWidget>

#include "gui/estimate_tasks.h"
#include "gui/remedy_list.h"

namespace unet::gui {

// One device's bar.
class MemoryBar : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryBar(QWidget* parent = nullptr);
  void set(const DevicePlan& plan);
  double fraction() const { return fraction_; }  // planned peak / capacity
  QColor color() const;
  QString text() const { return text_; }
  QSize sizeHint() const override { return {240, 26}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  double fraction_ = 0;
  QString text_;
};

class EstimatePanel : public QWidget {
  Q_OBJECT
 public:
  explicit EstimatePanel(QWidget* parent = nullptr);

  // A new estimate is on its way: an earlier "largest batch" no longer applies.
  void show_pending();
  // What the planner is doing for the estimate on its way ("remedy: mixed-bf16").
  void show_progress(const QString& what);
  void show_estimate(const Estimate& e);
  // No estimate for the settings as they are (invalid, no device): nothing of an earlier one stays shown.
  void show_unavailable(const QString& why);
  void show_fit(const BatchFitResult& r);
  void show_fit(const PatchFitResult& r);
  void set_enabled_actions(bool enabled);  // off while training
  // Whether the settings train on patches (Fit patch applies); `why_not`: why it does not, for its tooltip.
  void set_patch_mode(bool patches, const QString& why_not);

  int bar_count() const { return static_cast<int>(bars_.size()); }
  const MemoryBar* bar(int i) const { return bars_.at(static_cast<std::size_t>(i)); }
  // The remedies that fit, each with its Apply; and those that would not fit, in words.
  int remedy_count() const { return remedies_->fitting_count(); }
  QPushButton* apply_button(int i) const { return remedies_->apply_button(i); }
  QStringList missing_remedies() const { return remedies_->missing_texts(); }
  // The busy bar and what it says; visible while an estimate is on its way.
  const QProgressBar* busy() const { return busy_; }
  QPushButton* fit_button() const { return fit_button_; }
  QPushButton* fit_patch_button() const { return fit_patch_button_; }
  QString status_text() const { return status_->text(); }
  QString fit_text() const { return fit_result_->text(); }

 signals:
  // A remedy's changes, as JSON text of dotted key -> value (ConfigPanel::apply_changes takes them).
  void apply_requested(const QString& changes_json);
  void fit_requested();
  void fit_patch_requested();

 private:
  void clear_rows();

  void set_busy(const QString& what);
  void update_fit_patch_button();

  QLabel* status_;
  QProgressBar* busy_;
  QVBoxLayout* bars_layout_;
  RemedyList* remedies_;
  QPushButton* fit_button_;
  QPushButton* fit_patch_button_;
  QLabel* fit_result_;
  bool actions_enabled_ = true, patch_mode_ = false;
  QString no_patch_why_;
  std::vector<MemoryBar*> bars_;
};

// "12.3 MiB" as a QString.
QString bytes_text(std::int64_t bytes);

}  // namespace unet::gui
