// `unet-train predict`: one probability PNG per input image at the input's size, from a saved checkpoint,
// equal to what the in-memory model gives for the same images (to the 8-bit rounding of the PNG); multi-class
// models give one image per class; files that are not images are skipped by name.
// Inference on real images (issue 13): tiled prediction at native scale against the whole image in one pass,
// the Gaussian blend and its weight map against their closed forms, flip test-time augmentation, padding and
// cropping of small and odd-sized images, mask outputs, and the predict flags' errors.
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include "object_csv.h"
#include "predict_support.h"
#include "test_support.h"
#include "unet/data/synthetic.h"
#include "unet/infer/predictor.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/model/unet.h"
#include "unet/objects/instance_extraction.h"
#include "unet/step/data_parallel.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

using test::structured_image;

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
  return eight_bit_image(s);
}

// A model of depth 2 (sizes in multiples of 4) whose training size was 32 x 32.
Config model_config(int classes) {
  return config_from_json(
      {{"model", {{"width", 4}, {"depth", 2}, {"classes", classes}}}, {"data", {{"image_size", {32, 32}}}}});
}

// The parameters' offsets and shapes in the slab, from a model built on the CPU.
struct SlabLayout {
  std::vector<std::int64_t> offsets;
  std::vector<Shape> shapes;
};
SlabLayout slab_layout(const Config& c) {
  const auto backend = create_backend(DeviceId{}, {});
  UNet model(c.model, backend->allocator());
  SlabLayout layout{model.offsets(), {}};
  for (const Param& p : model.params()) layout.shapes.push_back(p.spec.shape);
  return layout;
}

// The He-normal initial weights from `seed`, the head's weights scaled by 40: an untrained model says about
// 0.5 everywhere, this one is as sure of itself as a trained one (its probabilities span most of 0..1 and
// change from pixel to pixel), which the comparisons of tiled, whole and flipped predictions need to mean
// something.
std::vector<float> seeded_weights(const Config& c, std::uint64_t seed) {
  std::vector<float> slab = UNet::initial_slab(c.model, seed);
  const SlabLayout layout = slab_layout(c);
  const std::size_t head_weight = layout.offsets.size() - 2;
  for (std::int64_t i = 0; i < layout.shapes[head_weight].numel(); ++i)
    slab[static_cast<std::size_t>(layout.offsets[head_weight] + i)] *= 40.0F;
  return slab;
}

// Weights with every kernel made symmetric under both flips (each tap the mean of its four mirror images):
// the network is then flip-equivariant (zero padding, 2x2 pooling and 2x2 up-convolutions of even sizes all
// commute with flips), so that test-time flips cannot change what it says.
std::vector<float> flip_symmetric_weights(const Config& c, std::uint64_t seed) {
  std::vector<float> slab = seeded_weights(c, seed);
  const SlabLayout layout = slab_layout(c);
  for (std::size_t p = 0; p < layout.offsets.size(); ++p) {
    const Shape& shape = layout.shapes[p];
    if (shape.rank != 4) continue;
    const std::int64_t kh = shape[2], kw = shape[3], kernels = shape[0] * shape[1];
    for (std::int64_t k = 0; k < kernels; ++k) {
      float* w = slab.data() + layout.offsets[p] + k * kh * kw;
      std::vector<float> mean(static_cast<std::size_t>(kh * kw));
      for (std::int64_t a = 0; a < kh; ++a)
        for (std::int64_t b = 0; b < kw; ++b)
          mean[static_cast<std::size_t>(a * kw + b)] =
              (w[a * kw + b] + w[(kh - 1 - a) * kw + b] + w[a * kw + kw - 1 - b] +
               w[(kh - 1 - a) * kw + kw - 1 - b]) /
              4.0F;
      std::copy(mean.begin(), mean.end(), w);
    }
  }
  return slab;
}

// Weights that make the model say the same at every pixel: all zero but the head's biases, so that the logits
// are those biases wherever the image is.
std::vector<float> constant_output_weights(const Config& c, const std::vector<float>& head_biases) {
  std::vector<float> slab(seeded_weights(c, 1).size(), 0.0F);
  const SlabLayout layout = slab_layout(c);
  std::copy(head_biases.begin(), head_biases.end(), slab.begin() + layout.offsets.back());
  return slab;
}

// Mirroring as numpy.pad's "reflect" means it, by walking: a step past either end turns back, the end pixel
// not repeated.
std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

Image pad_by_hand(const Image& image, std::int64_t h, std::int64_t w, bool mirror) {
  Image out{h, w, image.channels,
            std::vector<std::uint8_t>(static_cast<std::size_t>(h * w * image.channels))};
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x) {
      if (!mirror && (y >= image.height || x >= image.width)) continue;
      const std::int64_t sy = reflect(y, image.height), sx = reflect(x, image.width);
      for (std::int64_t ch = 0; ch < image.channels; ++ch)
        out.pixels[static_cast<std::size_t>((y * w + x) * image.channels + ch)] =
            image.pixels[static_cast<std::size_t>((sy * image.width + sx) * image.channels + ch)];
    }
  return out;
}

Image flipped(const Image& image, bool left_right, bool top_bottom) {
  Image out = image;
  for (std::int64_t y = 0; y < image.height; ++y)
    for (std::int64_t x = 0; x < image.width; ++x) {
      const std::int64_t sy = top_bottom ? image.height - 1 - y : y;
      const std::int64_t sx = left_right ? image.width - 1 - x : x;
      for (std::int64_t ch = 0; ch < image.channels; ++ch)
        out.pixels[static_cast<std::size_t>((y * image.width + x) * image.channels + ch)] =
            image.pixels[static_cast<std::size_t>((sy * image.width + sx) * image.channels + ch)];
    }
  return out;
}

