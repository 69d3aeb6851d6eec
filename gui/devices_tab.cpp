#include "gui/devices_tab.h"

#include <QHeaderView>
#include <QVBoxLayout>

#include "gui/device_list.h"
#include "gui/estimate_panel.h"

namespace unet::gui {

namespace {

enum Column { device, name, utilisation, memory, others, temperature, power, column_count };

QString known(double v, const QString& unit, int decimals = 0) {
  return v >= 0 ? QString::number(v, 'f', decimals) + unit : QStringLiteral("—");
}

}  // namespace

DevicesTab::DevicesTab(QWidget* parent) : QWidget(parent) {
  table_ = new QTableWidget(0, column_count, this);
  table_->setObjectName("device_monitor");
  table_->setHorizontalHeaderLabels({tr("Device"), tr("Name"), tr("Utilisation"), tr("Memory used"),
                                     tr("Other processes"), tr("Temperature"), tr("Power")});
  table_->horizontalHeaderItem(utilisation)
      ->setToolTip(
          tr("GPUs: the share of time a kernel ran (NVML); the CPU: its load since the last reading"));
  table_->horizontalHeaderItem(others)->setToolTip(tr("Memory that other processes hold on the GPU"));
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  auto* note = new QLabel(tr("Read once a second while this tab is shown, training or not."), this);
  note->setEnabled(false);
  gpu_note_ = new QLabel(this);
  gpu_note_->setObjectName("gpu_note");
  gpu_note_->setWordWrap(true);
  gpu_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);  // a package name to copy
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(gpu_note_);
  layout->addWidget(table_, 1);
  layout->addWidget(note);
  timer_.setInterval(1000);
  connect(&timer_, &QTimer::timeout, this, &DevicesTab::refresh);
  refresh_gpu_note();
}

void DevicesTab::refresh_gpu_note() {
  QString text;
  try {
    text = cuda_unavailable_text(list_devices());
  } catch (const std::exception& e) {
    text = tr("The devices could not be listed: %1").arg(QString::fromUtf8(e.what()));
  }
  gpu_note_->setText(text);
  gpu_note_->setVisible(!text.isEmpty());
}

void DevicesTab::refresh() {
  const std::vector<DeviceReading> readings = monitor_.read();
  table_->setRowCount(static_cast<int>(readings.size()));
  for (int row = 0; row < static_cast<int>(readings.size()); ++row) {
    const DeviceReading& r = readings[static_cast<std::size_t>(row)];
    const DeviceSample& s = r.sample;
    const QString used =
        s.total_bytes > 0 && s.free_bytes >= 0
            ? tr("%1 of %2").arg(bytes_text(s.total_bytes - s.free_bytes), bytes_text(s.total_bytes))
            : QStringLiteral("—");
    // NVML may see memory in use without telling this process's share from others' (a container).
    const QString others = s.others_not_attributable     ? tr("not attributable")
                           : s.used_by_others_bytes >= 0 ? bytes_text(s.used_by_others_bytes)
                                                         : QStringLiteral("—");
    const QString cells[column_count] = {QString::fromStdString(r.id),
                                         QString::fromStdString(r.name),
                                         known(s.utilisation_percent, QStringLiteral(" %")),
                                         used,
                                         others,
                                         known(s.temperature_celsius, QStringLiteral(" °C")),
                                         known(s.power_watts, QStringLiteral(" W"), 1)};
    for (int column = 0; column < column_count; ++column) {
      QTableWidgetItem* item = table_->item(row, column);
      if (!item) {
        item = new QTableWidgetItem;
        table_->setItem(row, column, item);
      }
      item->setText(cells[column]);
    }
  }
}

void DevicesTab::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  refresh_gpu_note();
  refresh();
  timer_.start();
}

void DevicesTab::hideEvent(QHideEvent* event) {
  timer_.stop();
  QWidget::hideEvent(event);
}

}  // namespace unet::gui
