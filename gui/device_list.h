// The editor of the `devices` config key: every device the engine finds, checkable, with its memory. A
// string list is the wrong shape for this choice: the user picks either the CPU (with a number of
// data-parallel replicas) or some CUDA devices, never both, and needs to see how much memory each has before
// choosing. Devices named by the config but absent from this machine stay listed (marked "not found") so that
// opening a config on a laptop and saving it again does not drop its GPUs.
#pragma once

#include <QWidget>

#include <string>
#include <vector>

#include "unet/backend/devices.h"

class QLabel;
class QPushButton;
class QSpinBox;
class QTreeWidget;
class QTreeWidgetItem;

namespace unet::gui {

class DeviceList : public QWidget {
  Q_OBJECT

 public:
  enum Column { id_column, name_column, total_column, free_column, others_column, replicas_column };

  explicit DeviceList(QWidget* parent = nullptr);

  // Rebuilds the rows; the selection (values()) stays as it was.
  void set_listing(const unet::DeviceListing& listing);
  // Lists the devices again (list_devices()); a failure is shown under the list, never thrown.
  void refresh();

  // The selection as the config holds it ("cpu:0", "cpu:1", ... or "cuda:N"). Does not emit changed().
  void set_values(const std::vector<std::string>& devices);
  const std::vector<std::string>& values() const { return values_; }

  // For the panel's validation marks and for tests.
  QTreeWidget* tree() const { return tree_; }
  QSpinBox* replicas() const { return replicas_; }
  QLabel* note() const { return note_; }
  QPushButton* refresh_button() const { return refresh_; }
  // The row of a device id ("cpu:0" is the CPU row, whatever its replicas); nullptr when not listed.
  QTreeWidgetItem* item(const QString& id) const;

 signals:
  // The user changed the selection (a check or the replica count).
  void changed();

 private:
  void rebuild();
  void sync_checks();
  void item_changed(QTreeWidgetItem* item, int column);
  void replicas_changed(int count);
  std::vector<std::string> selection_from_rows() const;
  void fit_height();
  void show_note();

  QTreeWidget* tree_ = nullptr;
  QSpinBox* replicas_ = nullptr;  // lives in the CPU row
  QLabel* note_ = nullptr;
  QPushButton* refresh_ = nullptr;

  unet::DeviceListing listing_;
  QString refresh_error_;
  std::vector<std::string> values_{"cpu:0"};
  // The CPU replicas as the config named them; usually cpu:0..cpu:N-1, kept verbatim until the count changes.
  std::vector<std::string> cpu_ids_{"cpu:0"};
  bool updating_ = false;  // set while the rows are filled from values_, so item signals are not user edits
};

// "80.0 GiB", "512 MiB", "—" for a negative (unknown) size.
QString format_bytes(std::int64_t bytes);

// Why the listing has no GPU and what to install for one (the engine's words: cuda_requirement_text), on two
// lines; empty when CUDA devices are listed.
QString cuda_unavailable_text(const unet::DeviceListing& listing);

}  // namespace unet::gui
