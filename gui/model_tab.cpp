#include "gui/model_tab.h"

#include <QHeaderView>
#include <QLocale>
#include <QVBoxLayout>

#include "gui/estimate_panel.h"

namespace unet::gui {

ModelTab::ModelTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  totals_ = new QLabel(this);
  totals_->setWordWrap(true);
  table_ = new QTableWidget(0, 5, this);
  table_->setHorizontalHeaderLabels(
      {tr("Layer"), tr("Kind"), tr("Output (N×C×H×W)"), tr("Parameters"), tr("Activations kept")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->hide();
  layout->addWidget(totals_);
  layout->addWidget(table_, 1);
}

void ModelTab::show_summary(const ModelSummary& s, bool checkpointing) {
  const QLocale locale = QLocale::c();
  table_->setRowCount(static_cast<int>(s.layers.size()));
  for (int i = 0; i < static_cast<int>(s.layers.size()); ++i) {
    const LayerSummary& l = s.layers[static_cast<std::size_t>(i)];
    auto cell = [&](int column, const QString& text, bool right) {
      auto* item = new QTableWidgetItem(text);
      if (right) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(i, column, item);
    };
    cell(0, QString::fromStdString(l.name), false);
    cell(1, QString::fromStdString(l.kind), false);
    cell(2, QString("%1×%2×%3×%4").arg(l.output.n).arg(l.output.c).arg(l.output.h).arg(l.output.w), false);
    cell(3, locale.toString(static_cast<qlonglong>(l.parameters)), true);
    cell(4, bytes_text(l.saved_bytes), true);
  }
  totals_->setText(
      tr("%1 parameters (%2 as f32). At %3 images per device the forward pass keeps %4 of activations "
         "for backward, and they peak at %5%6.")
          .arg(locale.toString(static_cast<qlonglong>(s.parameters)), bytes_text(s.parameters * 4))
          .arg(s.batch_per_device)
          .arg(bytes_text(s.kept_bytes), bytes_text(s.peak_bytes),
               checkpointing ? tr(" with activation checkpointing") : QString()));
}

}  // namespace unet::gui
