// Real datasets through the training pipeline: image and mask stay aligned under every augmentation the
// trainer draws; a folder dataset trains through `unet-train train` and learns; a dataset with bad files
// does not start in strict mode (every problem listed by path) and trains on the good samples with skip_bad.
#include <QProcess>
#include <QTemporaryDir>

#include <fstream>
#include <set>

#include "test_support.h"
#include "unet/config/config.h"
#include "unet/data/open_dataset.h"
#include "unet/data/synthetic.h"
#include "unet/io/image.h"
#include "unet/step/data_plan.h"

using namespace unet;

namespace {

// A folder dataset of synthetic cells: images/<i>.png (RGB) and masks/<i>.png (0/255).
void write_cells(const QString& root, int count, std::int64_t size) {
  QDir().mkpath(root + "/images");
  QDir().mkpath(root + "/masks");
  SyntheticCells cells(
      {.count = static_cast<std::size_t>(count), .height = size, .width = size, .channels = 3, .seed = 21});
  for (int i = 0; i < count; ++i) {
    const Sample s = cells.get(static_cast<std::size_t>(i));
    write_png((root + QString("/images/cell%1.png").arg(i)).toStdString(), eight_bit_image(s));
    std::vector<std::uint8_t> mask(s.mask.size());
    for (std::size_t k = 0; k < mask.size(); ++k) mask[k] = s.mask[k] ? 255 : 0;
    write_png((root + QString("/masks/cell%1.png").arg(i)).toStdString(), {s.height, s.width, 1, mask});
  }
}

std::vector<double> epoch_ious(const QString& metrics) {
  std::vector<double> ious;
  std::ifstream in(metrics.toStdString());
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("kind") == "epoch") ious.push_back(j.at("val_iou").get<double>());
  }
  return ious;
}

}  // namespace

