// The charts' shared look, tickers and export (see chart_common.h).
#include "gui/charts/chart_common.h"

#include <QBuffer>
#include <QFileInfo>
#include <QImage>
#include <QPageSize>
#include <QPdfWriter>
#include <QToolTip>
#include <array>
#include <cmath>
#include <exception>

#include "gui/file_tasks.h"

namespace unet::gui::charts {

QColor series_colour(int index) {
  // Distinct on white and for the common colour-vision deficiencies.
  static constexpr std::array<QRgb, 10> colours{0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                                0x8c564b, 0xe377c2, 0x17becf, 0xbcbd22, 0x7f7f7f};
  const auto n = static_cast<int>(colours.size());
  return QColor(colours[static_cast<std::size_t>(((index % n) + n) % n)]);
}

QColor greyed(const QColor& colour) {
  const QColor grey(150, 150, 150);
  return QColor((colour.red() + 2 * grey.red()) / 3, (colour.green() + 2 * grey.green()) / 3,
                (colour.blue() + 2 * grey.blue()) / 3);
}

namespace {

// The tick count an axis starts from; fewer where the labels would not fit.
constexpr int kTickCount = 5;
// The smallest plot, legend beside it excepted: room for a few tick labels on each axis.
const QSize kMinimumPlotSize(220, 140);

// Whether the tick labels `ticker` makes for `axis`'s range with its tick count lie apart, each at least a
// few pixels from the next along the axis as it is laid out now.
bool tick_labels_apart(QCPAxis* axis, QCPAxisTicker& ticker) {
  QVector<double> ticks;
  QVector<QString> labels;
  const QString format = axis->numberFormat();
  ticker.generate(axis->range(), axis->parentPlot()->locale(), format.isEmpty() ? QChar('g') : format.at(0),
                  axis->numberPrecision(), ticks, nullptr, &labels);
  const QFontMetricsF metrics(axis->tickLabelFont());
  const bool horizontal = axis->orientation() == Qt::Horizontal;
  constexpr double gap = 4;
  double previous_end = -std::numeric_limits<double>::infinity();
  // Pixels grow downwards on a vertical axis: walk the ticks from the bottom up there.
  for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
    if (!axis->range().contains(ticks[i])) continue;
    const QSizeF size = metrics.size(0, labels[i]);
    const double extent = horizontal ? size.width() : size.height();
    const double centre = horizontal ? axis->coordToPixel(ticks[i]) : -axis->coordToPixel(ticks[i]);
    if (centre - extent / 2 < previous_end + gap) return false;
    previous_end = centre + extent / 2;
  }
  return true;
}

// Up to kTickCount ticks on each axis of `plot` with tick labels, fewer when their labels would touch at the
// size the plot is laid out at (a small window, long numbers, a narrow logarithmic range). Run once the
// layout is known: where a count changed, the layout is done again with the new ticks.
void fit_tick_counts(QCustomPlot* plot) {
  bool changed = false;
  for (QCPAxisRect* rect : plot->axisRects())
    for (QCPAxis* axis : rect->axes()) {
      if (!axis->visible() || !axis->tickLabels()) continue;
      const double length = axis->orientation() == Qt::Horizontal ? rect->width() : rect->height();
      if (length <= 0) continue;  // not laid out yet
      QCPAxisTicker& ticker = *axis->ticker();
      const int before = ticker.tickCount();
      int count = kTickCount;
      ticker.setTickCount(count);
      while (count > 1 && !tick_labels_apart(axis, ticker)) ticker.setTickCount(--count);
      changed = changed || count != before;
    }
  if (!changed) return;
  for (const auto phase :
       {QCPLayoutElement::upPreparation, QCPLayoutElement::upMargins, QCPLayoutElement::upLayout})
    plot->plotLayout()->update(phase);
}

}  // namespace

