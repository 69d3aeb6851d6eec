// The memory tab (see memory_charts.h).
#include "gui/charts/memory_charts.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <map>

namespace unet::gui {

namespace {

constexpr std::array<const char*, unet::memory_category_count> category_names{
    "parameters", "gradients", "optimizer state", "activations", "workspace", "input batch", "other"};
constexpr std::array<QRgb, unet::memory_category_count> category_colours{
    0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0xb07aa1, 0x76b7b2, 0xbab0ac};

QPen usage_pen(const QColor& colour, MemoryCharts::UsageLine line) {
  switch (line) {
    case MemoryCharts::UsageLine::in_use:
      return QPen(colour, 2, Qt::SolidLine);
    case MemoryCharts::UsageLine::reserved:
      return QPen(colour, 1.5, Qt::DashLine);
    case MemoryCharts::UsageLine::peak:
      return QPen(colour, 1.5, Qt::DotLine);
    case MemoryCharts::UsageLine::device_used:
      return QPen(charts::greyed(colour), 1, Qt::SolidLine);
  }
  return QPen(colour);
}

QCPItemStraightLine* horizontal_line(QCustomPlot* plot, const QColor& colour) {
  auto* line = new QCPItemStraightLine(plot);  // owned by the plot
  line->setPen(QPen(colour, 1.5, Qt::DashDotLine));
  line->setClipToAxisRect(true);
  return line;
}

// A label just above a horizontal line at `y`, at the right edge of the axis rect.
QCPItemText* line_label(QCustomPlot* plot, const QColor& colour) {
  auto* label = new QCPItemText(plot);  // owned by the plot
  label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
  label->position->setTypeY(QCPItemPosition::ptPlotCoords);
  label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  QFont font = plot->font();
  font.setPointSizeF(8);
  label->setFont(font);
  label->setColor(colour.darker(120));
  label->setPadding(QMargins(2, 0, 2, 1));
  return label;
}

void place(QCPItemStraightLine* line, QCPItemText* label, std::int64_t capacity, const QString& text) {
  const auto y = static_cast<double>(capacity);
  line->point1->setCoords(0, y);
  line->point2->setCoords(1, y);
  label->position->setCoords(0.995, y);
  label->setText(text);
  line->setVisible(capacity > 0);
  label->setVisible(capacity > 0);
}

// A capacity line inside the plot's range, or (above it) no line and its label pinned under the top edge.
void show_capacity(QCPItemStraightLine* line, QCPItemText* label, std::int64_t capacity, double top) {
  if (capacity <= 0) return;
  const auto y = static_cast<double>(capacity);
  const bool above = y > top;
  line->setVisible(!above);
  label->position->setCoords(0.995, above ? top * 0.97 : y);
  const QString text = label->text();
  const QString marker = QStringLiteral(" (above this scale)");
  if (above && !text.endsWith(marker)) label->setText(text + marker);
  if (!above && text.endsWith(marker)) label->setText(text.chopped(marker.size()));
}

QString capacity_text(const QStringList& devices, std::int64_t capacity) {
  return QStringLiteral("capacity %1 %2")
      .arg(devices.join(QStringLiteral(", ")), QString::fromStdString(unet::format_bytes(capacity)));
}

}  // namespace

MemoryCharts::MemoryCharts(QWidget* parent) : QWidget(parent) {
  usage_plot_ = new QCustomPlot(this);
  breakdown_plot_ = new QCustomPlot(this);
  for (QCustomPlot* plot : {usage_plot_, breakdown_plot_}) {
    charts::setup_plot(plot, tr("time"), tr("memory"));
    plot->xAxis->setTicker(QSharedPointer<charts::ElapsedTicker>::create());
    plot->yAxis->setTicker(QSharedPointer<charts::ByteTicker>::create());
    plot->setAutoAddPlottableToLegend(false);
    charts::legend_on_right(plot);
  }
  charts::add_title(usage_plot_, tr("memory per device"));
  breakdown_title_ = charts::add_title(breakdown_plot_, tr("memory in use by category"));

  // Bottom to top, each filled down to the one below; the legend lists them top to bottom, as they are
  // stacked.
  for (int k = 0; k < unet::memory_category_count; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const QColor colour(category_colours[i]);
    QCPGraph* graph = breakdown_plot_->addGraph();
    graph->setName(QString::fromLatin1(category_names[i]));
    graph->setPen(QPen(colour.darker(115), 1));
    QColor fill = colour;
    fill.setAlpha(200);
    graph->setBrush(fill);
    graph->setAdaptiveSampling(true);
    if (k > 0) graph->setChannelFillGraph(breakdown_[i - 1]);
    breakdown_[i] = graph;
  }
  for (auto it = breakdown_.rbegin(); it != breakdown_.rend(); ++it) (*it)->addToLegend();
  breakdown_capacity_ = horizontal_line(breakdown_plot_, QColor(60, 60, 60));
  breakdown_capacity_label_ = line_label(breakdown_plot_, QColor(60, 60, 60));

  charts::follow_unless_moved(usage_plot_, this, &follow_usage_, [this] { refresh(); });
  charts::follow_unless_moved(breakdown_plot_, this, &follow_breakdown_, [this] { refresh(); });
  for (QCustomPlot* plot : {usage_plot_, breakdown_plot_}) charts::add_value_readout(plot);

  device_box_ = new QComboBox(this);
  device_box_->setToolTip(tr("The device whose memory is broken down by category"));
  device_box_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  connect(device_box_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int index) {
    if (index >= 0) select_index(index);
  });
  auto* hint = new QLabel(tr("drag to pan, wheel to zoom, double-click to fit"), this);
  hint->setEnabled(false);
  health_ = new QLabel(this);
  health_->setObjectName("health");
  health_->setToolTip(
      tr("The device now: utilisation, temperature, power draw and memory other processes "
         "hold (NVML), where the device reports them"));
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("breakdown of"), this));
  controls->addWidget(device_box_);
  controls->addSpacing(12);
  controls->addWidget(health_);
  controls->addStretch(1);
  controls->addWidget(hint);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->setSpacing(4);
  layout->addWidget(usage_plot_, 3);
  layout->addLayout(controls);
  layout->addWidget(breakdown_plot_, 2);

  refresh_timer_ = new QTimer(this);
  refresh_timer_->setSingleShot(true);
  refresh_timer_->setInterval(charts::refresh_interval_ms);
  connect(refresh_timer_, &QTimer::timeout, this, &MemoryCharts::refresh);
  reset({}, {});
}

