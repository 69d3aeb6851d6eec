// The chart widgets, offscreen: what goes in comes out in the right graphs with the right keys and values,
// the memory breakdown stacks to the bytes in use, replots are coalesced, the view follows the data until the
// user zooms, and exports write real PNG and PDF files or say why not.
#include <qcustomplot.h>

#include <QComboBox>
#include <QLabel>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <cmath>

#include "gui/charts/chart_common.h"
#include "gui/charts/memory_charts.h"
#include "gui/charts/training_charts.h"
#include "test_support.h"

using unet::MemoryCategory;
using unet::gui::MemoryCharts;
using unet::gui::TrainingCharts;
using UsageLine = unet::gui::MemoryCharts::UsageLine;

namespace {

constexpr std::int64_t MiB = std::int64_t{1024} * 1024;
constexpr std::int64_t GiB = 1024 * MiB;

unet::StepReport step_report(std::int64_t step) {
  unet::StepReport r;
  r.step = step;
  r.loss = 1.0 / static_cast<double>(step + 1);
  r.img_per_s = 100.0 + static_cast<double>(step % 7);
  r.img_per_s_avg = 103.0 + 0.01 * static_cast<double>(step);
  return r;
}

unet::EpochReport epoch_report(std::int64_t epoch, std::int64_t steps_per_epoch) {
  unet::EpochReport r;
  r.epoch = epoch;
  r.step = epoch * steps_per_epoch;
  r.loss = 0.5 / static_cast<double>(epoch);
  r.val_loss = 0.6 / static_cast<double>(epoch);
  r.val_iou = 0.1 * static_cast<double>(epoch);
  r.val_dice = 0.12 * static_cast<double>(epoch);
  return r;
}

// A sample whose categories sum to in_use, distinct per device, time and category.
unet::MemoryReport memory_sample(const std::string& device, double t, std::int64_t scale) {
  unet::MemoryReport m;
  m.t = t;
  m.device = device;
  const auto i = static_cast<std::int64_t>(t * 10);
  for (int k = 0; k < unet::memory_category_count; ++k)
    m.stats.in_use_by[static_cast<std::size_t>(k)] = scale * (k + 1) + (i % 5) * 4096 * (k + 1);
  for (auto b : m.stats.in_use_by) m.stats.in_use += b;
  m.stats.reserved = m.stats.in_use + 3 * MiB;
  m.stats.peak_in_use = m.stats.in_use + MiB;
  m.device_used = m.stats.reserved + 7 * MiB;
  return m;
}

bool starts_with_file(const QString& path, const QByteArray& prefix) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return false;
  return f.size() > 1000 && f.read(prefix.size()) == prefix;
}

QCPItemText* label_containing(QCustomPlot* plot, const QString& text) {
  for (int i = 0; i < plot->itemCount(); ++i) {
    auto* label = qobject_cast<QCPItemText*>(plot->item(i));
    if (label && label->visible() && label->text().contains(text)) return label;
  }
  return nullptr;
}

}  // namespace

class ChartsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  void byte_units() {
    using unet::gui::charts::byte_unit_for;
    QCOMPARE(byte_unit_for(100).name, QStringLiteral("B"));
    QCOMPARE(byte_unit_for(3 * 1024).name, QStringLiteral("KiB"));
    QCOMPARE(byte_unit_for(100.0 * MiB).name, QStringLiteral("MiB"));
    QCOMPARE(byte_unit_for(100.0 * MiB).bytes, static_cast<double>(MiB));
    QCOMPARE(byte_unit_for(2.5 * GiB).name, QStringLiteral("GiB"));
    QCOMPARE(byte_unit_for(5000.0 * GiB).name, QStringLiteral("TiB"));
  }

  void steps_and_epochs_land_in_their_graphs() {
    TrainingCharts charts;
    constexpr int steps = 50, epochs = 5, per_epoch = 10;
    for (int s = 1; s <= steps; ++s) {
      charts.add_step(step_report(s));
      if (s % per_epoch == 0) charts.add_epoch(epoch_report(s / per_epoch, per_epoch));
    }
    QCOMPARE(charts.loss_points(), steps);
    QCOMPARE(charts.throughput_points(), steps);
    QCOMPARE(charts.validation_points(), epochs);
    QCOMPARE(charts.metric_points(), epochs);
    QCOMPARE(charts.step_loss_graph()->data()->size(), steps);
    QCOMPARE(charts.throughput_avg_graph()->data()->size(), steps);
    QCOMPARE(charts.epoch_loss_graph()->data()->size(), epochs);
    QCOMPARE(charts.dice_graph()->data()->size(), epochs);
    // The graphs are the plots' own.
    QCOMPARE(charts.step_loss_graph()->parentPlot(), charts.loss_plot());
    QCOMPARE(charts.validation_loss_graph()->parentPlot(), charts.loss_plot());
    QCOMPARE(charts.iou_graph()->parentPlot(), charts.metrics_plot());
    QCOMPARE(charts.throughput_graph()->parentPlot(), charts.throughput_plot());

    for (int i : {0, 17, steps - 1}) {
      const auto p = charts.step_loss_graph()->data()->at(i);
      const auto expected = step_report(i + 1);
      QCOMPARE(p->key, static_cast<double>(expected.step));
      QCOMPARE(p->value, expected.loss);
      QCOMPARE(charts.throughput_graph()->data()->at(i)->value, expected.img_per_s);
      QCOMPARE(charts.throughput_avg_graph()->data()->at(i)->value, expected.img_per_s_avg);
    }
    for (int e = 0; e < epochs; ++e) {
      const auto expected = epoch_report(e + 1, per_epoch);
      // Losses per epoch sit at the epoch's last step, on the loss plot; metrics at the epoch number.
      QCOMPARE(charts.validation_loss_graph()->data()->at(e)->key, static_cast<double>(expected.step));
      QCOMPARE(charts.validation_loss_graph()->data()->at(e)->value, expected.val_loss);
      QCOMPARE(charts.epoch_loss_graph()->data()->at(e)->key, static_cast<double>(expected.step));
      QCOMPARE(charts.epoch_loss_graph()->data()->at(e)->value, expected.loss);
      QCOMPARE(charts.iou_graph()->data()->at(e)->key, static_cast<double>(expected.epoch));
      QCOMPARE(charts.iou_graph()->data()->at(e)->value, expected.val_iou);
      QCOMPARE(charts.dice_graph()->data()->at(e)->value, expected.val_dice);
    }

    charts.reset();
    QCOMPARE(charts.loss_points(), 0);
    QCOMPARE(charts.validation_points(), 0);
    QCOMPARE(charts.metric_points(), 0);
    QCOMPARE(charts.throughput_points(), 0);
    QVERIFY(charts.epoch_loss_graph()->data()->isEmpty());
    QVERIFY(charts.throughput_avg_graph()->data()->isEmpty());
    QVERIFY(charts.dice_graph()->data()->isEmpty());
  }

  void epochs_without_validation_leave_no_points() {
    TrainingCharts charts;
    unet::EpochReport r = epoch_report(1, 10);
    r.val_loss = r.val_iou = r.val_dice = NAN;
    charts.add_epoch(r);
    QCOMPARE(charts.validation_points(), 0);
    QCOMPARE(charts.metric_points(), 0);
    QCOMPARE(charts.epoch_loss_graph()->data()->size(), 1);
  }

  void axes_fit_their_data_range() {
    TrainingCharts charts;
    for (int s = 101; s <= 300; ++s) charts.add_step(step_report(s));  // a resumed run starts past step 0
    charts.add_epoch(epoch_report(3, 100));
    QTRY_COMPARE(charts.loss_plot()->xAxis->range().lower, 101.0);
    QCOMPARE(charts.loss_plot()->xAxis->range().upper, 300.0);
    QCOMPARE(charts.throughput_plot()->xAxis->range(), charts.loss_plot()->xAxis->range());
    QCOMPARE(charts.loss_plot()->yAxis->range().lower, 0.0);
    QVERIFY(charts.loss_plot()->yAxis->range().upper >= step_report(101).loss);
    QCOMPARE(charts.metrics_plot()->yAxis->range().lower, 0.0);
    QCOMPARE(charts.metrics_plot()->yAxis->range().upper, 1.0);
    QVERIFY(charts.metrics_plot()->xAxis->range().contains(3.0));
    QCOMPARE(charts.throughput_plot()->yAxis->range().lower, 0.0);
    QVERIFY(charts.throughput_plot()->yAxis->range().upper >= 106.0);

    charts.set_log_loss(true);
    QVERIFY(charts.log_loss());
    QCOMPARE(charts.loss_plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    const QCPRange log_range = charts.loss_plot()->yAxis->range();
    QVERIFY(log_range.lower > 0 && log_range.lower <= step_report(300).loss);
    QVERIFY(log_range.upper >= step_report(101).loss);
    charts.set_log_loss(false);
    QCOMPARE(charts.loss_plot()->yAxis->scaleType(), QCPAxis::stLinear);
    QCOMPARE(charts.loss_plot()->yAxis->range().lower, 0.0);
  }

  void zooming_stops_following_and_double_click_fits_again() {
    TrainingCharts charts;
    // Sized by hand: showing a window makes the offscreen platform log a warning.
    charts.loss_plot()->resize(800, 300);
    charts.throughput_plot()->resize(400, 200);
    for (int s = 1; s <= 100; ++s) charts.add_step(step_report(s));
    QTRY_COMPARE(charts.loss_plot()->xAxis->range().upper, 100.0);

    QCustomPlot* plot = charts.loss_plot();
    const QPointF centre = plot->axisRect()->rect().center();
    QWheelEvent wheel(centre, plot->mapToGlobal(centre), QPoint(), QPoint(0, 120), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(plot, &wheel);
    const QCPRange zoomed = plot->xAxis->range();
    QVERIFY(zoomed.size() < 99.0);
    QCOMPARE(charts.throughput_plot()->xAxis->range(), zoomed);  // linked x axes

    for (int s = 101; s <= 200; ++s) charts.add_step(step_report(s));
    QTest::qWait(3 * unet::gui::charts::refresh_interval_ms);
    QCOMPARE(plot->xAxis->range(), zoomed);  // the user's view stays

    QMouseEvent click(QEvent::MouseButtonDblClick, centre, plot->mapToGlobal(centre), Qt::LeftButton,
                      Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &click);
    QCOMPARE(plot->xAxis->range().lower, 1.0);
    QCOMPARE(plot->xAxis->range().upper, 200.0);

    // Issue 12: "follow" is a visible toggle: the zoom cleared it, the double-click set it again, and
    // ticking it after a zoom brings the whole run back into view.
    QVERIFY(charts.follow_box()->isChecked());
    QApplication::sendEvent(plot, &wheel);
    QVERIFY(!charts.follow_box()->isChecked());
    for (int s = 201; s <= 300; ++s) charts.add_step(step_report(s));
    charts.follow_box()->setChecked(true);
    QTRY_COMPARE(plot->xAxis->range().upper, 300.0);
  }

  // Issue 12: the learning rate, the loss scale (only once it is not 1), the skipped steps and the data wait
  // are charted beside the loss and the throughput.
  void schedule_skips_and_waits_are_charted() {
    TrainingCharts charts;
    for (int s = 1; s <= 10; ++s) {
      unet::StepReport r = step_report(s);
      r.lr = 1e-3;
      r.loss_scale = 1;
      r.data_wait_seconds = 0.01 * s;
      charts.add_step(r);
    }
    QCOMPARE(charts.lr_graph()->dataCount(), 10);
    QCOMPARE(charts.data_wait_graph()->dataCount(), 10);
    QCOMPARE(charts.data_wait_graph()->data()->at(4)->value, 0.05);
    QVERIFY(!charts.loss_scale_graph()->visible());  // fp32: nothing to show
    QCOMPARE(charts.skipped_graph()->dataCount(), 0);
    unet::StepReport skipped = step_report(11);
    skipped.lr = 1e-3;
    skipped.loss_scale = 32768;
    skipped.skipped = true;
    charts.add_step(skipped);
    QVERIFY(charts.loss_scale_graph()->visible());
    QCOMPARE(charts.skipped_graph()->dataCount(), 1);
    QCOMPARE(charts.skipped_graph()->data()->at(0)->key, 11.0);
    QCOMPARE(charts.lr_graph()->valueAxis(), charts.loss_plot()->yAxis2);
    charts.reset();
    QVERIFY(!charts.loss_scale_graph()->visible());
    QCOMPARE(charts.lr_graph()->dataCount(), 0);
  }

  // Issue 12: other runs overlaid for comparison, each with its own named graphs; they outlive reset() (a new
  // run of one's own) and go with clear_comparisons().
  void compared_runs_overlay_the_charts() {
    TrainingCharts charts;
    unet::RunHistory other;
    for (int s = 1; s <= 30; ++s) other.steps.push_back(step_report(s));
    for (int e = 1; e <= 3; ++e) other.epochs.push_back(epoch_report(e, 10));
    charts.add_comparison("yesterday", other);
    QCOMPARE(charts.comparison_count(), 1);
    const auto& graphs = charts.comparison_graphs()[0];
    QCOMPARE(graphs[0]->dataCount(), 30);
    QCOMPARE(graphs[1]->dataCount(), 3);
    QCOMPARE(graphs[2]->dataCount(), 3);
    QCOMPARE(graphs[0]->name(), QString("yesterday: train loss"));
    QCOMPARE(graphs[2]->parentPlot(), charts.metrics_plot());
    QCOMPARE(charts.loss_points(), 0);  // this run's own series are apart
    charts.reset();
    QCOMPARE(charts.comparison_count(), 1);
    const int graphs_before = charts.loss_plot()->graphCount();
    charts.clear_comparisons();
    QCOMPARE(charts.comparison_count(), 0);
    QCOMPARE(charts.loss_plot()->graphCount(), graphs_before - 2);
  }

  // Issue 12: the value under the cursor. The nearest point of any graph is found from the pointer's pixel
  // and described with its graph, axis labels and value; a pointer move over the plot puts the tracer on it.
  void value_under_the_cursor() {
    TrainingCharts charts;
    charts.loss_plot()->resize(800, 300);
    for (int s = 1; s <= 100; ++s) charts.add_step(step_report(s));
    QTRY_COMPARE(charts.loss_plot()->xAxis->range().upper, 100.0);
    QCustomPlot* plot = charts.loss_plot();
    plot->replot();
    const unet::StepReport expected = step_report(40);
    const QPointF pixel = charts.step_loss_graph()->coordsToPixels(40, expected.loss);
    const unet::gui::charts::PointUnderCursor p = unet::gui::charts::point_under_cursor(plot, pixel);
    QCOMPARE(p.graph, charts.step_loss_graph());
    QCOMPARE(p.key, 40.0);
    QCOMPARE(p.value, expected.loss);
    QVERIFY2(p.text.contains("train loss (step)") && p.text.contains("step 40") && p.text.contains("loss"),
             qPrintable(p.text));
    QVERIFY(!unet::gui::charts::point_under_cursor(plot, QPointF(-500, -500)).graph);

    QMouseEvent move(QEvent::MouseMove, pixel, plot->mapToGlobal(pixel), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
    QCPItemTracer* tracer = nullptr;
    for (int i = 0; i < plot->itemCount(); ++i)
      if (auto* t = qobject_cast<QCPItemTracer*>(plot->item(i))) tracer = t;
    QVERIFY(tracer && tracer->visible());
    QCOMPARE(tracer->graphKey(), 40.0);
  }

  void memory_samples_per_device() {
    MemoryCharts charts;
    const std::int64_t cpu_capacity = 100 * MiB, gpu_capacity = 2 * GiB;
    charts.reset({"cpu:0", "cuda:1"}, {cpu_capacity, gpu_capacity});
    QCOMPARE(charts.devices(), QStringList({"cpu:0", "cuda:1"}));
    QCOMPARE(charts.selected_device(), QStringLiteral("cpu:0"));

    std::vector<unet::MemoryReport> cpu, gpu;
    for (int i = 0; i < 30; ++i) {
      cpu.push_back(memory_sample("cpu:0", 0.1 * i, MiB));
      charts.add_sample(cpu.back());
      if (i % 2 == 0) {
        gpu.push_back(memory_sample("cuda:1", 0.1 * i, 40 * MiB));
        gpu.back().device_used = 0;  // unknown: no point
        charts.add_sample(gpu.back());
      }
    }
    QCOMPARE(charts.samples("cpu:0"), 30);
    QCOMPARE(charts.samples("cuda:1"), 15);
    QCOMPARE(charts.samples("cuda:7"), 0);
    QVERIFY(charts.usage_graph("cuda:7", UsageLine::in_use) == nullptr);

    const auto check_usage = [&](const QString& device, const std::vector<unet::MemoryReport>& fed) {
      QCPGraph* in_use = charts.usage_graph(device, UsageLine::in_use);
      QCPGraph* reserved = charts.usage_graph(device, UsageLine::reserved);
      QCPGraph* peak = charts.usage_graph(device, UsageLine::peak);
      HELPER_VERIFY2(in_use && reserved && peak, qPrintable("no usage graphs for " + device));
      HELPER_COMPARE(in_use->data()->size(), static_cast<int>(fed.size()));
      HELPER_COMPARE(reserved->data()->size(), static_cast<int>(fed.size()));
      HELPER_COMPARE(peak->data()->size(), static_cast<int>(fed.size()));
      HELPER_COMPARE(in_use->name(), device);
      for (std::size_t i = 0; i < fed.size(); ++i) {
        const int j = static_cast<int>(i);
        HELPER_COMPARE(in_use->data()->at(j)->key, fed[i].t);
        HELPER_COMPARE(in_use->data()->at(j)->value, static_cast<double>(fed[i].stats.in_use));
        HELPER_COMPARE(reserved->data()->at(j)->value, static_cast<double>(fed[i].stats.reserved));
        HELPER_COMPARE(peak->data()->at(j)->value, static_cast<double>(fed[i].stats.peak_in_use));
      }
      return true;
    };
    QVERIFY(check_usage("cpu:0", cpu));
    QVERIFY(check_usage("cuda:1", gpu));
    QCOMPARE(charts.usage_graph("cpu:0", UsageLine::device_used)->data()->size(), 30);
    QCOMPARE(charts.usage_graph("cpu:0", UsageLine::device_used)->data()->at(4)->value,
             static_cast<double>(cpu[4].device_used));
    QVERIFY(charts.usage_graph("cuda:1", UsageLine::device_used)->data()->isEmpty());
    // One colour per device.
    QVERIFY(charts.usage_graph("cpu:0", UsageLine::in_use)->pen().color() !=
            charts.usage_graph("cuda:1", UsageLine::in_use)->pen().color());

    // Capacity lines at the capacities, labelled with the device.
    for (const auto& [device, capacity] : {std::pair{QStringLiteral("cpu:0"), cpu_capacity},
                                           std::pair{QStringLiteral("cuda:1"), gpu_capacity}}) {
      QCPItemStraightLine* line = charts.capacity_line(device);
      QVERIFY(line && line->visible());
      QCOMPARE(line->point1->coords().y(), static_cast<double>(capacity));
      QCOMPARE(line->point2->coords().y(), static_cast<double>(capacity));
      QVERIFY(label_containing(charts.usage_plot(), QStringLiteral("capacity ") + device) != nullptr);
    }

    // The breakdown of the selected device stacks to in_use, layer by layer.
    const auto check_breakdown = [&](const std::vector<unet::MemoryReport>& fed, std::int64_t capacity) {
      for (std::size_t i = 0; i < fed.size(); ++i) {
        const int j = static_cast<int>(i);
        double below = 0;
        for (int k = 0; k < unet::memory_category_count; ++k) {
          QCPGraph* layer = charts.breakdown_graph(static_cast<MemoryCategory>(k));
          HELPER_COMPARE(layer->data()->size(), static_cast<int>(fed.size()));
          HELPER_COMPARE(layer->data()->at(j)->key, fed[i].t);
          HELPER_COMPARE(layer->data()->at(j)->value - below,
                         static_cast<double>(fed[i].stats.in_use_by[static_cast<std::size_t>(k)]));
          below = layer->data()->at(j)->value;
        }
        HELPER_COMPARE(below, static_cast<double>(fed[i].stats.in_use));
      }
      HELPER_COMPARE(charts.breakdown_capacity_line()->point1->coords().y(), static_cast<double>(capacity));
      return true;
    };
    QVERIFY(check_breakdown(cpu, cpu_capacity));
    QCOMPARE(charts.breakdown_graph(MemoryCategory::other)->channelFillGraph(),
             charts.breakdown_graph(MemoryCategory::input_batch));

    charts.select_device("cuda:1");
    QCOMPARE(charts.selected_device(), QStringLiteral("cuda:1"));
    QCOMPARE(charts.findChild<QComboBox*>()->currentText(), QStringLiteral("cuda:1"));
    QVERIFY(check_breakdown(gpu, gpu_capacity));
    // A sample of the selected device goes straight into the breakdown.
    gpu.push_back(memory_sample("cuda:1", 3.5, 40 * MiB));
    charts.add_sample(gpu.back());
    QVERIFY(check_breakdown(gpu, gpu_capacity));

    charts.select_device("cuda:9");  // unknown: nothing changes
    QCOMPARE(charts.selected_device(), QStringLiteral("cuda:1"));
    charts.findChild<QComboBox*>()->setCurrentIndex(0);  // the combo box selects too
    QCOMPARE(charts.selected_device(), QStringLiteral("cpu:0"));
    QVERIFY(check_breakdown(cpu, cpu_capacity));

    // The axis speaks in binary units: GiB for the usage plot (the GPU's 2 GiB), MiB for the CPU's breakdown.
    QTRY_VERIFY(charts.usage_plot()->yAxis->range().upper >= static_cast<double>(gpu_capacity));
    QVERIFY(charts.breakdown_plot()->yAxis->range().upper >= static_cast<double>(cpu_capacity));
    QVERIFY(charts.breakdown_plot()->yAxis->range().upper < static_cast<double>(gpu_capacity));
    QVERIFY(charts.usage_plot()->yAxis->tickVectorLabels().last().endsWith(QStringLiteral(" GiB")));
    QVERIFY(charts.breakdown_plot()->yAxis->tickVectorLabels().last().endsWith(QStringLiteral(" MiB")));
    QVERIFY(charts.usage_plot()->xAxis->range().contains(2.9));

    charts.reset({"cuda:0"}, {GiB});
    QCOMPARE(charts.devices(), QStringList({"cuda:0"}));
    QCOMPARE(charts.samples("cuda:0"), 0);
    QVERIFY(charts.capacity_line("cpu:0") == nullptr);
    QVERIFY(charts.usage_graph("cuda:0", UsageLine::in_use)->data()->isEmpty());
    QVERIFY(charts.breakdown_graph(MemoryCategory::parameters)->data()->isEmpty());
  }

  // The line beside the device box shows the selected device's GPU readings as they come, follows the
  // selection, and hides for a device that reports none (a CPU).
  void health_line_follows_the_selected_device() {
    MemoryCharts charts;
    charts.reset({"cuda:0", "cpu:0"}, {0, 0});
    auto* line = charts.findChild<QLabel*>("health");
    QVERIFY(line != nullptr);
    unet::MemoryReport gpu = memory_sample("cuda:0", 1.0, MiB);
    gpu.utilisation_percent = 87;
    gpu.temperature_celsius = 64.4;
    gpu.power_watts = 412.6;
    gpu.used_by_others = 3 * GiB / 2;
    charts.add_sample(gpu);
    charts.add_sample(memory_sample("cpu:0", 1.0, MiB));
    QCOMPARE(charts.health_text(), QString::fromUtf8("87 % busy, 64 °C, 413 W, %1 held by other processes")
                                       .arg(QString::fromStdString(unet::format_bytes(3 * GiB / 2))));
    QCOMPARE(line->text(), charts.health_text());
    QVERIFY(!line->isHidden());
    charts.select_device("cpu:0");
    QCOMPARE(charts.health_text(), QString());
    QVERIFY(line->isHidden());
    gpu.t = 1.1;
    gpu.utilisation_percent = 12;
    charts.add_sample(gpu);  // not the selected device: the line stays as it is
    QVERIFY(line->isHidden());
    charts.select_device("cuda:0");
    QVERIFY(charts.health_text().startsWith("12 % busy"));
    // NVML lists no process with our PID (a container): others are not counted, and the line says so.
    gpu.t = 1.2;
    gpu.used_by_others = -1;
    gpu.others_not_attributable = true;
    charts.add_sample(gpu);
    QCOMPARE(charts.health_text(),
             QString::fromUtf8("12 % busy, 64 °C, 413 W, memory of other processes not attributable"));
  }

  void unknown_devices_and_capacity_from_samples() {
    MemoryCharts charts;
    charts.reset({"cuda:0"}, {0});
    QVERIFY(!charts.capacity_line("cuda:0")->visible());
    unet::MemoryReport m = memory_sample("cuda:0", 1.0, MiB);
    m.stats.capacity = 8 * GiB;
    charts.add_sample(m);
    QVERIFY(charts.capacity_line("cuda:0")->visible());
    QCOMPARE(charts.capacity_line("cuda:0")->point1->coords().y(), 8.0 * GiB);

    charts.add_sample(memory_sample("cuda:3", 1.0, MiB));  // not announced by reset: added
    QCOMPARE(charts.devices(), QStringList({"cuda:0", "cuda:3"}));
    QCOMPARE(charts.samples("cuda:3"), 1);
    QCOMPARE(charts.findChild<QComboBox*>()->count(), 2);
    // The legend names both devices, then the line styles.
    QCPLegend* legend = charts.usage_plot()->legend;
    QCOMPARE(legend->itemCount(), 2 + 4);
    QCOMPARE(legend->itemWithPlottable(charts.usage_graph("cuda:3", UsageLine::in_use)), legend->item(1));

    // Devices with the same capacity share one label.
    unet::MemoryReport other = memory_sample("cuda:3", 1.1, MiB);
    other.stats.capacity = 8 * GiB;
    charts.add_sample(other);
    QVERIFY(label_containing(charts.usage_plot(), QStringLiteral("capacity cuda:0, cuda:3")) != nullptr);
  }

  void many_samples_coalesce_replots() {
    MemoryCharts charts;
    charts.reset({"cuda:0", "cuda:1"}, {GiB, GiB});
    QTRY_COMPARE(charts.usage_plot()->xAxis->range().upper, 10.0);  // the reset's refresh is done
    int replots = 0;
    connect(charts.usage_plot(), &QCustomPlot::afterReplot, this, [&replots] { ++replots; });
    connect(charts.breakdown_plot(), &QCustomPlot::afterReplot, this, [&replots] { ++replots; });

    constexpr int count = 20000;
    for (int i = 0; i < count; ++i)
      charts.add_sample(memory_sample(i % 2 ? "cuda:1" : "cuda:0", 0.05 * i, MiB));
    QCOMPARE(replots, 0);  // adding never replots
    QCOMPARE(charts.samples("cuda:0") + charts.samples("cuda:1"), count);
    QCOMPARE(charts.usage_graph("cuda:1", UsageLine::in_use)->data()->size(), count / 2);
    QTRY_COMPARE(replots, 2);  // then once per plot
    QTest::qWait(3 * unet::gui::charts::refresh_interval_ms);
    QCOMPARE(replots, 2);
    QCOMPARE(charts.usage_plot()->xAxis->range().upper, 0.05 * (count - 1));
  }

  void exports() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    TrainingCharts training;
    for (int s = 1; s <= 40; ++s) training.add_step(step_report(s));
    for (int e = 1; e <= 4; ++e) training.add_epoch(epoch_report(e, 10));
    MemoryCharts memory;
    memory.reset({"cpu:0", "cuda:0"}, {100 * MiB, 300 * MiB});
    for (int i = 0; i < 50; ++i) {
      memory.add_sample(memory_sample("cpu:0", 0.1 * i, MiB));
      memory.add_sample(memory_sample("cuda:0", 0.1 * i, 5 * MiB));
    }
    // UNET_CHART_DIR keeps the images for a look at them.
    const QString keep = qEnvironmentVariable("UNET_CHART_DIR");
    const QString out = keep.isEmpty() ? dir.path() : keep;

    QString error;
    QVERIFY2(training.export_to(out + "/training.png", &error), qPrintable(error));
    QVERIFY(starts_with_file(out + "/training.png", QByteArray("\x89PNG\r\n\x1a\n", 8)));
    QVERIFY2(training.export_to(out + "/training.pdf", &error), qPrintable(error));
    QVERIFY(starts_with_file(out + "/training.pdf", "%PDF"));
    QVERIFY2(memory.export_to(out + "/memory.png", &error), qPrintable(error));
    QVERIFY(starts_with_file(out + "/memory.png", QByteArray("\x89PNG\r\n\x1a\n", 8)));
    QVERIFY2(memory.export_to(out + "/memory.PDF", &error), qPrintable(error));
    QVERIFY(starts_with_file(out + "/memory.PDF", "%PDF"));
    // All three plots in one image: taller than one plot is wide.
    QImage image(out + "/training.png");
    QVERIFY(image.height() >= 3 * 300);
    // With a caption (the run and the date), a line above them.
    QVERIFY2(training.export_to(out + "/training-captioned.png", &error, "runs/demo — training, 2026-12-01"),
             qPrintable(error));
    QCOMPARE(QImage(out + "/training-captioned.png").height(),
             image.height() + unet::gui::charts::caption_height);

    const QString text = dir.filePath("charts.txt");
    QVERIFY(!training.export_to(text, &error));
    QVERIFY(error.contains(text));
    QVERIFY(error.contains(".png") && error.contains(".pdf"));
    QVERIFY(!QFile::exists(text));
    error.clear();
    QVERIFY(!memory.export_to(text, &error));
    QVERIFY(error.contains(text));

    const QString unwritable = dir.filePath("missing-folder/charts.png");
    error.clear();
    QVERIFY(!training.export_to(unwritable, &error));
    QVERIFY(error.contains(unwritable));
    error.clear();
    QVERIFY(!memory.export_to(dir.filePath("missing-folder/memory.pdf"), &error));
    QVERIFY(error.contains("missing-folder/memory.pdf"));
    QVERIFY(!training.export_to(unwritable, nullptr));  // no error text wanted: still false
  }
};

QTEST_MAIN(ChartsTest)
#include "test_gui_charts.moc"