void setup_plot(QCustomPlot* plot, const QString& x_label, const QString& y_label) {
  QFont tick_font = plot->font();
  tick_font.setPointSizeF(8);
  QFont label_font = plot->font();
  label_font.setPointSizeF(9);
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setTickLabelFont(tick_font);
    axis->setLabelFont(label_font);
    axis->setLabelPadding(2);
    axis->grid()->setPen(QPen(QColor(220, 220, 220), 0, Qt::SolidLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
    axis->ticker()->setTickCount(kTickCount);
  }
  // At each replot, as many ticks as their labels have room for.
  QObject::connect(plot, &QCustomPlot::afterLayout, plot, [plot] { fit_tick_counts(plot); });
  plot->xAxis->setLabel(x_label);
  plot->yAxis->setLabel(y_label);
  plot->axisRect()->setAutoMargins(QCP::msAll);

  plot->legend->setVisible(true);
  plot->legend->setFont(tick_font);
  plot->legend->setBrush(QColor(255, 255, 255, 210));
  plot->legend->setBorderPen(QPen(QColor(190, 190, 190)));
  plot->legend->setIconSize(22, 10);
  plot->legend->setRowSpacing(-2);

  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->axisRect()->setRangeDrag(Qt::Horizontal);
  plot->axisRect()->setRangeZoom(Qt::Horizontal);
  plot->setMinimumSize(kMinimumPlotSize);
}

void legend_on_right(QCustomPlot* plot) {
  plot->axisRect()->insetLayout()->take(plot->legend);
  // A column beside the axis rect: the legend at its top, an empty element below taking the remaining height
  // (a legend alone in a cell would stretch its rows over the whole height). The plot layout owns both.
  auto* column = new QCPLayoutGrid;
  plot->plotLayout()->addElement(0, 1, column);
  column->addElement(0, 0, plot->legend);
  column->addElement(1, 0, new QCPLayoutElement(plot));
  column->setRowStretchFactor(0, 0.001);
  column->setRowSpacing(0);
  column->setMargins(QMargins(0, 6, 6, 0));
  plot->plotLayout()->setColumnStretchFactor(1, 0.001);
}

void same_legend_width(const std::vector<QCustomPlot*>& plots) {
  int width = 0;
  for (QCustomPlot* plot : plots) {
    plot->legend->setMinimumSize(0, 0);
    width = std::max(width, plot->legend->minimumOuterSizeHint().width());
  }
  for (QCustomPlot* plot : plots) {
    plot->legend->setMinimumSize(width, 0);
    // A legend beside the axis rect takes its width from the plot's: the axes keep the smallest size still.
    if (plot->legend->layout() != plot->axisRect()->insetLayout())
      plot->setMinimumWidth(kMinimumPlotSize.width() + width);
  }
}

QCPTextElement* add_title(QCustomPlot* plot, const QString& title) {
  plot->plotLayout()->insertRow(0);
  QFont font = plot->font();
  font.setPointSizeF(9);
  font.setBold(true);
  auto* element = new QCPTextElement(plot, title, font);  // owned by the plot layout once added
  plot->plotLayout()->addElement(0, 0, element);
  plot->plotLayout()->setRowSpacing(0);
  return element;
}

void follow_unless_moved(QCustomPlot* plot, QObject* context, bool* follow, std::function<void()> refresh) {
  QObject::connect(plot, &QCustomPlot::mouseWheel, context, [follow](QWheelEvent*) { *follow = false; });
  QObject::connect(plot, &QCustomPlot::mouseMove, context, [follow](QMouseEvent* event) {
    if (event->buttons() & Qt::LeftButton) *follow = false;
  });
  QObject::connect(plot, &QCustomPlot::mouseDoubleClick, context,
                   [follow, refresh = std::move(refresh)](QMouseEvent*) {
                     *follow = true;
                     refresh();
                   });
}

PointUnderCursor point_under_cursor(QCustomPlot* plot, const QPointF& pixel, double max_distance) {
  PointUnderCursor best;
  double best_distance = max_distance;
  for (int g = 0; g < plot->graphCount(); ++g) {
    QCPGraph* graph = plot->graph(g);
    if (!graph->visible() || graph->data()->isEmpty()) continue;
    // Points near the pointer's key, by binary search: the series may hold hundreds of thousands of steps.
    const double key = graph->keyAxis()->pixelToCoord(pixel.x());
    auto at = graph->data()->findBegin(key, true);  // the point before the key, then the one at or after it
    for (int side = 0; side < 2; ++side, ++at) {
      if (at == graph->data()->constEnd()) break;
      if (!std::isfinite(at->value)) continue;
      const QPointF p = graph->coordsToPixels(at->key, at->value);
      const double d = std::hypot(p.x() - pixel.x(), p.y() - pixel.y());
      if (d < best_distance) {
        best_distance = d;
        best.graph = graph;
        best.key = at->key;
        best.value = at->value;
      }
    }
  }
  if (best.graph) {
    QCPAxis* x = best.graph->keyAxis();
    QCPAxis* y = best.graph->valueAxis();
    const QString value = std::fabs(best.value) >= 1e-3 && std::fabs(best.value) < 1e5
                              ? QString::number(best.value, 'g', 5)
                              : QString::number(best.value, 'e', 3);
    QString shown_value = value;
    if (auto bytes = y->ticker().dynamicCast<ByteTicker>()) shown_value = bytes->label(best.value);
    best.text =
        QStringLiteral("%1: %2 %3 at %4 %5")
            .arg(best.graph->name(), y->label(), shown_value, x->label(), QString::number(best.key, 'g', 10));
  }
  return best;
}

void add_value_readout(QCustomPlot* plot) {
  auto* tracer = new QCPItemTracer(plot);
  tracer->setStyle(QCPItemTracer::tsCircle);
  tracer->setSize(9);
  tracer->setPen(QPen(Qt::black, 1.2));
  tracer->setBrush(Qt::NoBrush);
  tracer->setVisible(false);
  tracer->setSelectable(false);
  tracer->setObjectName("value_tracer");
  QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot, tracer](QMouseEvent* event) {
    if (event->buttons() != Qt::NoButton) return;  // panning
    const PointUnderCursor p = point_under_cursor(plot, event->position());
    const bool was_visible = tracer->visible();
    if (!p.graph) {
      tracer->setVisible(false);
      QToolTip::hideText();
    } else {
      tracer->setGraph(p.graph);
      tracer->setGraphKey(p.key);
      tracer->setVisible(true);
      QToolTip::showText(event->globalPosition().toPoint(), p.text, plot);
    }
    if (was_visible || tracer->visible()) plot->replot(QCustomPlot::rpQueuedReplot);
  });
}

