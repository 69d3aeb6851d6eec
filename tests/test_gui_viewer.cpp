// Looking at results in the workbench (issue 25, items 11, 4 and 6), through the real window offscreen: a
// validation sample or a predicted image at full size, zoomed (buttons, wheel, keys) and panned (drag), with
// its classes laid over it at the opacity the slider sets; the Predict window's images in natural order
// (img1, img2, img10) and a stale mark on results the current settings would not give; Save masks offering
// a new folder beside the inputs and refusing a training set's folders; and the Predictions tab forgetting
// the previous run at Open run and at a new start.
#include <QAbstractButton>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QWheelEvent>

#include <cmath>
#include <memory>

#include "gui/image_view.h"
#include "gui/main_window.h"
#include "gui/predict_window.h"
#include "gui/predictions_tab.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/data/dataset_folders.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/model/unet.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

const QString kNoPredictionsYet = "Validation samples appear here after each epoch.";

// A 40 x 30 grey (100) sample whose ground truth is class 1 left of x = 20 and whose prediction is certain
// foreground left of x = 10, certain background elsewhere.
PredictionSample grey_sample() {
  PredictionSample s;
  s.height = 30;
  s.width = 40;
  s.channels = 1;
  s.image.assign(30 * 40, 100);
  s.mask.resize(30 * 40);
  s.probabilities.resize(30 * 40);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) {
      s.mask[static_cast<std::size_t>(y * 40 + x)] = x < 20 ? 1 : 0;
      s.probabilities[static_cast<std::size_t>(y * 40 + x)] = x < 10 ? 1.0F : 0.0F;
    }
  return s;
}

// A 400 x 300 sample with some structure, larger than any view at 100 %.
PredictionSample large_sample() {
  PredictionSample s;
  s.height = 300;
  s.width = 400;
  s.channels = 3;
  s.image.resize(300 * 400 * 3);
  for (std::size_t i = 0; i < s.image.size(); ++i) s.image[i] = static_cast<std::uint8_t>((i * 7) % 251);
  s.mask.assign(300 * 400, 0);
  s.probabilities.assign(300 * 400, 0.2F);
  return s;
}

// Shows `sample` in the window's Predictions tab, as after an epoch, and clicks its prediction's thumbnail.
PredictionsTab& show_sample(MainWindow& window, PredictionSample sample) {
  window.resize(1200, 800);
  window.show();
  PredictionsTab& tab = *window.predictions_tab();
  window.findChild<QTabWidget*>()->setCurrentWidget(&tab);
  PredictionsReport report;
  report.epoch = 1;
  report.step = 4;
  report.samples = {std::move(sample)};
  tab.show_predictions(report);
  tab.thumbnail(0, 2)->click();
  return tab;
}

// The colour the view's canvas shows over image pixel (x, y).
QColor rendered(const ImageView& view, int x, int y) {
  const QPointF at = view.canvas_point_of(QPointF(x + 0.5, y + 0.5));
  return view.canvas()->grab().toImage().pixelColor(static_cast<int>(std::floor(at.x())),
                                                    static_cast<int>(std::floor(at.y())));
}

void write_rgb(const QString& path, int salt) {
  std::vector<std::uint8_t> pixels(24 * 24 * 3);
  for (std::size_t p = 0; p < pixels.size(); ++p)
    pixels[p] = static_cast<std::uint8_t>((p * (3 + salt)) % 251);
  write_png(path.toStdString(), Image{24, 24, 3, pixels});
}

QStringList listed(const PredictWindow& predict) {
  const auto* list = predict.findChild<QListWidget*>("predict_list");
  QStringList names;
  for (int i = 0; list && i < list->count(); ++i) names << list->item(i)->text();
  return names;
}

}  // namespace

