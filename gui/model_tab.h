// The model tab: the per-layer table (output shape, parameters, activation bytes kept for backward, from the
// memory planner), with the totals, for the config as it stands in the panel.
#pragma once

#include <QLabel>
#include <QTableWidget>
#include <QWidget>

#include "unet/plan/memory_planner.h"

namespace unet::gui {

class ModelTab : public QWidget {
  Q_OBJECT
 public:
  explicit ModelTab(QWidget* parent = nullptr);
  void show_summary(const ModelSummary& summary, bool checkpointing);
  const QTableWidget* table() const { return table_; }
  QString totals_text() const { return totals_->text(); }

 private:
  QTableWidget* table_;
  QLabel* totals_;
};

}  // namespace unet::gui
