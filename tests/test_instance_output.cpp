// A task-instances model's output as objects (infer/instance_output.h): the seed and foreground maps made
// from the probabilities as the header says (checked against maps the test makes itself and hand-counted
// objects), the config's thresholds and minimum size applied, the rows of predict_rows() giving the same
// objects as the whole map, the 16-bit label PNG read back as the ids, and the CSV read back as the table it
// was written from.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "object_csv.h"
#include "test_support.h"
#include "unet/core/error.h"
#include "unet/infer/instance_output.h"
#include "unet/io/image.h"

using namespace unet;

namespace {

// Two touching 8 x 7 rectangles in a 12 x 20 image, A at columns 2..8 and B at 9..15 (rows 2..9), each with a
// boundary ring one pixel wide, as three softmax classes (background, interior, boundary).
constexpr std::int64_t kHeight = 12, kWidth = 20;

int rectangle_at(std::int64_t y, std::int64_t x) {  // 0 outside, 1 A, 2 B
  if (y < 2 || y >= 10) return 0;
  if (x >= 2 && x < 9) return 1;
  if (x >= 9 && x < 16) return 2;
  return 0;
}

std::vector<float> two_touching_rectangles() {
  std::vector<float> p(static_cast<std::size_t>(kHeight * kWidth * 3));
  for (std::int64_t y = 0; y < kHeight; ++y)
    for (std::int64_t x = 0; x < kWidth; ++x) {
      const int object = rectangle_at(y, x);
      bool boundary = false;
      for (const auto& [dy, dx] : {std::pair{-1, 0}, std::pair{1, 0}, std::pair{0, -1}, std::pair{0, 1}})
        boundary = boundary || rectangle_at(y + dy, x + dx) != object;
      const std::array<float, 3> v = object == 0 ? std::array{0.9F, 0.05F, 0.05F}
                                     : boundary  ? std::array{0.1F, 0.2F, 0.7F}
                                                 : std::array{0.05F, 0.9F, 0.05F};
      std::copy(v.begin(), v.end(), p.begin() + (y * kWidth + x) * 3);
    }
  return p;
}

// The maps the header promises, made here without the engine's code: boundary: seed = p1, foreground =
// p1 + p2; weight_map: both p.
struct Maps {
  std::vector<float> seed, foreground;
};
Maps maps_of(const std::vector<float>& p, std::int64_t channels) {
  Maps m;
  for (std::size_t i = 0; i < p.size() / static_cast<std::size_t>(channels); ++i) {
    if (channels == 1) {
      m.seed.push_back(p[i]);
      m.foreground.push_back(p[i]);
    } else {
      m.seed.push_back(p[i * 3 + 1]);
      m.foreground.push_back(p[i * 3 + 1] + p[i * 3 + 2]);
    }
  }
  return m;
}

InstancesConfig instances(InstanceTarget target, double seed, double foreground, std::int64_t min_size) {
  InstancesConfig c;
  c.target = target;
  c.seed_threshold = seed;
  c.foreground_threshold = foreground;
  c.min_size = min_size;
  return c;
}

void compare_tables(const ObjectTable& got, const ObjectTable& want) {
  QCOMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    QCOMPARE(got[i].id, want[i].id);
    QCOMPARE(got[i].area, want[i].area);
    QCOMPARE(got[i].centroid_y, want[i].centroid_y);
    QCOMPARE(got[i].centroid_x, want[i].centroid_x);
    QCOMPARE(got[i].y0, want[i].y0);
    QCOMPARE(got[i].x0, want[i].x0);
    QCOMPARE(got[i].y1, want[i].y1);
    QCOMPARE(got[i].x1, want[i].x1);
    QCOMPARE(got[i].mean_probability.has_value(), want[i].mean_probability.has_value());
    if (got[i].mean_probability) QCOMPARE(*got[i].mean_probability, *want[i].mean_probability);
  }
}

// A smooth field of three softmax classes whose interior and boundary bands wander over the image: several
// objects, some touching, for comparing two routes to the same objects.
std::vector<float> wavy_probabilities(std::int64_t h, std::int64_t w, double phase) {
  std::vector<float> p(static_cast<std::size_t>(h * w * 3));
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x) {
      const double s = std::sin(0.45 * x + phase) * std::cos(0.38 * y - phase);
      const double logits[3] = {-3 * s, 3 * s - 0.5, 1.2 - 4 * std::abs(s - 0.4)};
      double sum = 0;
      for (const double l : logits) sum += std::exp(l);
      for (int k = 0; k < 3; ++k)
        p[static_cast<std::size_t>((y * w + x) * 3 + k)] = static_cast<float>(std::exp(logits[k]) / sum);
    }
  return p;
}

}  // namespace

