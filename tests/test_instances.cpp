// Instance targets and post-processing (objects/instance_targets.h, objects/instance_extraction.h) against
// references written here: class images drawn by hand, brute-force distances (every pixel against every
// pixel) for the boundary band and the U-Net paper's border weights, objects found in synthetic network
// outputs compared with the scene they were drawn from by IoU, and object descriptions worked out by hand.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_support.h"
#include "unet/core/error.h"
#include "unet/core/rng.h"
#include "unet/objects/instance_extraction.h"
#include "unet/objects/instance_targets.h"
#include "unet/objects/threshold_search.h"

using namespace unet;

namespace {

// Hand-drawn label images: '.' is the background, each letter an object with a deliberately scattered id.
ObjectId id_of(char c) {
  switch (c) {
    case '.':
      return 0;
    case 'A':
      return 7;
    case 'B':
      return 70000;
    case 'C':
      return 3;
    case 'D':
      return 4000000000U;
    default:
      return 0xFFFFFFFFU;
  }
}

LabelImage labels_from(const std::vector<std::string>& rows) {
  LabelImage labels(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(rows.front().size()));
  for (std::int64_t y = 0; y < labels.height; ++y)
    for (std::int64_t x = 0; x < labels.width; ++x)
      labels.at(y, x) = id_of(rows[static_cast<std::size_t>(y)][static_cast<std::size_t>(x)]);
  return labels;
}

// '.' background, 'i' interior, 'b' boundary.
std::vector<std::uint8_t> classes_from(const std::vector<std::string>& rows) {
  std::vector<std::uint8_t> classes;
  for (const std::string& row : rows)
    for (const char c : row)
      classes.push_back(c == '.' ? kBackgroundClass : c == 'i' ? kInteriorClass : kBoundaryClass);
  return classes;
}

QString drawn(const std::vector<std::uint8_t>& classes, std::int64_t width) {
  QString out;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    if (i % static_cast<std::size_t>(width) == 0) out += '\n';
    out += classes[i] == kBackgroundClass ? '.' : classes[i] == kInteriorClass ? 'i' : 'b';
  }
  return out;
}

struct Disk {
  double y = 0, x = 0, radius = 0;
  ObjectId id = 0;
};

bool inside(const Disk& d, std::int64_t y, std::int64_t x) {
  const double dy = static_cast<double>(y) - d.y, dx = static_cast<double>(x) - d.x;
  return dy * dy + dx * dx <= d.radius * d.radius;
}

// Disks drawn in order (a later one covers an earlier one), some over the image's border; distinct large ids.
LabelImage disk_scene(std::int64_t height, std::int64_t width, int count, double min_radius,
                      double max_radius, std::uint64_t seed) {
  Rng rng(seed);
  LabelImage labels(height, width);
  std::set<ObjectId> used;
  for (int k = 0; k < count; ++k) {
    Disk d{rng.uniform(-2, static_cast<double>(height) + 1), rng.uniform(-2, static_cast<double>(width) + 1),
           rng.uniform(min_radius, max_radius), 0};
    do d.id = static_cast<ObjectId>(1 + rng.below(0xFFFFFFFEU));
    while (!used.insert(d.id).second);
    for (std::int64_t y = 0; y < height; ++y)
      for (std::int64_t x = 0; x < width; ++x)
        if (inside(d, y, x)) labels.at(y, x) = d.id;
  }
  return labels;
}

// Every pixel its own random id among a few: ragged objects, many edges, ids split in pieces.
LabelImage noise_scene(std::int64_t height, std::int64_t width, std::uint64_t seed) {
  Rng rng(seed);
  LabelImage labels(height, width);
  const ObjectId choices[] = {0, 0, 5, 900, 123456};
  for (ObjectId& id : labels.ids) id = choices[rng.below(5)];
  return labels;
}

// boundary_classes by its definition, with integer squared distances: an object pixel is boundary when some
// edge pixel of the same id lies at squared distance < width^2.
std::vector<std::uint8_t> reference_boundary_classes(const LabelImage& labels, int width) {
  const std::int64_t h = labels.height, w = labels.width;
  struct Pixel {
    std::int64_t y, x;
  };
  std::map<ObjectId, std::vector<Pixel>> edges;
  for (std::int64_t y = 0; y < h; ++y) {
    for (std::int64_t x = 0; x < w; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      bool edge = false;
      const std::int64_t steps[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};
      for (const auto& s : steps) {
        const std::int64_t ny = y + s[0], nx = x + s[1];
        if (ny >= 0 && ny < h && nx >= 0 && nx < w && labels.at(ny, nx) != id) edge = true;
      }
      if (edge) edges[id].push_back({y, x});
    }
  }
  std::vector<std::uint8_t> classes(labels.ids.size(), kBackgroundClass);
  for (std::int64_t y = 0; y < h; ++y) {
    for (std::int64_t x = 0; x < w; ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) continue;
      bool near = false;
      for (const Pixel& e : edges[id])
        near =
            near || (e.y - y) * (e.y - y) + (e.x - x) * (e.x - x) < static_cast<std::int64_t>(width) * width;
      classes[static_cast<std::size_t>(y * w + x)] = near ? kBoundaryClass : kInteriorClass;
    }
  }
  return classes;
}

double cutoff_of(double sigma) {
  return std::sqrt(2.0 * std::log(1000.0)) * sigma;
}

