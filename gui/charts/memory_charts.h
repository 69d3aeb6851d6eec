// The memory tab: per device, bytes in use, reserved, peak and device used over time against the capacity
// line, and for one chosen device the bytes in use stacked by category. Samples arrive at ~10 Hz per device
// for hours, so adding one never replots (a short timer coalesces replots), axis extents are kept as samples
// arrive, and every device's stacked series are kept ready so that switching the breakdown swaps data
// containers instead of copying them.
#pragma once

#include <QWidget>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gui/charts/chart_common.h"
#include "unet/core/memory.h"
#include "unet/train/observer.h"

class QComboBox;
class QLabel;
class QTimer;

namespace unet::gui {

class MemoryCharts : public QWidget {
  Q_OBJECT

 public:
  // The lines drawn per device on the usage plot.
  enum class UsageLine { in_use, reserved, peak, device_used };

  explicit MemoryCharts(QWidget* parent = nullptr);

  // A new run on these devices ("cpu:0", "cuda:1"), with their capacities in bytes (the device total or the
  // cap; 0 or missing: unknown until a sample says). Clears everything.
  void reset(const std::vector<std::string>& devices, const std::vector<std::int64_t>& capacities);
  // One sample of one device. A device not given to reset() is added. A sample's stats.capacity, when set,
  // moves that device's capacity line; device_used of 0 (unknown) draws no point.
  void add_sample(const unet::MemoryReport& m);
  // Whose stacked breakdown is shown (the combo box above the breakdown does the same). Unknown ids are
  // ignored.
  void select_device(const QString& device);
  QString selected_device() const;
  // The selected device's latest reading beyond memory, as the line beside the device box shows it: GPU
  // utilisation, temperature, power and other processes' memory, where the device reports them; empty (and
  // the line hidden) where it reports none, as a CPU.
  QString health_text() const;
  // Both plots, one below the other, into one ".png" image or one ".pdf" page. False with the reason (naming
  // the path) in `error` otherwise.
  bool export_to(const QString& path, QString* error, const QString& caption = {}) const;
  // What export_to() writes, rendered (on the GUI thread) for a write elsewhere (Export charts…: a
  // WriteFileTask); nullopt with the reason in `error` as export_to().
  std::optional<QByteArray> render_for(const QString& path, QString* error,
                                       const QString& caption = {}) const;

  QStringList devices() const;
  int samples(const QString& device) const;  // 0 for an unknown device
  QCustomPlot* usage_plot() const { return usage_plot_; }
  QCustomPlot* breakdown_plot() const { return breakdown_plot_; }
  // The graphs and lines behind the plots, for the main window and tests; nullptr for an unknown device.
  // Values are in bytes (the axes show them in binary units).
  QCPGraph* usage_graph(const QString& device, UsageLine line) const;
  QCPItemStraightLine* capacity_line(const QString& device) const;
  // The stacked layer of `category` for the selected device: its value is the bytes of this category plus all
  // the categories below it (parameters at the bottom, other at the top, which sums to in_use).
  QCPGraph* breakdown_graph(unet::MemoryCategory category) const;
  QCPItemStraightLine* breakdown_capacity_line() const { return breakdown_capacity_; }

 private:
  struct Device {
    std::string id;
    QString name;
    std::int64_t capacity = 0;
    int samples = 0;
    unet::MemoryReport last;           // the latest sample, for the health line
    double max_bytes = 0;              // the largest value of any usage line
    double max_stacked = 0;            // the largest stacked total
    std::array<QCPGraph*, 4> lines{};  // by UsageLine
    QCPItemStraightLine* capacity_line = nullptr;
    QCPItemText* capacity_label = nullptr;
    // Cumulative bytes by category, bottom to top; shown by the breakdown graphs while the device is
    // selected.
    std::array<QSharedPointer<QCPGraphDataContainer>, unet::memory_category_count> stacked;
  };

  Device& add_device(const std::string& id, std::int64_t capacity);
  const Device* find(const QString& id) const;
  void select_index(int index);
  void rebuild_legend();
  void update_capacity_items();
  void update_health();
  void schedule_refresh();
  void refresh();
  // Sets the axis ranges from the data (x only while following it). Changes the plots, not this widget's
  // state.
  void fit_axes() const;

  QCustomPlot* usage_plot_ = nullptr;
  QCustomPlot* breakdown_plot_ = nullptr;
  QComboBox* device_box_ = nullptr;
  QLabel* health_ = nullptr;
  QTimer* refresh_timer_ = nullptr;
  QCPTextElement* breakdown_title_ = nullptr;
  std::array<QCPGraph*, 4> key_{};  // graphs without data that explain the line styles in the legend
  std::array<QCPGraph*, unet::memory_category_count> breakdown_{};
  QCPItemStraightLine* breakdown_capacity_ = nullptr;
  QCPItemText* breakdown_capacity_label_ = nullptr;

  std::vector<Device> devices_;
  int selected_ = -1;
  charts::Extent time_;
  bool follow_usage_ = true, follow_breakdown_ = true;
};

}  // namespace unet::gui