std::vector<float> flipped(const Prediction& p, bool left_right, bool top_bottom) {
  std::vector<float> out(p.probabilities.size());
  for (std::int64_t y = 0; y < p.height; ++y)
    for (std::int64_t x = 0; x < p.width; ++x) {
      const std::int64_t sy = top_bottom ? p.height - 1 - y : y, sx = left_right ? p.width - 1 - x : x;
      for (std::int64_t k = 0; k < p.channels; ++k)
        out[static_cast<std::size_t>((y * p.width + x) * p.channels + k)] =
            p.probabilities[static_cast<std::size_t>((sy * p.width + sx) * p.channels + k)];
    }
  return out;
}

// The largest and the mean absolute difference of two maps of one size.
struct Difference {
  double max = 0, mean = 0;
};
Difference difference(const std::vector<float>& a, const std::vector<float>& b) {
  Difference d;
  if (a.size() != b.size()) return {1e30, 1e30};
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    d.max = std::max(d.max, e);
    d.mean += e;
  }
  d.mean /= static_cast<double>(std::max<std::size_t>(1, a.size()));
  return d;
}

PredictOptions options_of(PredictMode mode, PredictAugmentation augmentation = PredictAugmentation::none) {
  PredictOptions o;
  o.mode = mode;
  o.augmentation = augmentation;
  return o;
}

Prediction predict_one(Predictor& predictor, const Image& image, const PredictOptions& options) {
  return predictor.predict({image}, {"test image"}, options).front();
}

// A tiny model initialised into `dir` (width 4, depth 2, 32x32, `extra` --set flags) and an empty `in` folder
// beside it, for the tests that run predict end to end; false (a failure recorded) when init fails.
bool tiny_model_and_inputs(const QTemporaryDir& dir, const QString& checkpoint,
                           const QStringList& extra = {}) {
  const test::ProcessResult r =
      test::unet_train(QStringList{"init", "--set", "model.width=4", "--set", "model.depth=2", "--set",
                                   "data.image_size=[32,32]", "--out", checkpoint} +
                       extra);
  HELPER_VERIFY2(r.code == 0, qPrintable(r.err));
  HELPER_VERIFY(QDir(dir.path()).mkpath("in"));
  return true;
}

