// The training curves tab (see training_charts.h).
#include "gui/charts/training_charts.h"

#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QTimer>
#include <algorithm>
#include <cmath>

namespace unet::gui {

namespace {

QCPGraph* add_graph(QCustomPlot* plot, const QString& name, const QPen& pen,
                    QCPScatterStyle::ScatterShape marker = QCPScatterStyle::ssNone) {
  QCPGraph* graph = plot->addGraph();
  graph->setName(name);
  graph->setPen(pen);
  graph->setAdaptiveSampling(true);
  if (marker != QCPScatterStyle::ssNone)
    graph->setScatterStyle(QCPScatterStyle(marker, pen.color(), Qt::white, 6));
  return graph;
}

QPen pen(const QColor& colour, double width, Qt::PenStyle style = Qt::SolidLine) {
  QPen p(colour, width, style);
  p.setCapStyle(Qt::FlatCap);
  return p;
}

QColor with_alpha(QColor colour, int alpha) {
  colour.setAlpha(alpha);
  return colour;
}

// An x range around [lo, hi] for integer keys (steps), never empty.
QCPRange key_range(const charts::Extent& e) {
  if (e.empty()) return {0, 1};
  if (e.max - e.min < 1) return {e.min - 1, e.max + 1};
  return {e.min, e.max};
}

}  // namespace

TrainingCharts::TrainingCharts(QWidget* parent) : QWidget(parent) {
  loss_plot_ = new QCustomPlot(this);
  metrics_plot_ = new QCustomPlot(this);
  throughput_plot_ = new QCustomPlot(this);
  charts::setup_plot(loss_plot_, tr("step"), tr("loss"));
  charts::setup_plot(metrics_plot_, tr("epoch"), tr("IoU / Dice"));
  charts::setup_plot(throughput_plot_, tr("step"), tr("img/s"));

  const QColor train = charts::series_colour(0), val = charts::series_colour(1);
  step_loss_ = add_graph(loss_plot_, tr("train loss (step)"), pen(with_alpha(train, 110), 1));
  epoch_loss_ =
      add_graph(loss_plot_, tr("train loss (epoch)"), pen(train.darker(130), 1.5), QCPScatterStyle::ssSquare);
  val_loss_ = add_graph(loss_plot_, tr("validation loss"), pen(val, 1.5), QCPScatterStyle::ssCircle);
  iou_ = add_graph(metrics_plot_, tr("mean IoU"), pen(Qt::black, 2), QCPScatterStyle::ssCircle);
  dice_ =
      add_graph(metrics_plot_, tr("mean Dice"), pen(Qt::black, 2, Qt::DashLine), QCPScatterStyle::ssDiamond);
  throughput_ = add_graph(throughput_plot_, tr("per step"), pen(with_alpha(charts::series_colour(3), 90), 1));
  throughput_avg_ = add_graph(throughput_plot_, tr("smoothed"), pen(charts::series_colour(3), 2));
  // Steps whose gradients were inf/NaN (mixed fp16: the step was skipped and the loss scale lowered).
  skipped_ =
      add_graph(loss_plot_, tr("skipped step"), pen(charts::series_colour(3), 1.5), QCPScatterStyle::ssCross);
  skipped_->setLineStyle(QCPGraph::lsNone);
  skipped_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, charts::series_colour(3), 9));
  // The learning rate and the loss scale on the right axis of the loss plot (logarithmic: 1e-4 and 65536
  // share it); the time each step waited for its data on the right axis of the throughput plot.
  for (QCPAxis* right : {loss_plot_->yAxis2, throughput_plot_->yAxis2}) {
    right->setVisible(true);
    right->setTickLabels(true);
  }
  loss_plot_->yAxis2->setLabel(tr("lr, loss scale"));
  loss_plot_->yAxis2->setScaleType(QCPAxis::stLogarithmic);
  loss_plot_->yAxis2->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  throughput_plot_->yAxis2->setLabel(tr("data wait (s)"));
  lr_ = loss_plot_->addGraph(loss_plot_->xAxis, loss_plot_->yAxis2);
  lr_->setName(tr("learning rate"));
  lr_->setPen(pen(charts::series_colour(7), 1.2, Qt::DashLine));
  loss_scale_ = loss_plot_->addGraph(loss_plot_->xAxis, loss_plot_->yAxis2);
  loss_scale_->setName(tr("loss scale"));
  loss_scale_->setPen(pen(charts::series_colour(4), 1.2, Qt::DotLine));
  data_wait_ = throughput_plot_->addGraph(throughput_plot_->xAxis, throughput_plot_->yAxis2);
  data_wait_->setName(tr("data wait"));
  data_wait_->setPen(pen(with_alpha(charts::series_colour(5), 160), 1));

  // Steps and epochs are whole numbers: no ticks between them when zoomed in.
  for (QCustomPlot* plot : {loss_plot_, metrics_plot_, throughput_plot_})
    plot->xAxis->setTicker(charts::integer_ticker());
  metrics_plot_->yAxis->setRange(0, 1);
  metrics_plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  // A row per class: its IoU, then its Dice.
  metrics_plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  metrics_plot_->legend->setWrap(2);
  throughput_plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);

  // Loss and throughput share x = step: panning or zooming one moves the other.
  connect(loss_plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) {
            throughput_plot_->xAxis->setRange(r);
            throughput_plot_->replot(QCustomPlot::rpQueuedReplot);
          });
  connect(throughput_plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) {
            loss_plot_->xAxis->setRange(r);
            loss_plot_->replot(QCustomPlot::rpQueuedReplot);
          });
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_})
    charts::follow_unless_moved(plot, this, &follow_steps_, [this] { refresh(); });
  charts::follow_unless_moved(metrics_plot_, this, &follow_epochs_, [this] { refresh(); });
  for (QCustomPlot* plot : {loss_plot_, metrics_plot_, throughput_plot_}) charts::add_value_readout(plot);

  // Following new data is a visible state: zooming or panning clears it, ticking it (or a double-click)
  // brings the view back to all the data and keeps it there.
  follow_box_ = new QCheckBox(tr("follow new data"), this);
  follow_box_->setObjectName("follow");
  follow_box_->setToolTip(tr("Keep the whole run in view as it grows; zooming or panning turns this off"));
  follow_box_->setChecked(true);
  connect(follow_box_, &QCheckBox::toggled, this, [this](bool follow) {
    follow_steps_ = follow_epochs_ = follow;
    if (follow) refresh();
  });
  for (QCustomPlot* plot : {loss_plot_, metrics_plot_})
    connect(plot->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this] {
      const QSignalBlocker quiet(follow_box_);
      follow_box_->setChecked(follow_steps_ && follow_epochs_);
    });

  log_box_ = new QCheckBox(tr("log scale loss"), this);
  log_box_->setToolTip(tr("Show the loss on a logarithmic axis"));
  connect(log_box_, &QCheckBox::toggled, this, &TrainingCharts::set_log_loss);
  auto* hint = new QLabel(tr("drag to pan, wheel to zoom, double-click to fit"), this);
  hint->setEnabled(false);

  auto* top = new QHBoxLayout;
  top->addWidget(follow_box_);
  top->addWidget(log_box_);
  top->addStretch(1);
  top->addWidget(hint);
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(4, 4, 4, 4);
  grid->setSpacing(4);
  grid->addLayout(top, 0, 0, 1, 2);
  grid->addWidget(loss_plot_, 1, 0, 1, 2);
  grid->addWidget(metrics_plot_, 2, 0);
  grid->addWidget(throughput_plot_, 2, 1);
  grid->setRowStretch(1, 3);
  grid->setRowStretch(2, 2);

  refresh_timer_ = new QTimer(this);
  refresh_timer_->setSingleShot(true);
  refresh_timer_->setInterval(charts::refresh_interval_ms);
  connect(refresh_timer_, &QTimer::timeout, this, &TrainingCharts::refresh);
  reset();
}

