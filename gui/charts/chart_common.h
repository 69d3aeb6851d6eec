// What the workbench's charts share: one look (fonts, grid, legend, colours), the same mouse behaviour (drag
// and wheel on x, double-click to fit), axis tickers for bytes and elapsed time, and one export path that
// stacks several plots into one PNG image or one PDF page. The rule here: exports never log a Qt warning,
// they report failures through their error text, and files are written atomically.
#pragma once

#include <qcustomplot.h>

#include <QByteArray>
#include <QColor>
#include <QSize>
#include <QString>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace unet::gui::charts {

// How long data may wait before the plots show it. Memory samples come at ~10 Hz per device for hours: one
// replot per sample would cost more than drawing is worth.
inline constexpr int refresh_interval_ms = 150;

// The i-th colour of the series palette (wraps around).
QColor series_colour(int index);
// `colour` moved towards a neutral grey, for secondary lines.
QColor greyed(const QColor& colour);

// Fonts, grid, legend style and x-only interactions (drag to pan, wheel to zoom).
void setup_plot(QCustomPlot* plot, const QString& x_label, const QString& y_label);
// Moves the plot's legend out of the axis rect, into a column on its right.
void legend_on_right(QCustomPlot* plot);
// Gives the plots' legends one width, so that plots stacked one above the other line up their x axes.
void same_legend_width(const std::vector<QCustomPlot*>& plots);
// A small bold title row above the axis rect; the plot owns it.
QCPTextElement* add_title(QCustomPlot* plot, const QString& title);

// The plot follows its data while `*follow` is true: panning or zooming it clears the flag, a double-click
// sets it again and calls `refresh` to fit the view. `follow` must outlive `context`'s connections.
void follow_unless_moved(QCustomPlot* plot, QObject* context, bool* follow, std::function<void()> refresh);

// The data point nearest the pointer, as the value readout shows it.
struct PointUnderCursor {
  QCPGraph* graph = nullptr;  // null: no visible graph has a point near the pointer
  double key = 0, value = 0;
  QString text;  // "<graph>: <y label> <value> at <x label> <key>", with the axes' own tick labels
};
// The visible graph point nearest `pixel` (within `max_distance` pixels), over every graph of `plot`.
PointUnderCursor point_under_cursor(QCustomPlot* plot, const QPointF& pixel, double max_distance = 24);
// The value under the cursor: as the pointer moves over `plot`, a tracer marks the nearest point and a
// tooltip says its value; it goes when the pointer leaves the data.
void add_value_readout(QCustomPlot* plot);

// A binary unit for byte values: the largest of B, KiB, MiB, GiB, TiB not above `max_bytes`.
struct ByteUnit {
  double bytes = 1;
  QString name = QStringLiteral("B");
};
ByteUnit byte_unit_for(double max_bytes);

// Ticks on a byte axis at round numbers of a binary unit chosen by the visible range: "512 MiB", "1.5 GiB".
class ByteTicker : public QCPAxisTicker {
 public:
  const ByteUnit& unit() const { return unit_; }
  // The label `tick` gets with the unit and precision of the last generated ticks.
  QString label(double tick) const;

 protected:
  double getTickStep(const QCPRange& range) override;
  int getSubTickCount(double tick_step) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar format_char, int precision) override;

 private:
  ByteUnit unit_;
  double step_ = 1;  // in bytes
  int decimals_ = 0;
};

// Seconds as m:ss, or h:mm:ss once the visible range reaches an hour.
class ElapsedTicker : public QCPAxisTickerTime {
 protected:
  double getTickStep(const QCPRange& range) override;
};

// Ticks at whole numbers only (epochs).
QSharedPointer<QCPAxisTicker> integer_ticker();

// The finite values seen so far: their maximum, minimum, and smallest positive one (for log axes).
struct Extent {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double min_positive = std::numeric_limits<double>::infinity();
  void add(double v);
  bool empty() const { return !(min <= max); }
};

// Renders `plots` one below the other, each `each` pixels, into one image (".png") or one PDF page (".pdf"),
// chosen by the extension of `path`: the file's bytes. Widgets paint on the GUI thread only; the writing
// (write_export) may happen on another. On failure returns nullopt and says why in `error`, naming the path.
// `caption`, when not empty, is a line above the plots (the run and the date).
std::optional<QByteArray> render_plots(const std::vector<QCustomPlot*>& plots, QSize each,
                                       const QString& path, QString* error, const QString& caption = {});
// `bytes` written atomically into `path`; false with why in `error` ("cannot write <path>: <reason>").
bool write_export(const QString& path, const QByteArray& bytes, QString* error);
// The height of that line.
inline constexpr int caption_height = 30;

}  // namespace unet::gui::charts