ByteUnit byte_unit_for(double max_bytes) {
  static const std::array<const char*, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  double unit = 1;
  std::size_t i = 0;
  while (i + 1 < names.size() && std::fabs(max_bytes) >= unit * 1024) {
    unit *= 1024;
    ++i;
  }
  return {unit, QString::fromLatin1(names[i])};
}

double ByteTicker::getTickStep(const QCPRange& range) {
  unit_ = byte_unit_for(std::max(std::fabs(range.lower), std::fabs(range.upper)));
  const double step =
      QCPAxisTicker::getTickStep(QCPRange(range.lower / unit_.bytes, range.upper / unit_.bytes));
  // Enough decimals to tell ticks apart: 0.25 needs two, 5 none.
  decimals_ = 0;
  for (double scaled = step; decimals_ < 6 && std::fabs(scaled - std::round(scaled)) > 1e-6 * scaled;
       scaled *= 10)
    ++decimals_;
  step_ = step * unit_.bytes;
  return step_;
}

int ByteTicker::getSubTickCount(double tick_step) {
  return QCPAxisTicker::getSubTickCount(tick_step / unit_.bytes);
}

QString ByteTicker::label(double tick) const {
  const double value = std::fabs(tick) < step_ * 1e-6 ? 0.0 : tick / unit_.bytes;
  return QString::number(value, 'f', decimals_) + QLatin1Char(' ') + unit_.name;
}