void TrainingCharts::reset() {
  for (QCPGraph* g : {step_loss_, epoch_loss_, val_loss_, iou_, dice_, throughput_, throughput_avg_, skipped_,
                      lr_, loss_scale_, data_wait_})
    g->data()->clear();
  for (const auto& graphs : class_graphs_)
    for (QCPGraph* g : graphs) metrics_plot_->removeGraph(g);
  class_graphs_.clear();
  for (QCPGraph* objects : {dsb_, object_f1_})
    if (objects) metrics_plot_->removeGraph(objects);
  dsb_ = object_f1_ = nullptr;
  for (QCPGraph* mean : {iou_, dice_}) {
    mean->setVisible(true);
    mean->addToLegend();
  }
  steps_ = epochs_ = loss_ = throughput_values_ = rates_ = waits_ = charts::Extent{};
  // The loss scale only where it means something: a run that scales (mixed fp16).
  loss_scale_->setVisible(false);
  loss_scale_->removeFromLegend();
  skipped_->removeFromLegend();  // in the legend once a step was skipped
  follow_steps_ = follow_epochs_ = true;
  if (follow_box_) {
    const QSignalBlocker quiet(follow_box_);
    follow_box_->setChecked(true);
  }
  schedule_refresh();
}

void TrainingCharts::add_comparison(const QString& name, const unet::RunHistory& history) {
  // Colours after the ones this run's series use, lighter, so that this run stays in front.
  const QColor colour = charts::series_colour(5 + static_cast<int>(comparisons_.size()));
  std::array<QCPGraph*, 3> graphs{
      add_graph(loss_plot_, tr("%1: train loss").arg(name), pen(with_alpha(colour, 120), 1)),
      add_graph(loss_plot_, tr("%1: validation loss").arg(name), pen(colour, 1.2, Qt::DashLine),
                QCPScatterStyle::ssCircle),
      add_graph(metrics_plot_, tr("%1: IoU").arg(name), pen(colour, 1.2, Qt::DashLine),
                QCPScatterStyle::ssCircle)};
  for (const unet::StepReport& r : history.steps) {
    compared_steps_.add(static_cast<double>(r.step));
    if (!std::isfinite(r.loss)) continue;
    graphs[0]->addData(static_cast<double>(r.step), r.loss);
    compared_loss_.add(r.loss);
  }
  for (const unet::EpochReport& r : history.epochs) {
    compared_steps_.add(static_cast<double>(r.step));
    compared_epochs_.add(static_cast<double>(r.epoch));
    if (std::isfinite(r.val_loss)) {
      graphs[1]->addData(static_cast<double>(r.step), r.val_loss);
      compared_loss_.add(r.val_loss);
    }
    if (std::isfinite(r.val_iou)) graphs[2]->addData(static_cast<double>(r.epoch), r.val_iou);
  }
  comparisons_.push_back(graphs);
  follow_steps_ = follow_epochs_ = true;
  refresh();
}

