// The dataset interface's built-in source and the augmentation: synthetic cells are deterministic whatever
// the order or thread, their masks are exactly the drawn ellipses, the images carry the mask's signal in
// every channel, and flips and quarter turns move each pixel of image and mask to the same, hand-derived
// place. With instances, each pixel's id is the last drawn cell containing its centre (recomputed here from
// the cell list), most cells touch a neighbour, and the mask is the target made from the ids.
#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <thread>

#include "test_support.h"
#include "unet/core/error.h"
#include "unet/data/augment.h"
#include "unet/data/synthetic.h"
#include "unet/objects/instance_targets.h"

using namespace unet;

Q_DECLARE_METATYPE(unet::SyntheticOptions)

namespace {

bool same_sample(const Sample& a, const Sample& b) {
  return a.height == b.height && a.width == b.width && a.channels == b.channels && a.image == b.image &&
         a.mask == b.mask && a.source == b.source && a.instances.height == b.instances.height &&
         a.instances.width == b.instances.width && a.instances.ids == b.instances.ids &&
         a.weights == b.weights;
}

double foreground_fraction(const Sample& s) {
  return static_cast<double>(
             std::count_if(s.mask.begin(), s.mask.end(), [](std::uint8_t m) { return m != 0; })) /
         static_cast<double>(s.mask.size());
}

// The ellipse test written out independently of the engine: the quadratic form of a rotated ellipse.
double ellipse_form(const SyntheticCell& c, double y, double x) {
  const double dx = x - c.center_x, dy = y - c.center_y;
  const double along = dx * std::cos(c.angle) + dy * std::sin(c.angle);
  const double across = -dx * std::sin(c.angle) + dy * std::cos(c.angle);
  return along * along / (c.semi_major * c.semi_major) + across * across / (c.semi_minor * c.semi_minor);
}

SyntheticOptions options(std::int64_t height, std::int64_t width, std::int64_t channels, int classes = 1,
                         std::uint64_t seed = 0, std::size_t count = 64) {
  SyntheticOptions o;
  o.count = count;
  o.height = height;
  o.width = width;
  o.channels = channels;
  o.classes = classes;
  o.seed = seed;
  return o;
}

// Options with instance labels and `target`'s classes.
SyntheticOptions instance_options(std::int64_t height, std::int64_t width, std::int64_t channels,
                                  InstanceTarget target, std::uint64_t seed = 0, std::size_t count = 64,
                                  std::int64_t boundary_width = 2) {
  SyntheticOptions o =
      options(height, width, channels, target == InstanceTarget::boundary ? 3 : 1, seed, count);
  InstancesConfig instances;
  instances.target = target;
  instances.boundary_width = boundary_width;
  o.instances = instances;
  return o;
}

// The instance ids recomputed from the cell list, by the rule the header states: a pixel's cell is the last
// one whose contains() passes at its centre; the cells owning a pixel are numbered 1..n in drawing order.
std::vector<ObjectId> expected_ids(const std::vector<SyntheticCell>& cells, std::int64_t height,
                                   std::int64_t width) {
  std::vector<int> last(static_cast<std::size_t>(height * width), -1);
  for (std::int64_t y = 0; y < height; ++y)
    for (std::int64_t x = 0; x < width; ++x)
      for (std::size_t c = 0; c < cells.size(); ++c)
        if (cells[c].contains(static_cast<double>(y) + 0.5, static_cast<double>(x) + 0.5))
          last[static_cast<std::size_t>(y * width + x)] = static_cast<int>(c);
  std::vector<bool> owns(cells.size(), false);
  for (const int c : last)
    if (c >= 0) owns[static_cast<std::size_t>(c)] = true;
  std::vector<ObjectId> id_of(cells.size(), 0);
  ObjectId next = 0;
  for (std::size_t c = 0; c < cells.size(); ++c)
    if (owns[c]) id_of[c] = ++next;
  std::vector<ObjectId> ids(last.size(), 0);
  for (std::size_t p = 0; p < last.size(); ++p)
    if (last[p] >= 0) ids[p] = id_of[static_cast<std::size_t>(last[p])];
  return ids;
}

// Per id (index = id), whether the object has a pixel 4-adjacent to a pixel of another object.
std::vector<bool> touching_objects(const LabelImage& labels, ObjectId objects) {
  std::vector<bool> touches(static_cast<std::size_t>(objects) + 1, false);
  const auto meet = [&](ObjectId a, ObjectId b) {
    if (a == 0 || b == 0 || a == b) return;
    touches[a] = true;
    touches[b] = true;
  };
  for (std::int64_t y = 0; y < labels.height; ++y) {
    for (std::int64_t x = 0; x < labels.width; ++x) {
      if (x + 1 < labels.width) meet(labels.at(y, x), labels.at(y, x + 1));
      if (y + 1 < labels.height) meet(labels.at(y, x), labels.at(y + 1, x));
    }
  }
  return touches;
}

// A 3x4 sample whose pixels say where they came from: source pixel s = 4y + x has mask s, image channel 0
// 16y + x and channel 1 100 + s.
Sample coordinate_sample() {
  Sample s;
  s.height = 3;
  s.width = 4;
  s.channels = 2;
  s.source = "coordinates";
  s.instances = LabelImage(3, 4);  // task instances: id 1000 + the pixel's index
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) {
      const int source = 4 * y + x;
      s.image.push_back(static_cast<std::uint8_t>(16 * y + x));
      s.image.push_back(static_cast<std::uint8_t>(100 + source));
      s.mask.push_back(static_cast<std::uint8_t>(source));
      s.instances.at(y, x) = static_cast<ObjectId>(1000 + source);
    }
  }
  return s;
}

