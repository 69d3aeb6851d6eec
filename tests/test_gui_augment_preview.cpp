// The Augmentation tab and File → Export ONNX's input contract, driven through the real window, offscreen.
// The tab's samples are the engine's: each tile's pixels are display_pixels of what assemble_batch makes for
// the form's config at the same epoch and position, its mask that batch's mask, its caption describe() of the
// draw; an augment.* change redraws on the dataset already open, patch mode shows patch-sized tiles, a folder
// that is not there is said in the tab. An ONNX export tells what its input must hold, as `unet-train export`
// prints it.
#include <QApplication>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>

#include <filesystem>

#include "gui/augment_preview.h"
#include "gui/log_view.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/data/open_dataset.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/io/onnx_export.h"
#include "unet/model/normalize.h"
#include "unet/step/data_plan.h"
#include "unet/train/epoch_plan.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

constexpr int kSide = 32;
constexpr int kPairs = 6;

// Pair k: a gradient image, its mask an 8x8 square whose corner moves with k.
void write_pair(const std::filesystem::path& root, int k) {
  Image image{kSide, kSide, 1, std::vector<std::uint8_t>(kSide * kSide)};
  Image mask = image;
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const auto at = static_cast<std::size_t>(y * kSide + x);
      image.pixels[at] = static_cast<std::uint8_t>((x * 7 + y * 3 + k * 40) % 256);
      mask.pixels[at] = x >= 2 + 3 * k && x < 10 + 3 * k && y >= 4 && y < 12 ? 1 : 0;
    }
  const std::string name = "p" + std::to_string(k) + ".png";
  write_png(root / "images" / name, image);
  write_png(root / "masks" / name, mask);
}

std::filesystem::path write_dataset(const QTemporaryDir& dir) {
  const std::filesystem::path root = std::filesystem::path(dir.path().toStdString()) / "cells";
  std::filesystem::create_directories(root / "images");
  std::filesystem::create_directories(root / "masks");
  for (int k = 0; k < kPairs; ++k) write_pair(root, k);
  return root;
}

nlohmann::json folder_json(const std::filesystem::path& root, const QString& run_dir) {
  return {{"model", {{"width", 8}, {"depth", 2}, {"in_channels", 1}, {"classes", 1}}},
          {"data", {{"source", "folder"}, {"path", root.string()}, {"image_size", {kSide, kSide}}}},
          {"augment", {{"rotation_p", 0}}},
          {"train", {{"epochs", 1}, {"batch_size", 2}}},
          {"checkpoint", {{"dir", run_dir.toStdString()}}}};
}

// What the trainer assembles for the first `count` samples of epoch `epoch`'s order under `config`.
HostBatch trainers_batch(const Config& config, std::int64_t epoch, std::size_t count) {
  const auto dataset = open_dataset(config);
  const std::vector<std::size_t> train =
      split_dataset(dataset->size(), config.data.val_fraction, config.data.seed).train;
  const std::vector<std::size_t> order =
      training_order(config, train, epoch, samples_per_epoch(config, *dataset, train));
  count = std::min(count, order.size());
  std::vector<std::int64_t> positions(count);
  for (std::size_t p = 0; p < count; ++p) positions[p] = static_cast<std::int64_t>(p);
  HostBatch batch;
  assemble_batch(*dataset, std::span(order).first(count), positions, epoch, training_recipe(config), batch);
  return batch;
}

// The window over the test dataset, its log watched (`log` outlives the window), the tab not shown.
struct WindowOnDataset {
  QTemporaryDir dir;
  std::filesystem::path root = write_dataset(dir);
  test::LogWatch log;
  MainWindow window{{.demo = true, .prompter = std::make_shared<PromptRecorder>()}};

  explicit WindowOnDataset(const nlohmann::json& changes = nlohmann::json::object()) {
    watch_log(window, log);
    window.show();
    nlohmann::json j = folder_json(root, dir.filePath("run"));
    j.merge_patch(changes);
    window.config_panel()->set_config(config_from_json(j));
  }
  AugmentPreview& preview() { return *window.augment_preview(); }
  Config config() { return *window.config_panel()->config(); }
  // Runs `change` and waits (60 s at most) until the tab has shown the draw that follows.
  [[nodiscard]] bool drawn_after(const std::function<void()>& change) {
    QSignalSpy drawn(&preview(), &AugmentPreview::drawn);
    change();
    return QTest::qWaitFor([&] { return !drawn.isEmpty(); }, 60000);
  }
  [[nodiscard]] bool show_tab() {
    return drawn_after([&] { window.findChild<QTabWidget*>()->setCurrentWidget(&preview()); });
  }
};

// Every tile of `preview` is the sample of `batch` at its place: the pixels display_pixels makes of it (one
// grey channel), the mask's foreground opaque in the layer and its background transparent.
void compare_with(const AugmentPreview& preview, const HostBatch& batch, const NormalizeDesc& normalize) {
  QCOMPARE(preview.tile_count(), static_cast<int>(batch.count));
  const std::int64_t area = batch.height * batch.width;
  for (int i = 0; i < preview.tile_count(); ++i) {
    const AugmentedTile& tile = preview.tile(i);
    QCOMPARE(tile.image.size(), QSize(static_cast<int>(batch.width), static_cast<int>(batch.height)));
    const std::vector<std::uint8_t> expected = display_pixels(
        std::span(batch.pixels).subspan(static_cast<std::size_t>(i * area), static_cast<std::size_t>(area)),
        normalize);
    for (int y = 0; y < tile.image.height(); ++y)
      for (int x = 0; x < tile.image.width(); ++x) {
        const auto at = static_cast<std::size_t>(y * batch.width + x);
        const int g = expected[at];
        QCOMPARE(tile.image.pixel(x, y), qRgb(g, g, g));
        const bool foreground = batch.masks[static_cast<std::size_t>(i * area) + at] != 0;
        QCOMPARE(qAlpha(tile.mask_layer.pixel(x, y)), foreground ? 255 : 0);
      }
  }
}

}  // namespace