void TrainingCharts::clear_comparisons() {
  for (const auto& graphs : comparisons_)
    for (QCPGraph* g : graphs) g->parentPlot()->removeGraph(g);
  comparisons_.clear();
  compared_steps_ = compared_epochs_ = compared_loss_ = charts::Extent{};
  refresh();
}

void TrainingCharts::add_step(const unet::StepReport& r) {
  const auto x = static_cast<double>(r.step);
  steps_.add(x);
  if (std::isfinite(r.loss)) {
    step_loss_->addData(x, r.loss);
    loss_.add(r.loss);
  }
  if (std::isfinite(r.img_per_s)) {
    throughput_->addData(x, r.img_per_s);
    throughput_values_.add(r.img_per_s);
  }
  if (std::isfinite(r.img_per_s_avg)) {
    throughput_avg_->addData(x, r.img_per_s_avg);
    throughput_values_.add(r.img_per_s_avg);
  }
  if (r.skipped) {
    if (skipped_->dataCount() == 0) skipped_->addToLegend();
    skipped_->addData(x, std::isfinite(r.loss) ? r.loss : (loss_.empty() ? 0.0 : loss_.max));
  }
  if (std::isfinite(r.lr) && r.lr > 0) {
    lr_->addData(x, r.lr);
    rates_.add(r.lr);
  }
  if (std::isfinite(r.loss_scale) && r.loss_scale > 0) {
    loss_scale_->addData(x, r.loss_scale);
    if (r.loss_scale != 1.0 && !loss_scale_->visible()) {
      loss_scale_->setVisible(true);
      loss_scale_->addToLegend();
    }
    if (loss_scale_->visible()) rates_.add(r.loss_scale);
  }
  if (std::isfinite(r.data_wait_seconds) && r.data_wait_seconds >= 0) {
    data_wait_->addData(x, r.data_wait_seconds);
    waits_.add(r.data_wait_seconds);
  }
  schedule_refresh();
}

