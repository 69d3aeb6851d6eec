// Native-scale training (issue 26): normalisation as part of the model (each mode against hand-computed
// values, the statistics over the whole image, a dataset zscore measured by the scan and saved with the run),
// patch sampling (foreground oversampling, padding, exact crops, the epoch's order), and patch mode's
// validation through predict's tiled inference, held to the trainer's own evaluation where both see the same
// pixels.
#include <QTemporaryDir>

#include <cmath>
#include <numeric>
#include <set>

#include "held_dataset.h"
#include "test_support.h"
#include "tiff_writer.h"
#include "unet/config/config.h"
#include "unet/data/model_input.h"
#include "unet/data/open_dataset.h"
#include "unet/data/patch_sampler.h"
#include "unet/data/synthetic.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/model/normalize.h"
#include "unet/step/data_parallel.h"
#include "unet/step/data_plan.h"
#include "unet/step/step_options.h"
#include "unet/train/tiled_validation.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

// A folder dataset of `count` synthetic cell images of height x width, gray, masks 0/255.
void write_cells(const std::filesystem::path& root, int count, std::int64_t height, std::int64_t width,
                 std::uint64_t seed = 5) {
  std::filesystem::create_directories(root / "images");
  std::filesystem::create_directories(root / "masks");
  const SyntheticCells cells({.count = static_cast<std::size_t>(count),
                              .height = height,
                              .width = width,
                              .channels = 1,
                              .seed = seed});
  for (int i = 0; i < count; ++i) {
    const Sample s = cells.get(static_cast<std::size_t>(i));
    const std::string name = "cell" + std::to_string(i) + ".png";
    write_png(root / "images" / name, eight_bit_image(s));
    std::vector<std::uint8_t> mask(s.mask.size());
    for (std::size_t k = 0; k < mask.size(); ++k) mask[k] = s.mask[k] ? 255 : 0;
    write_png(root / "masks" / name, {s.height, s.width, 1, mask});
  }
}

// A small gray model's config over the folder dataset at `root`, with `data` keys beside the folder's and the
// other sections in `rest`.
Config folder_config(const std::filesystem::path& root, nlohmann::json data,
                     nlohmann::json rest = nlohmann::json::object()) {
  data["source"] = "folder";
  data["path"] = root.string();
  rest["model"] = {{"in_channels", 1}, {"depth", 2}, {"width", 4}};
  rest["data"] = std::move(data);
  return config_from_json(rest);
}

Sample sample_of(std::int64_t height, std::int64_t width, std::vector<std::uint8_t> mask) {
  Sample s;
  s.height = height;
  s.width = width;
  s.channels = 1;
  s.image.resize(static_cast<std::size_t>(height * width));
  std::iota(s.image.begin(), s.image.end(), 0.0f);  // value = y * width + x
  s.mask = std::move(mask);
  s.source = "test";
  return s;
}

}  // namespace