void MemoryCharts::reset(const std::vector<std::string>& devices,
                         const std::vector<std::int64_t>& capacities) {
  usage_plot_->clearGraphs();
  usage_plot_->clearItems();
  key_.fill(nullptr);
  devices_.clear();
  selected_ = -1;
  time_ = charts::Extent{};
  follow_usage_ = follow_breakdown_ = true;
  {
    const QSignalBlocker block(device_box_);
    device_box_->clear();
  }
  for (std::size_t i = 0; i < devices.size(); ++i)
    add_device(devices[i], i < capacities.size() ? capacities[i] : 0);

  // What the line styles mean, once for all devices: the legend names each device by its solid line.
  const QColor key(90, 90, 90);
  const std::array<QString, 4> meanings{tr("in use"), tr("reserved"), tr("peak in use"),
                                        tr("device used (all processes)")};
  for (std::size_t l = 0; l < key_.size(); ++l) {
    key_[l] = usage_plot_->addGraph();
    key_[l]->setName(meanings[l]);
    key_[l]->setPen(usage_pen(key, static_cast<UsageLine>(l)));
  }
  rebuild_legend();

  if (devices_.empty()) {
    for (QCPGraph* graph : breakdown_) graph->setData(QSharedPointer<QCPGraphDataContainer>::create());
    breakdown_title_->setText(tr("memory in use by category"));
    breakdown_capacity_->setVisible(false);
    breakdown_capacity_label_->setVisible(false);
  } else {
    select_index(0);
  }
  schedule_refresh();
}

MemoryCharts::Device& MemoryCharts::add_device(const std::string& id, std::int64_t capacity) {
  Device d;
  d.id = id;
  d.name = QString::fromStdString(id);
  d.capacity = std::max<std::int64_t>(capacity, 0);
  const QColor colour = charts::series_colour(static_cast<int>(devices_.size()));
  for (int l = 0; l < 4; ++l) {
    QCPGraph* graph = usage_plot_->addGraph();
    graph->setPen(usage_pen(colour, static_cast<UsageLine>(l)));
    graph->setAdaptiveSampling(true);
    d.lines[static_cast<std::size_t>(l)] = graph;
  }
  QCPGraph* in_use = d.lines[static_cast<std::size_t>(UsageLine::in_use)];
  in_use->setName(d.name);
  d.capacity_line = horizontal_line(usage_plot_, colour);
  d.capacity_label = line_label(usage_plot_, colour);
  for (auto& layer : d.stacked) layer = QSharedPointer<QCPGraphDataContainer>::create();
  devices_.push_back(std::move(d));
  device_box_->addItem(devices_.back().name);
  rebuild_legend();
  update_capacity_items();
  return devices_.back();
}