void TrainingCharts::add_epoch(const unet::EpochReport& r) {
  // A validation within an epoch (train.val_every_steps) sits at its share of the epoch.
  const auto step = static_cast<double>(r.step),
             epoch = r.epochs_done > 0 ? r.epochs_done : static_cast<double>(r.epoch);
  steps_.add(step);
  epochs_.add(epoch);
  if (std::isfinite(r.loss)) {
    epoch_loss_->addData(step, r.loss);
    loss_.add(r.loss);
  }
  if (std::isfinite(r.val_loss)) {
    val_loss_->addData(step, r.val_loss);
    loss_.add(r.val_loss);
  }
  if (std::isfinite(r.val_iou)) iou_->addData(epoch, r.val_iou);
  if (std::isfinite(r.val_dice)) dice_->addData(epoch, r.val_dice);
  add_class_graphs(std::max(r.val_class_iou.size(), r.val_class_dice.size()));
  for (std::size_t k = 0; k < r.val_class_iou.size(); ++k)
    if (std::isfinite(r.val_class_iou[k])) class_graphs_[k][0]->addData(epoch, r.val_class_iou[k]);
  for (std::size_t k = 0; k < r.val_class_dice.size(); ++k)
    if (std::isfinite(r.val_class_dice[k])) class_graphs_[k][1]->addData(epoch, r.val_class_dice[k]);
  if (r.objects) {
    // The objects' scores beside the pixels': the DSB score (solid) and F1 at IoU 0.5 (dotted), in orange.
    if (!dsb_) {
      const QColor objects(230, 120, 20);
      dsb_ =
          add_graph(metrics_plot_, tr("DSB score (objects)"), pen(objects, 2), QCPScatterStyle::ssTriangle);
      object_f1_ = add_graph(metrics_plot_, tr("object F1 at IoU 0.5"), pen(objects, 1.5, Qt::DotLine),
                             QCPScatterStyle::ssTriangle);
    }
    if (std::isfinite(r.val_dsb)) dsb_->addData(epoch, r.val_dsb);
    if (std::isfinite(r.val_f1)) object_f1_->addData(epoch, r.val_f1);
  }
  schedule_refresh();
}

void TrainingCharts::add_class_graphs(std::size_t classes) {
  while (class_graphs_.size() < classes) {
    const auto k = class_graphs_.size();
    const QColor colour = charts::series_colour(static_cast<int>(k));
    class_graphs_.push_back(
        {add_graph(metrics_plot_, tr("class %1 IoU").arg(k), pen(colour, 1.5), QCPScatterStyle::ssCircle),
         add_graph(metrics_plot_, tr("class %1 Dice").arg(k), pen(colour, 1.5, Qt::DashLine),
                   QCPScatterStyle::ssDiamond)});
  }
  // A binary model's mean is its foreground, class 1: drawn once, as class 1.
  if (class_graphs_.size() == 2)
    for (QCPGraph* mean : {iou_, dice_}) {
      mean->setVisible(false);
      mean->removeFromLegend();
    }
}

