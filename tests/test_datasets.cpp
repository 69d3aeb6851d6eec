// The file datasets and their preflight scan, on fixtures this suite writes: the folder layout turns gray,
// gray+alpha, RGB, RGBA, 16-bit and JPEG images into 1 or 3 channels at the training size with pixel values
// worked out by hand (area averages, luma, alpha dropped, gray replicated) and masks binarised, sampled
// nearest or read as class indices; DSB 2018 instance masks are merged with OR; every kind of bad input is
// reported by path in one strict-mode error while skip_bad trains on exactly the good samples; the cache and
// on-demand decoding give the same bytes, from any thread.
#include <QTemporaryDir>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <stop_token>
#include <thread>

#include "image_fixtures.h"
#include "test_support.h"
#include "tiff_writer.h"
#include "unet/config/config.h"
#include "unet/core/error.h"
#include "unet/data/decode_budget.h"
#include "unet/data/file_dataset.h"
#include "unet/data/open_dataset.h"
#include "unet/data/preflight.h"
#include "unet/io/image.h"
#include "unet/objects/instance_targets.h"

using namespace unet;
using namespace unet::test;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& path, const QByteArray& bytes) {
  fs::create_directories(path.parent_path());
  write_bytes(path, bytes);
}

// An 8-bit image through the engine's PNG writer.
void put_png(const fs::path& path, int height, int width, int channels, const std::vector<int>& values) {
  fs::create_directories(path.parent_path());
  Image image;
  image.height = height;
  image.width = width;
  image.channels = channels;
  for (const int v : values) image.pixels.push_back(static_cast<std::uint8_t>(v));
  write_png(path, image);
}

QList<int> ints(const std::vector<std::uint8_t>& v) {
  return QList<int>(v.begin(), v.end());
}

QList<int> ints(const std::vector<std::uint32_t>& v) {
  return QList<int>(v.begin(), v.end());
}

// A sample's image under data.normalize scale_255 (the default) as the 8-bit values it was read from.
QList<int> ints(const std::vector<float>& v) {
  const std::vector<std::uint8_t> bytes = display_pixels(v, NormalizeDesc{});
  return QList<int>(bytes.begin(), bytes.end());
}

// Every channel of a gray image, `channels` times.
QList<int> replicate(const QList<int>& gray, int channels) {
  QList<int> out;
  for (const int v : gray)
    for (int c = 0; c < channels; ++c) out.push_back(v);
  return out;
}

// `pixel` repeated `count` times.
std::vector<int> tile(const std::vector<int>& pixel, int count) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.insert(out.end(), pixel.begin(), pixel.end());
  return out;
}

QList<int> as_list(const std::vector<int>& v) {
  return QList<int>(v.begin(), v.end());
}

