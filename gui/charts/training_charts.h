// The training curves tab: loss per step with the epoch means and the validation loss, IoU and Dice per
// epoch (each class's, "class k IoU" and "class k Dice", a legend row per class, and their mean over the
// foreground classes where there are several), and throughput. It only takes report structs; data may arrive
// far faster than the screen needs, so adding a point never replots: a short timer coalesces the replots, and
// axis extents are kept as data arrives instead of being searched for in ever longer series.
#pragma once

#include <QWidget>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "gui/charts/chart_common.h"
#include "unet/train/metrics_log.h"
#include "unet/train/observer.h"

class QCheckBox;
class QTimer;

namespace unet::gui {

class TrainingCharts : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingCharts(QWidget* parent = nullptr);

  // A new run: clears every series of the run (the compared runs stay).
  void reset();
  // Overlays another run's curves (its metrics.jsonl, read_run_history) for comparison, as TensorBoard does:
  // its training and validation loss and its IoU, named "<name>: ...", each run in a colour of its own. They
  // stay through reset() until clear_comparisons().
  void add_comparison(const QString& name, const unet::RunHistory& history);
  void clear_comparisons();
  int comparison_count() const { return static_cast<int>(comparisons_.size()); }
  // The compared runs' graphs, for tests: [run][0 train loss, 1 validation loss, 2 IoU].
  const std::vector<std::array<QCPGraph*, 3>>& comparison_graphs() const { return comparisons_; }
  // Training loss at x = step; throughput per step, raw and smoothed. Non-finite values are left out.
  void add_step(const unet::StepReport& r);
  // Training and validation loss at x = r.step; IoU and Dice at x = r.epoch, the mean and each class's.
  // Non-finite values (no validation set, a class absent from it) are left out.
  void add_epoch(const unet::EpochReport& r);
  // The three plots, one below the other, into one ".png" image or one ".pdf" page. False with the reason
  // (naming the path) in `error` otherwise.
  bool export_to(const QString& path, QString* error, const QString& caption = {}) const;
  // What export_to() writes, rendered (on the GUI thread) for a write elsewhere (Export charts…: a
  // WriteFileTask); nullopt with the reason in `error` as export_to().
  std::optional<QByteArray> render_for(const QString& path, QString* error,
                                       const QString& caption = {}) const;

  // A logarithmic loss axis (the "log scale" check box does the same).
  void set_log_loss(bool log);
  bool log_loss() const;

  int loss_points() const;        // training loss per step
  int validation_points() const;  // validation loss per epoch
  int metric_points() const;      // IoU per epoch
  int throughput_points() const;  // raw throughput per step
  QCustomPlot* loss_plot() const { return loss_plot_; }
  QCheckBox* follow_box() const { return follow_box_; }
  QCustomPlot* metrics_plot() const { return metrics_plot_; }
  QCustomPlot* throughput_plot() const { return throughput_plot_; }
  // The graphs behind the plots, for the main window and tests.
  QCPGraph* step_loss_graph() const { return step_loss_; }
  QCPGraph* epoch_loss_graph() const { return epoch_loss_; }
  QCPGraph* validation_loss_graph() const { return val_loss_; }
  // The mean over the foreground classes (val_iou, val_dice); hidden for a binary model, where it is class 1.
  QCPGraph* iou_graph() const { return iou_; }
  QCPGraph* dice_graph() const { return dice_; }
  // Class k's IoU and Dice graphs, once a validation has measured it; nullptr before.
  QCPGraph* class_iou_graph(std::size_t k) const {
    return k < class_graphs_.size() ? class_graphs_[k][0] : nullptr;
  }
  QCPGraph* class_dice_graph(std::size_t k) const {
    return k < class_graphs_.size() ? class_graphs_[k][1] : nullptr;
  }
  // task instances: the object metrics (val_dsb, val_f1), made at the first epoch that reports them.
  QCPGraph* dsb_graph() const { return dsb_; }
  QCPGraph* object_f1_graph() const { return object_f1_; }
  QCPGraph* throughput_graph() const { return throughput_; }
  QCPGraph* throughput_avg_graph() const { return throughput_avg_; }
  QCPGraph* skipped_graph() const { return skipped_; }
  QCPGraph* lr_graph() const { return lr_; }
  QCPGraph* loss_scale_graph() const { return loss_scale_; }
  QCPGraph* data_wait_graph() const { return data_wait_; }

 private:
  void schedule_refresh();
  void refresh();
  // Graphs for the classes up to `classes` (IoU and Dice each), and the mean's shown only when there are
  // several foreground classes.
  void add_class_graphs(std::size_t classes);
  // Sets the axis ranges from the data (x only while following it). Changes the plots, not this widget's
  // state.
  void fit_axes() const;

  QCustomPlot* loss_plot_ = nullptr;
  QCustomPlot* metrics_plot_ = nullptr;
  QCustomPlot* throughput_plot_ = nullptr;
  QCPGraph* step_loss_ = nullptr;
  QCPGraph* epoch_loss_ = nullptr;
  QCPGraph* val_loss_ = nullptr;
  QCPGraph* iou_ = nullptr;
  QCPGraph* dice_ = nullptr;
  std::vector<std::array<QCPGraph*, 2>> class_graphs_;  // [class][0 IoU, 1 Dice]
  QCPGraph* dsb_ = nullptr;
  QCPGraph* object_f1_ = nullptr;
  QCPGraph* throughput_ = nullptr;
  QCPGraph* skipped_ = nullptr;
  QCPGraph* lr_ = nullptr;
  QCPGraph* loss_scale_ = nullptr;
  QCPGraph* data_wait_ = nullptr;
  QCPGraph* throughput_avg_ = nullptr;
  QCheckBox* log_box_ = nullptr;
  QTimer* refresh_timer_ = nullptr;

  charts::Extent steps_, epochs_, loss_, throughput_values_;
  charts::Extent rates_;  // learning rate and (when it scales) loss scale, on the loss plot's right axis
  charts::Extent waits_;  // data wait, on the throughput plot's right axis
  // Until the user pans or zooms, the x axes follow the data; a double-click goes back to following.
  bool follow_steps_ = true, follow_epochs_ = true;
  QCheckBox* follow_box_ = nullptr;
  std::vector<std::array<QCPGraph*, 3>> comparisons_;
  charts::Extent compared_steps_, compared_epochs_, compared_loss_;
};

}  // namespace unet::gui
