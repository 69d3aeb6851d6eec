// Takes the README's screenshots: the real workbench window on an X display (Xvfb in scripts/screenshots.sh),
// on the built-in demo, grabbed from the screen at a few moments of a training run.
//
//   unet-workbench-screenshots OUTPUT_FOLDER [SUFFIX]
//
// With a SUFFIX (the screen's size, "-1280x720"), the window keeps the size it chooses for the screen, and
// the files are named training-1280x720.png and so on.
#include <QApplication>
#include <QDir>
#include <QScreen>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>

#include "gui/augment_preview.h"
#include "gui/charts/training_charts.h"
#include "gui/config_panel.h"
#include "gui/dataset_browser.h"
#include "gui/main_window.h"
#include "gui/prompter.h"
#include "unet/data/synthetic.h"
#include "unet/io/image.h"

namespace {

bool grab(QWidget& window, const QString& path) {
  QApplication::processEvents();
  QTest::qWait(400);  // charts replot on a timer
  const QPixmap shot = window.screen()->grabWindow(window.winId());
  const bool saved = !shot.isNull() && shot.save(path);
  if (!saved) std::fprintf(stderr, "could not save %s\n", qPrintable(path));
  return saved;
}

bool waited(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "timed out waiting for %s\n", what);
  return ok;
}

// A folder dataset for the Dataset tab: 12 of the demo's cells as PNG files, one image without its mask and
// one mask cut 16 rows short, so that the shot shows good and bad pairs.
std::filesystem::path write_folder_dataset(const std::filesystem::path& root) {
  const unet::SyntheticCells cells({.count = 12, .height = 128, .width = 128, .channels = 3, .classes = 1});
  std::filesystem::create_directories(root / "images");
  std::filesystem::create_directories(root / "masks");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const unet::Sample s = cells.get(i);
    const std::string name = "cells-" + std::to_string(100 + i).substr(1) + ".png";
    unet::write_png(root / "images" / name, unet::eight_bit_image(s));
    if (i == 4) continue;  // no mask
    unet::Image mask{s.height, s.width, 1, s.mask};
    for (std::uint8_t& v : mask.pixels) v = v ? 255 : 0;
    if (i == 9) {
      mask.height -= 16;
      mask.pixels.resize(static_cast<std::size_t>(mask.height * mask.width));
    }
    unet::write_png(root / "masks" / name, mask);
  }
  return root;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: unet-workbench-screenshots OUTPUT_FOLDER [SUFFIX]\n");
    return 2;
  }
  const QString suffix = argc == 3 ? QString::fromLocal8Bit(argv[2]) : QString();
  const auto file = [&](const char* name) { return QString("%1%2.png").arg(QLatin1String(name), suffix); };
  const QDir out(QDir(QString::fromLocal8Bit(argv[1])).absolutePath());  // before the working folder changes
  QTemporaryDir home;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, home.path());
  QDir::setCurrent(home.path());
  QApplication::setWindowIcon(QIcon(":/unet-workbench-256.png"));

  // Unattended: a prompt would wait for no one, so a recorder declines whatever would be asked.
  unet::gui::MainWindow window({.demo = true, .prompter = std::make_shared<unet::gui::PromptRecorder>()});
  if (suffix.isEmpty()) window.resize(1560, 980);
  window.show();
  bool ok =
      waited(QTest::qWaitFor([&] { return window.estimates_shown() >= 1; }, 30000), "the first estimate");

  // The demo, a little shorter: 3 epochs of 256 images.
  unet::Config config = *window.config_panel()->config();
  config.data.synthetic_samples = 256;
  config.train.epochs = 3;
  window.config_panel()->set_config(config);
  window.start_training();
  auto* tabs = window.findChild<QTabWidget*>();
  ok = waited(QTest::qWaitFor([&] { return window.training_charts()->validation_points() >= 2; }, 600000),
              "two epochs") &&
       ok;
  ok = grab(window, out.filePath(file("training"))) && ok;
  tabs->setCurrentIndex(1);
  ok = grab(window, out.filePath(file("memory"))) && ok;
  ok = waited(QTest::qWaitFor([&] { return !window.training(); }, 600000), "the end of the run") && ok;
  if (window.run_summary()) window.run_summary()->close();  // the run's summary dialog, not in the pictures
  tabs->setCurrentIndex(3);
  ok = grab(window, out.filePath(file("predictions"))) && ok;

  // What a user sees when the settings do not fit: a 100 MiB cap, the remedies ranked.
  config.memory.cap_mib = 100;
  window.config_panel()->set_config(config);
  const int shown = window.estimates_shown();
  ok = waited(QTest::qWaitFor([&] { return window.estimates_shown() > shown; }, 30000),
              "the capped estimate") &&
       ok;
  tabs->setCurrentIndex(2);
  ok = grab(window, out.filePath(file("does-not-fit"))) && ok;

  // The Augmentation tab on the demo's cells, every sample rotated and some warped elastically.
  config.memory.cap_mib = 0;
  config.augment.rotation_p = 1;
  config.augment.elastic_p = 0.5;
  window.config_panel()->set_config(config);
  unet::gui::AugmentPreview& preview = *window.augment_preview();
  QSignalSpy drawn(&preview, &unet::gui::AugmentPreview::drawn);
  tabs->setCurrentWidget(&preview);
  ok = waited(QTest::qWaitFor([&] { return !drawn.isEmpty() && preview.tile_count() > 0; }, 60000),
              "the augmented samples") &&
       ok;
  ok = grab(window, out.filePath(file("augmentation"))) && ok;

  // The Dataset tab on a folder with two bad pairs, the first pair previewed.
  config.data.source = unet::DataSource::folder;
  config.data.path =
      write_folder_dataset(std::filesystem::path(home.path().toStdString()) / "cells").string();
  window.config_panel()->set_config(config);
  unet::gui::DatasetBrowser& browser = *window.dataset_browser();
  tabs->setCurrentWidget(&browser);
  ok = waited(QTest::qWaitFor([&] { return browser.pairs()->topLevelItemCount() > 0; }, 60000),
              "the dataset's scan") &&
       ok;
  browser.pairs()->setCurrentItem(browser.pairs()->topLevelItem(0));
  ok = waited(QTest::qWaitFor([&] { return !browser.preview().isNull(); }, 30000), "the preview") && ok;
  ok = grab(window, out.filePath(file("dataset"))) && ok;
  return ok ? 0 : 1;
}
