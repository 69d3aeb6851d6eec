// Instance segmentation in the workbench, end to end (issue 27), offscreen and through the real window: a
// user points the form at a folder in the DSB 2018 layout and picks task "instances"; model.classes follows
// the target (the status bar says why); the Dataset tab shows each pair's objects in colours of their own and
// counts them; training runs, and the Training tab charts the DSB score and the object F1 every epoch, the
// values metrics.jsonl records; the run's summary names the best DSB score; best.safetensors holds the
// thresholds the validation chose.
#include <QMessageBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTreeWidget>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gui/dataset_browser.h"
#include "gui/object_overlay.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/data/synthetic.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

constexpr std::int64_t kSide = 64;
constexpr std::size_t kSamples = 20;

// The demo's touching cells written as DSB 2018 samples: root/<id>/images/<id>.png and one mask a cell,
// root/<id>/masks/<id>_<k>.png (255 on the cell, 0 elsewhere). Returns each sample's instance labels by id.
std::map<std::string, LabelImage> write_dsb(const std::filesystem::path& root) {
  const SyntheticCells cells(SyntheticOptions{.count = kSamples,
                                              .height = kSide,
                                              .width = kSide,
                                              .channels = 3,
                                              .classes = 3,
                                              .seed = 5,
                                              .instances = InstancesConfig{}});
  std::map<std::string, LabelImage> written;
  for (std::size_t i = 0; i < kSamples; ++i) {
    const Sample s = cells.get(i);
    const std::string id = "cells" + std::to_string(10 + i);
    std::filesystem::create_directories(root / id / "images");
    std::filesystem::create_directories(root / id / "masks");
    write_png(root / id / "images" / (id + ".png"), eight_bit_image(s));
    const std::set<ObjectId> objects(s.instances.ids.begin(), s.instances.ids.end());
    for (const ObjectId object : objects) {
      if (object == 0) continue;
      Image mask{kSide, kSide, 1, std::vector<std::uint8_t>(s.instances.ids.size(), 0)};
      for (std::size_t p = 0; p < mask.pixels.size(); ++p)
        mask.pixels[p] = s.instances.ids[p] == object ? 255 : 0;
      write_png(root / id / "masks" / (id + "_" + std::to_string(object) + ".png"), mask);
    }
    written[id] = s.instances;
  }
  return written;
}

std::size_t object_count(const LabelImage& labels) {
  std::set<ObjectId> ids(labels.ids.begin(), labels.ids.end());
  ids.erase(0);
  return ids.size();
}

}  // namespace

