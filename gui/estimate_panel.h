// "Will it fit?": for each selected device, a bar of the planned peak against the device's capacity (or cap),
// green with room to spare, amber when close, red when it does not fit; under it, when it does not fit, the
// planner's remedies best first, each applied with one click; and a Fit batch button.
#pragma once

#include <QColor>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QWidget>

#include "gui/estimate_tasks.h"

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
  void show_estimate(const Estimate& e);
  // No estimate for the settings as they are (invalid, no device): nothing of an earlier one stays shown.
  void show_unavailable(const QString& why);
  void show_fit(const BatchFitResult& r);
  void set_enabled_actions(bool enabled);  // off while training

  int bar_count() const { return static_cast<int>(bars_.size()); }
  const MemoryBar* bar(int i) const { return bars_.at(static_cast<std::size_t>(i)); }
  int remedy_count() const { return static_cast<int>(apply_buttons_.size()); }
  QPushButton* apply_button(int i) const { return apply_buttons_.at(static_cast<std::size_t>(i)); }
  QPushButton* fit_button() const { return fit_button_; }
  QString status_text() const { return status_->text(); }
  QString fit_text() const { return fit_result_->text(); }

 signals:
  // A remedy's changes, as JSON text of dotted key -> value (ConfigPanel::apply_changes takes them).
  void apply_requested(const QString& changes_json);
  void fit_requested();

 private:
  void clear_rows();

  QLabel* status_;
  QVBoxLayout* bars_layout_;
  QVBoxLayout* remedies_layout_;
  QPushButton* fit_button_;
  QLabel* fit_result_;
  std::vector<MemoryBar*> bars_;
  std::vector<QWidget*> remedy_rows_;
  std::vector<QPushButton*> apply_buttons_;
};

// "12.3 MiB" as a QString.
QString bytes_text(std::int64_t bytes);

}  // namespace unet::gui
