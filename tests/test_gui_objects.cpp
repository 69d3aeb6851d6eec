// The Predict window with a task-instances checkpoint (issue 27, item 4), offscreen: the objects it shows are
// the engine's for the same probabilities, the count shown is the label image's, each object is drawn in its
// own colour, a click at an object's pixel shows its row and a click on the background says so, and Save
// writes each image's label PNG and object CSV as `unet-train predict` does.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <set>

#include "gui/image_view.h"
#include "gui/object_overlay.h"
#include "gui/predict_window.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "predict_support.h"
#include "test_support.h"
#include "unet/core/memory.h"
#include "unet/data/model_input.h"
#include "unet/infer/instance_output.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/model/unet.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

// A tiny task-instances checkpoint (boundary target, 3 classes) whose head's weights are scaled by 40: an
// untrained model says about 1/3 of each class everywhere and finds nothing; this one is as sure of itself as
// a trained one, and its interior and boundary classes change from place to place, so that it finds objects.
QString instance_model(const QTemporaryDir& dir) {
  Checkpoint model;
  model.config = config_from_json({{"task", "instances"},
                                   {"model", {{"width", 4}, {"depth", 2}, {"classes", 3}}},
                                   {"data", {{"image_size", {32, 32}}}},
                                   {"instances", {{"min_size", 2}}}});
  model.parameters = UNet::initial_slab(model.config.model, 3);
  CountingAllocator shapes_only("test", 0);
  const UNet layout(model.config.model, shapes_only);
  const std::size_t head_weight = layout.params().size() - 2;
  for (std::int64_t i = 0; i < layout.params()[head_weight].spec.shape.numel(); ++i)
    model.parameters[static_cast<std::size_t>(layout.offsets()[head_weight] + i)] *= 40.0F;
  const QString path = dir.filePath("instances.safetensors");
  save_checkpoint(path.toStdString(), model, CheckpointKind::weights_only);
  return path;
}

// Clicks the view's canvas over image pixel (x, y).
void click_pixel(ImageView& view, std::int64_t x, std::int64_t y) {
  const QPointF at =
      view.canvas_point_of(QPointF(static_cast<double>(x) + 0.5, static_cast<double>(y) + 0.5));
  QTest::mouseClick(view.canvas(), Qt::LeftButton, Qt::NoModifier, at.toPoint());
}

}  // namespace

class TestGuiObjects : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_objects"); }

  void predictShowsCountsPicksAndSavesObjects() {
    QTemporaryDir dir;
    const QString checkpoint = instance_model(dir);
    const QString image_path = dir.filePath("cells.png");
    write_png(image_path.toStdString(), test::structured_image(48, 64, 3));
    PromptRecorder prompts;
    PredictWindow predict(prompts);
    predict.resize(900, 640);
    predict.show();
    QVERIFY(QTest::qWaitForWindowExposed(&predict));
    QVERIFY(predict_and_wait(predict, checkpoint, {image_path}));
    QCOMPARE(predict.prediction_count(), 1);
    const InstanceOutput* shown = predict.objects(0);
    QVERIFY2(shown, "a task-instances checkpoint's results are objects");

    // The engine's objects for the same probabilities (the window's options, the checkpoint's instances.*).
    const Checkpoint loaded = load_checkpoint(checkpoint.toStdString());
    Predictor predictor(loaded);
    const ModelImage input = read_model_image(image_path.toStdString(), input_recipe(loaded.config));
    const InstanceOutput want =
        instance_output(predictor.predict({input}, {image_path.toStdString()}, predict.options()).front(),
                        loaded.config.instances);
    QCOMPARE(shown->labels.ids, want.labels.ids);

    // The count shown is the label image's: its distinct non-zero ids.
    std::set<ObjectId> ids(shown->labels.ids.begin(), shown->labels.ids.end());
    ids.erase(0);
    QVERIFY2(ids.size() >= 2, qPrintable(QString("%1 objects: too few to tell them apart").arg(ids.size())));
    QCOMPARE(predict.object_count_text(), QString("%1 objects").arg(ids.size()));
    QCOMPARE(shown->objects.size(), ids.size());

    // A click at an object's centroid (the pixel it falls in, where that pixel is the object's) shows its
    // row; each object is drawn in its own colour (at full opacity, the colour itself).
    auto* view = predict.findChild<ImageView*>();
    QVERIFY(view);
    view->set_opacity(100);
    int clicked = 0;
    for (const ObjectDescription& o : shown->objects) {
      const auto y = static_cast<std::int64_t>(std::floor(o.centroid_y));
      const auto x = static_cast<std::int64_t>(std::floor(o.centroid_x));
      if (shown->labels.at(y, x) != o.id) continue;  // a centroid outside its object (a crescent)
      click_pixel(*view, x, y);
      QVERIFY2(predict.object_row_text().startsWith(QString("Object %1: %2 px,").arg(o.id).arg(o.area)),
               qPrintable(predict.object_row_text()));
      QCOMPARE(view->composed().pixel(static_cast<int>(x), static_cast<int>(y)), object_colour(o.id).rgb());
      ++clicked;
    }
    QVERIFY2(clicked >= 1, "no object holds its own centroid: nothing was clicked");
    const auto background = std::find(shown->labels.ids.begin(), shown->labels.ids.end(), ObjectId{0});
    if (background != shown->labels.ids.end()) {
      const auto i = background - shown->labels.ids.begin();
      click_pixel(*view, i % shown->labels.width, i / shown->labels.width);
      QVERIFY2(predict.object_row_text().startsWith("Background at"), qPrintable(predict.object_row_text()));
    }

    // Save writes what the CLI writes: the 16-bit label PNG and the object table.
    auto* save = predict.findChild<QPushButton*>("predict_save");
    QVERIFY(save);
    QCOMPARE(save->text(), QString("Save labels"));
    QCOMPARE(predict.findChild<QLabel*>("predict_masks_folder_label")->text(), QString("Labels folder"));
    const QString folder = dir.filePath("objects");
    QVERIFY(succeeds(predict.save_masks(folder)));
    const MaskImage labels = read_mask((folder + "/cells_labels.png").toStdString());
    QCOMPARE(std::vector<ObjectId>(labels.values.begin(), labels.values.end()), shown->labels.ids);
    const std::vector<std::byte> csv = test::read_all((folder + "/cells_objects.csv").toStdString());
    QCOMPARE(std::string(reinterpret_cast<const char*>(csv.data()), csv.size()), objects_csv(shown->objects));

    // The label format TIFF: <image>_labels.tif of the same ids, as --labels-format tiff writes it.
    auto* format = predict.findChild<QComboBox*>("predict_label_format");
    QVERIFY(format);
    QVERIFY(format->isVisibleTo(&predict));
    format->setCurrentIndex(format->findText("TIFF"));
    const QString tiff_folder = dir.filePath("objects-tiff");
    QVERIFY(succeeds(predict.save_masks(tiff_folder)));
    QCOMPARE(QDir(tiff_folder).entryList(QDir::Files),
             QStringList({"cells_labels.tif", "cells_objects.csv"}));
    const ValueImage tiff = read_image_values((tiff_folder + "/cells_labels.tif").toStdString());
    QCOMPARE(tiff.values, std::vector<float>(shown->labels.ids.begin(), shown->labels.ids.end()));
  }
};

QTEST_MAIN(TestGuiObjects)
#include "test_gui_objects.moc"