class TestGuiViewer : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_viewer"); }

  // Item 11: a sample's thumbnail opens it at full size, fitted to the view; "100 %", the + button and key
  // and the wheel (about the pointer) zoom, a drag pans, - zooms out, Fit and 0 fit it to the view again.
  void aSampleZoomsAndPans() {
    MainWindow window({.demo = true});
    ImageView& view = *show_sample(window, large_sample()).view();
    QCOMPARE(view.composed().size(), QSize(400, 300));
    QWidget& canvas = *view.canvas();
    QVERIFY(canvas.width() > 50 && canvas.height() > 50);
    const double fit = std::min(canvas.width() / 400.0, canvas.height() / 300.0);
    QVERIFY(view.fitted());
    QCOMPARE(view.scale(), fit);

    view.findChild<QAbstractButton*>("zoom_actual")->click();
    QCOMPARE(view.scale(), 1.0);
    QVERIFY(!view.fitted());
    view.findChild<QAbstractButton*>("zoom_in")->click();
    QCOMPARE(view.scale(), 1.25);
    QTest::keyClick(&canvas, Qt::Key_Plus);
    QCOMPARE(view.scale(), 1.25 * 1.25);
    // Larger than the view (8 steps of 1.25: 5.96 x), so that it can pan, and zoom about any point.
    double scale = 1.25 * 1.25;
    for (int i = 0; i < 5; ++i) {
      view.findChild<QAbstractButton*>("zoom_in")->click();
      scale *= 1.25;
    }
    QCOMPARE(view.scale(), scale);
    QVERIFY(400 * scale > canvas.width() + 200 && 300 * scale > canvas.height() + 200);

    // The wheel zooms about the pointer: the image pixel under it stays there (to a screen pixel).
    const QPointF pointer(canvas.width() / 3.0, canvas.height() / 4.0);
    const QPointF under = view.image_point_at(pointer);
    QWheelEvent wheel(pointer, canvas.mapToGlobal(pointer), QPoint(), QPoint(0, 120), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(&canvas, &wheel);
    scale *= 1.25;
    QCOMPARE(view.scale(), scale);
    const QPointF moved = view.image_point_at(pointer) - under;
    QVERIFY2(std::abs(moved.x()) <= 1 / scale && std::abs(moved.y()) <= 1 / scale,
             qPrintable(QString("%1, %2").arg(moved.x()).arg(moved.y())));

    // A drag of (-40, -30) screen pixels shows what lay 40, 30 screen pixels right and below.
    const QPointF centre(canvas.width() / 2.0, canvas.height() / 2.0);
    const QPointF before = view.image_point_at(centre);
    QTest::mousePress(&canvas, Qt::LeftButton, Qt::NoModifier, centre.toPoint());
    QMouseEvent drag(QEvent::MouseMove, centre - QPointF(40, 30),
                     canvas.mapToGlobal(centre - QPointF(40, 30)), Qt::NoButton, Qt::LeftButton,
                     Qt::NoModifier);
    QApplication::sendEvent(&canvas, &drag);
    QTest::mouseRelease(&canvas, Qt::LeftButton, Qt::NoModifier, (centre - QPointF(40, 30)).toPoint());
    const QPointF panned = view.image_point_at(centre) - before;
    QCOMPARE(panned.x(), 40 / scale);
    QCOMPARE(panned.y(), 30 / scale);

    // The next epoch's sample (of the same size) is shown as this one was.
    PredictionsReport next;
    next.epoch = 2;
    next.step = 8;
    next.samples = {large_sample()};
    window.predictions_tab()->show_predictions(next);
    QCOMPARE(view.scale(), scale);
    QCOMPARE(view.image_point_at(centre), before + panned);

    QTest::keyClick(&canvas, Qt::Key_Minus);
    QCOMPARE(view.scale(), scale / 1.25);
    QTest::keyClick(&canvas, Qt::Key_0);
    QVERIFY(view.fitted());
    QCOMPARE(view.scale(), fit);
    view.findChild<QAbstractButton*>("zoom_in")->click();
    view.findChild<QAbstractButton*>("zoom_fit")->click();
    QCOMPARE(view.scale(), fit);
  }

  // Item 11: the overlay's opacity, by the slider, changes the pixel drawn to base * (1 - a) + colour * a,
  // a = opacity: class 1's colour (230, 75, 60) over grey 100 at 40 % is (152, 90, 84). The truth thumbnail
  // shows the ground truth over the input instead of the prediction.
  void theOpacitySliderBlendsTheOverlay() {
    MainWindow window({.demo = true});
    PredictionsTab& tab = show_sample(window, grey_sample());
    ImageView& view = *tab.view();
    view.findChild<QAbstractButton*>("zoom_actual")->click();
    auto* opacity = view.findChild<QSlider*>("overlay_opacity");
    QVERIFY(opacity);
    QCOMPARE(class_colour(1), QColor(230, 75, 60));

    opacity->setValue(40);
    QCOMPARE(view.opacity(), 40);
    QCOMPARE(rendered(view, 5, 5), QColor(152, 90, 84));
    QCOMPARE(rendered(view, 15, 5), QColor(100, 100, 100));  // predicted background: no overlay
    opacity->setValue(100);
    QCOMPARE(rendered(view, 5, 5), QColor(230, 75, 60));
    opacity->setValue(0);
    QCOMPARE(rendered(view, 5, 5), QColor(100, 100, 100));

    // The ground truth (class 1 left of x = 20) over the input, at the slider's opacity.
    opacity->setValue(40);
    tab.thumbnail(0, 1)->click();
    QCOMPARE(rendered(view, 15, 5), QColor(152, 90, 84));
    QCOMPARE(rendered(view, 25, 5), QColor(100, 100, 100));
  }

  // Item 11: the Predict window lists its images in natural order, shows the selected one in the same view
  // (zoom, opacity), and marks its results stale while the mode differs from the one they were computed with.
  void predictWindowSortsNaturallyAndMarksStaleResults() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    const QString checkpoint = small_model(dir);
    QStringList images;
    for (const char* name : {"img2.png", "img10.png", "img1.png"}) {
      images << dir.filePath(name);
      write_rgb(images.back(), static_cast<int>(images.size()));
    }
    PredictWindow& predict = *window.show_predict_window();
    QVERIFY(predict_and_wait(predict, checkpoint, images));
    QCOMPARE(listed(predict), QStringList({"img1.png", "img2.png", "img10.png"}));
    auto* view = predict.findChild<ImageView*>();
    QVERIFY(view && view->findChild<QSlider*>("overlay_opacity"));
    QCOMPARE(view->composed().size(), QSize(24, 24));

    auto* stale = predict.findChild<QLabel*>("predict_stale");
    auto* mode = predict.findChild<QComboBox*>("predict_mode");
    QVERIFY(stale && mode);
    QVERIFY(!stale->isVisible());
    mode->setCurrentIndex(mode->findText("Whole image"));
    QVERIFY(stale->isVisible());
    QVERIFY2(stale->text().contains("Stale") && stale->text().contains("Auto") &&
                 stale->text().contains("Whole image"),
             qPrintable(stale->text()));
    mode->setCurrentIndex(mode->findText("Auto"));  // back to what the results were computed with
    QVERIFY(!stale->isVisible());
    predict.findChild<QCheckBox*>("predict_flips")->setChecked(true);
    QVERIFY(stale->isVisible());
    QVERIFY(predict_and_wait(predict, checkpoint, images));  // recomputed with flips: current again
    QVERIFY(!stale->isVisible());
  }

  // Item 4: Save masks offers a new folder beside the inputs (<inputs>-masks, numbered when it exists), and
  // refuses the training set's folder, its images/ and masks/, and any folder the preflight would read as a
  // dataset, naming the folder; nothing is written there.
  void saveMasksOffersANewFolderAndRefusesATrainingSet() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    const QString checkpoint = small_model(dir);
    for (const char* folder : {"cells/images", "cells/masks", "other/images", "other/masks"})
      QVERIFY(QDir(dir.path()).mkpath(folder));
    QStringList images;
    for (int i = 0; i < 2; ++i) {
      images << dir.filePath(QString("cells/images/cell-%1.png").arg(i));
      write_rgb(images.back(), i);
    }
    Config config = small_run(dir.filePath("run"), 1);
    config.data.source = DataSource::folder;
    config.data.path = dir.filePath("cells").toStdString();
    window.config_panel()->set_config(config);
    QVERIFY(window.config_panel()->config());

    PredictWindow& predict = *window.show_predict_window();
    auto* folder = predict.findChild<QLineEdit*>("predict_masks_folder");
    auto* save = predict.findChild<QPushButton*>("predict_save");
    QVERIFY(folder && save);
    QVERIFY(predict_and_wait(predict, checkpoint, images));
    QCOMPARE(folder->text(), dir.filePath("cells/images-masks"));
    QVERIFY(QDir(dir.path()).mkpath("cells/images-masks"));
    QVERIFY(predict_and_wait(predict, checkpoint, images));
    QCOMPARE(folder->text(), dir.filePath("cells/images-masks-2"));

    for (const char* training : {"cells", "cells/images", "cells/masks", "other/masks"}) {
      const QString target = dir.filePath(training);
      const int files_before = static_cast<int>(QDir(target).entryList(QDir::Files).size());
      const auto warnings = prompts->count(PromptRecorder::Kind::warning);
      folder->setText(target);
      save->click();
      QTRY_COMPARE_WITH_TIMEOUT(prompts->count(PromptRecorder::Kind::warning), warnings + 1, 60000);
      QVERIFY2(prompts->asked.back().text.contains(target), qPrintable(prompts->asked.back().text));
      QVERIFY2(predict.status_text().contains(target), qPrintable(predict.status_text()));
      QVERIFY(tasks_end(window));
      QCOMPARE(static_cast<int>(QDir(target).entryList(QDir::Files).size()), files_before);
    }
    // The engine's answer for those, and for the folder offered.
    const std::optional<DatasetLocation> training = dataset_location(*window.config_panel()->config());
    QVERIFY(training && training->root == dir.filePath("cells").toStdString());
    QVERIFY(dataset_membership(dir.filePath("cells/images/sub").toStdString(), training));
    QVERIFY(!dataset_membership(dir.filePath("cells/images-masks-2").toStdString(), training));

    // The folder offered is made and the masks written there.
    folder->setText(dir.filePath("cells/images-masks-2"));
    QVERIFY(succeeds(predict.save_masks(folder->text())));
    QVERIFY(QFile::exists(dir.filePath("cells/images-masks-2/cell-0_mask.png")));
    QVERIFY(QFile::exists(dir.filePath("cells/images-masks-2/cell-1_mask.png")));
  }

  // Item 6: after a run, Open run and a new start show no caption or samples of the previous run.
  void predictionsForgetThePreviousRun() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(train_to_the_end(window, small_run(dir.filePath("run"), 1)));
    PredictionsTab& tab = *window.predictions_tab();
    QVERIFY2(tab.caption().startsWith("After epoch 1"), qPrintable(tab.caption()));
    QVERIFY(tab.sample_count() > 0);
    tab.thumbnail(0, 2)->click();
    QVERIFY(!tab.view()->composed().isNull());

    QVERIFY(succeeds(window.open_run(dir.filePath("run"))));
    QCOMPARE(tab.caption(), kNoPredictionsYet);
    QCOMPARE(tab.sample_count(), 0);
    QVERIFY(tab.view()->composed().isNull());

    // A new run (an epoch long enough not to end before it is looked at) starts with none either.
    PredictionsReport old;
    old.epoch = 7;
    old.step = 70;
    old.samples = {grey_sample()};
    tab.show_predictions(old);
    Config longer = small_run(dir.filePath("run-2"), 1);
    longer.data.synthetic_samples = 4000;
    window.config_panel()->set_config(longer);
    QVERIFY(run_begins(window, window.start_training()));
    QCOMPARE(tab.caption(), kNoPredictionsYet);
    QCOMPARE(tab.sample_count(), 0);
    window.stop_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 60000);
  }
};

QTEST_MAIN(TestGuiViewer)
#include "test_gui_viewer.moc"