class TestPatches : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- normalisation ---------------------------------------------------------------------------------------

  // numpy.percentile's linear rule: rank p/100 * (n - 1) between the order statistics.
  void percentileInterpolatesBetweenOrderStatistics() {
    const std::vector<float> v{7, 1, 3, 9, 5};  // sorted 1 3 5 7 9
    QCOMPARE(percentile(v, 0), 1.0);
    QCOMPARE(percentile(v, 100), 9.0);
    QCOMPARE(percentile(v, 50), 5.0);
    QCOMPARE(percentile(v, 10), 1.8);      // rank 0.4: 1 + 0.4 * 2
    QCOMPARE(percentile(v, 99.8), 8.984);  // rank 3.992: 7 + 0.992 * 2
  }

  void percentileModeMapsEachChannelsPercentilesToZeroAndOne() {
    // Two channels: 0..99 and 100 + 2 * (0..99); percentiles 10 and 90 of 0..99 are 9.9 and 89.1.
    std::vector<float> values;
    for (int i = 0; i < 100; ++i) {
      values.push_back(static_cast<float>(i));
      values.push_back(static_cast<float>(100 + 2 * i));
    }
    NormalizeDesc d;
    d.mode = NormalizeMode::percentile;
    d.low_percentile = 10;
    d.high_percentile = 90;
    const ChannelAffine a = image_normalization(d, values, 2, 16, false, "two channels");
    QVERIFY(std::fabs(a.offset[0] - 9.9f) < 1e-5f && std::fabs(a.offset[1] - 119.8f) < 1e-4f);
    QVERIFY(std::fabs(a.scale[0] - 1.0f / 79.2f) < 1e-7f && std::fabs(a.scale[1] - 1.0f / 158.4f) < 1e-7f);
    std::vector<float> out = values;
    normalize_in_place(a, out, 2);
    QVERIFY(std::fabs(out[0] - (0 - 9.9f) / 79.2f) < 1e-6f);  // below p_low: negative, not clipped
    d.clip = true;
    out = values;
    normalize_in_place(image_normalization(d, values, 2, 16, false, "clipped"), out, 2);
    QCOMPARE(out[0], 0.0f);
    QCOMPARE(out[199], 1.0f);
  }

  void zscoreRangeAndScale255ByHand() {
    const std::vector<float> values{2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, population std 2
    NormalizeDesc d;
    d.mode = NormalizeMode::zscore;
    ChannelAffine a = image_normalization(d, values, 1, 8, false, "z");
    QCOMPARE(a.offset[0], 5.0f);
    QCOMPARE(a.scale[0], 0.5f);
    d.mode = NormalizeMode::range;
    d.range_min = 1000;
    d.range_max = 3000;
    a = image_normalization(d, {}, 3, 16, false, "range");
    QCOMPARE(a.offset, (std::vector<float>{1000, 1000, 1000}));
    QCOMPARE(a.scale[2], 1.0f / 2000.0f);
    d.mode = NormalizeMode::scale_255;
    a = image_normalization(d, {}, 1, 8, false, "8-bit");
    QCOMPARE(a.scale[0], 1.0f / 255.0f);
    // 16-bit data under scale_255 is scaled as its 8-bit conversion always was; deeper or float data is
    // refused, naming the image and what to use.
    QCOMPARE(image_normalization(d, {}, 1, 16, false, "16-bit").scale[0], 1.0f / 65535.0f);
    for (const auto& [depth, floating] : {std::pair{32, false}, std::pair{32, true}}) {
      try {
        image_normalization(d, {}, 1, depth, floating, "deep.tif");
        QFAIL("scale_255 took data that is neither 8 nor 16-bit");
      } catch (const Error& e) {
        QCOMPARE(e.kind(), ErrorKind::data);
        QVERIFY2(std::string(e.what()).find("deep.tif") != std::string::npos &&
                     std::string(e.what()).find("range") != std::string::npos,
                 e.what());
      }
    }
    // A constant channel is moved by its offset only: no division by zero.
    d.mode = NormalizeMode::percentile;
    a = image_normalization(d, std::vector<float>(10, 42.0f), 1, 8, false, "flat");
    QCOMPARE(a.offset[0], 42.0f);
    QCOMPARE(a.scale[0], 1.0f);
  }

  // Moments merged image by image equal the moments of all values at once.
  void channelMomentsMergeExactly() {
    const std::vector<float> a{60000, 60002, 60004}, b{60001, 60003};
    ChannelMoments m(1);
    m.add(a);
    m.add(b);
    QCOMPARE(m.pixels(), 5);
    QVERIFY(std::fabs(m.mean()[0] - 60002.0) < 1e-9);
    QVERIFY(std::fabs(m.std()[0] - std::sqrt(2.0)) < 1e-9);
  }

  // Training's samples and prediction's inputs are the same values: one path (model_input.h).
  void datasetSamplesAreWhatPredictionFeedsTheModel() {
    QTemporaryDir dir;
    const std::filesystem::path root = dir.filePath("cells").toStdString();
    write_cells(root, 3, 40, 56);
    Config c = folder_config(
        root, {{"mode", "patch"}, {"normalize", "percentile"}, {"normalize_percentiles", {2, 98}}});
    const auto dataset = open_dataset(c);
    QCOMPARE(dataset->height(), 0);  // samples keep their files' size
    const Sample s = dataset->get(1);
    QCOMPARE(s.height, 40);
    QCOMPARE(s.width, 56);
    const Image file = read_image(root / "images" / "cell1.png");
    const ModelImage fed = model_image(file, input_recipe(c), "cell1.png");
    QCOMPARE(fed.values, s.image);
    // And the values are the percentile rule's: the 2nd percentile maps to 0, the 98th to 1.
    const std::vector<float> raw(file.pixels.begin(), file.pixels.end());
    const double low = percentile(raw, 2), high = percentile(raw, 98);
    QVERIFY(std::fabs(fed.values[7] - static_cast<float>((raw[7] - low) / (high - low))) < 1e-5f);
  }

  // A zscore over the dataset: the scan measures every usable sample's values, the samples are normalised
  // with them, and the run saves them in its checkpoints for prediction.
  void datasetZscoreIsMeasuredAndSaved() {
    QTemporaryDir dir;
    const std::filesystem::path root = dir.filePath("cells").toStdString();
    write_cells(root, 4, 32, 32);
    Config c = folder_config(root,
                             {{"image_size", {32, 32}},
                              {"normalize", "zscore"},
                              {"normalize_scope", "dataset"},
                              {"val_fraction", 0.25}},
                             {{"train", {{"steps", 1}, {"batch_size", 2}}},
                              {"checkpoint", {{"dir", dir.filePath("run").toStdString()}}}});
    ChannelMoments expected(1);
    for (int i = 0; i < 4; ++i) {
      const Image im = read_image(root / "images" / ("cell" + std::to_string(i) + ".png"));
      expected.add(std::vector<float>(im.pixels.begin(), im.pixels.end()));
    }
    const auto dataset = open_dataset(c);
    const std::optional<NormalizeDesc> measured = dataset->measured_normalization();
    QVERIFY(measured && measured->mean.size() == 1);
    QVERIFY(std::fabs(measured->mean[0] - expected.mean()[0]) < 1e-6);
    QVERIFY(std::fabs(measured->std[0] - expected.std()[0]) < 1e-6);
    const Sample s = dataset->get(2);
    const Image im = read_image(root / "images" / "cell2.png");
    const double want = (im.pixels[5] - expected.mean()[0]) / expected.std()[0];
    QVERIFY(std::fabs(s.image[5] - want) < 1e-4);
    Trainer(c).run();
    const Checkpoint saved = load_checkpoint(dir.filePath("run/last.safetensors").toStdString());
    QCOMPARE(saved.config.data.normalize.mean, measured->mean);
    QCOMPARE(saved.config.data.normalize.std, measured->std);
  }

  // 16-bit, two-channel, multi-page TIFFs larger than the patch: a sample per page, data.channels picks the
  // model's channel, the values keep their 16 bits into the normalisation, and a patch-mode run trains on
  // them; `unet-train predict` reads the same file through the same path.
  void sixteenBitMultiPageTiffsTrain() {
    QTemporaryDir dir;
    const std::filesystem::path root = dir.filePath("tiffs").toStdString();
    std::filesystem::create_directories(root / "images");
    std::filesystem::create_directories(root / "masks");
    const auto inside = [](int x, int y, int page) {
      return (x - 30 - 5 * page) * (x - 30 - 5 * page) + (y - 40) * (y - 40) < 225;
    };
    for (const char* name : {"a", "b"}) {
      std::vector<test_tiff::LibtiffSpec> images, masks;
      for (int page = 0; page < 3; ++page) {
        test_tiff::LibtiffSpec image;
        image.width = 80;
        image.height = 96;
        image.samples = 2;
        image.bits = 16;
        image.compression = COMPRESSION_ADOBE_DEFLATE;
        image.rows_per_strip = 16;
        // Channel 0: a disc at 40000 on 1000 (16 bits needed); channel 1: a ramp the model does not read.
        image.value = [inside, page](int x, int y, int c) {
          return c == 0 ? (inside(x, y, page) ? 40000.0 + 7 * x : 1000.0 + 3 * y) : 300.0 * x;
        };
        images.push_back(image);
        test_tiff::LibtiffSpec mask = image;
        mask.samples = 1;
        mask.bits = 8;
        mask.value = [inside, page](int x, int y, int) { return inside(x, y, page) ? 1.0 : 0.0; };
        masks.push_back(mask);
      }
      test_tiff::write_libtiff(root / "images" / (std::string(name) + ".tif"), images);
      test_tiff::write_libtiff(root / "masks" / (std::string(name) + ".tif"), masks);
    }
    Config c = folder_config(root,
                             {{"mode", "patch"},
                              {"patch_size", {32, 32}},
                              {"channels", {0}},
                              {"normalize", "range"},
                              {"normalize_range", {1000, 41000}},
                              {"val_fraction", 0.2}},
                             {{"train", {{"epochs", 1}, {"batch_size", 4}}},
                              {"checkpoint", {{"dir", dir.filePath("run").toStdString()}}}});
    const auto dataset = open_dataset(c);
    QCOMPARE(dataset->size(), std::size_t{6});
    QCOMPARE(dataset->sample_name(1), std::string("a.tif#2"));
    const Sample s = dataset->get(4);  // b.tif, page 2
    QCOMPARE(s.height, 96);
    QCOMPARE(s.width, 80);
    QCOMPARE(s.channels, 1);
    // (x, y) = (35, 40) is in page 2's disc: (40000 + 245 - 1000) / 40000; (0, 0) is background: 0.
    QVERIFY(std::fabs(s.image[40 * 80 + 35] - (40000.0f + 245.0f - 1000.0f) / 40000.0f) < 1e-6f);
    QCOMPARE(s.image[0], 0.0f);
    QCOMPARE(int(s.mask[40 * 80 + 35]), 1);
    Trainer(c).run();
    const test::ProcessResult r =
        test::unet_train({"predict", "--checkpoint", dir.filePath("run/last.safetensors"), "--input",
                          dir.filePath("tiffs/images"), "--output", dir.filePath("out")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(QFileInfo::exists(dir.filePath("out/a.png")) && QFileInfo::exists(dir.filePath("out/b.png")),
             qPrintable(r.err));
  }

  // --- patches ---------------------------------------------------------------------------------------------

  void foregroundPatchesAreCentredOnForeground() {
    // One foreground pixel at (30, 41) of a 64x80 image.
    std::vector<std::uint8_t> mask(64 * 80, 0);
    mask[30 * 80 + 41] = 1;
    const Sample s = sample_of(64, 80, mask);
    const PatchOptions always{16, 16, 1.0, -1}, never{16, 16, 0.0, -1};
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      Rng rng(seed, 1);
      const PatchPlace p = place_patch(s, always, rng);
      QVERIFY(p.on_foreground);
      QCOMPARE(p.top + 8, 30);  // the pixel sits at the patch's centre (height / 2)
      QCOMPARE(p.left + 8, 41);
      Rng other(seed, 1);
      const PatchPlace q = place_patch(s, never, other);
      QVERIFY(!q.on_foreground);
      QVERIFY(q.top >= 0 && q.top + 16 <= 64 && q.left >= 0 && q.left + 16 <= 80);  // inside the image
    }
  }

  void foregroundShareFollowsTheOption() {
    std::vector<std::uint8_t> mask(64 * 64, 0);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        mask[static_cast<std::size_t>(y * 64 + x)] = 1;  // a corner: rarely hit at random
    const Sample s = sample_of(64, 64, mask);
    int on = 0;
    const int draws = 3000;
    for (int i = 0; i < draws; ++i) {
      Rng rng(7, static_cast<std::uint64_t>(i));
      on += place_patch(s, {16, 16, 0.33, -1}, rng).on_foreground ? 1 : 0;
    }
    QVERIFY2(std::fabs(on / double(draws) - 0.33) < 0.03, qPrintable(QString::number(on)));
  }

  // A patch over the border (or larger than the image) is the image's exact values, padded with 0 and the
  // ignore label.
  void cropsAreExactAndPadded() {
    std::vector<std::uint8_t> mask(6 * 5, 1);
    const Sample s = sample_of(6, 5, mask);
    const PatchOptions o{8, 8, 0.0, 9};
    Rng rng(0, 0);
    const PatchPlace centred = place_patch(s, o, rng);
    QCOMPARE(centred.top, -1);  // (8 - 6) / 2 above
    QCOMPARE(centred.left, -1);
    std::vector<float> image(64);
    std::vector<std::uint8_t> out(64);
    crop_patch(s, centred, o, image.data(), out.data());
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const int sy = y - 1, sx = x - 1;
        const bool inside = sy >= 0 && sy < 6 && sx >= 0 && sx < 5;
        QCOMPARE(image[static_cast<std::size_t>(y * 8 + x)], inside ? static_cast<float>(sy * 5 + sx) : 0.0f);
        QCOMPARE(out[static_cast<std::size_t>(y * 8 + x)], std::uint8_t(inside ? 1 : 9));
      }
  }

  // A patch batch's pixel weights are each sample's weights cut at its patch's place, exactly as its mask
  // (padded with kPaddingWeight, 1, where the patch reaches past the image); a sample without weights weighs
  // 1 in a batch whose other samples have them; a batch of samples without weights has none. Whole images
  // (resize mode) keep theirs as they are.
  void batchWeightsAreTheSamplesCrops() {
    const auto weighted = [](std::int64_t h, std::int64_t w, float offset) {
      std::vector<std::uint8_t> mask(static_cast<std::size_t>(h * w));
      for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0 ? 1 : 0;
      Sample s = sample_of(h, w, std::move(mask));
      s.weights.resize(static_cast<std::size_t>(h * w));
      for (std::size_t i = 0; i < s.weights.size(); ++i)
        s.weights[i] = offset + 0.25f * static_cast<float>(i);
      return s;
    };
    std::vector<Sample> samples{weighted(10, 9, 2.0f), weighted(10, 9, 0.0f), weighted(10, 9, 50.0f)};
    samples[1].weights.clear();  // a sample without weights in the middle
    const test::HeldDataset dataset(samples);
    BatchRecipe recipe;
    recipe.seed = 17;
    recipe.patch = PatchOptions{12, 6, 0.5, -1};  // taller than the images: padded above and below
    const std::vector<std::size_t> order{0, 1, 2};
    const std::vector<std::int64_t> positions{4, 5, 6};
    HostBatch batch;
    assemble_batch(dataset, order, positions, 2, recipe, batch);
    QCOMPARE(batch.weights.size(), std::size_t{3 * 12 * 6});
    int padded = 0;
    for (std::size_t n = 0; n < 3; ++n) {
      const Sample& s = samples[n];
      const PatchPlace place = *draw_for(recipe, s, 2, positions[n]).place;
      for (std::int64_t y = 0; y < 12; ++y)
        for (std::int64_t x = 0; x < 6; ++x) {
          const std::int64_t sy = place.top + y, sx = place.left + x;
          const bool inside = sy >= 0 && sy < s.height && sx >= 0 && sx < s.width;
          padded += inside ? 0 : 1;
          const float want =
              inside && !s.weights.empty() ? s.weights[static_cast<std::size_t>(sy * s.width + sx)] : 1.0f;
          const std::size_t at = n * 72 + static_cast<std::size_t>(y * 6 + x);
          QVERIFY2(batch.weights[at] == want,
                   qPrintable(QString("sample %1 (%2, %3): weight %4, its crop's %5")
                                  .arg(n)
                                  .arg(y)
                                  .arg(x)
                                  .arg(batch.weights[at])
                                  .arg(want)));
          // The mask's crop is at the same place.
          const std::uint8_t mask = inside ? s.mask[static_cast<std::size_t>(sy * s.width + sx)] : 0;
          QCOMPARE(batch.masks[at], mask);
        }
    }
    QVERIFY(padded > 0);
    // No sample with weights: none in the batch (and none left from the batch's last use).
    assemble_batch(dataset, std::vector<std::size_t>{1}, std::vector<std::int64_t>{0}, 0, recipe, batch);
    QVERIFY(batch.weights.empty());
    // Whole images: the weights as they are.
    assemble_batch(dataset, std::vector<std::size_t>{2}, std::vector<std::int64_t>{0}, 0, BatchRecipe{},
                   batch);
    QCOMPARE(batch.weights, samples[2].weights);
  }

  void patchEpochsRepeatTheTrainingSetInNewOrders() {
    const std::vector<std::size_t> train{4, 7, 9};
    const std::vector<std::size_t> order = patch_epoch_order(train, 3, 2, true, 8);
    QCOMPARE(order.size(), std::size_t{8});
    QCOMPARE(std::vector<std::size_t>(order.begin(), order.begin() + 3), epoch_order(train, 3, 2, true));
    for (std::size_t round = 0; round < 2; ++round)
      QCOMPARE((std::set<std::size_t>(order.begin() + 3 * round, order.begin() + 3 * round + 3)),
               (std::set<std::size_t>{4, 7, 9}));
    QCOMPARE(patches_in_epoch(0, 3 * 100 * 100, {32, 32, 0.33, -1}), 30);  // 30000 / 1024 rounded up
    QCOMPARE(patches_in_epoch(17, 3 * 100 * 100, {32, 32, 0.33, -1}), 17);
  }

  // --- patch mode's validation -----------------------------------------------------------------------------

  // Where the tile is the whole image there is no blending: the tiled evaluation sees the model's own
  // probabilities, so its counts and loss are the trainer's evaluation of the same image.
  void tiledValidationIsTheEvaluationWhereOneTileCoversTheImage() {
    QTemporaryDir dir;
    const std::filesystem::path root = dir.filePath("cells").toStdString();
    write_cells(root, 2, 32, 32);
    Config c = folder_config(root, {{"mode", "patch"}, {"patch_size", {32, 32}}},
                             {{"loss", {{"kind", "cross_entropy_dice"}}}});
    const auto dataset = open_dataset(c);
    const std::vector<float> parameters = UNet::initial_slab(c.model, 3);
    const std::vector<std::size_t> samples{0, 1};
    const EvalOutcome tiled = evaluate_tiled(c, parameters, DeviceId{}, *dataset, samples, 2);

    DataParallel dp(step_options(c, c.devices));
    dp.set_parameters(parameters);
    // The same files in resize mode at their own size: the same samples, as one batch.
    Config resize = c;
    resize.data.mode = DataMode::resize;
    resize.data.image_height = resize.data.image_width = 32;
    HostBatch batch;
    assemble_batch(*open_dataset(resize), samples, std::vector<std::int64_t>(2, 0), 0, BatchRecipe{}, batch);
    const EvalOutcome direct = dp.evaluate({{batch}});
    QCOMPARE(tiled.pixels, direct.pixels);
    QCOMPARE(tiled.counts, direct.counts);
    QVERIFY2(std::fabs(tiled.loss_value - direct.loss_value) < 1e-4 * std::fabs(direct.loss_value),
             qPrintable(QString("%1 vs %2").arg(tiled.loss_value).arg(direct.loss_value)));
  }

  // A run in patch mode on images larger than its patch trains, validates on whole images and reports
  // finite metrics.
  void patchModeTrainsOnLargeImages() {
    QTemporaryDir dir;
    const std::filesystem::path root = dir.filePath("cells").toStdString();
    write_cells(root, 5, 96, 80);
    Config c = folder_config(root, {{"mode", "patch"}, {"patch_size", {32, 32}}, {"val_fraction", 0.2}},
                             {{"train", {{"epochs", 1}, {"batch_size", 4}}},
                              {"checkpoint", {{"dir", dir.filePath("run").toStdString()}}}});
    struct Watch final : test::WatchedObserver {
      RunInfo info;
      std::vector<EpochReport> epochs;
      void on_start(const RunInfo& i) override { info = i; }
      void on_epoch(const EpochReport& e) override { epochs.push_back(e); }
    } watch;
    Trainer(c, &watch).run();
    // 4 training images of 96x80 over 32x32 patches: 30 patches, 8 steps of 4.
    QCOMPARE(watch.info.steps_per_epoch, 8);
    QCOMPARE(watch.epochs.size(), std::size_t{1});
    QVERIFY(std::isfinite(watch.epochs[0].val_loss));
    QVERIFY(std::isfinite(watch.epochs[0].val_iou));
  }
};

QTEST_GUILESS_MAIN(TestPatches)
#include "test_patches.moc"
