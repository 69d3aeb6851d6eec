// Issue 25, items 2, 3 and 13 (axis labels), driven through the real window, offscreen: the IoU/Dice chart
// shows each class's series with the values metrics.jsonl holds; the run summary of a resumed run gives the
// run's whole time (the time its checkpoint recorded and this part's) and what best.safetensors and
// last.safetensors really hold; at the window's smallest size the charts' tick labels do not overlap.
#include <QElapsedTimer>
#include <QFile>
#include <QFontMetrics>
#include <QMessageBox>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "gui/charts/memory_charts.h"
#include "gui/charts/training_charts.h"
#include "gui/dialogs/run_summary_dialog.h"
#include "gui/main_window.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/io/checkpoint.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

// The graph of `plot` named `name`; nullptr when there is none.
QCPGraph* graph_named(QCustomPlot* plot, const QString& name) {
  for (int g = 0; g < plot->graphCount(); ++g)
    if (plot->graph(g)->name() == name) return plot->graph(g);
  return nullptr;
}

// Where each tick label of `axis` is drawn, as QCustomPlot lays them out at its last replot: centred on its
// tick along the axis, as wide and as high as the label's text in the axis's tick label font.
std::vector<QRectF> tick_label_rects(QCPAxis* axis) {
  const QFontMetricsF metrics(axis->tickLabelFont());
  std::vector<QRectF> rects;
  const QVector<double> ticks = axis->tickVector();
  const QVector<QString> labels = axis->tickVectorLabels();
  for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
    if (!axis->range().contains(ticks[i])) continue;
    const QSizeF size = metrics.size(0, labels[i]);
    const double at = axis->coordToPixel(ticks[i]);
    rects.push_back(axis->orientation() == Qt::Horizontal
                        ? QRectF(at - size.width() / 2, 0, size.width(), size.height())
                        : QRectF(0, at - size.height() / 2, size.width(), size.height()));
  }
  return rects;
}

// The demo window, shown, its log watched (a warning fails the test), its prompts recorded.
struct WatchedWindow {
  test::LogWatch log;  // outlives the window
  MainWindow window{WindowOptions{.demo = true, .prompter = std::make_shared<PromptRecorder>()}};
  WatchedWindow() {
    watch_log(window, log);
    window.show();
  }
};

}  // namespace

