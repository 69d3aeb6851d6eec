// `unet-train predict`: one probability PNG per input image at the input's size, from a saved checkpoint,
// equal to what the in-memory model gives for the same images (to the 8-bit rounding of the PNG); multi-class
// models give one image per class; files that are not images are skipped by name.
#include <QProcess>
#include <QTemporaryDir>

#include <cstring>
#include <fstream>

#include "test_support.h"
#include "unet/data/synthetic.h"
#include "unet/infer/predictor.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/train/data_parallel.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

Config config_for(const QString& dir, int classes) {
  return config_from_json({{"model", {{"width", 4}, {"depth", 2}, {"classes", classes}}},
                           {"data", {{"image_size", {32, 32}}, {"synthetic_samples", 24}}},
                           {"train", {{"steps", 6}, {"batch_size", 4}}},
                           {"checkpoint", {{"dir", dir.toStdString()}}}});
}

// The in-memory model's probabilities for an image, computed directly: channel conversion, resize to the
// model's size, forward, probabilities, resize back.
std::vector<float> reference(const Config& c, const std::vector<float>& params, const Image& image) {
  DataParallelOptions o;
  o.spec = c.model;
  o.devices = {{DeviceKind::cpu, 0}};
  DataParallel dp(o);
  dp.set_parameters(params);
  const Image in = resize_image(convert_channels(image, c.model.in_channels, "test"), 32, 32);
  Backend& be = dp.backend(0);
  auto stream = be.create_stream();
  ExecContext ctx{be, *stream, DType::f32, Layout::nhwc};
  Tensor px = Tensor::empty(be.allocator(), Shape{1, 32, 32, c.model.in_channels}, DType::u8,
                            MemoryCategory::input_batch);
  be.copy_from_host(*stream, in.pixels.data(), px);
  const UNet::Pass pass = dp.model(0).forward(ctx, px, false);
  const std::int64_t k = c.model.classes;
  Tensor probs = Tensor::empty(be.allocator(), Shape{32 * 32 * k}, DType::f32, MemoryCategory::other);
  be.probabilities(*stream, pass.logits, probs);
  const auto host = test::to_host(be, *stream, probs);
  return resize_probabilities(host, 32, 32, k, image.height, image.width);
}

Image synthetic_image(std::int64_t h, std::int64_t w, std::int64_t channels, std::size_t index) {
  SyntheticCells cells({.count = 8, .height = h, .width = w, .channels = channels, .seed = 4});
  const Sample s = cells.get(index);
  return {s.height, s.width, s.channels, s.image};
}

}  // namespace

class TestPredict : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void predictMatchesTheInMemoryModel_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("binary") << 1;
    QTest::newRow("3 classes") << 3;
  }
  void predictMatchesTheInMemoryModel() {
    QFETCH(int, classes);
    QTemporaryDir dir;
    const Config c = config_for(dir.path() + "/run", classes);
    test::WatchedObserver watch;
    Trainer trainer(c, &watch);
    trainer.run();
    const std::vector<float> params = trainer.snapshot().parameters;

    // Inputs: the model's size, a larger non-square one, a small gray one (converted to RGB), a JPEG-less
    // folder with one file that is not an image.
    QVERIFY(QDir(dir.path()).mkpath("in"));
    const std::vector<std::pair<std::string, Image>> inputs{{"a.png", synthetic_image(32, 32, 3, 0)},
                                                            {"b.png", synthetic_image(45, 70, 3, 1)},
                                                            {"c.png", synthetic_image(20, 24, 1, 2)}};
    for (const auto& [name, image] : inputs)
      write_png((dir.path() + "/in/" + name.c_str()).toStdString(), image);
    std::ofstream((dir.path() + "/in/notes.txt").toStdString()) << "not an image";

    const test::ProcessResult r =
        test::unet_train({"predict", "--checkpoint", dir.path() + "/run/last.safetensors", "--input",
                          dir.path() + "/in", "--output", dir.path() + "/out"});
    QCOMPARE(r.code, 1);  // one file skipped
    QVERIFY2(r.err.contains("notes.txt") && r.err.contains("not a PNG or JPEG image"), qPrintable(r.err));
    QVERIFY2(r.out.contains(QString("wrote %1 probability image").arg(classes == 1 ? 3 : 6)),
             qPrintable(r.out));

    for (const auto& [name, image] : inputs) {
      const auto expected = reference(c, params, image);
      const std::string stem = name.substr(0, name.size() - 4);
      const int first = classes == 1 ? 0 : 1;
      for (int k = first; k < classes; ++k) {
        const std::string file = dir.path().toStdString() + "/out/" + stem +
                                 (classes == 1 ? "" : "_class" + std::to_string(k)) + ".png";
        const Image got = read_image(file);
        QCOMPARE(got.height, image.height);
        QCOMPARE(got.width, image.width);
        QCOMPARE(got.channels, 1);
        int worst = 0;
        for (std::int64_t i = 0; i < image.height * image.width; ++i) {
          const int want =
              static_cast<int>(std::lround(expected[static_cast<std::size_t>(i * classes + k)] * 255.0f));
          worst = std::max(worst, std::abs(want - got.pixels[static_cast<std::size_t>(i)]));
        }
        QVERIFY2(worst <= 1,
                 qPrintable(QString("%1 class %2: off by %3 levels").arg(name.c_str()).arg(k).arg(worst)));
      }
    }
    // No output for the background of a multi-class model, nor for the text file.
    QCOMPARE(QDir(dir.path() + "/out").entryList(QDir::Files).size(), classes == 1 ? 3 : 6);
  }

  // The segmentation a prediction makes, by hand: a binary model's foreground at the threshold (inclusive),
  // a multi-class model's most probable class (the lower index on a tie).
  void classMaskThresholdsOrTakesTheLikeliestClass() {
    Prediction binary{1, 4, 1, {0.2F, 0.5F, 0.7F, 0.49F}};
    QCOMPARE(class_mask(binary), (std::vector<std::uint8_t>{0, 1, 1, 0}));
    QCOMPARE(class_mask(binary, 0.3), (std::vector<std::uint8_t>{0, 1, 1, 1}));
    Prediction classes{1, 3, 3, {0.1F, 0.7F, 0.2F, 0.5F, 0.25F, 0.25F, 0.4F, 0.2F, 0.4F}};
    QCOMPARE(class_mask(classes, 0.99), (std::vector<std::uint8_t>{1, 0, 0}));
    Prediction wrong{2, 2, 1, {0.5F}};
    QVERIFY_THROWS_EXCEPTION(Error, class_mask(wrong));
  }

  void badArgumentsNameWhatIsMissing() {
    QCOMPARE(test::unet_train({"predict", "--input", "x", "--output", "y"}).code, 2);
    const test::ProcessResult r =
        test::unet_train({"predict", "--checkpoint", "c", "--input", "/nonexistent-dir", "--output", "y"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("/nonexistent-dir is not a folder"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestPredict)
#include "test_predict.moc"