class TestGuiAugmentPreview : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_augment_preview"); }

  void showsWhatTheTrainerAssembles() {
    WindowOnDataset on(nlohmann::json{{"augment", {{"scale_p", 1}, {"gamma_p", 1}}}});
    AugmentPreview& preview = on.preview();
    QVERIFY(on.show_tab());
    const Config config = on.config();
    // 6 pairs, one of them validates: the 5 training samples of epoch 0's order.
    QCOMPARE(preview.tile_count(), kPairs - 1);
    compare_with(preview, trainers_batch(config, 0, AugmentPreview::sample_count), config.data.normalize);
    // Each caption says what was drawn for its sample, scaled and gamma-corrected as the settings ask.
    for (int i = 0; i < preview.tile_count(); ++i) {
      const QString caption = preview.tile(i).caption;
      QVERIFY2(caption.contains(QRegularExpression(R"(^p\d\.png: .*scale [\d.]+ .*gamma [\d.]+)")),
               qPrintable(caption));
    }
    QVERIFY2(preview.status().contains("Epoch 1's first 5 training samples"), qPrintable(preview.status()));

    // New draw: the next epoch's samples, as the trainer assembles them.
    const QString first_caption = preview.tile(0).caption;
    QVERIFY(on.drawn_after([&] { preview.findChild<QPushButton*>()->click(); }));
    QCOMPARE(preview.epoch(), std::int64_t{1});
    compare_with(preview, trainers_batch(config, 1, AugmentPreview::sample_count), config.data.normalize);
    QVERIFY(preview.tile(0).caption != first_caption);
  }

  void anAugmentChangeRedrawsOnTheOpenDataset() {
    WindowOnDataset on;
    AugmentPreview& preview = on.preview();
    QVERIFY(on.show_tab());
    const Dataset* opened = preview.dataset();
    QVERIFY(opened);
    for (int i = 0; i < preview.tile_count(); ++i) QVERIFY(!preview.tile(i).caption.contains("rot "));

    QVERIFY(on.drawn_after([&] { QVERIFY(set_field(*on.window.config_panel(), "augment.rotation_p", 1)); }));
    QCOMPARE(preview.tile_count(), kPairs - 1);
    for (int i = 0; i < preview.tile_count(); ++i)
      QVERIFY2(preview.tile(i).caption.contains(QRegularExpression(R"(rot -?[\d.]+°)")),
               qPrintable(preview.tile(i).caption));
    QCOMPARE(preview.dataset(), opened);  // not opened again
    const Config config = on.config();
    compare_with(preview, trainers_batch(config, 0, AugmentPreview::sample_count), config.data.normalize);
  }

  void patchModeShowsPatches() {
    WindowOnDataset on(nlohmann::json{
        {"data", {{"mode", "patch"}, {"patch_size", {16, 16}}, {"foreground_oversample", 1}}}});
    AugmentPreview& preview = on.preview();
    QVERIFY(on.show_tab());
    // 5 training images of 32x32 over 16x16 patches: 20 patches an epoch, the first 8 shown.
    QCOMPARE(preview.tile_count(), AugmentPreview::sample_count);
    for (int i = 0; i < preview.tile_count(); ++i) {
      QCOMPARE(preview.tile(i).image.size(), QSize(16, 16));
      // Every patch is centred on a labelled pixel (every mask has some).
      QVERIFY2(preview.tile(i).caption.endsWith(", on foreground"), qPrintable(preview.tile(i).caption));
    }
    const Config config = on.config();
    compare_with(preview, trainers_batch(config, 0, AugmentPreview::sample_count), config.data.normalize);
    QVERIFY2(preview.status().contains("patches of 16x16"), qPrintable(preview.status()));
  }

  void aMissingFolderIsSaid() {
    WindowOnDataset on;
    AugmentPreview& preview = on.preview();
    QVERIFY(on.show_tab());
    QCOMPARE(preview.tile_count(), kPairs - 1);
    const std::filesystem::path missing = on.root.parent_path() / "no-such-folder";
    QVERIFY(on.drawn_after([&] {
      QVERIFY(set_field(*on.window.config_panel(), "data.path", QString::fromStdString(missing.string())));
    }));
    QCOMPARE(preview.tile_count(), 0);
    QVERIFY2(preview.status().contains(QString::fromStdString(missing.filename().string())),
             qPrintable(preview.status()));
    QVERIFY2(preview.status().startsWith("Cannot draw the samples: ") &&
                 preview.status().contains("no such folder"),
             qPrintable(preview.status()));
  }

  void theOnnxExportSaysItsInputContract() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    watch_log(window, log);
    QStringList lines;
    connect(window.log_view(), &LogView::added, this, [&](LogLevel, const QString& line) { lines << line; });
    const QString model = small_model(dir);
    QVERIFY(succeeds(window.export_onnx_of(model, dir.filePath("model.onnx"))));
    QVERIFY(tasks_end(window));
    const QString contract = QString::fromStdString(
        onnx_input_contract(load_checkpoint(model.toStdString()).config.data.normalize));
    QVERIFY(!contract.isEmpty());
    QVERIFY2(lines.join('\n').contains("input pixels: " + contract), qPrintable(lines.join('\n')));
    QVERIFY2(window.statusBar()->currentMessage().contains(contract),
             qPrintable(window.statusBar()->currentMessage()));
  }
};

QTEST_MAIN(TestGuiAugmentPreview)
#include "test_gui_augment_preview.moc"