// The border weights by brute force: for every background pixel the distance to every object pixel, the least
// per object, the two least of those. `sums` receives d1 + d2 per pixel (infinity where undefined).
std::vector<double> reference_border_weights(const LabelImage& labels, double w0, double sigma, bool balance,
                                             std::vector<double>& sums) {
  const std::int64_t h = labels.height, w = labels.width;
  std::map<ObjectId, std::vector<std::pair<std::int64_t, std::int64_t>>> pixels;
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      if (labels.at(y, x) != 0) pixels[labels.at(y, x)].emplace_back(y, x);
  const double n = static_cast<double>(h * w);
  double foreground = 0;
  for (const auto& [id, list] : pixels) foreground += static_cast<double>(list.size());
  const bool both = foreground > 0 && foreground < n;
  const double wc_background = balance && both ? n / (2 * (n - foreground)) : 1.0;
  const double wc_foreground = balance && both ? n / (2 * foreground) : 1.0;
  std::vector<double> weights(labels.ids.size());
  sums.assign(labels.ids.size(), std::numeric_limits<double>::infinity());
  for (std::int64_t y = 0; y < h; ++y) {
    for (std::int64_t x = 0; x < w; ++x) {
      const auto i = static_cast<std::size_t>(y * w + x);
      if (labels.at(y, x) != 0) {
        weights[i] = wc_foreground;
        continue;
      }
      std::vector<double> per_object;
      for (const auto& [id, list] : pixels) {
        std::int64_t least = std::numeric_limits<std::int64_t>::max();
        for (const auto& [py, px] : list) least = std::min(least, (py - y) * (py - y) + (px - x) * (px - x));
        per_object.push_back(std::sqrt(static_cast<double>(least)));
      }
      std::sort(per_object.begin(), per_object.end());
      weights[i] = wc_background;
      if (per_object.size() < 2) continue;
      sums[i] = per_object[0] + per_object[1];
      if (sums[i] < cutoff_of(sigma)) weights[i] += w0 * std::exp(-sums[i] * sums[i] / (2 * sigma * sigma));
    }
  }
  return weights;
}

// The IoU of object `a` of one label image with object `b` of another.
// A binary network's output over two touching disks (ids 1 left, 2 right): 0.95 inside with a dip to 0.55
// along the line where they meet (pixels of disk 1 with disk 2 to their right), 0.05 outside.
std::vector<float> dipped_probability(const LabelImage& truth) {
  std::vector<float> p(truth.ids.size(), 0.05F);
  for (std::int64_t y = 0; y < truth.height; ++y) {
    for (std::int64_t x = 0; x < truth.width; ++x) {
      if (truth.at(y, x) == 0) continue;
      double nearest_line = 1e9;
      for (std::int64_t ly = 0; ly < truth.height; ++ly) {
        for (std::int64_t lx = 0; lx + 1 < truth.width; ++lx) {
          if (truth.at(ly, lx) == 1 && truth.at(ly, lx + 1) == 2)
            nearest_line = std::min(nearest_line, std::hypot(static_cast<double>(ly - y), lx + 0.5 - x));
        }
      }
      p[static_cast<std::size_t>(y * truth.width + x)] =
          static_cast<float>(0.95 - 0.4 * std::exp(-nearest_line * nearest_line / 8));
    }
  }
  return p;
}

double iou(const LabelImage& first, ObjectId a, const LabelImage& second, ObjectId b) {
  std::int64_t both = 0, either = 0;
  for (std::size_t i = 0; i < first.ids.size(); ++i) {
    const bool in_a = first.ids[i] == a, in_b = second.ids[i] == b;
    both += in_a && in_b ? 1 : 0;
    either += in_a || in_b ? 1 : 0;
  }
  return either == 0 ? 0.0 : static_cast<double>(both) / static_cast<double>(either);
}

// The ids present, 0 left out.
std::set<ObjectId> ids_in(const LabelImage& labels) {
  std::set<ObjectId> ids(labels.ids.begin(), labels.ids.end());
  ids.erase(0);
  return ids;
}

// Objects numbered 1..n in the raster order of their first pixel.
bool numbered_in_raster_order(const LabelImage& labels) {
  ObjectId next = 1;
  for (const ObjectId id : labels.ids) {
    HELPER_VERIFY2(id < next + 1, qPrintable(QString("id %1 before id %2").arg(id).arg(next)));
    if (id == next) ++next;
  }
  return true;
}

// Two overlapping disks split where they meet (each pixel to the nearer centre): the truth of the extraction
// tests.
struct TwoDisks {
  LabelImage truth{64, 88};
  TwoDisks() {
    const Disk a{32, 30, 15, 1}, b{33, 56, 15, 2};
    for (std::int64_t y = 0; y < truth.height; ++y) {
      for (std::int64_t x = 0; x < truth.width; ++x) {
        if (!inside(a, y, x) && !inside(b, y, x)) continue;
        const double da = std::hypot(static_cast<double>(y) - a.y, static_cast<double>(x) - a.x);
        const double db = std::hypot(static_cast<double>(y) - b.y, static_cast<double>(x) - b.x);
        truth.at(y, x) = da <= db ? 1 : 2;
      }
    }
  }
};

// Each true object has an extracted object with IoU > 0.9, and no two share one.
bool each_found(const LabelImage& truth, const LabelImage& found) {
  std::set<ObjectId> taken;
  for (const ObjectId t : ids_in(truth)) {
    double best = 0;
    ObjectId best_id = 0;
    for (const ObjectId f : ids_in(found)) {
      const double v = iou(truth, t, found, f);
      if (v > best) {
        best = v;
        best_id = f;
      }
    }
    HELPER_VERIFY2(best > 0.9, qPrintable(QString("object %1: best IoU %2").arg(t).arg(best)));
    HELPER_VERIFY(taken.insert(best_id).second);
  }
  return true;
}