void MemoryCharts::rebuild_legend() {
  // Devices first, then the key to the line styles.
  usage_plot_->legend->clearItems();
  for (const Device& d : devices_) d.lines[static_cast<std::size_t>(UsageLine::in_use)]->addToLegend();
  for (QCPGraph* graph : key_)
    if (graph) graph->addToLegend();
}

void MemoryCharts::add_sample(const unet::MemoryReport& m) {
  auto it = std::find_if(devices_.begin(), devices_.end(), [&](const Device& d) { return d.id == m.device; });
  Device& d = it != devices_.end() ? *it : add_device(m.device, 0);
  const double t = m.t;
  time_.add(t);
  ++d.samples;

  const MemoryStats& s = m.stats;
  const auto in_use = static_cast<double>(s.in_use), reserved = static_cast<double>(s.reserved),
             peak = static_cast<double>(s.peak_in_use), used = static_cast<double>(m.device_used);
  d.lines[static_cast<std::size_t>(UsageLine::in_use)]->addData(t, in_use);
  d.lines[static_cast<std::size_t>(UsageLine::reserved)]->addData(t, reserved);
  d.lines[static_cast<std::size_t>(UsageLine::peak)]->addData(t, peak);
  if (m.device_used > 0) d.lines[static_cast<std::size_t>(UsageLine::device_used)]->addData(t, used);
  d.max_bytes = std::max({d.max_bytes, in_use, reserved, peak, used});

  double total = 0;
  for (std::size_t k = 0; k < d.stacked.size(); ++k) {
    total += static_cast<double>(s.in_use_by[k]);
    d.stacked[k]->add(QCPGraphData(t, total));
  }
  d.max_stacked = std::max(d.max_stacked, total);

  const std::int64_t capacity = s.capacity > 0 ? s.capacity : (d.capacity > 0 ? d.capacity : m.device_total);
  if (capacity > 0 && capacity != d.capacity) {
    d.capacity = capacity;
    update_capacity_items();
  }
  d.last = m;
  if (selected_ >= 0 && &devices_[static_cast<std::size_t>(selected_)] == &d) update_health();
  schedule_refresh();
}

QString MemoryCharts::health_text() const {
  if (selected_ < 0) return {};
  const unet::MemoryReport& m = devices_[static_cast<std::size_t>(selected_)].last;
  QStringList parts;
  if (m.utilisation_percent >= 0) parts << tr("%1 % busy").arg(m.utilisation_percent, 0, 'f', 0);
  if (m.temperature_celsius >= 0) parts << tr("%1 °C").arg(m.temperature_celsius, 0, 'f', 0);
  if (m.power_watts >= 0) parts << tr("%1 W").arg(m.power_watts, 0, 'f', 0);
  if (m.others_not_attributable)
    parts << tr("memory of other processes not attributable");
  else if (m.used_by_others >= 0)
    parts
        << tr("%1 held by other processes").arg(QString::fromStdString(unet::format_bytes(m.used_by_others)));
  return parts.join(QStringLiteral(", "));
}

void MemoryCharts::update_health() {
  const QString text = health_text();
  health_->setText(text);
  health_->setVisible(!text.isEmpty());
}

void MemoryCharts::select_device(const QString& device) {
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].name == device) {
      select_index(static_cast<int>(i));
      return;
    }
  }
}

QString MemoryCharts::selected_device() const {
  return selected_ >= 0 ? devices_[static_cast<std::size_t>(selected_)].name : QString();
}

void MemoryCharts::select_index(int index) {
  if (index < 0 || index >= static_cast<int>(devices_.size())) return;
  selected_ = index;
  const Device& d = devices_[static_cast<std::size_t>(index)];
  for (std::size_t k = 0; k < breakdown_.size(); ++k)
    breakdown_[k]->setData(d.stacked[k]);  // shared, not copied
  breakdown_title_->setText(tr("memory in use by category: %1").arg(d.name));
  if (device_box_->currentIndex() != index) {
    const QSignalBlocker block(device_box_);
    device_box_->setCurrentIndex(index);
  }
  update_capacity_items();
  update_health();
  schedule_refresh();
}