// predict's _objects.csv read back: the header checked, each row's numbers parsed as written.
ObjectTable read_objects_csv(const std::filesystem::path& path) {
  const std::vector<std::byte> bytes = test::read_all(path);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ObjectTable table;
  std::size_t start = 0;
  bool header = true;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) throw std::runtime_error(path.string() + ": a line without its \\n");
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (header) {
      if (line != "id,area,centroid_y,centroid_x,y0,x0,y1,x1,mean_probability")
        throw std::runtime_error(path.string() + ": header " + line);
      header = false;
      continue;
    }
    const std::vector<std::string> f = test::split_fields(line);
    if (f.size() != 9) throw std::runtime_error(path.string() + ": " + line);
    table.push_back(test::object_row(f));
  }
  return table;
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
                          dir.path() + "/in", "--output", dir.path() + "/out", "--mode", "resize"});
    QCOMPARE(r.code, 1);  // one file skipped
    QVERIFY2(r.err.contains("notes.txt") && r.err.contains("not a PNG, JPEG or TIFF image"),
             qPrintable(r.err));
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

  // (a) Tiling at native scale against the whole image in one pass. They differ at all because every tile is
  // zero-padded by the convolutions at its own borders: a pixel near a tile's edge is computed from a
  // receptive field that is partly zeros where the whole image has real neighbours. This model's receptive
  // field is about 45 pixels (two 3x3 convolutions at strides 1, 2, 4, 2, 1, the poolings and
  // up-convolutions), so a tile of the training size (32) never holds one whole; a 64-pixel tile does, around
  // its centre, where the Gaussian weights give it the say. (Tiles start at multiples of 2^depth = 4, as the
  // whole image's pooling windows do; unaligned, the mean difference was 0.085 at tile 64.) Measured (CPU,
  // seeded weights below, a 101 x 141 image whose probabilities span 0.25..0.99):
  //   tile 64, overlap 0.5, Gaussian: largest difference 0.067, mean 0.0017  -> tolerance 0.1, 0.005
  //   tile 64, overlap 0.5, uniform:  largest 0.29, mean 0.024 (tile borders count as much as centres)
  //   tile 32, overlap 0.5, Gaussian: largest difference 0.45, mean 0.037    -> tolerance mean 0.06
  void tiledPredictionEqualsTheWholeImage() {
    const Config c = model_config(1);
    Predictor predictor(c, seeded_weights(c, 7), DeviceId{});
    const Image image = structured_image(101, 141, 3);
    const Prediction whole = predict_one(predictor, image, options_of(PredictMode::whole));
    QCOMPARE(whole.height, 101);
    QCOMPARE(whole.width, 141);
    const auto [low, high] = std::minmax_element(whole.probabilities.begin(), whole.probabilities.end());
    QVERIFY2(*high - *low > 0.5,
             "the model says nearly the same everywhere: the comparison would mean little");

    PredictOptions tiled = options_of(PredictMode::tiled);
    tiled.tile_height = tiled.tile_width = 64;
    int progress_calls = 0;
    PredictProgress last;
    const PredictControl control{.on_image =
                                     [&](const PredictProgress& p) {
                                       ++progress_calls;
                                       last = p;
                                     },
                                 .stop = {}};
    const Prediction by_tiles = predictor.predict({image}, {"large"}, tiled, control).front();
    QCOMPARE(progress_calls, 1);
    QCOMPARE(last.mode, PredictMode::tiled);
    // The canvas 104 x 144; tiles of 64 at steps of at most 32, in units of 4: rows 0, 20, 40; columns 0,
    // 28, 52, 80.
    QCOMPARE(last.tiles, 3 * 4);
    const Difference d = difference(by_tiles.probabilities, whole.probabilities);
    qInfo("tile 64, overlap 0.5: largest difference %.4f, mean %.5f", d.max, d.mean);
    QVERIFY2(d.max < 0.1 && d.mean < 0.005, qPrintable(QString("max %1 mean %2").arg(d.max).arg(d.mean)));

    tiled.gaussian = false;
    const Difference uniform =
        difference(predict_one(predictor, image, tiled).probabilities, whole.probabilities);
    qInfo("tile 64, uniform blend: largest difference %.4f, mean %.5f", uniform.max, uniform.mean);
    QVERIFY(uniform.mean > d.mean);

    // The default tile, the training size, is smaller than the receptive field: further off, still close.
    const Difference small = difference(
        predict_one(predictor, image, options_of(PredictMode::tiled)).probabilities, whole.probabilities);
    qInfo("tile 32, overlap 0.5: largest difference %.4f, mean %.5f", small.max, small.mean);
    QVERIFY2(small.mean < 0.06, qPrintable(QString("mean %1").arg(small.mean)));
  }

  // (b) Blending identical values gives that value: a model that says the same at every pixel (zero weights,
  // the head's biases as logits), tiled with overlap, returns its single-tile probabilities everywhere, to
  // the float rounding of the weighted sums (each a few ulps).
  void blendingConstantTilesReturnsTheConstant_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("binary") << 1;
    QTest::newRow("3 classes") << 3;
  }
  void blendingConstantTilesReturnsTheConstant() {
    QFETCH(int, classes);
    const Config c = model_config(classes);
    const std::vector<float> biases =
        classes == 1 ? std::vector<float>{0.3F} : std::vector<float>{0.1F, 0.7F, -0.4F};
    Predictor predictor(c, constant_output_weights(c, biases), DeviceId{});
    // By hand: the sigmoid or softmax of the biases.
    std::vector<double> expected;
    if (classes == 1) {
      expected.push_back(1.0 / (1.0 + std::exp(-0.3)));
    } else {
      double total = 0;
      for (const float b : biases) total += std::exp(double(b));
      for (const float b : biases) expected.push_back(std::exp(double(b)) / total);
    }
    for (const double overlap : {0.0, 0.5, 0.75}) {
      PredictOptions o = options_of(PredictMode::tiled);
      o.overlap = overlap;
      const Prediction p = predict_one(predictor, structured_image(77, 115, 3), o);
      QCOMPARE(p.probabilities.size(), std::size_t(77 * 115 * classes));
      double worst = 0;
      for (std::size_t i = 0; i < p.probabilities.size(); ++i)
        worst = std::max(worst, std::fabs(p.probabilities[i] - expected[i % expected.size()]));
      QVERIFY2(worst < 1e-6, qPrintable(QString("overlap %1: off by %2").arg(overlap).arg(worst)));
    }
  }

  // (c) The weight map and the tile positions against their closed forms.
  void gaussianWeightsAndTilePositions() {
    const std::int64_t h = 32, w = 48;
    const std::vector<float> map = gaussian_importance(h, w);
    QCOMPARE(map.size(), std::size_t(h * w));
    float smallest = 1;
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x) {
        const double dy = y + 0.5 - h / 2.0, dx = x + 0.5 - w / 2.0;
        const double sy = h / 8.0, sx = w / 8.0;
        const double want = std::exp(-dy * dy / (2 * sy * sy)) * std::exp(-dx * dx / (2 * sx * sx));
        const float got = map[static_cast<std::size_t>(y * w + x)];
        QVERIFY2(std::fabs(got - want) <= 1e-6 * want + 1e-12,
                 qPrintable(QString("(%1, %2): %3, want %4").arg(y).arg(x).arg(got).arg(want)));
        smallest = std::min(smallest, got);
      }
    QVERIFY2(smallest > 0, "a zero weight: a pixel only that tile covers would have no prediction");
    QCOMPARE(smallest, map.front());                              // the corners weigh least
    QVERIFY(map[static_cast<std::size_t>(15 * w + 23)] > 0.98F);  // next to the centre: exp(-1/128 - 1/288)

    using Starts = std::vector<std::int64_t>;
    QCOMPARE(tile_starts(32, 32, 0.5), Starts({0}));
    QCOMPARE(tile_starts(64, 32, 0.5), Starts({0, 16, 32}));
    QCOMPARE(tile_starts(64, 32, 0.0), Starts({0, 32}));
    QCOMPARE(tile_starts(65, 32, 0.0), Starts({0, 17, 33}));     // steps evened out: 17 and 16, not 32 and 1
    QCOMPARE(tile_starts(68, 32, 0.0, 4), Starts({0, 20, 36}));  // 9 units of 4 in 2 steps: 4.5, 4
    // 101 pixels, step at most 16: ceil(69 / 16) = 5 steps of 13.8, rounded.
    QCOMPARE(tile_starts(101, 32, 0.5), Starts({0, 14, 28, 41, 55, 69}));
    // Aligned to 4: 104 pixels, 18 units of span, steps of at most 4 units: 5 steps of 3.6 units, rounded.
    QCOMPARE(tile_starts(104, 32, 0.5, 4), Starts({0, 16, 28, 44, 56, 72}));
    QCOMPARE(tile_starts(40, 32, 0.9), Starts({0, 3, 5, 8}));  // step at most 3.2 pixels
  }

  // (d) Flip test-time augmentation. A flip-equivariant model (symmetric kernels) says of a flipped image the
  // flipped answer, so averaging its four un-flipped answers changes nothing: flips of any image, a
  // flip-symmetric one or not, equal no augmentation. An ordinary model of an asymmetric image says something
  // different of each flip: the augmented result must be the mean of the four answers un-flipped by hand,
  // which it would not be if the outputs were averaged as they come back.
  void flipAugmentationUndoesItsFlips() {
    const Config c = model_config(1);
    {
      Predictor symmetric(c, flip_symmetric_weights(c, 3), DeviceId{});
      // The mirror image of a structured one, joined to it: flip-symmetric left to right.
      const Image half = structured_image(64, 48, 3);
      Image symmetric_image{64, 96, 3, std::vector<std::uint8_t>(64 * 96 * 3)};
      const Image mirror = flipped(half, true, false);
      for (std::int64_t y = 0; y < 64; ++y) {
        std::memcpy(&symmetric_image.pixels[static_cast<std::size_t>(y * 96 * 3)],
                    &half.pixels[static_cast<std::size_t>(y * 48 * 3)], 48 * 3);
        std::memcpy(&symmetric_image.pixels[static_cast<std::size_t>((y * 96 + 48) * 3)],
                    &mirror.pixels[static_cast<std::size_t>(y * 48 * 3)], 48 * 3);
      }
      for (const Image& image : {symmetric_image, structured_image(70, 90, 3)})
        for (const PredictMode mode : {PredictMode::tiled, PredictMode::whole, PredictMode::resize}) {
          const Prediction plain = predict_one(symmetric, image, options_of(mode));
          const Prediction augmented =
              predict_one(symmetric, image, options_of(mode, PredictAugmentation::flips));
          const Difference d = difference(plain.probabilities, augmented.probabilities);
          QVERIFY2(d.max < 1e-5, qPrintable(QString("%1 %2x%3: off by %4")
                                                .arg(to_string(mode))
                                                .arg(image.width)
                                                .arg(image.height)
                                                .arg(d.max)));
        }
    }
    Predictor predictor(c, seeded_weights(c, 11), DeviceId{});
    const Image image = structured_image(64, 96, 3);  // multiples of 4: no padding, whose side would not flip
    std::vector<float> by_hand(static_cast<std::size_t>(64 * 96), 0.0F);
    double spread = 0;
    const Prediction plain = predict_one(predictor, image, options_of(PredictMode::whole));
    for (const auto& [left_right, top_bottom] :
         {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const Prediction p =
          predict_one(predictor, flipped(image, left_right, top_bottom), options_of(PredictMode::whole));
      const std::vector<float> back = flipped(p, left_right, top_bottom);
      spread = std::max(spread, difference(back, plain.probabilities).max);
      for (std::size_t i = 0; i < by_hand.size(); ++i) by_hand[i] += back[i] / 4.0F;
    }
    QVERIFY2(spread > 0.05,
             "the model's answers to the flips hardly differ: the test would not see a missed un-flip");
    const Prediction augmented =
        predict_one(predictor, image, options_of(PredictMode::whole, PredictAugmentation::flips));
    const Difference d = difference(augmented.probabilities, by_hand);
    QVERIFY2(d.max < 1e-5, qPrintable(QString("off by %1").arg(d.max)));
  }

  // (e) Images smaller than a tile, and sizes no multiple of anything, come back at their own size: the
  // prediction is the top-left corner of the prediction of the image padded by hand (mirrored or black) to
  // the next multiple of 2^depth, in both modes (a tile is never larger than the padded image, issue 23).
  void smallAndOddImagesAreCroppedBack_data() {
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<bool>("mirror");
    QTest::newRow("13x21 reflect") << 13 << 21 << true;
    QTest::newRow("13x21 zero") << 13 << 21 << false;
    QTest::newRow("1x7 reflect") << 1 << 7 << true;
    QTest::newRow("45x70 reflect") << 45 << 70 << true;
    QTest::newRow("45x70 zero") << 45 << 70 << false;
  }
  void smallAndOddImagesAreCroppedBack() {
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(bool, mirror);
    const Config c = model_config(3);
    Predictor predictor(c, seeded_weights(c, 5), DeviceId{});
    const Image image = structured_image(height, width, 3);
    for (const PredictMode mode : {PredictMode::tiled, PredictMode::whole}) {
      PredictOptions o = options_of(mode);
      o.padding = mirror ? PredictPadding::reflect : PredictPadding::zero;
      const Prediction p = predict_one(predictor, image, o);
      QCOMPARE(p.height, height);
      QCOMPARE(p.width, width);
      QCOMPARE(p.channels, 3);
      QCOMPARE(p.probabilities.size(), std::size_t(height * width * 3));
      // The canvas the mode pads to, by hand: the next multiples of 4 (the tile shrinks to it where larger).
      const std::int64_t ph = (height + 3) / 4 * 4, pw = (width + 3) / 4 * 4;
      const Image canvas = pad_by_hand(image, ph, pw, mirror);
      const Prediction full = predict_one(predictor, canvas, o);  // already the right size: padded no more
      std::vector<float> corner;
      for (std::int64_t y = 0; y < height; ++y)
        corner.insert(corner.end(), full.probabilities.begin() + y * pw * 3,
                      full.probabilities.begin() + (y * pw + width) * 3);
      const Difference d = difference(p.probabilities, corner);
      QVERIFY2(d.max < 1e-6, qPrintable(QString("%1: off by %2").arg(to_string(mode)).arg(d.max)));
    }
  }

  // The auto rule: resize (as before) for an image no larger than the training size, tiles for a larger one.
  void autoResizesSmallImagesAndTilesLargeOnes() {
    const Config c = model_config(1);
    Predictor predictor(c, seeded_weights(c, 2), DeviceId{});
    const PredictOptions automatic;
    QCOMPARE(automatic.mode, PredictMode::automatic);
    QCOMPARE(predictor.mode_for(32, 32, automatic), PredictMode::resize);
    QCOMPARE(predictor.mode_for(20, 32, automatic), PredictMode::resize);
    QCOMPARE(predictor.mode_for(33, 32, automatic), PredictMode::tiled);
    QCOMPARE(predictor.mode_for(20, 200, automatic), PredictMode::tiled);
    QCOMPARE(predictor.mode_for(200, 200, options_of(PredictMode::resize)), PredictMode::resize);
    for (const Image& image : {structured_image(24, 30, 3), structured_image(50, 40, 3)}) {
      const PredictMode expected =
          image.height <= 32 && image.width <= 32 ? PredictMode::resize : PredictMode::tiled;
      QCOMPARE(predict_one(predictor, image, automatic).probabilities,
               predict_one(predictor, image, options_of(expected)).probabilities);
    }
  }

  // Several images of several sizes in one call, batched across the call, give what each alone gives; a stop
  // requested from the progress callback ends the call before the next forward pass, with the first images.
  void batchesAcrossImagesAndStopsOnRequest() {
    const Config c = model_config(1);
    Predictor predictor(c, seeded_weights(c, 9), DeviceId{});
    const std::vector<Image> images{structured_image(32, 32, 3), structured_image(20, 28, 3),
                                    structured_image(70, 50, 3), structured_image(31, 30, 3)};
    const std::vector<std::string> names{"a", "b", "c", "d"};
    PredictOptions o;
    o.batch = 3;
    o.augmentation = PredictAugmentation::flips;
    const std::vector<Prediction> together = predictor.predict(images, names, o);
    QCOMPARE(together.size(), images.size());
    for (std::size_t i = 0; i < images.size(); ++i) {
      const Difference d =
          difference(together[i].probabilities, predict_one(predictor, images[i], o).probabilities);
      QVERIFY2(d.max < 1e-6, qPrintable(QString("image %1: off by %2").arg(i).arg(d.max)));
    }

    std::stop_source stop;
    std::vector<std::size_t> reported;
    const PredictControl control{.on_image =
                                     [&](const PredictProgress& p) {
                                       reported.push_back(p.image);
                                       QCOMPARE(p.images, images.size());
                                       if (p.image == 2) stop.request_stop();
                                     },
                                 .stop = stop.get_token()};
    o.batch = 1;
    const std::vector<Prediction> first = predictor.predict(images, names, o, control);
    QCOMPARE(reported, (std::vector<std::size_t>{0, 1, 2}));
    QCOMPARE(first.size(), std::size_t(3));
    QCOMPARE(first[2].probabilities, together[2].probabilities);
  }

  void optionsOutOfRangeAreRefused() {
    const UNetSpec spec = model_config(1).model;
    auto refused = [&](PredictOptions o, const char* key) {
      try {
        validate(o, spec);
      } catch (const ConfigError& e) {
        return e.key() == key;
      }
      return false;
    };
    PredictOptions o;
    validate(o, spec);
    o.tile_height = o.tile_width = 30;
    QVERIFY(refused(o, "tile"));
    o.tile_height = 32;
    o.tile_width = 0;
    QVERIFY(refused(o, "tile"));
    o = {};
    o.overlap = 0.95;
    QVERIFY(refused(o, "overlap"));
    o.overlap = -0.1;
    QVERIFY(refused(o, "overlap"));
    o.overlap = std::nan("");
    QVERIFY(refused(o, "overlap"));
    o = {};
    o.batch = 0;
    QVERIFY(refused(o, "batch"));
    QVERIFY_THROWS_EXCEPTION(ConfigError, predict_mode_from_string("tiles", "--mode"));
    QCOMPARE(predict_mode_from_string("auto", "--mode"), PredictMode::automatic);
  }

  // The predict flags end to end: a mask per image from tiles with flips, equal to the engine's for the
  // same options; a progress line per image on stderr; a second run refuses to replace the masks unless
  // --overwrite.
  void predictWritesMasksFromTilesAndRefusesToOverwrite() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors");
    QVERIFY(tiny_model_and_inputs(dir, checkpoint));
    test::ProcessResult r;
    const std::vector<std::pair<std::string, Image>> inputs{{"a.png", structured_image(45, 70, 3)},
                                                            {"b.png", structured_image(20, 24, 3)}};
    for (const auto& [name, image] : inputs)
      write_png(dir.filePath("in/" + QString::fromStdString(name)).toStdString(), image);
    const QStringList args{"predict",
                           "--checkpoint",
                           checkpoint,
                           "--input",
                           dir.filePath("in"),
                           "--output",
                           dir.filePath("out"),
                           "--mode",
                           "tiled",
                           "--overlap",
                           "0.25",
                           "--tta",
                           "flips",
                           "--padding",
                           "zero",
                           "--output-kind",
                           "mask",
                           "--threshold",
                           "0.4"};
    r = test::unet_train(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("wrote 2 mask images"), qPrintable(r.out));
    // 45 x 70 padded to 48 x 72: rows 0, 16; columns at most 24 apart in units of 4: 0, 20, 40.
    QVERIFY2(r.err.contains("[1/2] a.png 70x45 in 6 tiles, 4 flips each"), qPrintable(r.err));
    QVERIFY2(r.err.contains("[2/2] b.png 24x20 in 1 tile, 4 flips each"), qPrintable(r.err));

    const Checkpoint loaded = load_checkpoint(checkpoint.toStdString());
    Predictor predictor(loaded);
    PredictOptions o = options_of(PredictMode::tiled, PredictAugmentation::flips);
    o.overlap = 0.25;
    o.padding = PredictPadding::zero;
    o.batch = loaded.config.train.batch_size;
    for (const auto& [name, image] : inputs) {
      const std::string stem = name.substr(0, name.size() - 4);
      const Image written =
          read_image(dir.filePath("out/" + QString::fromStdString(stem) + "_mask.png").toStdString());
      QCOMPARE(written, mask_image(predict_one(predictor, image, o), 0.4));
    }
    QCOMPARE(QDir(dir.filePath("out")).entryList(QDir::Files).size(), 2);

    const auto before = test::read_all(dir.filePath("out/a_mask.png").toStdString());
    r = test::unet_train(args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("a_mask.png exists (and 1 more of the outputs)") && r.err.contains("--overwrite"),
             qPrintable(r.err));
    QVERIFY(test::read_all(dir.filePath("out/a_mask.png").toStdString()) == before);
    QStringList again = args;
    again[again.indexOf("0.4")] = "0.9";
    r = test::unet_train(again + QStringList{"--overwrite"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(test::read_all(dir.filePath("out/a_mask.png").toStdString()) != before);

    // The default, auto: b (no larger than 32 x 32) is resized as it always was, a (larger) tiled with the
    // default overlap 0.5: rows 0, 16; columns at most 16 apart: 0, 12, 28, 40.
    r = test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("auto")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("[1/2] a.png 70x45 in 8 tiles") &&
                 r.err.contains("[2/2] b.png 24x20 resized to 32x32"),
             qPrintable(r.err));
  }

  // (f) Each bad flag value is refused with exit code 2, naming the flag and the value, before anything is
  // written.
  void predictFlagErrorsNameTheFlag_data() {
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("message");
    QTest::newRow("mode") << QStringList{"--mode", "tiles"}
                          << "--mode: must be one of auto, resize, tiled, whole, got 'tiles'";
    QTest::newRow("tile not a multiple")
        << QStringList{"--tile", "30"}
        << "--tile: each side must be a multiple of 2^depth = 4 (model.depth 2) in "
           "4..16384, got 30";
    QTest::newRow("tile text") << QStringList{"--tile", "32x"}
                               << "--tile: must be N or HxW pixels, such as 256 or 256x512, got '32x'";
    QTest::newRow("tile zero") << QStringList{"--tile", "0x32"} << "--tile: give both sides or neither";
    QTest::newRow("overlap range") << QStringList{"--overlap", "0.95"}
                                   << "--overlap: must be in 0..0.9, got 0.95";
    QTest::newRow("overlap text") << QStringList{"--overlap", "half"}
                                  << "--overlap: must be a number, got 'half'";
    QTest::newRow("tta") << QStringList{"--tta", "rotate"}
                         << "--tta: must be one of none, flips, got 'rotate'";
    QTest::newRow("padding") << QStringList{"--padding", "edge"}
                             << "--padding: must be one of reflect, zero, got 'edge'";
    QTest::newRow("blend") << QStringList{"--blend", "box"}
                           << "--blend: must be one of gaussian, uniform, got 'box'";
    QTest::newRow("output kind") << QStringList{"--output-kind", "jpeg"}
                                 << "--output-kind: must be one of probability, mask, labels, got 'jpeg'";
    QTest::newRow("threshold without mask")
        << QStringList{"--threshold", "0.3"} << "--threshold: applies to --output-kind mask";
    QTest::newRow("threshold range") << QStringList{"--output-kind", "mask", "--threshold", "1.5"}
                                     << "--threshold: must be in 0..1, got 1.5";
    QTest::newRow("labels format") << QStringList{"--labels-format", "tif"}
                                   << "--labels-format: must be one of png, tiff, got 'tif'";
    QTest::newRow("labels format of a mask")
        << QStringList{"--output-kind", "mask", "--labels-format", "tiff"}
        << "--labels-format: applies to --output-kind labels";
    QTest::newRow("tile with resize") << QStringList{"--mode", "resize", "--tile", "32"}
                                      << "--tile: applies to tiles; --mode resize makes none";
    QTest::newRow("overlap with whole") << QStringList{"--mode", "whole", "--overlap", "0.5"}
                                        << "--overlap: applies to tiles; --mode whole makes none";
    QTest::newRow("given twice") << QStringList{"--mode", "tiled", "--mode", "whole"} << "--mode given twice";
    QTest::newRow("no value") << QStringList{"--tile"} << "--tile needs a value";
    // Keys predict does not read are refused, not accepted and ignored (issue 23, section 4): a model that is
    // not the checkpoint's, a precision predict does not compute in.
    QTest::newRow("another model") << QStringList{"--set", "model.classes=3"}
                                   << "model.classes: predict runs the checkpoint's model";
    QTest::newRow("a precision") << QStringList{"--set", "precision=mixed-fp16"}
                                 << "precision: does not affect predict";
    QTest::newRow("a training key") << QStringList{"--set", "train.lr=0.5"}
                                    << "train.lr: does not affect predict";
  }
  void predictFlagErrorsNameTheFlag() {
    QFETCH(QStringList, flags);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors");
    QVERIFY(tiny_model_and_inputs(dir, checkpoint));
    test::ProcessResult r;
    write_png(dir.filePath("in/a.png").toStdString(), structured_image(40, 40, 3));
    r = test::unet_train(QStringList{"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"),
                                     "--output", dir.filePath("out")} +
                         flags);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
    QVERIFY(!QDir(dir.filePath("out")).exists());
  }

  // A model of several classes has no threshold: its mask is the most probable class.
  void thresholdIsRefusedForSeveralClasses() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors");
    QVERIFY(tiny_model_and_inputs(dir, checkpoint, {"--set", "model.classes=3"}));
    test::ProcessResult r;
    write_png(dir.filePath("in/a.png").toStdString(), structured_image(40, 40, 3));
    const QStringList args{"predict",  "--checkpoint",      checkpoint,      "--input", dir.filePath("in"),
                           "--output", dir.filePath("out"), "--output-kind", "mask"};
    r = test::unet_train(args + QStringList{"--threshold", "0.5"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--threshold: the model has 3 classes"), qPrintable(r.err));
    r = test::unet_train(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const Image mask = read_image(dir.filePath("out/a_mask.png").toStdString());
    QCOMPARE(mask.height, 40);
    QVERIFY(std::all_of(mask.pixels.begin(), mask.pixels.end(), [](std::uint8_t v) { return v < 3; }));
  }

  // Inputs whose outputs would share a name (x.png and x.jpg are written as x.png.png and x.jpg.png, which an
  // input x.png.png would be too) are refused before anything is written, naming both: one output must not
  // silently replace another (issue 23, section 5).
  void outputsThatWouldShareANameAreRefused() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors");
    QVERIFY(tiny_model_and_inputs(dir, checkpoint));
    test::ProcessResult r;
    for (const char* name : {"x.png", "x.jpg.png", "x.png.png"})
      write_png(dir.filePath(QString("in/") + name).toStdString(), structured_image(32, 32, 3));
    QVERIFY(QFile::rename(dir.filePath("in/x.jpg.png"), dir.filePath("in/x.jpg")));  // a PNG named .jpg
    r = test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("out")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("x.png and x.png.png would both be written as x.png.png"), qPrintable(r.err));
    QVERIFY(!QDir(dir.filePath("out")).exists());
    // Without the clash every input gets its own output.
    QVERIFY(QFile::remove(dir.filePath("in/x.png.png")));
    r = test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("out")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(QFile::exists(dir.filePath("out/x.png.png")) && QFile::exists(dir.filePath("out/x.jpg.png")));
  }

  // A task-instances checkpoint (boundary target, 3 classes; weights as sure as a trained model's) predicts
  // its objects by default: per image a 16-bit label PNG whose ids are extract_objects' of the same
  // probabilities at the checkpoint's instances.* (the maps made here from the channels: seed p1, foreground
  // p1 + p2), and a CSV whose rows read back equal describe_objects of those labels over the foreground; the
  // per-image line counts the objects; the outputs are not replaced without --overwrite.
  void instanceCheckpointPredictsLabelsAndObjects() {
    QTemporaryDir dir;
    const QString init = dir.filePath("init.safetensors"), checkpoint = dir.filePath("instances.safetensors");
    QVERIFY(tiny_model_and_inputs(
        dir, init,
        {"--set", "task=instances", "--set", "model.classes=3", "--set", "instances.seed_threshold=0.6",
         "--set", "instances.foreground_threshold=0.4", "--set", "instances.min_size=3"}));
    Checkpoint confident = load_checkpoint(init.toStdString());
    confident.parameters = seeded_weights(confident.config, 3);
    save_checkpoint(checkpoint.toStdString(), confident, CheckpointKind::weights_only);
    const std::vector<std::pair<std::string, Image>> inputs{{"a.png", structured_image(45, 70, 3)},
                                                            {"b.png", structured_image(24, 28, 3)}};
    for (const auto& [name, image] : inputs)
      write_png(dir.filePath("in/" + QString::fromStdString(name)).toStdString(), image);
    const QStringList args{"predict",          "--checkpoint", checkpoint,         "--input",
                           dir.filePath("in"), "--output",     dir.filePath("out")};
    test::ProcessResult r = test::unet_train(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("wrote 2 label images and 2 object tables"), qPrintable(r.out));
    QCOMPARE(QDir(dir.filePath("out")).entryList(QDir::Files).size(), 4);

    const Checkpoint loaded = load_checkpoint(checkpoint.toStdString());
    Predictor predictor(loaded);
    PredictOptions o;
    o.batch = loaded.config.train.batch_size;
    std::size_t total_objects = 0;
    for (const auto& [name, image] : inputs) {
      const Prediction p = predict_one(predictor, image, o);
      QCOMPARE(p.channels, std::int64_t{3});
      std::vector<float> seed, foreground;
      for (std::int64_t i = 0; i < p.height * p.width; ++i) {
        seed.push_back(p.probabilities[static_cast<std::size_t>(i * 3 + 1)]);
        foreground.push_back(p.probabilities[static_cast<std::size_t>(i * 3 + 1)] +
                             p.probabilities[static_cast<std::size_t>(i * 3 + 2)]);
      }
      const LabelImage want = extract_objects(seed.data(), foreground.data(), p.height, p.width,
                                              {.seed = 0.6, .foreground = 0.4, .min_size = 3});
      const ObjectTable rows = describe_objects(want, foreground.data());
      total_objects += rows.size();
      const std::string stem = name.substr(0, name.size() - 4);
      const std::filesystem::path out = dir.filePath("out").toStdString();
      QCOMPARE(probe_image(out / (stem + "_labels.png")).bit_depth, 16);
      const MaskImage labels = read_mask(out / (stem + "_labels.png"));
      QCOMPARE(labels.height, image.height);
      QCOMPARE(labels.width, image.width);
      QCOMPARE(std::vector<ObjectId>(labels.values.begin(), labels.values.end()), want.ids);
      const ObjectTable back = read_objects_csv(out / (stem + "_objects.csv"));
      QCOMPARE(back.size(), rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        QCOMPARE(back[i].id, rows[i].id);
        QCOMPARE(back[i].area, rows[i].area);
        QCOMPARE(back[i].centroid_y, rows[i].centroid_y);
        QCOMPARE(back[i].centroid_x, rows[i].centroid_x);
        QCOMPARE(std::tuple(back[i].y0, back[i].x0, back[i].y1, back[i].x1),
                 std::tuple(rows[i].y0, rows[i].x0, rows[i].y1, rows[i].x1));
        QVERIFY(back[i].mean_probability.has_value());
        QCOMPARE(*back[i].mean_probability, *rows[i].mean_probability);
      }
      const QString line =
          QString("%1 %2x%3 ").arg(QString::fromStdString(name)).arg(image.width).arg(image.height);
      const QString count = QString(rows.size() == 1 ? ", %1 object\n" : ", %1 objects\n").arg(rows.size());
      QVERIFY2(r.err.contains(QRegularExpression(QRegularExpression::escape(line) + "[^\n]*" +
                                                 QRegularExpression::escape(count))),
               qPrintable(r.err));
    }
    QVERIFY2(total_objects >= 2, "the confident weights should find objects: the test would compare nothing");

    // The outputs stay unless --overwrite; the same labels again with it.
    const auto before = test::read_all(dir.filePath("out/a_labels.png").toStdString());
    r = test::unet_train(args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("a_labels.png exists (and 3 more of the outputs)"), qPrintable(r.err));
    r = test::unet_train(args + QStringList{"--overwrite", "--output-kind", "labels"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(test::read_all(dir.filePath("out/a_labels.png").toStdString()) == before);
    // Probability maps and masks are still there for the asking.
    r = test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("masks"), "--output-kind", "mask"});
    QVERIFY2(r.code == 0 && r.out.contains("wrote 2 mask images"), qPrintable(r.err + r.out));

    // --labels-format tiff: <stem>_labels.tif, 16-bit (these ids fit), the same ids as the PNG, the same
    // table.
    r = test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("tiff"), "--labels-format", "tiff"});
    QVERIFY2(r.code == 0 && r.out.contains("wrote 2 label images and 2 object tables"),
             qPrintable(r.err + r.out));
    QCOMPARE(QDir(dir.filePath("tiff")).entryList(QDir::Files),
             QStringList({"a_labels.tif", "a_objects.csv", "b_labels.tif", "b_objects.csv"}));
    for (const std::string stem : {"a", "b"}) {
      const std::filesystem::path tiff = dir.filePath("tiff").toStdString();
      const std::filesystem::path png = dir.filePath("out").toStdString();
      const ValueImage labels = read_image_values(tiff / (stem + "_labels.tif"));
      QCOMPARE(labels.bit_depth, 16);
      QVERIFY(!labels.floating && !labels.is_signed);
      const MaskImage want = read_mask(png / (stem + "_labels.png"));
      QCOMPARE(labels.values, std::vector<float>(want.values.begin(), want.values.end()));
      QVERIFY(test::read_all((tiff / (stem + "_objects.csv")).string()) ==
              test::read_all((png / (stem + "_objects.csv")).string()));
    }
  }

  // Labels are the objects of a task-instances model: refused for a semantic one, naming its task.
  void labelsOfASemanticCheckpointAreRefused() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors");
    QVERIFY(tiny_model_and_inputs(dir, checkpoint));
    write_png(dir.filePath("in/a.png").toStdString(), structured_image(32, 32, 3));
    const test::ProcessResult r =
        test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("out"), "--output-kind", "labels"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--output-kind: labels are the objects of a task \"instances\" model") &&
                 r.err.contains("was trained with task \"semantic\""),
             qPrintable(r.err));
    QVERIFY(!QDir(dir.filePath("out")).exists());
    // A label format for a checkpoint whose default output is probabilities: refused the same way.
    const test::ProcessResult format =
        test::unet_train({"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                          dir.filePath("out"), "--labels-format", "tiff"});
    QCOMPARE(format.code, 2);
    QVERIFY2(
        format.err.contains("--labels-format: applies to label images, the output of a task \"instances\" "
                            "model") &&
            format.err.contains("was trained with task \"semantic\""),
        qPrintable(format.err));
    QVERIFY(!QDir(dir.filePath("out")).exists());
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