// The objects tile the foreground: a pixel has an object exactly where the foreground probability is above
// its threshold (with min_size 0).
bool tiles_foreground(const LabelImage& found, const std::vector<float>& foreground, double threshold) {
  for (std::size_t i = 0; i < found.ids.size(); ++i)
    HELPER_VERIFY2((found.ids[i] != 0) == (foreground[i] > threshold),
                   qPrintable(QString("pixel %1").arg(i)));
  return true;
}

}  // namespace

class TestInstances : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- boundary_classes ----------------------------------------------------------------------------------

  void boundary_classes_by_hand_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<std::vector<std::string>>("labels");
    QTest::addColumn<std::vector<std::string>>("expected");
    const std::vector<std::string> two_small = {
        "..........",  //
        ".AAAABBBB.",  //
        ".AAAABBBB.",  //
        ".AAAABBBB.",  //
        ".AAAABBBB.",  //
        "..........",
    };
    QTest::newRow("two touching 4x4 squares, width 1") << 1 << two_small
                                                       << std::vector<std::string>{
                                                              "..........",  //
                                                              ".bbbbbbbb.",  //
                                                              ".biibbiib.",  //
                                                              ".biibbiib.",  //
                                                              ".bbbbbbbb.",  //
                                                              "..........",
                                                          };
    QTest::newRow("two touching 4x4 squares, width 2") << 2 << two_small
                                                       << std::vector<std::string>{
                                                              "..........",  //
                                                              ".bbbbbbbb.",  //
                                                              ".bbbbbbbb.",  //
                                                              ".bbbbbbbb.",  //
                                                              ".bbbbbbbb.",  //
                                                              "..........",
                                                          };
    const std::vector<std::string> two_large = {
        "..............",  //
        ".AAAAAABBBBBB.",  //
        ".AAAAAABBBBBB.",  //
        ".AAAAAABBBBBB.",  //
        ".AAAAAABBBBBB.",  //
        ".AAAAAABBBBBB.",  //
        ".AAAAAABBBBBB.",  //
        "..............",
    };
    // Distance 2 is not < 2: the centre 2x2 of each square stays interior.
    QTest::newRow("two touching 6x6 squares, width 2") << 2 << two_large
                                                       << std::vector<std::string>{
                                                              "..............",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbiibbbbiibb.",  //
                                                              ".bbiibbbbiibb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              "..............",
                                                          };
    QTest::newRow("two touching 6x6 squares, width 3") << 3 << two_large
                                                       << std::vector<std::string>{
                                                              "..............",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              ".bbbbbbbbbbbb.",  //
                                                              "..............",
                                                          };
    // The image's border is not an edge: the square in the corner has edges on its two inner sides only.
    const std::vector<std::string> corner = {
        "AAAA..",  //
        "AAAA..",  //
        "AAAA..",  //
        "AAAA..",  //
        "......",
    };
    QTest::newRow("in the corner, width 1") << 1 << corner
                                            << std::vector<std::string>{
                                                   "iiib..",  //
                                                   "iiib..",  //
                                                   "iiib..",  //
                                                   "bbbb..",  //
                                                   "......",
                                               };
    // (1, 1) is 2 from the edges at (3, 1) and (1, 3): interior; (1, 2) is 1 from (1, 3).
    QTest::newRow("in the corner, width 2") << 2 << corner
                                            << std::vector<std::string>{
                                                   "iibb..",  //
                                                   "iibb..",  //
                                                   "bbbb..",  //
                                                   "bbbb..",  //
                                                   "......",
                                               };
    QTest::newRow("a single pixel, width 1") << 1 << std::vector<std::string>{"...", ".D.", "..."}
                                             << std::vector<std::string>{"...", ".b.", "..."};
    QTest::newRow("a single pixel, width 4") << 4 << std::vector<std::string>{"...", ".D.", "..."}
                                             << std::vector<std::string>{"...", ".b.", "..."};
    QTest::newRow("a single pixel on the border, width 2")
        << 2 << std::vector<std::string>{"D..", "...", "..."}
        << std::vector<std::string>{"b..", "...", "..."};
    // A pixel object inside another: both sides of the line are boundary.
    QTest::newRow("a pixel inside a square, width 1") << 1
                                                       << std::vector<std::string>{
                                                              "AAAAA",  //
                                                              "AAAAA",  //
                                                              "AACAA",  //
                                                              "AAAAA",  //
                                                              "AAAAA",
                                                          }
                                                       << std::vector<std::string>{
                                                              "iiiii",  //
                                                              "iibii",  //
                                                              "ibbbi",  //
                                                              "iibii",  //
                                                              "iiiii",
                                                          };
    // (0, 1) is sqrt(2) < 2 from the edge pixel (1, 2): boundary; (0, 0) is sqrt(5) from the nearest:
    // interior.
    QTest::newRow("a pixel inside a square, width 2") << 2
                                                       << std::vector<std::string>{
                                                              "AAAAA",  //
                                                              "AAAAA",  //
                                                              "AACAA",  //
                                                              "AAAAA",  //
                                                              "AAAAA",
                                                          }
                                                       << std::vector<std::string>{
                                                              "ibbbi",  //
                                                              "bbbbb",  //
                                                              "bbbbb",  //
                                                              "bbbbb",  //
                                                              "ibbbi",
                                                          };
    QTest::newRow("one object fills the image")
        << 2 << std::vector<std::string>{"BBB", "BBB"} << std::vector<std::string>{"iii", "iii"};
    QTest::newRow("a 1x1 object image")
        << 1 << std::vector<std::string>{"A"} << std::vector<std::string>{"i"};
    QTest::newRow("no object") << 3 << std::vector<std::string>{"....", "...."}
                               << std::vector<std::string>{"....", "...."};
  }
  void boundary_classes_by_hand() {
    QFETCH(int, width);
    QFETCH(std::vector<std::string>, labels);
    QFETCH(std::vector<std::string>, expected);
    const LabelImage image = labels_from(labels);
    QCOMPARE(drawn(boundary_classes(image, width), image.width), drawn(classes_from(expected), image.width));
  }

  // Random scenes against the definition, widths 1 to 5.
  void boundary_classes_match_brute_force_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("scene");
    for (int width = 1; width <= 5; ++width) {
      for (int scene = 0; scene < 3; ++scene)
        QTest::newRow(qPrintable(QString("width %1, scene %2").arg(width).arg(scene))) << width << scene;
    }
  }
  void boundary_classes_match_brute_force() {
    QFETCH(int, width);
    QFETCH(int, scene);
    const LabelImage labels = scene == 0   ? disk_scene(40, 52, 7, 3, 11, 11)
                              : scene == 1 ? disk_scene(33, 29, 12, 1, 6, 12)
                                           : noise_scene(17, 23, 13);
    const std::vector<std::uint8_t> classes = boundary_classes(labels, width);
    QCOMPARE(drawn(classes, labels.width), drawn(reference_boundary_classes(labels, width), labels.width));
    if (scene == 0) {  // a scene where the band is thinner than the objects
      QVERIFY(std::count(classes.begin(), classes.end(), kInteriorClass) > 0);
      QVERIFY(std::count(classes.begin(), classes.end(), kBoundaryClass) > 0);
    }
  }

  void boundary_classes_refusals() {
    const LabelImage image = labels_from({"AB", ".."});
    QVERIFY_THROWS_EXCEPTION(Error, boundary_classes(image, 0));
    QVERIFY_THROWS_EXCEPTION(Error, boundary_classes(image, -2));
    LabelImage malformed = image;
    malformed.ids.pop_back();
    QVERIFY_THROWS_EXCEPTION(Error, boundary_classes(malformed, 1));
    try {
      boundary_classes(image, 0);
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
      QVERIFY2(e.message().find("boundary_width") != std::string::npos, e.what());
      QVERIFY2(e.message().find("got 0") != std::string::npos, e.what());
    }
  }

  // --- separate_touching ---------------------------------------------------------------------------------

  // Ids: C 3 < A 7 < B 70000 < D 4e9. Where two objects meet, the larger id gives up the pixels that have an
  // 8-neighbour of the smaller one.
  void separate_touching_by_hand_data() {
    QTest::addColumn<std::vector<std::string>>("labels");
    QTest::addColumn<std::vector<std::string>>("expected");
    QTest::newRow("side by side: a one-pixel ridge")
        << std::vector<std::string>{"AAABBB", "AAABBB"} << std::vector<std::string>{"AAA.BB", "AAA.BB"};
    QTest::newRow("corner to corner: the larger id's corner goes")
        << std::vector<std::string>{"AAA...", "AAA...", "...CCC"}
        << std::vector<std::string>{"AAA...", "AA....", "...CCC"};
    QTest::newRow("apart already: unchanged") << std::vector<std::string>{"AA.BB", "AA.BB", ".....", "DD.CC"}
                                              << std::vector<std::string>{"AA.BB", "AA.BB", ".....", "DD.CC"};
    QTest::newRow("three meet: removals do not cascade")
        << std::vector<std::string>{"CCAABB", "CCAABB", "CCAABB"}
        << std::vector<std::string>{"CC.A.B", "CC.A.B", "CC.A.B"};
    QTest::newRow("a ring around a smaller id gives up its inner edge")
        << std::vector<std::string>{"BBBBB", "BBBBB", "BBABB", "BBBBB", "BBBBB"}
        << std::vector<std::string>{"BBBBB", "B...B", "B.A.B", "B...B", "BBBBB"};
    QTest::newRow("a pixel object beside a smaller id is lost")
        << std::vector<std::string>{"AAD", "AA."} << std::vector<std::string>{"AA.", "AA."};
    QTest::newRow("one object in pieces")
        << std::vector<std::string>{"A.A", "A.A"} << std::vector<std::string>{"A.A", "A.A"};
  }
  void separate_touching_by_hand() {
    QFETCH(std::vector<std::string>, labels);
    QFETCH(std::vector<std::string>, expected);
    const LabelImage separated = separate_touching(labels_from(labels));
    const LabelImage want = labels_from(expected);
    QCOMPARE(separated.height, want.height);
    QCOMPARE(separated.width, want.width);
    QCOMPARE(separated.ids, want.ids);
  }

  // Random scenes: every pixel kept keeps its id, every pixel removed had a smaller id among its 8-neighbours
  // (and every such pixel is removed), and no two objects are 8-neighbours afterwards.
  void separate_touching_separates_every_pair() {
    for (int scene = 0; scene < 3; ++scene) {
      const LabelImage labels = scene == 0   ? disk_scene(40, 52, 7, 3, 11, 11)
                                : scene == 1 ? disk_scene(33, 29, 12, 1, 6, 12)
                                             : noise_scene(17, 23, 13);
      const LabelImage separated = separate_touching(labels);
      QCOMPARE(separated.ids.size(), labels.ids.size());
      int removed = 0;
      for (std::int64_t y = 0; y < labels.height; ++y) {
        for (std::int64_t x = 0; x < labels.width; ++x) {
          const ObjectId id = labels.at(y, x), kept = separated.at(y, x);
          bool smaller_neighbour = false, other_neighbour_left = false;
          for (std::int64_t ny = std::max<std::int64_t>(y - 1, 0); ny <= std::min(y + 1, labels.height - 1);
               ++ny) {
            for (std::int64_t nx = std::max<std::int64_t>(x - 1, 0); nx <= std::min(x + 1, labels.width - 1);
                 ++nx) {
              const ObjectId n = labels.at(ny, nx), m = separated.at(ny, nx);
              smaller_neighbour = smaller_neighbour || (n != 0 && n < id);
              other_neighbour_left = other_neighbour_left || (m != 0 && m != kept);
            }
          }
          QCOMPARE(kept, id != 0 && !smaller_neighbour ? id : ObjectId{0});
          if (kept != 0) QVERIFY2(!other_neighbour_left, qPrintable(QString("(%1, %2)").arg(y).arg(x)));
          removed += id != 0 && kept == 0 ? 1 : 0;
        }
      }
      QVERIFY(removed > 0);  // each scene has touching objects
    }
    QVERIFY(separate_touching(LabelImage(0, 5)).ids.empty());
    LabelImage malformed = labels_from({"AB"});
    malformed.width = 3;
    QVERIFY_THROWS_EXCEPTION(Error, separate_touching(malformed));
  }

  // --- border_weights ------------------------------------------------------------------------------------

  void border_weights_match_brute_force_data() {
    QTest::addColumn<int>("scene");
    QTest::addColumn<double>("w0");
    QTest::addColumn<double>("sigma");
    QTest::addColumn<bool>("balance");
    QTest::newRow("a few disks") << 0 << kBorderWeightW0 << kBorderWeightSigma << false;
    QTest::newRow("a few disks, balanced") << 0 << kBorderWeightW0 << kBorderWeightSigma << true;
    QTest::newRow("a few disks, w0 7, sigma 3") << 0 << 7.0 << 3.0 << true;
    QTest::newRow("many small disks (windows cut short)")
        << 1 << kBorderWeightW0 << kBorderWeightSigma << false;
    QTest::newRow("many small disks, sigma 2, balanced") << 1 << kBorderWeightW0 << 2.0 << true;
    QTest::newRow("ragged noise") << 2 << kBorderWeightW0 << kBorderWeightSigma << true;
  }
  void border_weights_match_brute_force() {
    QFETCH(int, scene);
    QFETCH(double, w0);
    QFETCH(double, sigma);
    QFETCH(bool, balance);
    const LabelImage labels = scene == 0   ? disk_scene(64, 64, 5, 4, 9, 21)
                              : scene == 1 ? disk_scene(96, 112, 30, 1.5, 4, 22)
                                           : noise_scene(20, 24, 5);
    std::vector<double> sums;
    const std::vector<double> expected = reference_border_weights(labels, w0, sigma, balance, sums);
    const std::vector<float> weights = border_weights(labels, w0, sigma, balance);
    QCOMPARE(weights.size(), expected.size());
    const double cutoff = cutoff_of(sigma);
    int near_cutoff = 0, raised = 0, cut = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      // A pixel within rounding of the cut-off may fall on either side of it.
      if (std::abs(sums[i] - cutoff) < 1e-4) {
        ++near_cutoff;
        continue;
      }
      QVERIFY2(std::abs(weights[i] - expected[i]) <= 1e-4,
               qPrintable(QString("pixel %1: %2, expected %3").arg(i).arg(weights[i]).arg(expected[i])));
      raised += labels.ids[i] == 0 && sums[i] < cutoff ? 1 : 0;
      cut += labels.ids[i] == 0 && std::isfinite(sums[i]) && sums[i] >= cutoff ? 1 : 0;
    }
    QVERIFY(near_cutoff < 10);
    QVERIFY(raised > 100);  // the scene has gaps between objects
    if (scene != 2) {
      QVERIFY(cut > 100);  // and pixels past the cut-off
    }
  }

  // Two pixel objects 4 apart in a row: every pixel between has d1 + d2 = 4.
  void border_weights_by_hand() {
    const LabelImage labels = labels_from({"A...B"});
    const std::vector<float> weights = border_weights(labels, 10, 5, false);
    const float between = static_cast<float>(1 + 10 * std::exp(-16.0 / 50.0));
    const std::vector<float> expected = {1, between, between, between, 1};
    for (std::size_t i = 0; i < expected.size(); ++i) QCOMPARE(weights[i], expected[i]);
    // Balanced: 2 of 5 pixels are foreground: w_c = 5 / 4 and 5 / 6.
    const std::vector<float> balanced = border_weights(labels, 10, 5, true);
    const auto balanced_between = static_cast<float>(5.0 / 6.0 + 10 * std::exp(-16.0 / 50.0));
    QCOMPARE(balanced[0], 1.25F);
    QCOMPARE(balanced[2], balanced_between);
    QCOMPARE(balanced[4], 1.25F);
  }

  // With fewer than two objects there is no gap: w_c alone.
  void border_weights_without_two_objects() {
    // One object in 4 of 16 pixels: w_c = 16 / (2 * 4) = 2 and 16 / (2 * 12) = 2 / 3.
    const LabelImage one = labels_from({"AA..", "AA..", "....", "...."});
    for (const float w : border_weights(one, 10, 5, false)) QCOMPARE(w, 1.0F);
    const std::vector<float> balanced = border_weights(one, 10, 5, true);
    for (std::size_t i = 0; i < balanced.size(); ++i)
      QCOMPARE(balanced[i], one.ids[i] != 0 ? 2.0F : static_cast<float>(2.0 / 3.0));
    // One object in pieces is still one object.
    const LabelImage pieces = labels_from({"A..A", "....", "A..A"});
    for (const float w : border_weights(pieces, 10, 5, false)) QCOMPARE(w, 1.0F);
    // A class absent from the image: nothing to balance.
    for (const float w : border_weights(labels_from({"....", "...."}), 10, 5, true)) QCOMPARE(w, 1.0F);
    for (const float w : border_weights(labels_from({"BB", "BB"}), 10, 5, true)) QCOMPARE(w, 1.0F);
    QVERIFY(border_weights(LabelImage(0, 7), 10, 5, true).empty());
  }

  void border_weights_refusals() {
    const LabelImage image = labels_from({"A.B"});
    QVERIFY_THROWS_EXCEPTION(Error, border_weights(image, 10, 0, false));
    QVERIFY_THROWS_EXCEPTION(Error, border_weights(image, 10, -1, false));
    QVERIFY_THROWS_EXCEPTION(Error, border_weights(image, -1, 5, false));
    QVERIFY_THROWS_EXCEPTION(Error, border_weights(image, std::nan(""), 5, false));
    QVERIFY_THROWS_EXCEPTION(Error,
                             border_weights(image, 10, std::numeric_limits<double>::infinity(), false));
    LabelImage malformed = image;
    malformed.width = 2;
    QVERIFY_THROWS_EXCEPTION(Error, border_weights(malformed, 10, 5, false));
  }

  // --- extract_objects -----------------------------------------------------------------------------------

  // The boundary target's output: three softmax classes drawn from the truth's boundary_classes (width 3, so
  // a band of 6 pixels between the two interiors), with noise.
  void touching_disks_from_boundary_classes() {
    const TwoDisks scene;
    const std::vector<std::uint8_t> classes = boundary_classes(scene.truth, 3);
    Rng rng(11);
    std::vector<float> interior(classes.size()), foreground(classes.size());
    for (std::size_t i = 0; i < classes.size(); ++i) {
      const double noise = rng.uniform(-0.04, 0.04);
      const double p_interior = classes[i] == kInteriorClass   ? 0.9
                                : classes[i] == kBoundaryClass ? 0.1
                                                               : 0.02;
      const double p_boundary = classes[i] == kInteriorClass   ? 0.08
                                : classes[i] == kBoundaryClass ? 0.85
                                                               : 0.03;
      interior[i] = static_cast<float>(p_interior + noise);
      foreground[i] = static_cast<float>(p_interior + p_boundary + noise);
    }
    const ExtractionThresholds thresholds;
    const LabelImage found = extract_objects(interior.data(), foreground.data(), scene.truth.height,
                                             scene.truth.width, thresholds);
    QCOMPARE(ids_in(found), (std::set<ObjectId>{1, 2}));
    QVERIFY(each_found(scene.truth, found));
    QVERIFY(tiles_foreground(found, foreground, thresholds.foreground));
    QVERIFY(numbered_in_raster_order(found));
  }

  // The weight map's output: one sigmoid, high over both disks with a dip (not below the foreground
  // threshold) along the line where they meet; seeds above 0.7, foreground above 0.5. The disks reach over
  // the image's border.
  void touching_disks_from_one_probability() {
    TwoDisks scene;
    for (const std::int64_t shift : {0, 30}) {  // 30: the left disk's left part falls outside the image
      LabelImage truth(scene.truth.height, scene.truth.width - shift);
      for (std::int64_t y = 0; y < truth.height; ++y)
        for (std::int64_t x = 0; x < truth.width; ++x) truth.at(y, x) = scene.truth.at(y, x + shift);
      const std::vector<float> p = dipped_probability(truth);
      ExtractionThresholds thresholds;
      thresholds.seed = 0.7;
      const LabelImage found = extract_objects(p.data(), p.data(), truth.height, truth.width, thresholds);
      QCOMPARE(ids_in(found), (std::set<ObjectId>{1, 2}));
      QVERIFY(each_found(truth, found));
      QVERIFY(tiles_foreground(found, p, thresholds.foreground));
      // Without the higher seed threshold the two are one blob, and so one object.
      thresholds.seed = 0.5;
      QCOMPARE(ids_in(extract_objects(p.data(), p.data(), truth.height, truth.width, thresholds)),
               (std::set<ObjectId>{1}));
    }
  }

  // A 2x2 seeded blob of 4 pixels: min_size 4 keeps it, 5 removes it; the large object stays either way.
  void min_size_removes_small_objects() {
    const LabelImage truth = labels_from({
        "..........",  //
        ".AA.......",  //
        ".AA..BBB..",  //
        ".....BBB..",  //
        ".....BBB..",  //
        "..........",
    });
    std::vector<float> p(truth.ids.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = truth.ids[i] != 0 ? 0.9F : 0.1F;
    ExtractionThresholds thresholds;
    thresholds.min_size = 4;
    const LabelImage kept = extract_objects(p.data(), p.data(), truth.height, truth.width, thresholds);
    QCOMPARE(ids_in(kept), (std::set<ObjectId>{1, 2}));
    QCOMPARE(kept.at(1, 1), ObjectId{1});  // first in raster order
    QCOMPARE(kept.at(3, 6), ObjectId{2});
    thresholds.min_size = 5;
    const LabelImage removed = extract_objects(p.data(), p.data(), truth.height, truth.width, thresholds);
    QCOMPARE(ids_in(removed), (std::set<ObjectId>{1}));
    QCOMPARE(removed.at(1, 1), ObjectId{0});
    QCOMPARE(removed.at(3, 6), ObjectId{1});  // renumbered after the removal
    QCOMPARE(std::count(removed.ids.begin(), removed.ids.end(), ObjectId{1}), 9L);
  }

  void no_probability_no_object() {
    const std::vector<float> zeros(30 * 20, 0.0F);
    const LabelImage found = extract_objects(zeros.data(), zeros.data(), 30, 20, ExtractionThresholds{});
    QCOMPARE(found.height, std::int64_t{30});
    QCOMPARE(found.width, std::int64_t{20});
    QVERIFY(ids_in(found).empty());
    // NaN counts as below every threshold.
    const std::vector<float> nans(30 * 20, std::nanf(""));
    QVERIFY(ids_in(extract_objects(nans.data(), nans.data(), 30, 20, ExtractionThresholds{})).empty());
    QVERIFY(extract_objects(nullptr, nullptr, 0, 5, ExtractionThresholds{}).ids.empty());
  }

  // Foreground without a seed: an object of its own, numbered in raster order with the seeded ones. Here it
  // comes first (the seedless blob's top row is above the seeded disk's), though its component is found last.
  void seedless_foreground_becomes_an_object() {
    const LabelImage truth = labels_from({
        "............",  //
        "..CCC.......",  //
        "..CCC...AAA.",  //
        "..CCC..AAAAA",  //
        ".......AAAAA",  //
        "........AAA.",  //
        "............",  //
        ".D..........",
    });
    std::vector<float> seed(truth.ids.size(), 0.0F), foreground(truth.ids.size(), 0.0F);
    for (std::size_t i = 0; i < truth.ids.size(); ++i) {
      foreground[i] = truth.ids[i] != 0 ? 0.8F : 0.2F;
      seed[i] = truth.ids[i] == id_of('A') ? 0.9F : 0.1F;
    }
    const LabelImage found =
        extract_objects(seed.data(), foreground.data(), truth.height, truth.width, ExtractionThresholds{});
    QCOMPARE(ids_in(found), (std::set<ObjectId>{1, 2, 3}));
    QCOMPARE(iou(truth, id_of('C'), found, 1), 1.0);
    QCOMPARE(iou(truth, id_of('A'), found, 2), 1.0);
    QCOMPARE(iou(truth, id_of('D'), found, 3), 1.0);
    QVERIFY(numbered_in_raster_order(found));
    // No seed anywhere: each foreground component (8-connected) is one object.
    const std::vector<float> none(truth.ids.size(), 0.0F);
    const LabelImage unseeded =
        extract_objects(none.data(), foreground.data(), truth.height, truth.width, ExtractionThresholds{});
    QCOMPARE(ids_in(unseeded), (std::set<ObjectId>{1, 2, 3}));
    QCOMPARE(iou(truth, id_of('A'), unseeded, 2), 1.0);
  }

  // Many seeds in one foreground blob: every pixel of the blob goes to one of them (no watershed line or rim
  // pixel left out), ids 1..n in raster order.
  void many_seeds_tile_their_blob() {
    const std::int64_t h = 48, w = 60;
    Rng rng(3);
    std::vector<float> seed(static_cast<std::size_t>(h * w)), foreground(seed.size());
    for (std::int64_t y = 0; y < h; ++y) {
      for (std::int64_t x = 0; x < w; ++x) {
        const auto i = static_cast<std::size_t>(y * w + x);
        foreground[i] = std::hypot(y - 24.0, x - 30.0) < 22 ? 0.9F : 0.1F;
        // Bumps of the seed probability on a grid, with noise.
        seed[i] =
            static_cast<float>(0.5 + 0.4 * std::cos(y * 0.6) * std::cos(x * 0.6) + rng.uniform(-0.05, 0.05));
      }
    }
    ExtractionThresholds thresholds;
    thresholds.seed = 0.8;
    const LabelImage found = extract_objects(seed.data(), foreground.data(), h, w, thresholds);
    QVERIFY(ids_in(found).size() > 10);
    QCOMPARE(static_cast<std::size_t>(*ids_in(found).rbegin()), ids_in(found).size());
    QVERIFY(tiles_foreground(found, foreground, thresholds.foreground));
    QVERIFY(numbered_in_raster_order(found));
  }

  void extraction_refusals() {
    const std::vector<float> p(4, 0.5F);
    ExtractionThresholds bad_seed;
    bad_seed.seed = 1.5;
    QVERIFY_THROWS_EXCEPTION(Error, extract_objects(p.data(), p.data(), 2, 2, bad_seed));
    ExtractionThresholds nan_foreground;
    nan_foreground.foreground = std::nan("");
    QVERIFY_THROWS_EXCEPTION(Error, extract_objects(p.data(), p.data(), 2, 2, nan_foreground));
    ExtractionThresholds negative_size;
    negative_size.min_size = -1;
    QVERIFY_THROWS_EXCEPTION(Error, extract_objects(p.data(), p.data(), 2, 2, negative_size));
    QVERIFY_THROWS_EXCEPTION(Error, extract_objects(p.data(), nullptr, 2, 2, ExtractionThresholds{}));
    QVERIFY_THROWS_EXCEPTION(Error, extract_objects(p.data(), p.data(), -1, 2, ExtractionThresholds{}));
  }

  // --- describe_objects ----------------------------------------------------------------------------------

  // The thresholds searched on validation images: the sigmoid's dip between two touching disks (down to
  // 0.55) splits them only where a threshold lies above it; at seed and foreground 0.5 the two are one object
  // (a merge). The search must return the grid's first pair of the highest DSB score, worked out here pair
  // by pair, and that pair must find both disks.
  void threshold_search_picks_the_splitting_pair() {
    TwoDisks scene;
    const std::vector<float> p = dipped_probability(scene.truth);
    std::vector<ObjectMaps> images;
    images.push_back(object_maps(p, scene.truth.height, scene.truth.width, 1, scene.truth));
    QCOMPARE(images[0].seed, p);
    QCOMPARE(images[0].foreground, p);
    const ThresholdGrid grid;
    double best_score = -1;
    ExtractionThresholds expected;
    for (const double seed : grid.seed) {
      for (const double foreground : grid.foreground) {
        const double score = score_thresholds(images, {seed, foreground, 0}).dsb_score;
        if (score > best_score) {
          best_score = score;
          expected = {seed, foreground, 0};
        }
      }
    }
    const ThresholdChoice choice = best_thresholds(images, 0, grid);
    QCOMPARE(choice.thresholds.seed, expected.seed);
    QCOMPARE(choice.thresholds.foreground, expected.foreground);
    QCOMPARE(choice.metrics.dsb_score, best_score);
    QCOMPARE(choice.metrics.true_positives, std::int64_t{2});
    QCOMPARE(choice.metrics.merges, std::int64_t{0});
    const ObjectMetricsSummary merged = score_thresholds(images, {0.5, 0.5, 0});
    QCOMPARE(merged.predicted_objects, std::int64_t{1});
    QCOMPARE(merged.merges, std::int64_t{1});
    QVERIFY(choice.metrics.dsb_score > merged.dsb_score);
    // Of equal scores the first pair of the grid: over no image every pair scores NaN.
    const ThresholdChoice none = best_thresholds({}, 0);
    QCOMPARE(none.thresholds.seed, 0.3);
    QCOMPARE(none.thresholds.foreground, 0.3);
    QVERIFY(std::isnan(none.metrics.dsb_score));
  }

  // A boundary model's softmax: seed = p_interior, foreground = p_interior + p_boundary.
  void object_maps_of_three_classes() {
    const std::vector<float> probabilities{0.7F, 0.2F, 0.1F, 0.1F, 0.3F, 0.6F};
    const ObjectMaps maps = object_maps(probabilities, 1, 2, 3, LabelImage(1, 2));
    QCOMPARE(maps.seed, (std::vector<float>{0.2F, 0.3F}));
    QCOMPARE(maps.foreground, (std::vector<float>{0.2F + 0.1F, 0.3F + 0.6F}));
    QVERIFY_THROWS_EXCEPTION(Error, object_maps(probabilities, 1, 2, 2, LabelImage(1, 2)));
    QVERIFY_THROWS_EXCEPTION(Error, object_maps(probabilities, 1, 2, 3, LabelImage(2, 1)));
  }

  void describe_objects_by_hand() {
    const LabelImage labels = labels_from({
        "AA....",  //
        "AA..B.",  //
        "....B.",  //
        "...BB.",  //
        "C.....",
    });
    std::vector<float> p(labels.ids.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(i) / 100;
    const ObjectTable table = describe_objects(labels, p.data());
    QCOMPARE(table.size(), std::size_t{3});
    // Ascending id: C (3), A (7), B (70000).
    const ObjectDescription& c = table[0];
    QCOMPARE(c.id, ObjectId{3});
    QCOMPARE(c.area, std::int64_t{1});
    QCOMPARE(c.centroid_y, 4.0);
    QCOMPARE(c.centroid_x, 0.0);
    QCOMPARE((std::vector<std::int64_t>{c.y0, c.x0, c.y1, c.x1}), (std::vector<std::int64_t>{4, 0, 5, 1}));
    QVERIFY(std::abs(c.mean_probability.value() - 0.24) < 1e-7);  // pixel 24
    const ObjectDescription& a = table[1];
    QCOMPARE(a.id, ObjectId{7});
    QCOMPARE(a.area, std::int64_t{4});
    QCOMPARE(a.centroid_y, 0.5);
    QCOMPARE(a.centroid_x, 0.5);
    QCOMPARE((std::vector<std::int64_t>{a.y0, a.x0, a.y1, a.x1}), (std::vector<std::int64_t>{0, 0, 2, 2}));
    QVERIFY(std::abs(a.mean_probability.value() - 0.035) < 1e-7);  // pixels 0, 1, 6, 7
    const ObjectDescription& b = table[2];
    QCOMPARE(b.id, ObjectId{70000});
    QCOMPARE(b.area, std::int64_t{4});
    QCOMPARE(b.centroid_y, 2.25);  // rows 1, 2, 3, 3
    QCOMPARE(b.centroid_x, 3.75);  // columns 4, 4, 3, 4
    QCOMPARE((std::vector<std::int64_t>{b.y0, b.x0, b.y1, b.x1}), (std::vector<std::int64_t>{1, 3, 4, 5}));
    QVERIFY(std::abs(b.mean_probability.value() - 0.1725) < 1e-7);  // pixels 10, 16, 21, 22

    const ObjectTable without = describe_objects(labels, nullptr);
    QCOMPARE(without.size(), std::size_t{3});
    QVERIFY(!without[1].mean_probability.has_value());
    QCOMPARE(without[1].area, std::int64_t{4});
    QVERIFY(describe_objects(labels_from({"...", "..."}), nullptr).empty());
    LabelImage malformed = labels;
    malformed.ids.resize(3);
    QVERIFY_THROWS_EXCEPTION(Error, describe_objects(malformed, nullptr));
  }
};

QTEST_GUILESS_MAIN(TestInstances)
#include "test_instances.moc"