void MemoryCharts::update_capacity_items() {
  // Devices with the same capacity share one line position: one label names them all.
  std::map<std::int64_t, QStringList> by_capacity;
  for (const Device& d : devices_)
    if (d.capacity > 0) by_capacity[d.capacity].append(d.name);
  for (const Device& d : devices_) {
    place(d.capacity_line, d.capacity_label, d.capacity, capacity_text(by_capacity[d.capacity], d.capacity));
    const bool first_of_group = d.capacity > 0 && by_capacity[d.capacity].front() == d.name;
    d.capacity_label->setVisible(first_of_group);
  }
  if (selected_ >= 0) {
    const Device& d = devices_[static_cast<std::size_t>(selected_)];
    place(breakdown_capacity_, breakdown_capacity_label_, d.capacity, capacity_text({d.name}, d.capacity));
  }
}

QStringList MemoryCharts::devices() const {
  QStringList ids;
  for (const Device& d : devices_) ids.append(d.name);
  return ids;
}

const MemoryCharts::Device* MemoryCharts::find(const QString& id) const {
  for (const Device& d : devices_)
    if (d.name == id) return &d;
  return nullptr;
}

int MemoryCharts::samples(const QString& device) const {
  const Device* d = find(device);
  return d ? d->samples : 0;
}

QCPGraph* MemoryCharts::usage_graph(const QString& device, UsageLine line) const {
  const Device* d = find(device);
  return d ? d->lines[static_cast<std::size_t>(line)] : nullptr;
}

QCPItemStraightLine* MemoryCharts::capacity_line(const QString& device) const {
  const Device* d = find(device);
  return d ? d->capacity_line : nullptr;
}

QCPGraph* MemoryCharts::breakdown_graph(unet::MemoryCategory category) const {
  return breakdown_[static_cast<std::size_t>(category)];
}

void MemoryCharts::schedule_refresh() {
  if (!refresh_timer_->isActive()) refresh_timer_->start();
}

void MemoryCharts::refresh() {
  refresh_timer_->stop();
  fit_axes();
  usage_plot_->replot(QCustomPlot::rpQueuedRefresh);
  breakdown_plot_->replot(QCustomPlot::rpQueuedRefresh);
}

void MemoryCharts::fit_axes() const {
  charts::same_legend_width({usage_plot_, breakdown_plot_});
  // At least ten seconds, so that a young run does not show sub-second ticks.
  const QCPRange time(time_.empty() ? 0.0 : std::min(time_.min, 0.0),
                      time_.empty() ? 10.0 : std::max(time_.max, std::min(time_.min, 0.0) + 10.0));
  if (follow_usage_) usage_plot_->xAxis->setRange(time);
  if (follow_breakdown_) breakdown_plot_->xAxis->setRange(time);

  // Room above the highest line or capacity for the capacity labels. A capacity far above what is used (a
  // host's RAM for a CPU device, a big GPU) would flatten the curves: it stays off scale, named at the top.
  constexpr double headroom = 1.12;
  constexpr double off_scale_factor = 4.0;
  double usage_data = 0;
  for (const Device& d : devices_) usage_data = std::max(usage_data, d.max_bytes);
  auto in_view = [&](double used, double capacity) {
    return used <= 0 || capacity <= off_scale_factor * used;
  };
  double usage_max = usage_data;
  for (const Device& d : devices_)
    if (in_view(usage_data, static_cast<double>(d.capacity)))
      usage_max = std::max(usage_max, static_cast<double>(d.capacity));
  const double usage_top = usage_max > 0 ? usage_max * headroom : 1024.0 * 1024;
  usage_plot_->yAxis->setRange(0, usage_top);
  for (const Device& d : devices_) show_capacity(d.capacity_line, d.capacity_label, d.capacity, usage_top);

  double breakdown_max = 0, breakdown_top = 1024.0 * 1024;
  if (selected_ >= 0) {
    const Device& d = devices_[static_cast<std::size_t>(selected_)];
    breakdown_max = in_view(d.max_stacked, static_cast<double>(d.capacity))
                        ? std::max(d.max_stacked, static_cast<double>(d.capacity))
                        : d.max_stacked;
    if (breakdown_max > 0) breakdown_top = breakdown_max * headroom;
    show_capacity(breakdown_capacity_, breakdown_capacity_label_, d.capacity, breakdown_top);
  }
  breakdown_plot_->yAxis->setRange(0, breakdown_top);
}

std::optional<QByteArray> MemoryCharts::render_for(const QString& path, QString* error,
                                                   const QString& caption) const {
  fit_axes();
  const int width = std::max(usage_plot_->width(), 900);
  return charts::render_plots({usage_plot_, breakdown_plot_}, QSize(width, 360), path, error, caption);
}

bool MemoryCharts::export_to(const QString& path, QString* error, const QString& caption) const {
  const std::optional<QByteArray> bytes = render_for(path, error, caption);
  return bytes && charts::write_export(path, *bytes, error);
}

}  // namespace unet::gui