Sample random_sample(std::int64_t height, std::int64_t width, std::int64_t channels, std::uint64_t seed) {
  Rng rng(seed, 3);
  Sample s;
  s.height = height;
  s.width = width;
  s.channels = channels;
  for (std::int64_t i = 0; i < height * width * channels; ++i)
    s.image.push_back(static_cast<std::uint8_t>(rng.below(256)));
  for (std::int64_t i = 0; i < height * width; ++i) s.mask.push_back(static_cast<std::uint8_t>(rng.below(4)));
  return s;
}

}  // namespace

class TestSynthetic : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // ---- synthetic cells ----

  void sameSampleWhateverTheOrderOrThread() {
    const SyntheticOptions o = options(64, 64, 3, 1, 42, 24);
    const SyntheticCells forward(o), backward(o), parallel(o);
    std::vector<Sample> in_order, reversed(o.count), threaded(o.count);
    for (std::size_t i = 0; i < o.count; ++i) in_order.push_back(forward.get(i));
    for (std::size_t i = o.count; i-- > 0;) reversed[i] = backward.get(i);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t i = t; i < o.count; i += 4) threaded[i] = parallel.get(i);
      });
    }
    for (auto& thread : threads) thread.join();
    for (std::size_t i = 0; i < o.count; ++i) {
      QVERIFY2(same_sample(in_order[i], reversed[i]), qPrintable(QString("reverse order, sample %1").arg(i)));
      QVERIFY2(same_sample(in_order[i], threaded[i]), qPrintable(QString("threads, sample %1").arg(i)));
      QCOMPARE(in_order[i].source, "synthetic #" + std::to_string(i));
    }
    // The count only says how many there are: sample 5 of a larger set is the same sample.
    SyntheticOptions more = o;
    more.count = 1000;
    QVERIFY(same_sample(SyntheticCells(more).get(5), in_order[5]));
  }

  void differentSeedOrIndexDiffers() {
    const SyntheticCells seed0(options(64, 64, 3, 1, 0)), seed1(options(64, 64, 3, 1, 1));
    for (std::size_t i = 0; i < 8; ++i) {
      const Sample a = seed0.get(i), b = seed1.get(i), next = seed0.get(i + 1);
      QVERIFY(a.image != b.image);
      QVERIFY(a.mask != b.mask);
      QVERIFY(a.image != next.image);
      QVERIFY(a.mask != next.mask);
    }
  }

  void maskIsExactlyTheDrawnCells_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("128x128x3") << options(128, 128, 3);
    QTest::newRow("64x96x1, 4 classes") << options(64, 96, 1, 4, 9);
    QTest::newRow("8x8x1") << options(8, 8, 1, 1, 3);
  }
  void maskIsExactlyTheDrawnCells() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    const double side = std::sqrt(static_cast<double>(o.height * o.width));
    bool some_cut_by_border = false;
    for (std::size_t i = 0; i < 16; ++i) {
      const Sample s = data.get(i);
      const std::vector<SyntheticCell> cells = data.cells(i);
      QVERIFY2(cells.size() >= 3 && cells.size() <= 30, qPrintable(QString::number(cells.size())));
      for (const SyntheticCell& c : cells) {
        QVERIFY(c.center_y >= 0 && c.center_y < static_cast<double>(o.height));
        QVERIFY(c.center_x >= 0 && c.center_x < static_cast<double>(o.width));
        QVERIFY(c.semi_major >= c.semi_minor && c.semi_minor > 0.7);
        // The radius of equal area is 2..9 % of the side, but at least 1.5 pixels.
        const double radius = std::sqrt(c.semi_major * c.semi_minor);
        QVERIFY2(radius >= std::max(0.02 * side, 1.5) - 1e-9 && radius <= std::max(0.09 * side, 2.5) + 1e-9,
                 qPrintable(QString::number(radius)));
        QVERIFY(c.label >= 1 && c.label <= std::max(1, o.classes - 1));
        if (c.center_x - c.semi_major < 0 || c.center_y - c.semi_major < 0 ||
            c.center_x + c.semi_major > static_cast<double>(o.width) ||
            c.center_y + c.semi_major > static_cast<double>(o.height)) {
          some_cut_by_border = true;
        }
      }
      // Repaint the mask from the cell list: the last cell containing a pixel centre names it.
      for (std::int64_t y = 0; y < o.height; ++y) {
        for (std::int64_t x = 0; x < o.width; ++x) {
          std::uint8_t expected = 0;
          bool borderline = false;
          for (const SyntheticCell& c : cells) {
            const double q = ellipse_form(c, static_cast<double>(y) + 0.5, static_cast<double>(x) + 0.5);
            borderline = borderline || std::fabs(q - 1.0) < 1e-9;  // rounding may go either way there
            if (q <= 1.0) expected = c.label;
            QCOMPARE(c.contains(static_cast<double>(y) + 0.5, static_cast<double>(x) + 0.5), q <= 1.0);
          }
          if (!borderline) {
            QCOMPARE(s.mask[static_cast<std::size_t>(y * o.width + x)], expected);
          }
        }
      }
    }
    QVERIFY(some_cut_by_border);
  }

  void cellsStandOutFromTheBackground_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("gray 128") << options(128, 128, 1);
    QTest::newRow("rgb 128") << options(128, 128, 3);
    QTest::newRow("rgba 64x96") << options(64, 96, 4, 1, 5);
    QTest::newRow("5 channels 32") << options(32, 32, 5, 1, 6);
  }
  void cellsStandOutFromTheBackground() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    const auto channels = static_cast<std::size_t>(o.channels);
    std::vector<double> inside(channels), outside(channels);
    double inside_pixels = 0, outside_pixels = 0, fraction_sum = 0;
    double squared_steps = 0, steps = 0;  // between horizontal neighbours that are both background
    int cells = 0, dim_cells = 0;
    for (std::size_t i = 0; i < o.count; ++i) {
      const Sample s = data.get(i);
      const std::vector<std::uint8_t> grey = eight_bit_image(s).pixels;  // the 8-bit values drawn
      const double fraction = foreground_fraction(s);
      QVERIFY2(fraction > 0.02 && fraction < 0.7, qPrintable(QString("sample %1: %2").arg(i).arg(fraction)));
      fraction_sum += fraction;
      for (std::size_t p = 0; p < s.mask.size(); ++p) {
        const bool cell = s.mask[p] != 0;
        for (std::size_t k = 0; k < channels; ++k) (cell ? inside : outside)[k] += grey[p * channels + k];
        (cell ? inside_pixels : outside_pixels) += 1;
        if ((p + 1) % static_cast<std::size_t>(s.width) != 0 && !cell && s.mask[p + 1] == 0) {
          const double step = double(grey[p * channels]) - double(grey[(p + 1) * channels]);
          squared_steps += step * step;
          steps += 1;
        }
      }
      for (const SyntheticCell& c : data.cells(i)) {
        ++cells;
        dim_cells += c.brightness < 50 ? 1 : 0;
      }
    }
    const double mean_fraction = fraction_sum / static_cast<double>(o.count);
    QVERIFY2(mean_fraction > 0.08 && mean_fraction < 0.45, qPrintable(QString::number(mean_fraction)));
    // A few dim cells near the background, most clearly brighter.
    QVERIFY2(dim_cells > 0 && dim_cells < cells / 5,
             qPrintable(QString("%1 of %2").arg(dim_cells).arg(cells)));
    // Noise of 9..18 grey levels, a little more on brighter background, a little less where clamped at black:
    // neighbours differ by sqrt(2) sigma.
    const double sigma = std::sqrt(squared_steps / steps / 2.0);
    QVERIFY2(sigma > 9.0 && sigma < 17.0, qPrintable(QString::number(sigma)));
    std::vector<double> ratio(channels);
    for (std::size_t k = 0; k < channels; ++k) {
      const double in = inside[k] / inside_pixels, out = outside[k] / outside_pixels;
      if (o.channels == 4 && k == 3) {
        QCOMPARE(in, 255.0);  // opaque alpha
        QCOMPARE(out, 255.0);
        continue;
      }
      QVERIFY2(in > out + 15.0,
               qPrintable(QString("channel %1: inside %2, outside %3").arg(k).arg(in).arg(out)));
      ratio[k] = in / out;
    }
    if (channels >= 3) {
      // The colour carries signal too: the stain brightens blue far more than green.
      QVERIFY2(ratio[2] > 1.5 * ratio[1],
               qPrintable(QString("blue %1, green %2").arg(ratio[2]).arg(ratio[1])));
    }
    if (channels == 5) {
      // Every channel a different mix of the same intensity.
      std::set<int> distinct;
      for (std::size_t k = 0; k < channels; ++k)
        distinct.insert(static_cast<int>(std::lround(ratio[k] * 10)));
      QCOMPARE(distinct.size(), channels);
    }
  }

  void everyClassAppearsAndLooksDifferent_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("2") << 2;
    QTest::newRow("3") << 3;
    QTest::newRow("5") << 5;
    QTest::newRow("8") << 8;
  }
  void everyClassAppearsAndLooksDifferent() {
    QFETCH(int, classes);
    const SyntheticCells data(options(96, 96, 1, classes, 11, 12));
    QCOMPARE(data.classes(), classes);
    std::vector<double> pixels(classes), brightness(classes), cells(classes), elongation(classes);
    for (std::size_t i = 0; i < data.size(); ++i) {
      const Sample s = data.get(i);
      const std::vector<std::uint8_t> grey = eight_bit_image(s).pixels;  // the 8-bit values drawn
      for (std::size_t p = 0; p < s.mask.size(); ++p) {
        QVERIFY2(s.mask[p] < classes, qPrintable(QString::number(s.mask[p])));
        pixels[s.mask[p]] += 1;
        brightness[s.mask[p]] += grey[p];
      }
      for (const SyntheticCell& c : data.cells(i)) {
        cells[c.label] += 1;
        elongation[c.label] += c.semi_major / c.semi_minor;
      }
    }
    for (int k = 1; k < classes; ++k) QVERIFY2(pixels[k] > 0, qPrintable(QString("class %1 missing").arg(k)));
    if (classes >= 3) {
      // Class 1 is the big, round, bright kind; the last class the small, elongated, dimmer one.
      const int last = classes - 1;
      QVERIFY(brightness[1] / pixels[1] > brightness[last] / pixels[last] + 25.0);
      QVERIFY(pixels[1] / cells[1] > 1.5 * pixels[last] / cells[last]);
      QVERIFY(elongation[last] / cells[last] > 1.5 * elongation[1] / cells[1]);
    }
  }

  void sizesAndChannelsHonoured_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("8x8x1") << options(8, 8, 1);
    QTest::newRow("64x96x3") << options(64, 96, 3);
    QTest::newRow("96x64x2") << options(96, 64, 2);
    QTest::newRow("128x128x4") << options(128, 128, 4);
    QTest::newRow("32x32x5") << options(32, 32, 5);
    QTest::newRow("8x200x1") << options(8, 200, 1);
    QTest::newRow("13x17x64, 255 classes") << options(13, 17, 64, 255);
  }
  void sizesAndChannelsHonoured() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    QCOMPARE(data.size(), o.count);
    QCOMPARE(data.height(), o.height);
    QCOMPARE(data.width(), o.width);
    QCOMPARE(data.channels(), o.channels);
    QCOMPARE(data.classes(), o.classes);
    for (std::size_t i = 0; i < 4; ++i) {
      const Sample s = data.get(i);
      QCOMPARE(s.height, o.height);
      QCOMPARE(s.width, o.width);
      QCOMPARE(s.channels, o.channels);
      QCOMPARE(s.image.size(), static_cast<std::size_t>(o.height * o.width * o.channels));
      QCOMPARE(s.mask.size(), static_cast<std::size_t>(o.height * o.width));
      QVERIFY(foreground_fraction(s) > 0.0);
      if (o.channels > 1) {
        bool channels_differ = false;
        for (std::size_t p = 0; p < s.mask.size() && !channels_differ; ++p) {
          channels_differ = s.image[p * o.channels] != s.image[p * o.channels + 1];
        }
        QVERIFY(channels_differ);
      }
    }
  }

  void invalidOptionsThrow_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("count 0") << options(64, 64, 3, 1, 0, 0) << "count";
    QTest::newRow("height 7") << options(7, 64, 3) << "height";
    QTest::newRow("width 4") << options(64, 4, 3) << "width";
    QTest::newRow("height 100000") << options(100000, 64, 3) << "height";
    QTest::newRow("channels 0") << options(64, 64, 0) << "channels";
    QTest::newRow("channels 65") << options(64, 64, 65) << "channels";
    QTest::newRow("classes 0") << options(64, 64, 3, 0) << "classes";
    QTest::newRow("classes 256") << options(64, 64, 3, 256) << "classes";
  }
  void invalidOptionsThrow() {
    QFETCH(SyntheticOptions, o);
    QFETCH(QString, mentions);
    try {
      SyntheticCells data(o);
      QFAIL("invalid options accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::config);
      QVERIFY2(QString::fromStdString(e.message()).contains(mentions), e.what());
    }
  }

  void indexOutOfRangeThrows() {
    const SyntheticCells data(options(16, 16, 1, 1, 0, 3));
    QVERIFY_THROWS_EXCEPTION(Error, data.get(3));
    QVERIFY_THROWS_EXCEPTION(Error, data.cells(3));
    try {
      data.get(3);
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
    }
  }

  void describes() {
    QCOMPARE(SyntheticCells(SyntheticOptions{}).describe(),
             std::string("synthetic cells: 512 images 128x128x3, seed 0"));
    QCOMPARE(SyntheticCells(options(64, 96, 1, 3, 7, 10)).describe(),
             std::string("synthetic cells: 10 images 64x96x1, 3 classes, seed 7"));
    QCOMPARE(SyntheticCells(instance_options(64, 96, 1, InstanceTarget::boundary, 7, 10)).describe(),
             std::string("synthetic cells: 10 images 64x96x1, instances (target boundary), seed 7"));
    QCOMPARE(SyntheticCells(instance_options(64, 96, 1, InstanceTarget::weight_map, 7, 10)).describe(),
             std::string("synthetic cells: 10 images 64x96x1, instances (target weight_map), seed 7"));
  }

  // ---- instance labels ----

  void instanceIdsAreTheLastCellContainingEachPixel_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("128x128x3 boundary") << instance_options(128, 128, 3, InstanceTarget::boundary);
    QTest::newRow("64x96x1 weight_map") << instance_options(64, 96, 1, InstanceTarget::weight_map, 5);
    QTest::newRow("256x200x1 boundary") << instance_options(256, 200, 1, InstanceTarget::boundary, 8);
    QTest::newRow("8x8x1 boundary") << instance_options(8, 8, 1, InstanceTarget::boundary, 3);
  }
  void instanceIdsAreTheLastCellContainingEachPixel() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    std::size_t cells_drawn = 0, cells_seen = 0;
    for (std::size_t i = 0; i < 16; ++i) {
      const Sample s = data.get(i);
      const std::vector<SyntheticCell> cells = data.cells(i);
      QCOMPARE(s.instances.height, o.height);
      QCOMPARE(s.instances.width, o.width);
      QCOMPARE(s.instances.ids, expected_ids(cells, o.height, o.width));
      // Ids 1..n, each on some pixel, n at most the cells drawn.
      const ObjectId n = *std::max_element(s.instances.ids.begin(), s.instances.ids.end());
      const std::set<ObjectId> present(s.instances.ids.begin(), s.instances.ids.end());
      QCOMPARE(present.size(), static_cast<std::size_t>(n) + 1);  // with 0: the background
      QCOMPARE(*present.begin(), ObjectId{0});
      QVERIFY(n >= 1 && n <= cells.size());
      cells_drawn += cells.size();
      cells_seen += n;
    }
    // A cell placed against a cluster never covers an earlier cell's centre; a cell placed apart rarely does.
    QVERIFY2(static_cast<double>(cells_seen) >= 0.95 * static_cast<double>(cells_drawn),
             qPrintable(QString("%1 of %2 cells visible").arg(cells_seen).arg(cells_drawn)));
  }

  void mostCellsTouchANeighbour_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("128x128x3, the demo's") << instance_options(128, 128, 3, InstanceTarget::boundary, 0, 96);
    QTest::newRow("64x64x1, seed 7") << instance_options(64, 64, 1, InstanceTarget::boundary, 7, 96);
    QTest::newRow("256x256x1, seed 2") << instance_options(256, 256, 1, InstanceTarget::weight_map, 2, 48);
  }
  void mostCellsTouchANeighbour() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    std::size_t objects = 0, touching = 0, images_with_touching = 0, images_with_apart = 0;
    for (std::size_t i = 0; i < o.count; ++i) {
      const Sample s = data.get(i);
      const ObjectId n = *std::max_element(s.instances.ids.begin(), s.instances.ids.end());
      const std::vector<bool> touches = touching_objects(s.instances, n);
      const auto touched = static_cast<std::size_t>(std::count(touches.begin() + 1, touches.end(), true));
      objects += n;
      touching += touched;
      images_with_touching += touched > 0 ? 1 : 0;
      images_with_apart += touched < n ? 1 : 0;
    }
    const double share = static_cast<double>(touching) / static_cast<double>(objects);
    qInfo("%zu of %zu cells (%.3f) touch a neighbour; %zu of %zu images have touching cells", touching,
          objects, share, images_with_touching, static_cast<std::size_t>(o.count));
    // The header: about three in four touch (more than 0.6), the rest lie apart.
    QVERIFY2(share > 0.6 && share < 0.9, qPrintable(QString::number(share)));
    QVERIFY(images_with_touching >= o.count * 9 / 10);
    QVERIFY(images_with_apart >= o.count * 3 / 4);
  }

  void targetIsMadeFromTheIds_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::newRow("boundary, width 1") << instance_options(96, 96, 3, InstanceTarget::boundary, 4, 8, 1);
    QTest::newRow("boundary, width 2") << instance_options(96, 96, 3, InstanceTarget::boundary, 4, 8, 2);
    QTest::newRow("boundary, width 3") << instance_options(64, 80, 1, InstanceTarget::boundary, 6, 8, 3);
    QTest::newRow("weight_map") << instance_options(96, 96, 3, InstanceTarget::weight_map, 4, 8);
  }
  void targetIsMadeFromTheIds() {
    QFETCH(SyntheticOptions, o);
    const SyntheticCells data(o);
    const bool boundary = o.instances->target == InstanceTarget::boundary;
    QCOMPARE(data.classes(), boundary ? 3 : 1);
    bool some_boundary_between_cells = false;
    for (std::size_t i = 0; i < o.count; ++i) {
      const Sample s = data.get(i);
      if (boundary) {
        QCOMPARE(s.mask, boundary_classes(s.instances, static_cast<int>(o.instances->boundary_width)));
        QVERIFY(s.weights.empty());
        // Where two cells meet, both sides are boundary: touching cells are told apart.
        for (std::size_t p = 0; p + 1 < s.mask.size(); ++p) {
          const ObjectId a = s.instances.ids[p], b = s.instances.ids[p + 1];
          if ((p + 1) % static_cast<std::size_t>(o.width) == 0 || a == 0 || b == 0 || a == b) continue;
          QCOMPARE(s.mask[p], kBoundaryClass);
          QCOMPARE(s.mask[p + 1], kBoundaryClass);
          some_boundary_between_cells = true;
        }
      } else {
        // The mask is the cells' foreground less a ridge where two cells meet, the weights those of the
        // separated cells.
        const LabelImage separated = separate_touching(s.instances);
        for (std::size_t p = 0; p < s.mask.size(); ++p) QCOMPARE(s.mask[p], separated.ids[p] != 0 ? 1 : 0);
        QCOMPARE(s.weights, border_weights(separated, o.instances->border_w0, o.instances->border_sigma,
                                           o.instances->balance_classes));
        // Two foreground pixels of the mask side by side (8-neighbours) belong to the same cell: the binary
        // target keeps touching cells apart.
        const std::int64_t w = o.width;
        const auto at = [w](std::int64_t y, std::int64_t x) { return static_cast<std::size_t>(y * w + x); };
        for (std::int64_t y = 0; y < o.height; ++y) {
          for (std::int64_t x = 0; x < w; ++x) {
            // The neighbours after (y, x) in raster order: right, and the three below.
            const std::int64_t after[4][2] = {{0, 1}, {1, -1}, {1, 0}, {1, 1}};
            for (const auto& d : after) {
              const std::int64_t ny = y + d[0], nx = x + d[1];
              if (ny >= o.height || nx < 0 || nx >= w || s.mask[at(y, x)] == 0 || s.mask[at(ny, nx)] == 0)
                continue;
              QCOMPARE(s.instances.ids[at(ny, nx)], s.instances.ids[at(y, x)]);
            }
          }
        }
        some_boundary_between_cells =
            some_boundary_between_cells || separated.ids != s.instances.ids;  // the cells touch somewhere
        // The border weight rises above the class weights in the gaps between cells.
        QVERIFY(*std::max_element(s.weights.begin(), s.weights.end()) > 3.0f);
      }
    }
    QVERIFY(some_boundary_between_cells);
  }

  void instancesChangeOnlyTheTarget() {
    // The same seed draws the same image and cells with or without instances; the semantic mask is the
    // foreground of the ids, and a semantic sample carries neither ids nor weights.
    const SyntheticCells semantic(options(96, 80, 3, 1, 12, 12));
    const SyntheticCells boundary(instance_options(96, 80, 3, InstanceTarget::boundary, 12, 12));
    const SyntheticCells weighted(instance_options(96, 80, 3, InstanceTarget::weight_map, 12, 12));
    for (std::size_t i = 0; i < semantic.size(); ++i) {
      const Sample s = semantic.get(i), b = boundary.get(i), w = weighted.get(i);
      QVERIFY(s.instances.ids.empty() && s.instances.height == 0);
      QVERIFY(s.weights.empty());
      QCOMPARE(b.image, s.image);
      QCOMPARE(w.image, s.image);
      QCOMPARE(b.instances.ids, w.instances.ids);
      QCOMPARE(b.source, s.source);
      for (std::size_t p = 0; p < s.mask.size(); ++p)
        QCOMPARE(s.mask[p], b.instances.ids[p] != 0 ? std::uint8_t{1} : std::uint8_t{0});
      QCOMPARE(semantic.cells(i).size(), boundary.cells(i).size());
    }
  }

  void instancesSameWhateverTheOrderOrThread() {
    const SyntheticOptions o = instance_options(64, 64, 1, InstanceTarget::weight_map, 21, 12);
    const SyntheticCells first(o), second(o);
    std::vector<Sample> in_order, threaded(o.count);
    for (std::size_t i = 0; i < o.count; ++i) in_order.push_back(first.get(i));
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {  // each thread every third sample, last first
        for (std::size_t k = 0; k < o.count; ++k) {
          const std::size_t i = o.count - 1 - k;
          if (i % 3 == t) threaded[i] = second.get(i);
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (std::size_t i = 0; i < o.count; ++i) {
      QVERIFY(!in_order[i].weights.empty());
      QVERIFY2(same_sample(in_order[i], threaded[i]), qPrintable(QString("sample %1").arg(i)));
      QVERIFY(same_sample(first.get(i), in_order[i]));  // and asked again
    }
  }

  void sampleBytesCountWhatASampleHolds() {
    // 64 x 64 pixels: 3 floats and a mask byte; the ids add 4 bytes, the weights 4 more.
    QCOMPARE(SyntheticCells(options(64, 64, 3)).sample_bytes(), std::int64_t{4096 * 13});
    QCOMPARE(SyntheticCells(instance_options(64, 64, 3, InstanceTarget::boundary)).sample_bytes(),
             std::int64_t{4096 * 17});
    QCOMPARE(SyntheticCells(instance_options(64, 64, 3, InstanceTarget::weight_map)).sample_bytes(),
             std::int64_t{4096 * 21});
    for (const InstanceTarget target : {InstanceTarget::boundary, InstanceTarget::weight_map}) {
      const Sample s = SyntheticCells(instance_options(64, 64, 3, target)).get(0);
      const auto held = static_cast<std::int64_t>(s.image.size() * sizeof(float) + s.mask.size() +
                                                  s.instances.ids.size() * sizeof(ObjectId) +
                                                  s.weights.size() * sizeof(float));
      QCOMPARE(SyntheticCells(instance_options(64, 64, 3, target)).sample_bytes(), held);
    }
  }

  void instancesWithTheWrongClassesThrow_data() {
    QTest::addColumn<SyntheticOptions>("o");
    QTest::addColumn<QString>("mentions");
    SyntheticOptions boundary_binary = instance_options(64, 64, 3, InstanceTarget::boundary);
    boundary_binary.classes = 1;
    SyntheticOptions weights_three = instance_options(64, 64, 3, InstanceTarget::weight_map);
    weights_three.classes = 3;
    QTest::newRow("boundary, 1 class")
        << boundary_binary << "classes must be 3 with instances target boundary, got 1";
    QTest::newRow("weight_map, 3 classes")
        << weights_three << "classes must be 1 with instances target weight_map, got 3";
  }
  void instancesWithTheWrongClassesThrow() {
    QFETCH(SyntheticOptions, o);
    QFETCH(QString, mentions);
    try {
      SyntheticCells data(o);
      QFAIL("invalid options accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::config);
      QVERIFY2(QString::fromStdString(e.message()).contains(mentions), e.what());
    }
  }

  // ---- augmentation ----

  void movesEveryPixelWhereExpected_data() {
    QTest::addColumn<bool>("flip_h");
    QTest::addColumn<bool>("flip_v");
    QTest::addColumn<int>("turns");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<QList<int>>(
        "sources");  // the source pixel (4y + x of the 3x4 input) of each output pixel

    // Input:           flip_h:          flip_v:          both:
    //  0  1  2  3       3  2  1  0       8  9 10 11      11 10  9  8
    //  4  5  6  7       7  6  5  4       4  5  6  7       7  6  5  4
    //  8  9 10 11      11 10  9  8       0  1  2  3       3  2  1  0
    // A counter-clockwise quarter turn makes output row i the input column (width - 1 - i), top to bottom.
    const QList<int> input{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const QList<int> flip_h{3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8};
    const QList<int> flip_v{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3};
    const QList<int> both{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    const QList<int> input_ccw{3, 7, 11, 2, 6, 10, 1, 5, 9, 0, 4, 8};
    const QList<int> input_cw{8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3};
    const QList<int> transpose{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    const QList<int> anti_transpose{11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0};

    QTest::newRow("identity") << false << false << 0 << 3 << 4 << input;
    QTest::newRow("rot90") << false << false << 1 << 4 << 3 << input_ccw;
    QTest::newRow("rot180") << false << false << 2 << 3 << 4 << both;
    QTest::newRow("rot270") << false << false << 3 << 4 << 3 << input_cw;
    QTest::newRow("flip_h") << true << false << 0 << 3 << 4 << flip_h;
    QTest::newRow("flip_h+rot90") << true << false << 1 << 4 << 3 << transpose;
    QTest::newRow("flip_h+rot180") << true << false << 2 << 3 << 4 << flip_v;
    QTest::newRow("flip_h+rot270") << true << false << 3 << 4 << 3 << anti_transpose;
    QTest::newRow("flip_v") << false << true << 0 << 3 << 4 << flip_v;
    QTest::newRow("flip_v+rot90") << false << true << 1 << 4 << 3 << anti_transpose;
    QTest::newRow("flip_v+rot180") << false << true << 2 << 3 << 4 << flip_h;
    QTest::newRow("flip_v+rot270") << false << true << 3 << 4 << 3 << transpose;
    QTest::newRow("flip_h+flip_v") << true << true << 0 << 3 << 4 << both;
    QTest::newRow("flip_h+flip_v+rot90") << true << true << 1 << 4 << 3 << input_cw;
    QTest::newRow("flip_h+flip_v+rot180") << true << true << 2 << 3 << 4 << input;
    QTest::newRow("flip_h+flip_v+rot270") << true << true << 3 << 4 << 3 << input_ccw;
  }
  void movesEveryPixelWhereExpected() {
    QFETCH(bool, flip_h);
    QFETCH(bool, flip_v);
    QFETCH(int, turns);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(QList<int>, sources);
    const Augmentation augmentation{flip_h, flip_v, turns};
    QCOMPARE(QString::fromStdString(to_string(augmentation)), QString(QTest::currentDataTag()));
    Sample s = coordinate_sample();
    apply(augmentation, s);
    QCOMPARE(s.height, height);
    QCOMPARE(s.width, width);
    QCOMPARE(s.channels, 2);
    QCOMPARE(s.image.size(), std::size_t{24});
    QCOMPARE(s.mask.size(), std::size_t{12});
    QCOMPARE(s.instances.height, std::int64_t{height});
    QCOMPARE(s.instances.width, std::int64_t{width});
    for (int p = 0; p < 12; ++p) {
      const int source = sources[p];
      QCOMPARE(int(s.mask[p]), source);
      QCOMPARE(int(s.image[2 * p]), 16 * (source / 4) + source % 4);
      QCOMPARE(int(s.image[2 * p + 1]), 100 + source);
      QCOMPARE(s.instances.ids[static_cast<std::size_t>(p)], static_cast<ObjectId>(1000 + source));
    }
  }

  void inversesGiveBackTheSample() {
    const Sample original = random_sample(5, 7, 3, 1);
    Sample s = original;
    for (int turn = 0; turn < 4; ++turn) {
      apply(Augmentation{false, false, 1}, s);
      QCOMPARE(s.height, turn % 2 == 0 ? 7 : 5);
    }
    QVERIFY(same_sample(s, original));
    apply(Augmentation{true, false, 0}, s);
    QVERIFY(!same_sample(s, original));
    apply(Augmentation{true, false, 0}, s);
    QVERIFY(same_sample(s, original));
    apply(Augmentation{false, true, 0}, s);
    apply(Augmentation{false, true, 0}, s);
    QVERIFY(same_sample(s, original));
    apply(Augmentation{true, true, 3}, s);
    apply(Augmentation{false, false, 1}, s);  // undoes the quarter turns; both flips remain = a half turn
    apply(Augmentation{false, false, 2}, s);
    QVERIFY(same_sample(s, original));
  }

  void quarterTurnsAreTakenModuloFour() {
    Sample a = random_sample(4, 6, 2, 2), b = a, c = a, d = a;
    apply(Augmentation{false, false, 1}, a);
    apply(Augmentation{false, false, 5}, b);
    apply(Augmentation{false, false, 3}, c);
    apply(Augmentation{false, false, -1}, d);
    QVERIFY(same_sample(a, b));
    QVERIFY(same_sample(c, d));
    QVERIFY(!same_sample(a, c));
    QCOMPARE(to_string(Augmentation{false, false, -1}), std::string("rot270"));
  }

  void maskOptional() {
    Sample with_mask = random_sample(3, 5, 1, 4), without = with_mask;
    without.mask.clear();
    apply(Augmentation{true, false, 1}, with_mask);
    apply(Augmentation{true, false, 1}, without);
    QVERIFY(without.mask.empty());
    QCOMPARE(without.image, with_mask.image);
    QCOMPARE(without.height, 5);
  }

  void mismatchedBuffersThrow() {
    Sample s = random_sample(3, 5, 2, 5);
    s.image.pop_back();
    QVERIFY_THROWS_EXCEPTION(Error, apply(Augmentation{true, false, 0}, s));
    s = random_sample(3, 5, 2, 5);
    s.mask.push_back(0);
    QVERIFY_THROWS_EXCEPTION(Error, apply(Augmentation{}, s));
    s = random_sample(3, 5, 2, 5);
    s.instances = LabelImage(5, 3);  // the sample's pixel count, transposed
    QVERIFY_THROWS_EXCEPTION(Error, apply(Augmentation{}, s));
  }

  void randomAugmentationDrawsEveryAllowedTransform_data() {
    QTest::addColumn<bool>("square");
    QTest::newRow("square") << true;
    QTest::newRow("not square") << false;
  }
  void randomAugmentationDrawsEveryAllowedTransform() {
    QFETCH(bool, square);
    Rng rng(17, 1);
    std::array<int, 16> seen{};  // by flip_h + 2 flip_v + 4 rotate90
    const int draws = 4000;
    for (int i = 0; i < draws; ++i) {
      const Augmentation a = random_augmentation(rng, square);
      QVERIFY(a.rotate90 >= 0 && a.rotate90 <= 3);
      if (!square) QVERIFY2(a.rotate90 % 2 == 0, "odd quarter turn for a non-square image");
      ++seen[(a.flip_horizontal ? 1 : 0) + (a.flip_vertical ? 2 : 0) + 4 * a.rotate90];
    }
    const int kinds = square ? 16 : 8, expected = draws / kinds;
    for (int code = 0; code < 16; ++code) {
      if (!square && (code / 4) % 2 == 1) continue;
      QVERIFY2(seen[code] > expected * 3 / 4 && seen[code] < expected * 5 / 4,
               qPrintable(QString("combination %1 drawn %2 times, expected about %3")
                              .arg(code)
                              .arg(seen[code])
                              .arg(expected)));
    }
  }
};

QTEST_GUILESS_MAIN(TestSynthetic)
#include "test_synthetic.moc"