QString ByteTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
  return label(tick);
}

double ElapsedTicker::getTickStep(const QCPRange& range) {
  setTimeFormat(std::max(std::fabs(range.lower), std::fabs(range.upper)) >= 3600 ? QStringLiteral("%h:%m:%s")
                                                                                 : QStringLiteral("%m:%s"));
  return QCPAxisTickerTime::getTickStep(range);
}

QSharedPointer<QCPAxisTicker> integer_ticker() {
  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(1);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  return ticker;
}

void Extent::add(double v) {
  if (!std::isfinite(v)) return;
  min = std::min(min, v);
  max = std::max(max, v);
  if (v > 0) min_positive = std::min(min_positive, v);
}

namespace {

void paint_stacked(QCPPainter& painter, const std::vector<QCustomPlot*>& plots, QSize each,
                   const QString& caption) {
  const int top = caption.isEmpty() ? 0 : caption_height;
  if (!caption.isEmpty()) {
    painter.save();
    QFont font = plots.front()->font();
    font.setBold(true);
    painter.setFont(font);
    painter.setPen(Qt::black);
    painter.drawText(QRect(8, 0, each.width() - 16, top), Qt::AlignVCenter | Qt::AlignLeft, caption);
    painter.restore();
  }
  for (std::size_t i = 0; i < plots.size(); ++i) {
    painter.save();
    painter.translate(0, top + static_cast<double>(i) * each.height());
    plots[i]->toPainter(&painter, each.width(), each.height());
    painter.restore();
    // toPainter leaves the plot laid out at the export size; the next replot lays it out for the screen
    // again.
    plots[i]->replot(QCustomPlot::rpQueuedReplot);
  }
}

}  // namespace

std::optional<QByteArray> render_plots(const std::vector<QCustomPlot*>& plots, QSize each,
                                       const QString& path, QString* error, const QString& caption) {
  const auto fail = [&](const QString& why) -> std::optional<QByteArray> {
    if (error) *error = why;
    return std::nullopt;
  };
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix != QLatin1String("png") && suffix != QLatin1String("pdf"))
    return fail(
        QStringLiteral("cannot export charts to %1: unsupported file type (use .png or .pdf)").arg(path));
  if (plots.empty() || each.isEmpty())
    return fail(QStringLiteral("cannot export charts to %1: nothing to draw").arg(path));

  const QSize total(each.width(), each.height() * static_cast<int>(plots.size()) +
                                      (caption.isEmpty() ? 0 : caption_height));
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (suffix == QLatin1String("png")) {
    QImage image(total, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white);
    {
      QCPPainter painter(&image);
      paint_stacked(painter, plots, each, caption);
    }
    if (!image.save(&buffer, "PNG"))
      return fail(QStringLiteral("cannot export charts to %1: PNG encoding failed").arg(path));
  } else {
    QPdfWriter writer(&buffer);
    writer.setCreator(QStringLiteral("UNet Workbench"));
    // 96 dots per inch, as on screen, so that fonts keep their size relative to the plots.
    writer.setResolution(96);
    writer.setPageSize(
        QPageSize(QSizeF(total) * 72.0 / 96.0, QPageSize::Point, QString(), QPageSize::ExactMatch));
    writer.setPageMargins(QMarginsF(0, 0, 0, 0));
    QCPPainter painter;
    if (!painter.begin(&writer))
      return fail(QStringLiteral("cannot export charts to %1: PDF output failed").arg(path));
    painter.setMode(QCPPainter::pmVectorized);
    paint_stacked(painter, plots, each, caption);
    painter.end();
  }
  buffer.close();
  return bytes;
}

bool write_export(const QString& path, const QByteArray& bytes, QString* error) {
  try {
    write_file_atomically(path, bytes);
    return true;
  } catch (const std::exception& e) {
    if (error) *error = QStringLiteral("cannot write ") + QString::fromStdString(e.what());
    return false;
  }
}

}  // namespace unet::gui::charts