class TestInstanceOutput : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // boundary: the interiors are the seeds (p1 = 0.9 > 0.5), the boundary rings only foreground (p1 = 0.2,
  // p1 + p2 = 0.9): the two touching rectangles come out as two objects that share their 112 pixels, A first
  // in raster order; equal to extract_objects and describe_objects of the maps made here.
  void boundaryClassesBecomeSeedsAndForeground() {
    const std::vector<float> p = two_touching_rectangles();
    const InstancesConfig config = instances(InstanceTarget::boundary, 0.5, 0.5, 0);
    const InstanceOutput out = instance_output(p, kHeight, kWidth, 3, config);
    QCOMPARE(out.objects.size(), std::size_t{2});
    QCOMPARE(out.labels.at(5, 4), ObjectId{1});
    QCOMPARE(out.labels.at(5, 12), ObjectId{2});
    QCOMPARE(out.objects[0].area + out.objects[1].area, std::int64_t{112});
    for (std::int64_t y = 0; y < kHeight; ++y)
      for (std::int64_t x = 0; x < kWidth; ++x) QCOMPARE(out.labels.at(y, x) != 0, rectangle_at(y, x) != 0);
    for (const ObjectDescription& o : out.objects) {
      QVERIFY(o.mean_probability.has_value());
      // The foreground's mean: 0.95 inside, 0.9 on the rings.
      QVERIFY2(*o.mean_probability > 0.9 && *o.mean_probability < 0.95,
               qPrintable(QString::number(*o.mean_probability)));
    }

    const Maps m = maps_of(p, 3);
    const LabelImage want = extract_objects(m.seed.data(), m.foreground.data(), kHeight, kWidth,
                                            {.seed = 0.5, .foreground = 0.5, .min_size = 0});
    QCOMPARE(out.labels.ids, want.ids);
    compare_tables(out.objects, describe_objects(want, m.foreground.data()));
  }

  // The config's instances.* decide: a seed threshold over every interior (0.95) leaves no seed, and the
  // foreground component becomes one object of all 112 pixels; a min_size over that removes it.
  void theConfigsThresholdsAndMinimumSizeApply() {
    const std::vector<float> p = two_touching_rectangles();
    const InstanceOutput seedless =
        instance_output(p, kHeight, kWidth, 3, instances(InstanceTarget::boundary, 0.95, 0.5, 0));
    QCOMPARE(seedless.objects.size(), std::size_t{1});
    QCOMPARE(seedless.objects[0].area, std::int64_t{112});
    QCOMPARE(seedless.objects[0].y0, std::int64_t{2});
    QCOMPARE(seedless.objects[0].x1, std::int64_t{16});
    QCOMPARE(instance_output(p, kHeight, kWidth, 3, instances(InstanceTarget::boundary, 0.95, 0.5, 113))
                 .objects.size(),
             std::size_t{0});
    QCOMPARE(instance_output(p, kHeight, kWidth, 3, instances(InstanceTarget::boundary, 0.95, 0.5, 112))
                 .objects.size(),
             std::size_t{1});
    const ExtractionThresholds t = extraction_thresholds(instances(InstanceTarget::boundary, 0.7, 0.3, 9));
    QCOMPARE(t.seed, 0.7);
    QCOMPARE(t.foreground, 0.3);
    QCOMPARE(t.min_size, std::int64_t{9});
  }

  // weight_map: one sigmoid p is both maps. Two 4 x 6 cores (p = 0.9) joined by a column of p = 0.6: apart
  // at seed threshold 0.7 (the column is foreground, not seed), one object at 0.5.
  void aSigmoidIsBothMaps() {
    const std::int64_t h = 8, w = 18;
    std::vector<float> p(static_cast<std::size_t>(h * w), 0.1F);
    for (std::int64_t y = 2; y < 6; ++y)
      for (std::int64_t x = 2; x < 15; ++x) p[static_cast<std::size_t>(y * w + x)] = x == 8 ? 0.6F : 0.9F;
    const InstanceOutput apart =
        instance_output(p, h, w, 1, instances(InstanceTarget::weight_map, 0.7, 0.5, 0));
    QCOMPARE(apart.objects.size(), std::size_t{2});
    QCOMPARE(apart.objects[0].area + apart.objects[1].area, std::int64_t{4 * 13});
    QCOMPARE(apart.labels.at(3, 3), ObjectId{1});
    QCOMPARE(apart.labels.at(3, 13), ObjectId{2});
    const LabelImage want =
        extract_objects(p.data(), p.data(), h, w, {.seed = 0.7, .foreground = 0.5, .min_size = 0});
    QCOMPARE(apart.labels.ids, want.ids);
    compare_tables(apart.objects, describe_objects(want, p.data()));
    const InstanceOutput joined =
        instance_output(p, h, w, 1, instances(InstanceTarget::weight_map, 0.5, 0.5, 0));
    QCOMPARE(joined.objects.size(), std::size_t{1});
  }

  // The channels must be the target's, and the size must match: refused (usage), naming them.
  void otherChannelsAreRefused() {
    const std::vector<float> p(12 * 20, 0.5F);
    try {
      instance_output(p, kHeight, kWidth, 1, instances(InstanceTarget::boundary, 0.5, 0.5, 0));
      QFAIL("one channel taken for the boundary target");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
      QVERIFY2(
          QString(e.what()).contains("instances.target boundary gives 3 channels, got probabilities of 1"),
          e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error, instance_output(p, kHeight, kWidth + 1, 1,
                                                    instances(InstanceTarget::weight_map, 0.5, 0.5, 0)));
  }

  // predict_rows()'s rows, one image after another through one InstanceRows, give each image's objects at
  // its last row and nothing before, the same as the whole map's.
  void rowsGiveTheWholeMapsObjects() {
    const InstancesConfig config = instances(InstanceTarget::boundary, 0.6, 0.4, 3);
    InstanceRows rows(config);
    for (const auto& [h, w, phase] : {std::tuple{23, 31, 0.3}, std::tuple{17, 40, 1.1}}) {
      const std::vector<float> p = wavy_probabilities(h, w, phase);
      const InstanceOutput whole = instance_output(p, h, w, 3, config);
      QVERIFY2(whole.objects.size() >= 3, "the field should hold several objects");
      std::optional<InstanceOutput> out;
      for (std::int64_t y = 0; y < h; ++y) {
        QVERIFY(!out);
        out = rows.add({.image = 0,
                        .height = h,
                        .width = w,
                        .channels = 3,
                        .row = y,
                        .probabilities = std::span<const float>(p).subspan(
                            static_cast<std::size_t>(y * w * 3), static_cast<std::size_t>(w * 3))});
      }
      QVERIFY(out.has_value());
      QCOMPARE(out->labels.ids, whole.labels.ids);
      compare_tables(out->objects, whole.objects);
    }
    // A row out of order is refused.
    const std::vector<float> row(10 * 3, 0.3F);
    QVERIFY(!rows.add({.height = 4, .width = 10, .channels = 3, .row = 0, .probabilities = row}));
    QVERIFY_THROWS_EXCEPTION(
        Error, rows.add({.height = 4, .width = 10, .channels = 3, .row = 2, .probabilities = row}));
  }

  // The label PNG is 16-bit gray and reads back as the ids (300 = 0x012C tells the byte order); an id over
  // 65535 is refused naming the image, and nothing is written.
  void labelPngReadsBackAsTheIds() {
    QTemporaryDir dir;
    LabelImage labels(3, 4);
    labels.ids = {0, 1, 1, 300, 0, 65535, 2, 300, 7, 7, 0, 0};
    const std::string path = dir.filePath("a_labels.png").toStdString();
    write_label_png(path, labels, "in/a.png");
    QCOMPARE(probe_image(path).bit_depth, 16);
    QCOMPARE(probe_image(path).channels, std::int64_t{1});
    const MaskImage back = read_mask(path);
    QCOMPARE(back.height, std::int64_t{3});
    QCOMPARE(back.width, std::int64_t{4});
    QCOMPARE(std::vector<ObjectId>(back.values.begin(), back.values.end()), labels.ids);

    labels.at(2, 3) = 65536;
    const std::string over = dir.filePath("b_labels.png").toStdString();
    try {
      write_label_png(over, labels, "in/b.png");
      QFAIL("an id over 65535 written");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
      // Objects 1, 2, 7, 300, 65535, 65536.
      QVERIFY2(QString(e.what()).contains("in/b.png: 6 objects (ids up to 65536), more than the 65535"),
               e.what());
    }
    QVERIFY(!QFile::exists(QString::fromStdString(over)));
  }

  // The label TIFF reads back (through the TIFF reader) as the ids: 16-bit when every id fits (300 = 0x012C
  // tells the byte order), 32-bit when one does not (70000; 2^24 the largest a float, as read_image_values
  // gives them, holds exactly); runs of equal ids compress (Deflate).
  void labelTiffReadsBackAsTheIds() {
    QTemporaryDir dir;
    LabelImage labels(3, 4);
    labels.ids = {0, 1, 1, 300, 0, 65535, 2, 300, 7, 7, 0, 0};
    const std::filesystem::path narrow = dir.filePath("a_labels.tif").toStdString();
    write_label_image(narrow, labels, "in/a.png", LabelFormat::tiff);
    const ImageInfo info = probe_image(narrow);
    QCOMPARE(info.format, ImageFormat::tiff);
    QCOMPARE(info.bit_depth, 16);
    QCOMPARE(info.channels, std::int64_t{1});
    const auto as_floats = [](const std::vector<ObjectId>& ids) {
      return std::vector<float>(ids.begin(), ids.end());
    };
    QCOMPARE(read_image_values(narrow).values, as_floats(labels.ids));
    const MaskImage mask = read_mask(narrow);
    QCOMPARE(std::vector<ObjectId>(mask.values.begin(), mask.values.end()), labels.ids);

    labels.at(2, 2) = 70000;
    labels.at(2, 3) = ObjectId{1} << 24;
    const std::filesystem::path wide = dir.filePath("b_labels.tif").toStdString();
    write_label_tiff(wide, labels);
    const ValueImage back = read_image_values(wide);
    QCOMPARE(back.bit_depth, 32);
    QVERIFY(!back.floating && !back.is_signed);
    QCOMPARE(back.values, as_floats(labels.ids));

    // 512x512 of four 100x100 objects: 256 KiB of 16-bit ids raw, a few KiB written.
    LabelImage squares(512, 512);
    for (std::int64_t y = 0; y < 512; ++y)
      for (std::int64_t x = 0; x < 512; ++x)
        if (y % 256 < 100 && x % 256 < 100)
          squares.at(y, x) = static_cast<ObjectId>(1 + 2 * (y / 256) + x / 256);
    const std::filesystem::path big = dir.filePath("c_labels.tif").toStdString();
    write_label_tiff(big, squares);
    QVERIFY2(std::filesystem::file_size(big) < 512 * 512 * 2 / 20,
             std::to_string(std::filesystem::file_size(big)).c_str());
    QCOMPARE(read_image_values(big).values, as_floats(squares.ids));
  }

  // The format's names, as --labels-format takes them, and the file names each gives.
  void labelFormatsByName() {
    QCOMPARE(label_format_from_string("png", "--labels-format"), LabelFormat::png);
    QCOMPARE(label_format_from_string("tiff", "--labels-format"), LabelFormat::tiff);
    QCOMPARE(std::string(to_string(LabelFormat::tiff)), std::string("tiff"));
    QCOMPARE(label_file_suffix(LabelFormat::png), std::string("_labels.png"));
    QCOMPARE(label_file_suffix(LabelFormat::tiff), std::string("_labels.tif"));
    try {
      label_format_from_string("TIFF", "--labels-format");
      QFAIL("TIFF taken");
    } catch (const ConfigError& e) {
      QVERIFY2(QString(e.what()).contains("--labels-format: must be one of png, tiff, got 'TIFF'"), e.what());
    }
  }

  // The CSV: the header, a row per object in the table's order, and numbers that read back (strtod) as the
  // very doubles written; the mean probability empty where there is none.
  void csvReadsBackAsTheTable() {
    ObjectTable table(3);
    table[0] = {.id = 1,
                .area = 3,
                .centroid_y = 1.0 / 3.0,
                .centroid_x = 2.0 / 3.0,
                .y0 = 0,
                .x0 = 0,
                .y1 = 2,
                .x1 = 2,
                .mean_probability = 0.1 + 0.2};
    table[1] = {.id = 4,
                .area = 1,
                .centroid_y = 7,
                .centroid_x = 1e-7,
                .y0 = 7,
                .x0 = 0,
                .y1 = 8,
                .x1 = 1,
                .mean_probability = 0.987654321987654321};
    table[2] = {.id = 70000,
                .area = 12345678901,
                .centroid_y = 123456.789,
                .centroid_x = 5e-300,
                .y0 = 1,
                .x0 = 2,
                .y1 = 3,
                .x1 = 4,
                .mean_probability = std::nullopt};
    const std::string text = objects_csv(table);
    const std::vector<std::string> lines = test::split_fields(text, '\n');
    QCOMPARE(lines.size(), std::size_t{5});  // the header, 3 rows, and the empty field after the last \n
    QCOMPARE(lines[0], std::string("id,area,centroid_y,centroid_x,y0,x0,y1,x1,mean_probability"));
    QVERIFY(lines[4].empty());
    ObjectTable back;
    for (std::size_t i = 1; i <= 3; ++i) {
      const std::vector<std::string> f = test::split_fields(lines[i]);
      QCOMPARE(f.size(), std::size_t{9});
      back.push_back(test::object_row(f));
    }
    compare_tables(back, table);
    QCOMPARE(lines[2], std::string("4,1,7,1e-07,7,0,8,1,0.9876543219876543"));

    QTemporaryDir dir;
    const std::string path = dir.filePath("a_objects.csv").toStdString();
    write_objects_csv(path, table);
    const std::vector<std::byte> bytes = test::read_all(path);
    QCOMPARE(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), text);
  }
};

QTEST_GUILESS_MAIN(TestInstanceOutput)
#include "test_instance_output.moc"