int largest_difference(const QList<int>& a, const QList<int>& b) {
  if (a.size() != b.size()) return 1000;
  int worst = 0;
  for (qsizetype i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

std::string stem_of(const Sample& s) {
  return fs::path(s.source).stem().string();
}

FileDatasetOptions target(std::int64_t height, std::int64_t width, std::int64_t channels, int classes = 1,
                          std::int64_t cache_mib = 2048) {
  FileDatasetOptions o;
  o.height = height;
  o.width = width;
  o.channels = channels;
  o.classes = classes;
  o.cache_mib = cache_mib;
  return o;
}

DataSourceOptions source(DataLayout layout, const fs::path& root, const FileDatasetOptions& t,
                         bool skip_bad = false) {
  DataSourceOptions o;
  o.layout = layout;
  o.root = root;
  o.target = t;
  o.skip_bad = skip_bad;
  return o;
}

// The DatasetError a preflight throws, or a report with nothing in it when it does not throw.
struct Refused {
  bool refused = false;
  std::string message;
  PreflightReport report;
};

Refused refusal(const DataSourceOptions& o) {
  Refused r;
  try {
    preflight(o);
  } catch (const DatasetError& e) {
    r.refused = true;
    r.message = e.what();
    r.report = e.report();
    if (e.kind() != ErrorKind::data) r.message = "(wrong kind) " + r.message;
  }
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A 4x4 RGB PNG of noise whose header is whole and whose pixel data stops 4 bytes into its IDAT chunk.
QByteArray truncated_png() {
  const QByteArray whole = build_png(spec(4, 4, 8, kRgb, pattern(4 * 4 * 3, 255, 5)));
  return whole.left(chunk_offset(whole, "IDAT") + 12);
}

// The 4x4 gray image g(y, x) = 40 y + 10 x, whose 2x2 area averages are 25, 45, 105 and 125.
std::vector<int> ramp() {
  std::vector<int> v;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) v.push_back(40 * y + 10 * x);
  return v;
}

// (g, 255 - g, 7): an RGB image whose channels each have known averages.
std::vector<int> ramp_rgb(int alpha_step = -1) {
  std::vector<int> v;
  const std::vector<int> g = ramp();
  for (std::size_t i = 0; i < g.size(); ++i) {
    v.insert(v.end(), {g[i], 255 - g[i], 7});
    if (alpha_step >= 0) v.push_back(int(i) * alpha_step);
  }
  return v;
}

}  // namespace

class TestDatasets : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  fs::path at(const std::string& name) const { return fs::path(dir_.path().toStdString()) / name; }

  // The conversion fixtures: six kinds of image, each with a mask, all to become 2x2.
  void write_conversion_folder() {
    const fs::path root = at("conv");
    put_png(root / "images/gray.png", 4, 4, 1, ramp());
    // Nearest 4 -> 2 reads rows and columns 1 and 3; rows 0 and 2 are set so that any other pick shows.
    put_png(root / "masks/gray.png", 4, 4, 1,
            {255, 255, 255, 255, 0, 255, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255});
    put_png(root / "images/rgb.png", 4, 4, 3, ramp_rgb());
    put_png(root / "masks/rgb_mask.png", 4, 4, 1, {5, 5, 5, 5, 0, 7, 0, 1, 5, 5, 5, 5, 0, 0, 0, 0});
    put_png(root / "images/rgba.png", 2, 2, 4,
            {10, 20, 30, 0, 40, 50, 60, 128, 70, 80, 90, 255, 200, 100, 50, 4});
    put_png(root / "masks/rgba.png", 2, 2, 3, {0, 0, 0, 9, 9, 9, 9, 9, 9, 0, 0, 0});
    put(root / "images/ga.png", build_png(spec(2, 2, 8, kGrayAlpha, {5, 0, 6, 255, 7, 9, 8, 100})));
    put(root / "masks/ga.png", build_png(spec(2, 2, 8, kGrayAlpha, {0, 255, 0, 255, 3, 255, 0, 0})));
    put(root / "images/deep.png", build_png(spec(2, 2, 16, kGray, {0, 257, 32768, 65535})));
    put(root / "masks/deep.png", build_png(spec(2, 2, 16, kGray, {0, 300, 0, 1})));
    std::vector<std::uint8_t> quads(16 * 16), quad_mask(16 * 16);
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        quads[std::size_t(y * 16 + x)] = std::uint8_t((y < 8 ? 0 : 160) + (x < 8 ? 0 : 80));
        quad_mask[std::size_t(y * 16 + x)] = std::uint8_t((y < 8) != (x < 8) ? 1 : 0);
      }
    }
    put(root / "images/photo.jpg", build_jpeg(quads, 16, 16, 1));
    put_png(root / "masks/photo.png", 16, 16, 1, std::vector<int>(quad_mask.begin(), quad_mask.end()));
    put(root / "images/.DS_Store", "hidden files are ignored");
    put(root / "masks/.hidden.png", "so is this");
  }

  // Every problem the folder layout knows, beside two good samples.
  void write_problem_folder(const fs::path& root) {
    put_png(root / "images/good1.png", 4, 4, 1, ramp());
    put_png(root / "masks/good1.png", 4, 4, 1, std::vector<int>(16, 255));
    put_png(root / "images/good2.png", 4, 4, 3, ramp_rgb());
    put_png(root / "masks/good2_mask.png", 4, 4, 1, std::vector<int>(16, 0));
    put_png(root / "images/nomask.png", 4, 4, 1, ramp());
    put_png(root / "masks/orphan.png", 4, 4, 1, ramp());
    put_png(root / "images/dup.png", 4, 4, 1, ramp());
    put(root / "images/dup.jpg", build_jpeg(flat(4, 4, {9}), 4, 4, 1));
    put_png(root / "masks/dup.png", 4, 4, 1, ramp());
    put(root / "images/empty.png", QByteArray());
    put_png(root / "masks/empty.png", 4, 4, 1, ramp());
    put(root / "images/text.png", "this is not an image\n");
    put_png(root / "masks/text.png", 4, 4, 1, ramp());
    put(root / "images/trunc.png", truncated_png());
    put_png(root / "masks/trunc.png", 4, 4, 1, ramp());
    // A header that asks for 100000 x 100000 pixels and nothing after it: only a refusal from the header
    // reads "over the limit"; a decoder that went further would say "truncated".
    put(root / "images/huge.png", signature() + ihdr(100000, 100000, 8, kRgb));
    put_png(root / "masks/huge.png", 4, 4, 1, ramp());
    put_png(root / "images/size.png", 4, 4, 1, ramp());
    put_png(root / "masks/size.png", 2, 3, 1, {0, 1, 0, 1, 0, 1});
    put_png(root / "images/rgbmask.png", 4, 4, 1, ramp());
    std::vector<int> rgb_mask(16 * 3, 0);
    rgb_mask[5 * 3 + 2] = 255;  // pixel 5: (0, 0, 255)
    put_png(root / "masks/rgbmask.png", 4, 4, 3, rgb_mask);
    put_png(root / "images/twomasks.png", 4, 4, 1, ramp());
    put_png(root / "masks/twomasks.png", 4, 4, 1, ramp());
    put_png(root / "masks/twomasks_mask.png", 4, 4, 1, ramp());
    put_png(root / "images/badmask.png", 4, 4, 1, ramp());
    put(root / "masks/badmask.png", truncated_png());
    fs::create_directories(root / "images/sub");
    put(root / "images/.DS_Store", "ignored");
  }

  // (path relative to the root, problem) of every problem in write_problem_folder(), in path order.
  std::vector<std::pair<std::string, std::string>> expected_folder_problems(const fs::path& root) const {
    return {
        {"images/dup.jpg",
         "has the same stem \"dup\" as images/dup.png: masks are matched by stem, so keep one "
         "image per stem"},
        {"images/empty.png", "not a PNG, JPEG or TIFF image (empty file)"},
        {"images/huge.png", "declared 100000x100000, over the 16384x16384 limit"},
        {"images/nomask.png", "missing mask (looked for masks/nomask.* and masks/nomask_mask.*)"},
        {"images/sub", "a folder inside images/: only the files directly in images/ are read"},
        {"images/text.png", "not a PNG, JPEG or TIFF image (text, starting \"this is not an image\")"},
        {"images/trunc.png", "truncated: the data ends after"},
        {"images/twomasks.png",
         "has more than one mask (masks/twomasks.png and masks/twomasks_mask.png): keep one"},
        {"masks/badmask.png", "truncated: the data ends after"},
        {"masks/orphan.png", "mask with no image (looked for images/orphan.*)"},
        {"masks/rgbmask.png", "RGB mask whose channels differ: save masks as single-channel class indices"},
        {"masks/size.png",
         "the mask is 3x2 (width x height) but its image " + (root / "images/size.png").string() + " is 4x4"},
    };
  }

 private slots:
  void initTestCase() {
    test::fail_on_warnings();
    QVERIFY(dir_.isValid());
    write_conversion_folder();
  }

  // ---- the folder layout: conversions and resizing ----

  void folder_converts_and_resizes_data() {
    QTest::addColumn<int>("channels");
    QTest::newRow("to 1 channel") << 1;
    QTest::newRow("to 3 channels") << 3;
  }

  void folder_converts_and_resizes() {
    QFETCH(int, channels);
    const auto r = scan_dataset(source(DataLayout::folder, at("conv"), target(2, 2, channels)));
    QVERIFY2(r.report.problems.empty(), r.report.summary().c_str());
    const FileDataset data(r.pairs, target(2, 2, channels), "folder conv", 0, r.cached);

    // Sorted by name; the mask of rgb is rgb_mask.png and the mask of photo.jpg is photo.png.
    QCOMPARE(data.size(), std::size_t{6});
    std::vector<std::string> stems;
    for (std::size_t i = 0; i < data.size(); ++i) stems.push_back(stem_of(data.get(i)));
    QCOMPARE(stems, (std::vector<std::string>{"deep", "ga", "gray", "photo", "rgb", "rgba"}));
    QCOMPARE(r.pairs[4].masks, std::vector<fs::path>{at("conv") / "masks/rgb_mask.png"});
    QCOMPARE(r.pairs[3].masks, std::vector<fs::path>{at("conv") / "masks/photo.png"});

    // Worked out by hand. gray: 2x2 means of the 4x4 ramp. rgb: luma (299 R + 587 G + 114 B + 500) / 1000
    // of each pixel, then the means (137.5 rounds up to 138). rgba: alpha dropped, or luma. ga: the gray.
    // deep: 16-bit v -> (255 v + 32767) / 65535. photo: the means of four flat 8x8 JPEG blocks.
    std::map<std::string, QList<int>> image;
    const QList<int> rgb3{25, 230, 7, 45, 210, 7, 105, 150, 7, 125, 130, 7};
    const QList<int> rgba3{10, 20, 30, 40, 50, 60, 70, 80, 90, 200, 100, 50};
    image["gray"] = replicate({25, 45, 105, 125}, channels);
    image["rgb"] = channels == 1 ? QList<int>{143, 138, 120, 115} : rgb3;
    image["rgba"] = channels == 1 ? QList<int>{18, 48, 78, 124} : rgba3;
    image["ga"] = replicate({5, 6, 7, 8}, channels);
    image["deep"] = replicate({0, 1, 128, 255}, channels);
    image["photo"] = replicate({0, 80, 160, 240}, channels);
    // Masks: any non-zero value is 1 (7, 300, 9 and 3 included); nearest picks rows and columns 1 and 3
    // of a 4x4 mask and 4 and 12 of a 16x16 one.
    std::map<std::string, QList<int>> mask{{"gray", {1, 0, 0, 1}}, {"rgb", {1, 1, 0, 0}},
                                           {"rgba", {0, 1, 1, 0}}, {"ga", {0, 0, 1, 0}},
                                           {"deep", {0, 1, 0, 1}}, {"photo", {0, 1, 1, 0}}};
    for (std::size_t i = 0; i < data.size(); ++i) {
      const Sample s = data.get(i);
      const std::string stem = stem_of(s);
      QCOMPARE(s.height, 2);
      QCOMPARE(s.width, 2);
      QCOMPARE(s.channels, channels);
      if (stem == "photo") {  // JPEG is lossy
        QVERIFY2(largest_difference(ints(s.image), image[stem]) <= 2, stem.c_str());
      } else {
        QCOMPARE(ints(s.image), image[stem]);
      }
      QCOMPARE(ints(s.mask), mask[stem]);
    }
  }

  void folder_class_index_masks() {
    const fs::path root = at("classes");
    put_png(root / "images/a.png", 4, 4, 1, ramp());
    put_png(root / "masks/a.png", 4, 4, 1, {2, 2, 2, 2, 0, 1, 0, 2, 2, 2, 2, 2, 0, 0, 0, 0});
    put_png(root / "images/b.png", 2, 2, 3, std::vector<int>(12, 50));
    put(root / "masks/b_mask.png", build_png(spec(2, 2, 16, kGray, {2, 1, 0, 2})));
    put_png(root / "images/c.png", 2, 2, 1, {1, 2, 3, 4});
    put_png(root / "masks/c.png", 2, 2, 1, {0, 3, 1, 2});
    put_png(root / "images/d.png", 2, 2, 1, {1, 2, 3, 4});
    put_png(root / "masks/d.png", 2, 2, 1, {0, 255, 255, 0});

    const Refused strict = refusal(source(DataLayout::folder, root, target(2, 2, 1, 3)));
    QVERIFY(strict.refused);
    QCOMPARE(strict.report.problems.size(), std::size_t{2});
    QVERIFY2(has(strict.message, (root / "masks/c.png").string() +
                                     ": holds the value 3, but model.classes is 3 (class indices 0..2)"),
             strict.message.c_str());
    QVERIFY2(has(strict.message, (root / "masks/d.png").string() +
                                     ": holds the value 255, but model.classes is 3 (class indices 0..2); a "
                                     "black-and-white mask is binary: use model.classes 1"),
             strict.message.c_str());

    PreflightReport report;
    const auto data = open_file_dataset(source(DataLayout::folder, root, target(2, 2, 1, 3), true), &report);
    QCOMPARE(data->size(), std::size_t{2});
    QCOMPARE(data->classes(), 3);
    QCOMPARE(report.skipped, std::size_t{2});
    QCOMPARE(stem_of(data->get(0)), std::string("a"));
    QCOMPARE(ints(data->get(0).mask), (QList<int>{1, 2, 0, 0}));  // nearest: (1,1), (1,3), (3,1), (3,3)
    QCOMPARE(stem_of(data->get(1)), std::string("b"));
    QCOMPARE(ints(data->get(1).mask), (QList<int>{2, 1, 0, 2}));  // 16-bit class indices, as stored
    QCOMPARE(ints(data->get(1).image), (QList<int>{50, 50, 50, 50}));
  }

  // loss.ignore_index: its value marks unlabelled pixels. Class-index masks may hold it (and still no other
  // value past the classes); binary masks keep it instead of binarising it to foreground.
  void masks_keep_the_ignore_label() {
    const fs::path root = at("ignore");
    put_png(root / "images/a.png", 2, 2, 1, {1, 2, 3, 4});
    put_png(root / "masks/a.png", 2, 2, 1, {0, 255, 2, 1});
    put_png(root / "images/c.png", 2, 2, 1, {1, 2, 3, 4});
    put_png(root / "masks/c.png", 2, 2, 1, {0, 3, 255, 0});
    FileDatasetOptions softmax = target(2, 2, 1, 3);
    softmax.ignore_index = 255;
    const Refused refused = refusal(source(DataLayout::folder, root, softmax));
    QVERIFY(refused.refused);
    QCOMPARE(refused.report.problems.size(), std::size_t{1});
    QVERIFY2(has(refused.message, (root / "masks/c.png").string() + ": holds the value 3"),
             refused.message.c_str());
    const auto classes = open_file_dataset(source(DataLayout::folder, root, softmax, true));
    QCOMPARE(classes->size(), std::size_t{1});
    QCOMPARE(ints(classes->get(0).mask), (QList<int>{0, 255, 2, 1}));

    FileDatasetOptions binary = target(2, 2, 1, 1);
    binary.ignore_index = 255;
    const auto kept = open_file_dataset(source(DataLayout::folder, root, binary));
    QCOMPARE(ints(kept->get(0).mask), (QList<int>{0, 255, 1, 1}));
    QCOMPARE(ints(kept->get(1).mask), (QList<int>{0, 1, 255, 0}));
    const auto binarised = open_file_dataset(source(DataLayout::folder, root, target(2, 2, 1, 1)));
    QCOMPARE(ints(binarised->get(0).mask), (QList<int>{0, 1, 1, 1}));
  }

  // ---- DSB 2018 ----

  void dsb2018_merges_instance_masks_data() {
    QTest::addColumn<int>("size");
    QTest::newRow("kept at 4x4") << 4;
    QTest::newRow("resized to 2x2") << 2;
  }

  void dsb2018_merges_instance_masks() {
    QFETCH(int, size);
    const fs::path root = at("dsb");
    if (!fs::exists(root)) {
      // An RGBA image (alpha varies and must be dropped) with three overlapping nuclei, each mask in
      // another encoding: 8-bit 0/255, 8-bit 0/1, 1-bit.
      put_png(root / "0a1b/images/0a1b.png", 4, 4, 4, ramp_rgb(16));
      std::vector<int> n1(16, 0), n2(16, 0), n3(16, 0);
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 4; ++x) {
          if (y <= 1 && x <= 1) n1[std::size_t(4 * y + x)] = 255;
          if (y >= 1 && y <= 2 && x >= 1 && x <= 2) n2[std::size_t(4 * y + x)] = 1;
          if (y >= 2 && x >= 2) n3[std::size_t(4 * y + x)] = 1;
        }
      }
      put_png(root / "0a1b/masks/n1.png", 4, 4, 1, n1);
      put_png(root / "0a1b/masks/n2.png", 4, 4, 1, n2);
      put(root / "0a1b/masks/n3.png", build_png(spec(4, 4, 1, kGray, n3)));
      // Mixed sizes, as in DSB: an 8x8 RGB image, one nucleus covering it all.
      put_png(root / "ff00/images/ff00.png", 8, 8, 3, tile({9, 99, 199}, 64));
      put_png(root / "ff00/masks/all.png", 8, 8, 1, std::vector<int>(64, 255));
    }

    PreflightReport report;
    const auto data = open_file_dataset(source(DataLayout::dsb2018, root, target(size, size, 3)), &report);
    QCOMPARE(data->size(), std::size_t{2});
    QCOMPARE(report.found, std::size_t{2});
    QCOMPARE(report.usable, std::size_t{2});
    QVERIFY(report.problems.empty());
    QCOMPARE(report.sizes,
             (std::map<std::pair<std::int64_t, std::int64_t>, std::size_t>{{{4, 4}, 1}, {{8, 8}, 1}}));
    QCOMPARE(report.channels, (std::map<std::int64_t, std::size_t>{{3, 1}, {4, 1}}));

    const Sample first = data->get(0), second = data->get(1);
    QCOMPARE(first.source, (root / "0a1b/images/0a1b.png").string());
    QCOMPARE(second.source, (root / "ff00/images/ff00.png").string());
    QCOMPARE(ints(second.image), as_list(tile({9, 99, 199}, size * size)));
    QCOMPARE(ints(second.mask), QList<int>(size * size, 1));
    if (size == 4) {
      QCOMPARE(ints(first.image), as_list(ramp_rgb()));   // RGBA -> RGB drops alpha
      QCOMPARE(ints(first.mask), (QList<int>{1, 1, 0, 0,  //
                                             1, 1, 1, 0,  //
                                             0, 1, 1, 1,  //
                                             0, 0, 1, 1}));
    } else {
      QCOMPARE(ints(first.image), (QList<int>{25, 230, 7, 45, 210, 7, 105, 150, 7, 125, 130, 7}));
      QCOMPARE(ints(first.mask), (QList<int>{1, 0, 0, 1}));  // the merged mask at (1,1), (1,3), (3,1), (3,3)
    }
  }

  // task instances: DSB 2018's masks numbered one object a file (a later file has the pixels they share),
  // the mask the boundary target made from them, and model.classes 3 accepted for dsb2018.
  void dsb2018_numbers_instances() {
    const fs::path root = at("dsb_instances");
    put_png(root / "0a1b/images/0a1b.png", 4, 4, 1, ramp());
    std::vector<int> n1(16, 0), n2(16, 0), n3(16, 0);
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) {
        if (y <= 1 && x <= 1) n1[std::size_t(4 * y + x)] = 255;
        if (y >= 1 && y <= 2 && x >= 1 && x <= 2) n2[std::size_t(4 * y + x)] = 255;
        if (y >= 2 && x >= 2) n3[std::size_t(4 * y + x)] = 255;
      }
    }
    put_png(root / "0a1b/masks/n1.png", 4, 4, 1, n1);
    put_png(root / "0a1b/masks/n2.png", 4, 4, 1, n2);
    put_png(root / "0a1b/masks/n3.png", 4, 4, 1, n3);
    FileDatasetOptions options = target(4, 4, 1, 3);
    InstancesConfig instances;
    instances.boundary_width = 1;
    options.instances = instances;
    const auto data = open_file_dataset(source(DataLayout::dsb2018, root, options));
    const Sample sample = data->get(0);
    QCOMPARE(sample.instances.height, std::int64_t{4});
    QCOMPARE(sample.instances.width, std::int64_t{4});
    QCOMPARE(ints(sample.instances.ids), (QList<int>{1, 1, 0, 0,  //
                                                     1, 2, 2, 0,  //
                                                     0, 2, 3, 3,  //
                                                     0, 0, 3, 3}));
    // Width 1: an object's pixels with a 4-neighbour of another id are boundary (2), the rest interior (1).
    QCOMPARE(ints(sample.mask), (QList<int>{1, 2, 0, 0,  //
                                            2, 2, 2, 0,  //
                                            0, 2, 2, 2,  //
                                            0, 0, 2, 1}));
    QVERIFY(sample.weights.empty());
  }

  // task instances from TIFF label stacks, as microscopy users save them (Cellpose, StarDist, napari): a
  // multi-page 16-bit label TIFF beside its image stack, each page a sample whose ids are the page's values
  // (above 255 too); a 32-bit label TIFF is refused naming the file.
  void folder_reads_tiff_label_stacks() {
    const fs::path root = at("tiff_labels");
    fs::create_directories(root / "images");
    fs::create_directories(root / "masks");
    // Page p: object 300 + p on rows 0-1, object 40000 on rows 3-5 from column p, background elsewhere.
    const auto id_at = [](int x, int y, int page) {
      if (y <= 1 && x >= 1 && x <= 4) return 300.0 + page;
      if (y >= 3 && y <= 5 && x >= page) return 40000.0;
      return 0.0;
    };
    std::vector<test_tiff::LibtiffSpec> images, labels;
    for (int page = 0; page < 3; ++page) {
      test_tiff::LibtiffSpec image;
      image.width = 8;
      image.height = 6;
      image.bits = 16;
      image.value = [page](int x, int y, int) { return 1000.0 * page + 10.0 * y + x; };
      images.push_back(image);
      test_tiff::LibtiffSpec label = image;
      label.compression = COMPRESSION_LZW;
      label.value = [id_at, page](int x, int y, int) { return id_at(x, y, page); };
      labels.push_back(label);
    }
    test_tiff::write_libtiff(root / "images/stack.tif", images);
    test_tiff::write_libtiff(root / "masks/stack.tif", labels);
    FileDatasetOptions options = target(0, 0, 1, 3);
    InstancesConfig instances;
    instances.boundary_width = 1;
    options.instances = instances;
    const auto data = open_file_dataset(source(DataLayout::folder, root, options));
    QCOMPARE(data->size(), std::size_t{3});
    for (int page = 0; page < 3; ++page) {
      const Sample s = data->get(static_cast<std::size_t>(page));
      QCOMPARE(s.height, std::int64_t{6});
      QCOMPARE(s.width, std::int64_t{8});
      LabelImage expected(6, 8);
      for (int y = 0; y < 6; ++y)
        for (int x = 0; x < 8; ++x) expected.at(y, x) = static_cast<ObjectId>(id_at(x, y, page));
      QCOMPARE(s.instances.ids, expected.ids);
      QCOMPARE(s.mask, boundary_classes(expected, 1));
    }

    // 32-bit labels (more objects than 16 bits number) are refused, naming the file.
    const fs::path wide = at("tiff_labels_32");
    fs::create_directories(wide / "images");
    fs::create_directories(wide / "masks");
    test_tiff::write_libtiff(wide / "images/a.tif", {images[0]});
    test_tiff::LibtiffSpec label32 = labels[0];
    label32.bits = 32;
    test_tiff::write_libtiff(wide / "masks/a.tif", {label32});
    const Refused r = refusal(source(DataLayout::folder, wide, options));
    QVERIFY(r.refused);
    QVERIFY2(has(r.message, (wide / "masks/a.tif").string()) && has(r.message, "8/16-bit"),
             r.message.c_str());
  }

  // task instances from a folder of 16-bit label images: each value one object, resized by nearest
  // neighbour as masks are; weight_map gives the binary mask and the border weights of the labels.
  void folder_reads_label_images() {
    const fs::path root = at("labels");
    put_png(root / "images/a.png", 4, 4, 1, ramp());
    put(root / "masks/a.png",
        build_png(spec(4, 4, 16, kGray, {0, 0, 0, 0, 0, 700, 0, 65535, 0, 0, 0, 0, 0, 700, 0, 65535})));
    FileDatasetOptions options = target(2, 2, 1, 3);
    options.instances = InstancesConfig{};
    const Sample resized = open_file_dataset(source(DataLayout::folder, root, options))->get(0);
    QCOMPARE(ints(resized.instances.ids), (QList<int>{700, 65535, 700, 65535}));  // rows and columns 1 and 3
    QCOMPARE(ints(resized.mask), (QList<int>{2, 2, 2, 2}));  // resized, the two touch: all edge

    FileDatasetOptions native = target(0, 0, 1, 1);
    InstancesConfig weighted;
    weighted.target = InstanceTarget::weight_map;
    native.instances = weighted;
    const Sample sample = open_file_dataset(source(DataLayout::folder, root, native))->get(0);
    QCOMPARE(sample.height, std::int64_t{4});
    QCOMPARE(ints(sample.mask), (QList<int>{0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1}));
    const std::vector<float> expected = border_weights(sample.instances, 10.0, 5.0, true);
    QCOMPARE(sample.weights, expected);
    QVERIFY(expected[2] > expected[0]);  // between the two objects, the border term
  }

  void dsb2018_refuses_classes() {
    try {
      scan_dataset(source(DataLayout::dsb2018, at("dsb"), target(4, 4, 3, 2)));
      QFAIL("accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(e.key(), std::string("model.classes"));
      QCOMPARE(std::string(e.what()),
               std::string("model.classes: must be 1 with data.source \"dsb2018\" (its nucleus masks are "
                           "binary), got 2"));
    }
  }

  void dsb2018_reports_every_problem() {
    const fs::path root = at("dsb_bad");
    const auto sample = [&](const std::string& id) {
      put_png(root / id / "images" / (id + ".png"), 4, 4, 4, ramp_rgb(1));
      put_png(root / id / "masks/m.png", 4, 4, 1, std::vector<int>(16, 255));
    };
    sample("good");
    put_png(root / "testset/images/testset.png", 4, 4, 4, ramp_rgb(1));
    put_png(root / "emptymasks/images/emptymasks.png", 4, 4, 4, ramp_rgb(1));
    put(root / "emptymasks/masks/.keep", "");
    put(root / "notes/readme.txt", "not a sample");
    sample("extra");
    put_png(root / "extra/images/extra_copy.png", 4, 4, 4, ramp_rgb(1));
    put_png(root / "renamed/images/other.png", 4, 4, 4, ramp_rgb(1));
    put_png(root / "renamed/masks/m.png", 4, 4, 1, std::vector<int>(16, 255));
    sample("badsize");
    put_png(root / "badsize/masks/small.png", 3, 4, 1, std::vector<int>(12, 255));
    sample("brokenmask");
    put(root / "brokenmask/masks/cut.png", truncated_png());
    sample("stray");
    put(root / "stray/notes.txt", "x");
    put(root / "stage1_train_labels.csv", "ImageId,EncodedPixels\n");

    const Refused r = refusal(source(DataLayout::dsb2018, root, target(4, 4, 3)));
    QVERIFY(r.refused);
    const std::vector<std::pair<std::string, std::string>> expected{
        {"badsize/masks/small.png", "the mask is 4x3 (width x height) but its image " +
                                        (root / "badsize/images/badsize.png").string() + " is 4x4"},
        {"brokenmask/masks/cut.png", "truncated: the data ends after"},
        {"emptymasks/masks", "no masks (the DSB 2018 test set has none: use it with predict)"},
        {"extra/images/extra_copy.png",
         "not extra.png: a DSB 2018 sample has exactly one image, images/extra.png"},
        {"notes", "no images/ folder, so not a DSB 2018 sample"},
        {"renamed/images", "no renamed.png in it"},
        {"renamed/images/other.png", "not renamed.png: a DSB 2018 sample has exactly one image"},
        {"stage1_train_labels.csv", "not a sample folder: the dsb2018 layout is path/<id>/images/<id>.png"},
        {"stray/notes.txt", "does not belong in a DSB 2018 sample folder (only images/ and masks/ do)"},
        {"testset/masks", "no masks (the DSB 2018 test set has none: use it with predict)"},
    };
    QCOMPARE(r.report.problems.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto& [path, problem] = expected[i];
      QCOMPARE(r.report.problems[i].path, root / path);
      QVERIFY2(has(r.report.problems[i].problem, problem), r.report.problems[i].text().c_str());
      QVERIFY2(has(r.message, (root / path).string() + ": " + problem), r.message.c_str());
    }
    QCOMPARE(r.report.found, std::size_t{9});  // the sample folders
    QCOMPARE(r.report.usable, std::size_t{1});

    const auto data = open_file_dataset(source(DataLayout::dsb2018, root, target(4, 4, 3), true));
    QCOMPARE(data->size(), std::size_t{1});
    QCOMPARE(data->get(0).source, (root / "good/images/good.png").string());
  }

  // ---- bad input, reported by path in one run ----

  void reports_every_problem_in_one_run() {
    const fs::path root = at("problems");
    write_problem_folder(root);
    const Refused r = refusal(source(DataLayout::folder, root, target(4, 4, 3)));
    QVERIFY(r.refused);
    QVERIFY2(has(r.message, "folder " + root.string() +
                                ": 12 problems in 13 samples, so the run did not start; "
                                "fix them, or set data.skip_bad to true to train on the 2 "
                                "good samples:"),
             r.message.c_str());
    const auto expected = expected_folder_problems(root);
    QCOMPARE(r.report.problems.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto& [path, problem] = expected[i];
      QCOMPARE(r.report.problems[i].path, root / path);
      QVERIFY2(has(r.report.problems[i].problem, problem), r.report.problems[i].text().c_str());
      QVERIFY2(has(r.message, "\n  " + (root / path).string() + ": " + problem), r.message.c_str());
    }
    QVERIFY(!has(r.message, ".DS_Store"));
    QCOMPARE(r.report.found, std::size_t{13});  // the files in images/
    QCOMPARE(r.report.usable, std::size_t{2});
    QCOMPARE(r.report.skipped, std::size_t{11});
  }

  // What the workbench's dataset tab lists: every sample found, usable or not, with its own problems (the
  // listing's and its files'), and the mask values of the usable ones; the problems about no sample (a mask
  // without an image, a folder inside images/) are the report's only.
  void every_sample_with_its_own_problems() {
    const fs::path root = at("problems");
    const PreflightResult r = scan_dataset(source(DataLayout::folder, root, target(2, 2, 3)));
    const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
        {"badmask.png", {"masks/badmask.png"}},
        {"dup.jpg", {"images/dup.jpg"}},
        {"dup.png", {"images/dup.jpg"}},
        {"empty.png", {"images/empty.png"}},
        {"good1.png", {}},
        {"good2.png", {}},
        {"huge.png", {"images/huge.png"}},
        {"nomask.png", {"images/nomask.png"}},
        {"rgbmask.png", {"masks/rgbmask.png"}},
        {"size.png", {"masks/size.png"}},
        {"text.png", {"images/text.png"}},
        {"trunc.png", {"images/trunc.png"}},
        {"twomasks.png", {"images/twomasks.png"}},
    };
    QCOMPARE(r.samples.size(), expected.size());
    std::size_t attributed = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const SampleCheck& s = r.samples[i];
      const auto& [image, problem_paths] = expected[i];
      QCOMPARE(s.pair.image, root / "images" / image);
      QCOMPARE(s.usable, problem_paths.empty());
      QCOMPARE(s.problems.size(), problem_paths.size());
      for (std::size_t p = 0; p < problem_paths.size(); ++p) {
        QCOMPARE(s.problems[p].path, root / problem_paths[p]);
        QVERIFY(std::find(r.report.problems.begin(), r.report.problems.end(), s.problems[p]) !=
                r.report.problems.end());
      }
      if (image != "dup.png") attributed += s.problems.size();  // dup.jpg's problem is both duplicates'
    }
    QCOMPARE(r.report.problems.size(), attributed + 2);          // and images/sub, masks/orphan.png
    QCOMPARE(r.samples[7].pair.masks, std::vector<fs::path>{});  // nomask
    // good1's mask is 255 everywhere (foreground, 4 pixels at 2x2), good2's 0 everywhere.
    QCOMPARE(r.samples[4].mask_values, (std::vector<std::int64_t>{0, 4}));
    QCOMPARE(r.samples[5].mask_values, (std::vector<std::int64_t>{4}));
    QVERIFY(r.samples[0].mask_values.empty());
  }

  void skip_bad_loads_only_good_samples() {
    const fs::path root = at("problems");
    PreflightReport report;
    const auto data = open_file_dataset(source(DataLayout::folder, root, target(2, 2, 3), true), &report);
    QCOMPARE(report.problems.size(), std::size_t{12});
    QCOMPARE(report.skipped, std::size_t{11});
    QCOMPARE(data->size(), std::size_t{2});
    QCOMPARE(data->describe(), "folder " + root.string() + ": 2 images -> 2x2x3 (11 skipped)");
    QCOMPARE(data->pairs()[0], (FilePair{root / "images/good1.png", {root / "masks/good1.png"}}));
    QCOMPARE(data->pairs()[1], (FilePair{root / "images/good2.png", {root / "masks/good2_mask.png"}}));
    const Sample a = data->get(0), b = data->get(1);
    QCOMPARE(ints(a.image), replicate({25, 45, 105, 125}, 3));
    QCOMPARE(ints(a.mask), (QList<int>{1, 1, 1, 1}));
    QCOMPARE(ints(b.image), (QList<int>{25, 230, 7, 45, 210, 7, 105, 150, 7, 125, 130, 7}));
    QCOMPARE(ints(b.mask), (QList<int>{0, 0, 0, 0}));
    try {
      data->get(2);
      QFAIL("sample 2 of 2 returned");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
    }
  }

  void refuses_over_the_configured_side() {
    const fs::path root = at("wide");
    put_png(root / "images/ok.png", 20, 32, 1, std::vector<int>(640, 3));
    put_png(root / "masks/ok.png", 20, 32, 1, std::vector<int>(640, 0));
    put_png(root / "images/wide.png", 20, 40, 1, std::vector<int>(800, 3));
    put_png(root / "masks/wide.png", 20, 40, 1, std::vector<int>(800, 0));
    Config c;
    c.base_dir = dir_.path().toStdString();
    c.data.source = DataSource::folder;
    c.data.path = "wide";
    c.data.image_height = c.data.image_width = 16;
    c.data.max_image_side = 32;
    try {
      open_dataset(c);
      QFAIL("accepted");
    } catch (const DatasetError& e) {
      QCOMPARE(e.report().problems.size(), std::size_t{2});
      QVERIFY2(has(e.what(), (root / "images/wide.png").string() + ": declared 40x20, over the 32x32 limit"),
               e.what());
      QVERIFY2(has(e.what(), (root / "masks/wide.png").string() + ": declared 40x20, over the 32x32 limit"),
               e.what());
    }
  }

  void no_usable_sample_is_always_an_error() {
    const fs::path root = at("hopeless");
    put(root / "images/a.png", "text");
    put_png(root / "masks/a.png", 2, 2, 1, {0, 1, 1, 0});
    for (const bool skip : {false, true}) {
      const Refused r = refusal(source(DataLayout::folder, root, target(2, 2, 1), skip));
      QVERIFY(r.refused);
      QVERIFY2(has(r.message,
                   "folder " + root.string() + ": no usable sample (1 sample found, all bad); 1 problem:"),
               r.message.c_str());
      QVERIFY2(has(r.message, (root / "images/a.png").string() + ": not a PNG, JPEG or TIFF image"),
               r.message.c_str());
    }
    fs::create_directories(at("empty/images"));
    fs::create_directories(at("empty/masks"));
    const Refused empty = refusal(source(DataLayout::folder, at("empty"), target(2, 2, 1), true));
    QVERIFY2(has(empty.message, "no samples found (the folder layout reads path/images/* and path/masks/*"),
             empty.message.c_str());
    const Refused missing = refusal(source(DataLayout::folder, at("nowhere"), target(2, 2, 1), true));
    QVERIFY2(has(missing.message, at("nowhere").string() + ": no such folder"), missing.message.c_str());
    QCOMPARE(missing.report.problems.size(), std::size_t{1});  // not also images/ and masks/
  }

  // At most 100 problems in the message, all of them in the report.
  void error_message_is_capped() {
    const fs::path root = at("many");
    put_png(root / "images/a.png", 2, 2, 1, {0, 1, 1, 0});
    put_png(root / "masks/a.png", 2, 2, 1, {0, 1, 1, 0});
    for (int i = 0; i < 105; ++i)
      put_png(root / QString::asprintf("masks/orphan%03d.png", i).toStdString(), 1, 1, 1, {0});
    const Refused r = refusal(source(DataLayout::folder, root, target(2, 2, 1)));
    QVERIFY(r.refused);
    QCOMPARE(r.report.problems.size(), std::size_t{105});
    QCOMPARE(int(std::count(r.message.begin(), r.message.end(), '\n')),
             101);  // 100 problems and the rest counted
    QVERIFY(has(r.message, "orphan099.png: mask with no image"));
    QVERIFY(!has(r.message, "orphan100.png"));
    QVERIFY2(r.message.ends_with("\n  ... and 5 more"), r.message.c_str());
    QVERIFY(has(r.report.summary(1000), "orphan104.png: mask with no image"));
  }

  // ---- the cache and decoding on demand ----

  void cache_and_on_demand_are_equal() {
    const fs::path root = at("cache");
    for (int i = 0; i < 6; ++i) {
      const std::string name = "s" + std::to_string(i) + ".png";
      put_png(root / "images" / name, 16, 16, 3, pattern(16 * 16 * 3, 255, i));
      std::vector<int> m = pattern(16 * 16, 1, i + 7);
      put_png(root / "masks" / name, 16, 16, 1, m);
    }
    // 256x256x(3 floats + 1 mask byte) a sample: 3 MiB holds 3 of the 6.
    QCOMPARE(FileDataset::sample_bytes(target(256, 256, 3)), 256 * 256 * (3 * 4 + 1));
    std::vector<std::shared_ptr<const FileDataset>> sets;
    std::vector<std::size_t> cached;
    for (const std::int64_t mib : {2048, 3, 0}) {
      PreflightReport report;
      sets.push_back(
          open_file_dataset(source(DataLayout::folder, root, target(256, 256, 3, 1, mib)), &report));
      cached.push_back(sets.back()->cached_count());
      QCOMPARE(report.cached, sets.back()->cached_count());
    }
    QCOMPARE(cached, (std::vector<std::size_t>{6, 3, 0}));
    for (std::size_t i = 0; i < 6; ++i) {
      std::vector<DataProblem> problems;
      const auto direct = load_pair(sets[0]->pairs()[i], target(256, 256, 3), problems);
      QVERIFY(direct && problems.empty());
      for (const auto& set : sets) {
        const Sample s = set->get(i);
        QVERIFY2(s.image == direct->image && s.mask == direct->mask && s.source == direct->source,
                 qPrintable(QStringLiteral("sample %1").arg(i)));
      }
    }
  }

  // The decoding budget: a lease that does not fit beside the others waits until they are given back, and a
  // stop ends the wait.
  void decode_budget_waits_for_room() {
    std::stop_source stop;
    DecodeBudget budget(100, stop.get_token());
    auto first = std::make_optional(budget.acquire(60));
    std::atomic<bool> second_granted{false};
    std::thread second([&] {
      const DecodeBudget::Lease lease = budget.acquire(60);
      second_granted = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    QVERIFY2(!second_granted, "a lease was granted beyond the budget");
    first.reset();
    second.join();
    QVERIFY(second_granted);
    QCOMPARE(budget.peak(), std::int64_t{60});
    // More than the whole budget runs alone; a waiting lease ends with Error(cancelled) on a stop.
    { const DecodeBudget::Lease alone = budget.acquire(1000); }
    QCOMPARE(budget.peak(), std::int64_t{100});
    const DecodeBudget::Lease held = budget.acquire(100);
    std::atomic<bool> cancelled{false};
    std::thread waiting([&] {
      try {
        budget.acquire(1);
      } catch (const Error& e) {
        cancelled = e.kind() == ErrorKind::cancelled;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.request_stop();
    waiting.join();
    QVERIFY(cancelled);
  }

  // The scan's threads decode at most what one pair of max_image_side x max_image_side needs at once: with
  // the side at the images' own, eight threads decode one pair at a time, and every sample is still read.
  void scan_holds_one_largest_pair_at_a_time() {
    const fs::path root = at("budget");
    for (int i = 0; i < 8; ++i) {
      const std::string name = "s" + std::to_string(i) + ".png";
      put_png(root / "images" / name, 16, 16, 3, tile({i * 20, 7, 9}, 16 * 16));
      put_png(root / "masks" / name, 16, 16, 1, tile({i % 2 ? 255 : 0}, 16 * 16));
    }
    FileDatasetOptions t = target(8, 8, 3);
    t.max_side = 16;
    t.threads = 8;
    const PreflightResult r = scan_dataset(source(DataLayout::folder, root, t));
    QCOMPARE(r.report.usable, std::size_t{8});
    QCOMPARE(r.decode_budget_bytes, 16 * 16 * kDecodeBytesPerPixel);
    QCOMPARE(r.decode_peak_bytes, 16 * 16 * kDecodeBytesPerPixel);
    // A larger allowed side leaves room for several pairs at once, never beyond it.
    t.max_side = 64;
    const PreflightResult wide = scan_dataset(source(DataLayout::folder, root, t));
    QCOMPARE(wide.report.usable, std::size_t{8});
    QVERIFY(wide.decode_peak_bytes >= 16 * 16 * kDecodeBytesPerPixel &&
            wide.decode_peak_bytes <= wide.decode_budget_bytes);
  }

  void get_is_thread_safe() {
    const auto data = open_file_dataset(source(DataLayout::folder, at("conv"), target(2, 2, 3, 1, 0)));
    QCOMPARE(data->cached_count(), std::size_t{0});
    std::vector<Sample> reference;
    for (std::size_t i = 0; i < data->size(); ++i) reference.push_back(data->get(i));
    std::atomic<int> mismatches{0}, reads{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 20; ++round) {
          for (std::size_t k = 0; k < data->size(); ++k) {
            const std::size_t i = (k + std::size_t(t)) % data->size();
            const Sample s = data->get(i);
            if (s.image != reference[i].image || s.mask != reference[i].mask ||
                s.source != reference[i].source)
              ++mismatches;
            ++reads;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    QCOMPARE(reads.load(), 4 * 20 * 6);
    QCOMPARE(mismatches.load(), 0);
  }

  // A file that goes bad after the scan: the cache still has it; decoding on demand names it.
  void file_gone_after_preflight() {
    const fs::path root = at("vanishing");
    put_png(root / "images/a.png", 2, 2, 1, {1, 2, 3, 4});
    put_png(root / "masks/a.png", 2, 2, 1, {0, 1, 1, 0});
    const auto cached = open_file_dataset(source(DataLayout::folder, root, target(2, 2, 1)));
    const auto on_demand = open_file_dataset(source(DataLayout::folder, root, target(2, 2, 1, 1, 0)));
    fs::remove(root / "images/a.png");
    QCOMPARE(ints(cached->get(0).image), (QList<int>{1, 2, 3, 4}));
    try {
      on_demand->get(0);
      QFAIL("a missing file was read");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
      QVERIFY2(has(e.what(), (root / "images/a.png").string() + ": cannot open: No such file"), e.what());
      QVERIFY2(has(e.what(), "changed after the preflight scan"), e.what());
    }
  }

  // ---- from a config, and the report ----

  void opens_from_config() {
    Config c;
    c.base_dir = dir_.path().toStdString();
    c.data.source = DataSource::folder;
    c.data.path = "conv";
    c.data.image_height = c.data.image_width = 2;
    c.model.in_channels = 1;
    PreflightReport report;
    const auto data = open_dataset(c, &report);
    QCOMPARE(data->describe(), "folder " + at("conv").string() + ": 6 images -> 2x2x1");
    QCOMPARE(data->channels(), 1);
    QCOMPARE(report.usable, std::size_t{6});
    QCOMPARE(ints(data->get(2).image), (QList<int>{25, 45, 105, 125}));

    // Strict refusal through the config: the report is filled all the same.
    c.data.path = "problems";
    PreflightReport refused;
    QVERIFY_THROWS_EXCEPTION(DatasetError, open_dataset(c, &refused));
    QCOMPARE(refused.problems.size(), std::size_t{12});

    // A stop requested ends the scan, and a synthetic source's generation, with Error(cancelled), before the
    // problems above are reported.
    std::stop_source stop;
    stop.request_stop();
    for (const bool synthetic : {false, true}) {
      Config stopped = c;
      if (synthetic) {
        stopped.data.source = DataSource::synthetic;
        stopped.data.image_height = stopped.data.image_width = 32;
      }
      try {
        open_dataset(stopped, nullptr, stop.get_token());
        QFAIL("a stopped scan returned a dataset");
      } catch (const DatasetError& e) {
        QFAIL(e.what());
      } catch (const Error& e) {
        QCOMPARE(e.kind(), ErrorKind::cancelled);
        const std::string expected = synthetic ? "generating the samples of synthetic cells"
                                               : "the scan of " + at("problems").string();
        QVERIFY2(has(e.what(), expected), e.what());
      }
    }
    c.data.skip_bad = true;
    QCOMPARE(open_dataset(c)->size(), std::size_t{2});

    Config synthetic;
    synthetic.data.synthetic_samples = 8;
    synthetic.data.image_height = synthetic.data.image_width = 32;
    PreflightReport generated;
    const auto cells = open_dataset(synthetic, &generated);
    QCOMPARE(cells->describe(), std::string("synthetic cells: 8 images 32x32x3, seed 0"));
    QCOMPARE(generated.summary(), std::string("synthetic: 8 samples generated\n"
                                              "  each sample becomes 32x32 (width x height), 3 channels, "
                                              "normalised scale_255 (value / 255); masks "
                                              "binarised (any non-zero value is foreground)\n"
                                              "  8 of 8 samples kept in memory"));

    // task instances: the samples carry their instance labels, the mask is the target and the dataset has
    // the target's classes; the weight map's samples also carry their weights.
    Config labelled = synthetic;
    labelled.task = ModelTask::instances;
    labelled.model.classes = 3;
    labelled.instances.boundary_width = 1;
    PreflightReport labelled_report;
    const auto boundary = open_dataset(labelled, &labelled_report);
    QCOMPARE(boundary->classes(), 3);
    QVERIFY2(
        has(labelled_report.summary(),
            "; masks hold objects (each its own id), trained as three classes (0 background, 1 interior, "
            "2 a boundary 1 px wide) (instances.target boundary)\n"),
        labelled_report.summary().c_str());
    QCOMPARE(boundary->describe(),
             std::string("synthetic cells: 8 images 32x32x3, instances (target boundary), seed 0"));
    const Sample with_ids = boundary->get(3);
    QCOMPARE(with_ids.instances.ids.size(), std::size_t{32 * 32});
    QCOMPARE(with_ids.mask, boundary_classes(with_ids.instances, 1));
    QCOMPARE(cells->get(3).image, with_ids.image);
    labelled.model.classes = 1;
    labelled.instances.target = InstanceTarget::weight_map;
    PreflightReport weighted_report;
    const Sample weighted = open_dataset(labelled, &weighted_report)->get(3);
    QVERIFY2(has(weighted_report.summary(),
                 "; masks hold objects (each its own id), trained as a binary mask, touching objects a pixel "
                 "apart, with border weights (w0 10, "
                 "sigma 5 px) (instances.target weight_map)\n"),
             weighted_report.summary().c_str());
    QCOMPARE(weighted.instances.ids, with_ids.instances.ids);
    QCOMPARE(weighted.weights.size(), std::size_t{32 * 32});
  }

  void summary_counts_sizes_and_channels() {
    const auto r = scan_dataset(source(DataLayout::folder, at("conv"), target(2, 2, 3)));
    QCOMPARE(r.report.summary(), "folder " + at("conv").string() +
                                     ": 6 samples found, 6 usable, 0 bad\n"
                                     "  image sizes (width x height): 2x2 (3), 4x4 (2), 16x16 (1)\n"
                                     "  image channels as stored: 1 (3), 2 (1), 3 (1), 4 (1)\n"
                                     "  each sample becomes 2x2 (width x height), 3 channels, normalised "
                                     "scale_255 (value / 255); masks binarised "
                                     "(any non-zero value is foreground)\n"
                                     "  6 of 6 samples kept in memory (data.cache_mib 2048)");

    const auto skipped =
        scan_dataset(source(DataLayout::folder, at("problems"), target(2, 2, 3, 1, 0), true));
    const std::string text = skipped.report.summary(3);
    QVERIFY2(has(text, ": 13 samples found, 2 usable, 11 skipped (left out: data.skip_bad is true)\n"),
             text.c_str());
    QVERIFY2(has(text,
                 "\n  0 of 2 samples kept in memory (data.cache_mib 0), the rest decoded each time they "
                 "are read\n  12 problems:\n    " +
                     (at("problems") / "images/dup.jpg").string()),
             text.c_str());
    QVERIFY2(text.ends_with("\n    ... and 9 more"), text.c_str());
  }
};

QTEST_GUILESS_MAIN(TestDatasets)
#include "test_datasets.moc"
