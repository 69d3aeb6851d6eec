// The device monitor tab: every device's utilisation, memory, other processes' memory, temperature and
// power, once a second while the tab is shown, training or not (as nvitop shows GPUs; the host's CPU load
// and memory for the CPU). Above them, where the engine lists no GPU, why not and what to install: this is
// where a user looks for GPUs.
#pragma once

#include <QLabel>
#include <QTableWidget>
#include <QTimer>
#include <QWidget>

#include "unet/backend/device_monitor.h"

namespace unet::gui {

class DevicesTab : public QWidget {
  Q_OBJECT
 public:
  explicit DevicesTab(QWidget* parent = nullptr);

  // Reads the devices now and shows them (the timer calls it each second while the tab is shown).
  void refresh();
  // Lists the devices again (list_devices(), each time the tab is shown): why there is no GPU, if so.
  void refresh_gpu_note();
  QTableWidget* table() const { return table_; }
  QLabel* gpu_note() const { return gpu_note_; }

 protected:
  void showEvent(QShowEvent* event) override;
  void hideEvent(QHideEvent* event) override;

 private:
  QTableWidget* table_ = nullptr;
  QLabel* gpu_note_ = nullptr;
  QTimer timer_;
  DeviceMonitor monitor_;
};

}  // namespace unet::gui