class TestGuiClassCharts : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_class_charts"); }

  // Item 2: a binary model has two classes, background and foreground; the chart shows each one's IoU and
  // Dice, with the values metrics.jsonl recorded for them, epoch by epoch.
  void eachClassIsCharted() {
    QTemporaryDir dir;
    WatchedWindow watched;
    MainWindow& window = watched.window;
    // best.safetensors follows the background's IoU, chosen in the form.
    window.config_panel()->set_config(small_run(dir.path(), 2));
    QVERIFY(set_field(*window.config_panel(), "checkpoint.monitor", "val_iou"));
    QVERIFY(set_field(*window.config_panel(), "checkpoint.monitor_class", "0"));
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const std::vector<nlohmann::json> epochs = epoch_records(dir.filePath("metrics.jsonl"));
    QCOMPARE(epochs.size(), std::size_t{2});
    QCustomPlot* plot = window.training_charts()->metrics_plot();
    for (const char* metric : {"IoU", "Dice"}) {
      const std::string key = metric == std::string("IoU") ? "val_iou_per_class" : "val_dice_per_class";
      for (int k = 0; k < 2; ++k) {
        const QString name = QString("class %1 %2").arg(k).arg(metric);
        QCPGraph* graph = graph_named(plot, name);
        QVERIFY2(graph, qPrintable("no graph " + name));
        QVERIFY2(plot->legend->hasItemWithPlottable(graph), qPrintable(name + " is not in the legend"));
        QCOMPARE(graph->dataCount(), 2);
        for (int e = 0; e < 2; ++e) {
          const nlohmann::json& r = epochs[static_cast<std::size_t>(e)];
          QCOMPARE(graph->data()->at(e)->key, r.at("epoch").get<double>());
          QCOMPARE(graph->data()->at(e)->value, r.at(key).at(static_cast<std::size_t>(k)).get<double>());
        }
      }
    }
    // The summary names the monitor and the class, with the value best.safetensors was chosen for: the
    // best of the background's IoU over the epochs.
    const double best_iou = std::max(epochs[0].at("val_iou_per_class").at(0).get<double>(),
                                     epochs[1].at("val_iou_per_class").at(0).get<double>());
    const CheckpointInfo best = inspect_checkpoint(dir.filePath("best.safetensors").toStdString());
    QCOMPARE(best.position.metrics.at("val_iou_class0").get<double>(), best_iou);
    QVERIFY(window.run_summary());
    const QString summary = qobject_cast<QMessageBox*>(window.run_summary())->text();
    QVERIFY2(summary.contains(QString("holds epoch %1 (step %2): the best val_iou of class 0, %3")
                                  .arg(best.position.epoch)
                                  .arg(best.position.step)
                                  .arg(best_iou, 0, 'f', 4)),
             qPrintable(summary));
  }

  // Item 3: a run stopped, then resumed to its end. The summary's time is the whole run's: the time the
  // checkpoint it resumed from recorded (set here to an hour and a half) and this part's; its checkpoint
  // lines say which epoch and step best.safetensors and last.safetensors hold, as the files do.
  // task instances: the DSB score and the object F1 are charted per epoch beside IoU and Dice, from the
  // first epoch that reports them; an absent value (NaN) leaves no point, and reset() removes both graphs.
  void objectMetricsAreCharted() {
    TrainingCharts charts;
    EpochReport plain;
    plain.epoch = 1;
    plain.val_iou = 0.5;
    charts.add_epoch(plain);
    QVERIFY(charts.dsb_graph() == nullptr);
    EpochReport first = plain, second = plain;
    first.epoch = 2;
    first.objects = true;
    first.val_dsb = 0.25;
    first.val_f1 = std::nan("");
    second.epoch = 3;
    second.objects = true;
    second.val_dsb = 0.4;
    second.val_f1 = 0.6;
    charts.add_epoch(first);
    charts.add_epoch(second);
    QCPGraph* dsb = charts.dsb_graph();
    QVERIFY(dsb != nullptr);
    QCOMPARE(dsb->data()->size(), 2);
    QCOMPARE(dsb->data()->at(0)->key, 2.0);
    QCOMPARE(dsb->data()->at(0)->value, 0.25);
    QCOMPARE(dsb->data()->at(1)->value, 0.4);
    QCOMPARE(charts.object_f1_graph()->data()->size(), 1);
    QCOMPARE(charts.object_f1_graph()->data()->at(0)->value, 0.6);
    charts.reset();
    QVERIFY(charts.dsb_graph() == nullptr);
  }

  void resumedRunSummaryIsTheWholeRuns() {
    QTemporaryDir dir;
    WatchedWindow watched;
    MainWindow& window = watched.window;
    QVERIFY(train_two_steps_and_stop(window, small_run(dir.path(), 3)));
    const std::string last = dir.filePath("last.safetensors").toStdString();
    Checkpoint stopped = load_checkpoint(last);
    QVERIFY(stopped.training_seconds > 0);  // the first part's own time, recorded
    const double earlier = 5400;            // 1h30m, by hand
    stopped.training_seconds = earlier;
    save_checkpoint(last, stopped);

    QElapsedTimer part;
    part.start();
    QVERIFY(run_begins(window, window.resume_from(QString::fromStdString(last))));
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    const double at_most = earlier + static_cast<double>(part.elapsed()) / 1000;
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QVERIFY(window.run_summary());
    const QString summary = qobject_cast<QMessageBox*>(window.run_summary())->text();

    const Checkpoint finished = load_checkpoint(last);
    // The whole run's time as last.safetensors records it: the earlier part and this one.
    QVERIFY(finished.training_seconds > earlier && finished.training_seconds <= at_most);
    QVERIFY2(summary.contains(QString("after %1").arg(duration_text(finished.training_seconds))) ||
                 summary.contains(QString("after %1").arg(duration_text(at_most))),
             qPrintable(summary));
    QVERIFY2(summary.contains(QString("%1 holds epoch %2 (step %3)")
                                  .arg(QString::fromStdString(last))
                                  .arg(finished.position.epoch)
                                  .arg(finished.position.step)),
             qPrintable(summary));
    const QString best_file = dir.filePath("best.safetensors");
    const CheckpointInfo best = inspect_checkpoint(best_file.toStdString());
    // best follows checkpoint.monitor, val_loss by default: the summary names it, with the value the file
    // was chosen for.
    QVERIFY2(summary.contains(QString("%1 holds epoch %2 (step %3): the best val_loss, %4")
                                  .arg(best_file)
                                  .arg(best.position.epoch)
                                  .arg(best.position.step)
                                  .arg(best.position.metrics.at("val_loss").get<double>(), 0, 'f', 4)),
             qPrintable(summary));
  }

  // Item 13: at the window's smallest size, with long step numbers and an hour of memory samples, no tick
  // label overlaps the next on any axis of any chart.
  void tickLabelsDoNotOverlapInASmallWindow() {
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    window.show();
    window.resize(window.minimumSizeHint());
    TrainingCharts& charts = *window.training_charts();
    for (std::int64_t step = 1; step <= 250000; step += 997) {
      StepReport r;
      r.step = step;
      r.loss = 1.0 / static_cast<double>(step);
      r.lr = 1e-3;
      r.img_per_s = r.img_per_s_avg = 1234.5;
      r.data_wait_seconds = 0.0125;
      charts.add_step(r);
    }
    for (std::int64_t epoch = 1; epoch <= 120; ++epoch) {
      EpochReport r;
      r.epoch = epoch;
      r.step = epoch * 2000;
      r.loss = r.val_loss = 0.5;
      r.val_iou = r.val_dice = 0.75;
      r.val_class_iou = r.val_class_dice = {0.9, 0.75};
      charts.add_epoch(r);
    }
    MemoryCharts& memory = *window.memory_charts();
    memory.reset({"cpu:0"}, {std::int64_t{64} << 30});
    for (int s = 0; s <= 3600 * 3; s += 60) {
      MemoryReport m;
      m.t = s;
      m.device = "cpu:0";
      m.stats.in_use = m.stats.reserved = m.stats.peak_in_use = (std::int64_t{3} << 30) + s * 1000;
      m.device_total = std::int64_t{64} << 30;
      m.device_used = std::int64_t{20} << 30;
      memory.add_sample(m);
    }
    std::vector<QCustomPlot*> plots = {charts.loss_plot(), charts.metrics_plot(), charts.throughput_plot()};
    for (QCustomPlot* plot : memory.findChildren<QCustomPlot*>()) plots.push_back(plot);
    for (QWidget* tab : {static_cast<QWidget*>(&charts), static_cast<QWidget*>(&memory)}) {
      tab->resize(tab->minimumSizeHint().expandedTo(tab->minimumSize()));
      tab->show();
    }
    QTest::qWait(2 * charts::refresh_interval_ms);
    int checked = 0;
    for (QCustomPlot* plot : plots) {
      plot->resize(plot->minimumSize());
      plot->replot();
      for (QCPAxis* axis : plot->axisRect()->axes()) {
        if (!axis->visible() || !axis->tickLabels()) continue;
        const std::vector<QRectF> rects = tick_label_rects(axis);
        for (std::size_t i = 1; i < rects.size(); ++i) {
          QVERIFY2(!rects[i].intersects(rects[i - 1]),
                   qPrintable(QString("%1 axis \"%2\": tick labels \"%3\" and \"%4\" overlap at %5 x %6")
                                  .arg(plot->objectName(), axis->label(),
                                       axis->tickVectorLabels()[int(i) - 1], axis->tickVectorLabels()[int(i)])
                                  .arg(plot->width())
                                  .arg(plot->height())));
        }
        ++checked;
      }
    }
    QVERIFY(checked >= 6);
  }
};

QTEST_MAIN(TestGuiClassCharts)
#include "test_gui_class_charts.moc"