class TestGuiInstances : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_instances"); }

  void dsbFolderTrainsObjects() {
    QTemporaryDir dir;
    const std::filesystem::path root = std::filesystem::path(dir.path().toStdString()) / "dsb";
    const std::map<std::string, LabelImage> samples = write_dsb(root);
    test::LogWatch log;  // outlives the window
    MainWindow window{{.demo = true, .prompter = std::make_shared<PromptRecorder>()}};
    watch_log(window, log);
    window.show();
    ConfigPanel& form = *window.config_panel();
    // A small, quick model on the demo, as the test's starting point.
    form.set_config(config_from_json({{"model", {{"width", 8}, {"depth", 2}}},
                                      {"data", {{"image_size", {kSide, kSide}}}},
                                      {"train", {{"epochs", 3}, {"batch_size", 4}}},
                                      {"checkpoint", {{"dir", dir.filePath("run").toStdString()}}}}));
    auto* classes = qobject_cast<QSpinBox*>(form.field("model.classes"));
    QVERIFY(classes);
    QCOMPARE(classes->value(), 1);

    // The user's steps: the DSB folder, then task instances. The target (boundary, the default) has three
    // classes: the form sets them and says so.
    QVERIFY(set_field(form, "data.source", "dsb2018"));
    QVERIFY(set_field(form, "data.path", QString::fromStdString(root.string())));
    QVERIFY2(form.is_valid(), qPrintable(form.problems().join('\n')));
    QVERIFY(set_field(form, "task", "instances"));
    QCOMPARE(classes->value(), 3);
    QVERIFY2(window.statusBar()->currentMessage().startsWith("model.classes set to 3: instances.target "
                                                             "\"boundary\" trains three classes"),
             qPrintable(window.statusBar()->currentMessage()));
    QVERIFY2(form.is_valid(), qPrintable(form.problems().join('\n')));

    // The Dataset tab: every sample a good pair of objects, and a pair's preview counts its cells.
    DatasetBrowser& browser = *window.dataset_browser();
    QSignalSpy scanned(&browser, &DatasetBrowser::scanned);
    window.findChild<QTabWidget*>()->setCurrentWidget(&browser);
    QVERIFY(QTest::qWaitFor([&] { return !scanned.isEmpty(); }, 60000));
    QVERIFY2(browser.summary().contains(QString("%1 pairs, %1 good, 0 bad").arg(kSamples)),
             qPrintable(browser.summary()));
    QVERIFY2(
        browser.summary().contains("masks hold objects, trained as instances.target \"boundary\"; classes "
                                   "found: 0 (background): "),
        qPrintable(browser.summary()));
    QVERIFY2(browser.summary().contains(", 1 (interior): ") && browser.summary().contains(", 2 (boundary): "),
             qPrintable(browser.summary()));
    QCOMPARE(browser.pairs()->topLevelItemCount(), static_cast<int>(kSamples));
    QTreeWidgetItem* first = browser.pairs()->topLevelItem(0);
    const std::string first_id =
        std::filesystem::path(first->text(DatasetBrowser::image_column).toStdString()).stem().string();
    QVERIFY2(samples.count(first_id), qPrintable(first->text(DatasetBrowser::image_column)));
    const LabelImage& first_labels = samples.at(first_id);
    browser.pairs()->setCurrentItem(first);
    QVERIFY(QTest::qWaitFor([&] { return !browser.preview().isNull(); }, 30000));
    QCOMPARE(browser.preview_note(),
             QString("%1 objects, each in a colour of its own.").arg(object_count(first_labels)));
    // Each cell's pixels are blended half-way to one object colour, the cell's own: the preview numbers the
    // cells 1..n by their mask files (as training does), so cell k of the labels has some id j, the same
    // for all its pixels and no other cell's; the background is the image.
    const QImage preview = browser.preview();
    const Image drawn = read_image(root / first_id / "images" / (first_id + ".png"));
    const auto n = static_cast<ObjectId>(object_count(first_labels));
    std::map<ObjectId, ObjectId> preview_id;  // cell -> the id whose colour it is drawn in
    for (std::int64_t p = 0; p < kSide * kSide; ++p) {
      const ObjectId cell = first_labels.ids[static_cast<std::size_t>(p)];
      const int x = static_cast<int>(p % kSide), y = static_cast<int>(p / kSide);
      const auto at = static_cast<std::size_t>(p * 3);
      const int r = drawn.pixels[at], g = drawn.pixels[at + 1], b = drawn.pixels[at + 2];
      const auto blended = [&](ObjectId id) {
        const QColor c = object_colour(id);
        return qRgb((r + c.red()) / 2, (g + c.green()) / 2, (b + c.blue()) / 2);
      };
      if (cell == 0) {
        QCOMPARE(preview.pixel(x, y), qRgb(r, g, b));
        continue;
      }
      if (!preview_id.count(cell)) {
        for (ObjectId id = 1; id <= n && !preview_id.count(cell); ++id)
          if (preview.pixel(x, y) == blended(id)) preview_id[cell] = id;
        QVERIFY2(preview_id.count(cell), qPrintable(QString("cell %1 at (%2, %3)").arg(cell).arg(x).arg(y)));
      }
      QCOMPARE(preview.pixel(x, y), blended(preview_id[cell]));
    }
    std::set<ObjectId> used;
    for (const auto& [cell, id] : preview_id) used.insert(id);
    QCOMPARE(used.size(), object_count(first_labels));

    // Training: the DSB score and the object F1 per epoch, as metrics.jsonl has them.
    QVERIFY(window.start_training());
    QVERIFY(QTest::qWaitFor([&] { return !window.training(); }, 180000));
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const std::vector<nlohmann::json> epochs = epoch_records(dir.filePath("run/metrics.jsonl"));
    QCOMPARE(epochs.size(), std::size_t{3});
    const TrainingCharts& charts = *window.training_charts();
    QVERIFY(charts.dsb_graph() != nullptr && charts.object_f1_graph() != nullptr);
    QCOMPARE(charts.dsb_graph()->dataCount(), 3);
    QCOMPARE(charts.object_f1_graph()->dataCount(), 3);
    for (int e = 0; e < 3; ++e) {
      const nlohmann::json& r = epochs[static_cast<std::size_t>(e)];
      QCOMPARE(charts.dsb_graph()->data()->at(e)->key, r.at("epoch").get<double>());
      QCOMPARE(charts.dsb_graph()->data()->at(e)->value, r.at("val_dsb").get<double>());
      QCOMPARE(charts.object_f1_graph()->data()->at(e)->value, r.at("val_f1").get<double>());
    }
    // The run's summary gives the best DSB score, its epoch and that epoch's F1.
    std::size_t top = 0;
    for (std::size_t e = 1; e < epochs.size(); ++e)
      if (epochs[e].at("val_dsb").get<double>() > epochs[top].at("val_dsb").get<double>()) top = e;
    QVERIFY(window.run_summary());
    const QString summary = qobject_cast<QMessageBox*>(window.run_summary())->text();
    QVERIFY2(summary.contains(QString("Best DSB 2018 score: %1 (epoch %2; object F1 %3)")
                                  .arg(epochs[top].at("val_dsb").get<double>(), 0, 'f', 4)
                                  .arg(top + 1)
                                  .arg(epochs[top].at("val_f1").get<double>(), 0, 'f', 4)),
             qPrintable(summary));
    // The checkpoint is an instance model with the thresholds the validation chose.
    const Checkpoint best = load_checkpoint(dir.filePath("run/best.safetensors").toStdString());
    QCOMPARE(best.config.task, ModelTask::instances);
    QCOMPARE(best.config.data.source, DataSource::dsb2018);
    QCOMPARE(best.config.model.classes, std::int64_t{3});
    const nlohmann::json& held = epochs.at(static_cast<std::size_t>(best.position.epoch - 1));
    QCOMPARE(best.config.instances.seed_threshold, held.at("val_seed_threshold").get<double>());
    QCOMPARE(best.config.instances.foreground_threshold, held.at("val_foreground_threshold").get<double>());
  }
};

QTEST_MAIN(TestGuiInstances)
#include "test_gui_instances.moc"