void TrainingCharts::set_log_loss(bool log) {
  if (log_box_->isChecked() != log) {
    log_box_->setChecked(log);  // comes back here through toggled()
    return;
  }
  QCPAxis* y = loss_plot_->yAxis;
  if (log) {
    y->setScaleType(QCPAxis::stLogarithmic);
    y->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  } else {
    y->setScaleType(QCPAxis::stLinear);
    y->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  y->ticker()->setTickCount(5);
  refresh();
}

bool TrainingCharts::log_loss() const {
  return log_box_->isChecked();
}

int TrainingCharts::loss_points() const {
  return step_loss_->dataCount();
}
int TrainingCharts::validation_points() const {
  return val_loss_->dataCount();
}
int TrainingCharts::metric_points() const {
  return iou_->dataCount();
}
int TrainingCharts::throughput_points() const {
  return throughput_->dataCount();
}

void TrainingCharts::schedule_refresh() {
  if (!refresh_timer_->isActive()) refresh_timer_->start();
}

void TrainingCharts::refresh() {
  refresh_timer_->stop();
  fit_axes();
  for (QCustomPlot* plot : {loss_plot_, metrics_plot_, throughput_plot_})
    plot->replot(QCustomPlot::rpQueuedRefresh);
}

void TrainingCharts::fit_axes() const {
  // This run's data and the compared runs' together.
  const auto merged = [](charts::Extent a, const charts::Extent& b) {
    for (const double v : {b.min, b.max, b.min_positive})
      if (std::isfinite(v)) a.add(v);
    return a;
  };
  const charts::Extent steps = merged(steps_, compared_steps_), epochs = merged(epochs_, compared_epochs_);
  const charts::Extent loss = merged(loss_, compared_loss_);
  if (follow_steps_) loss_plot_->xAxis->setRange(key_range(steps));  // throughput follows through the link
  if (follow_epochs_) {
    metrics_plot_->xAxis->setRange(epochs.empty() ? QCPRange(0.5, 1.5)
                                                  : QCPRange(epochs.min - 0.5, epochs.max + 0.5));
  }
  if (rates_.min_positive <= rates_.max)
    loss_plot_->yAxis2->setRange(rates_.min_positive / 3, rates_.max * 3);
  else
    loss_plot_->yAxis2->setRange(1e-4, 1);
  throughput_plot_->yAxis2->setRange(0, waits_.empty() || waits_.max <= 0 ? 1.0 : waits_.max * 1.1);
  if (loss_plot_->yAxis->scaleType() == QCPAxis::stLogarithmic) {
    if (loss.min_positive <= loss.max) {
      loss_plot_->yAxis->setRange(loss.min_positive / 1.5, loss.max * 1.5);
    } else {
      loss_plot_->yAxis->setRange(0.01, 1);
    }
  } else {
    loss_plot_->yAxis->setRange(std::min(0.0, loss.empty() ? 0.0 : loss.min),
                                loss.empty() || loss.max <= 0 ? 1.0 : loss.max * 1.05);
  }
  throughput_plot_->yAxis->setRange(
      0, throughput_values_.empty() || throughput_values_.max <= 0 ? 1.0 : throughput_values_.max * 1.1);
}

std::optional<QByteArray> TrainingCharts::render_for(const QString& path, QString* error,
                                                     const QString& caption) const {
  fit_axes();
  const int width = std::max(loss_plot_->width(), 900);
  return charts::render_plots({loss_plot_, metrics_plot_, throughput_plot_}, QSize(width, 320), path, error,
                              caption);
}

bool TrainingCharts::export_to(const QString& path, QString* error, const QString& caption) const {
  const std::optional<QByteArray> bytes = render_for(path, error, caption);
  return bytes && charts::write_export(path, *bytes, error);
}

}  // namespace unet::gui