class TestDataPipeline : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void imageAndMaskStayAlignedUnderAugmentation() {
    QTemporaryDir dir;
    // An asymmetric pattern: an L of bright pixels, and the mask marking exactly them, in a non-square image
    // (odd quarter turns are not drawn for it) and a square one (all 16 transforms).
    for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{16, 24}, {16, 16}}) {
      const QString root = dir.filePath(QString("ds%1x%2").arg(h).arg(w));
      QDir().mkpath(root + "/images");
      QDir().mkpath(root + "/masks");
      Image image{h, w, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(h * w * 3))};
      std::vector<std::uint8_t> mask(static_cast<std::size_t>(h * w));
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t x = 0; x < w; ++x) {
          const bool on =
              (x == 2 && y >= 1 && y <= 12) || (y == 12 && x >= 2 && x <= 9) || (x == 7 && y == 3);
          for (int c = 0; c < 3; ++c)
            image.pixels[static_cast<std::size_t>((y * w + x) * 3 + c)] =
                static_cast<std::uint8_t>(on ? 200 + c : 10 + (x + y) % 7);
          mask[static_cast<std::size_t>(y * w + x)] = on ? 255 : 0;
        }
      write_png((root + "/images/l.png").toStdString(), image);
      write_png((root + "/masks/l.png").toStdString(), {h, w, 1, mask});
      Config c = config_from_json(
          {{"model", {{"depth", 2}}},
           {"data", {{"source", "folder"}, {"path", root.toStdString()}, {"image_size", {h, w}}}}});
      const auto dataset = open_dataset(c);
      QCOMPARE(dataset->size(), std::size_t{1});
      std::set<std::string> seen;
      for (std::int64_t epoch = 0; epoch < 64; ++epoch) {
        const std::size_t index = 0;
        const std::int64_t position = epoch % 5;
        HostBatch b;
        assemble_batch(*dataset, {&index, 1}, {&position, 1}, epoch, true, 3, b);
        seen.insert(to_string(augmentation_for(3, epoch, position, h == w)));
        for (std::int64_t p = 0; p < h * w; ++p) {
          const bool bright = b.pixels[static_cast<std::size_t>(p * 3)] >= 200.0f / 255.0f;
          QVERIFY2(
              bright == (b.masks[static_cast<std::size_t>(p)] == 1),
              qPrintable(QString("epoch %1: pixel %2 of the image and its mask disagree").arg(epoch).arg(p)));
        }
      }
      QVERIFY2(seen.size() >= (h == w ? 12u : 4u),
               qPrintable(QString("%1 distinct transforms").arg(seen.size())));
    }
  }

  void folderDatasetTrainsAndLearns() {
    QTemporaryDir dir;
    test::LogWatch log;
    write_cells(dir.filePath("cells"), 48, 64);
    const test::ProcessResult r = test::unet_train({"train",
                                                    "--set",
                                                    "data.source=folder",
                                                    "--set",
                                                    "data.path=" + dir.filePath("cells"),
                                                    "--set",
                                                    "data.image_size=[64,64]",
                                                    "--set",
                                                    "data.val_fraction=0.25",
                                                    "--set",
                                                    "model.width=8",
                                                    "--set",
                                                    "model.depth=3",
                                                    "--set",
                                                    "train.epochs=8",
                                                    "--set",
                                                    "train.lr=0.003",
                                                    "--set",
                                                    "checkpoint.dir=run",
                                                    "--set",
                                                    "checkpoint.every_epochs=0"},
                                                   dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("48 samples") || r.out.contains("48 images"), qPrintable(r.out + r.err));
    const auto ious = epoch_ious(dir.filePath("run/metrics.jsonl"));
    QCOMPARE(ious.size(), std::size_t{8});
    qInfo("folder dataset: val_iou %.3f after the first epoch, %.3f after the last", ious.front(),
          ious.back());
    QVERIFY2(ious.back() > ious.front() + 0.2 && ious.back() > 0.6,
             qPrintable(QString("val_iou %1 -> %2").arg(ious.front()).arg(ious.back())));
  }

  void badFilesStopStrictRunsAndAreSkippedOnRequest() {
    QTemporaryDir dir;
    test::LogWatch log;
    const QString root = dir.filePath("cells");
    write_cells(root, 12, 32);
    // Four kinds of bad sample (five files), each to be named by path.
    std::ofstream((root + "/images/empty.png").toStdString());  // zero bytes
    std::ofstream((root + "/masks/empty.png").toStdString()) << "x";
    std::ofstream((root + "/images/notes.png").toStdString()) << "just some text";  // not an image
    std::ofstream((root + "/masks/notes.png").toStdString()) << "x";
    QFile::copy(root + "/images/cell0.png", root + "/images/orphan.png");  // no mask
    // No mask either, and a name that tries to forge a line of the report.
    QFile::copy(root + "/images/cell0.png", root + "/images/forged\nunet-train: all is well.png");
    {
      std::ifstream in((root + "/images/cell1.png").toStdString(), std::ios::binary);  // truncated
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      std::ofstream((root + "/images/cut.png").toStdString(), std::ios::binary)
          << bytes.substr(0, bytes.size() / 2);
      QFile::copy(root + "/masks/cell1.png", root + "/masks/cut.png");
    }
    const QStringList common = {"train",
                                "--set",
                                "data.source=folder",
                                "--set",
                                "data.path=" + root,
                                "--set",
                                "data.image_size=[32,32]",
                                "--set",
                                "model.width=4",
                                "--set",
                                "model.depth=2",
                                "--set",
                                "train.epochs=1",
                                "--set",
                                "checkpoint.dir=run"};
    const test::ProcessResult strict = test::unet_train(common, dir.path());
    log.record_output(strict.err);
    QCOMPARE(strict.code, 1);
    // Each bad file on a line of its own (the report is several lines, not one with literal "\n"s), and a
    // file name holding a newline cannot start a line of its own: it is escaped within its line.
    const QStringList lines = strict.err.split('\n', Qt::SkipEmptyParts);
    for (const char* name : {"images/empty.png", "images/notes.png", "images/orphan.png", "images/cut.png"}) {
      const bool own_line = std::any_of(lines.begin(), lines.end(), [&](const QString& line) {
        return line.startsWith("unet-train:   ") && line.contains(name);
      });
      QVERIFY2(own_line, qPrintable(QString(name) + " not on a line of its own in:\n" + strict.err));
    }
    QVERIFY2(!strict.err.contains("\\n  "), qPrintable(strict.err));
    QVERIFY2(strict.err.contains("forged\\nunet-train: all is well.png"), qPrintable(strict.err));
    for (const QString& line : lines)
      QVERIFY2(!line.startsWith("unet-train: all is well"), qPrintable(strict.err));
    QVERIFY(!QFile::exists(dir.filePath("run/metrics.jsonl")));  // nothing trained

    const test::ProcessResult skipping =
        test::unet_train(common + QStringList{"--set", "data.skip_bad=true"}, dir.path());
    log.record_output(skipping.err);
    QVERIFY2(skipping.code == 0, qPrintable(skipping.err));
    QVERIFY2((skipping.out + skipping.err).contains("5 skipped"), qPrintable(skipping.out + skipping.err));
    // 12 good samples: one for validation (12 x 0.1 rounds to 1), 11 to train on.
    QVERIFY2(skipping.out.contains("11 train / 1 validation"), qPrintable(skipping.out));
  }
};

QTEST_GUILESS_MAIN(TestDataPipeline)
#include "test_data_pipeline.moc"
