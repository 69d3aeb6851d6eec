// Training-time augmentation (data/augment_draw.h, augment_warp.h, augment_intensity.h) against references
// computed here: plain crops, data/augment.h's flips and turns, exact values of bilinear resampling on linear
// images, the hand formulas of brightness, contrast and gamma, a hand-built Gaussian kernel; the draws
// against their config (each augment.* key, its default and its bounds); and the same bytes whatever OpenCV's
// thread count.
#include <opencv2/core.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>
#include <set>

#include "held_dataset.h"
#include "test_support.h"
#include "unet/config/config.h"
#include "unet/config/key_applies.h"
#include "unet/core/error.h"
#include "unet/data/augment.h"
#include "unet/data/augment_draw.h"
#include "unet/data/augment_intensity.h"
#include "unet/data/augment_warp.h"
#include "unet/step/data_plan.h"

using namespace unet;

namespace {

using json = nlohmann::json;

// A float HWC image and, beside it, a mask.
struct Image {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<float> values;
  std::vector<std::uint8_t> mask;

  Image(std::int64_t h, std::int64_t w, std::int64_t c)
      : height(h),
        width(w),
        channels(c),
        values(static_cast<std::size_t>(h * w * c)),
        mask(static_cast<std::size_t>(h * w)) {}
  float& at(std::int64_t y, std::int64_t x, std::int64_t k) {
    return values[static_cast<std::size_t>((y * width + x) * channels + k)];
  }
  float at(std::int64_t y, std::int64_t x, std::int64_t k) const {
    return values[static_cast<std::size_t>((y * width + x) * channels + k)];
  }
  std::uint8_t& label(std::int64_t y, std::int64_t x) {
    return mask[static_cast<std::size_t>(y * width + x)];
  }
};

// Whole numbers 0..255 (so that a uint8 copy is exact) and labels 0..4, from a seed.
Image random_image(std::int64_t h, std::int64_t w, std::int64_t c, std::uint64_t seed) {
  Image image(h, w, c);
  Rng rng(seed);
  for (float& v : image.values) v = static_cast<float>(rng.below(256));
  for (std::uint8_t& m : image.mask) m = static_cast<std::uint8_t>(rng.below(5));
  return image;
}

// Channel k of pixel (y, x) is f(y, x, k).
template <typename F>
Image image_of(std::int64_t h, std::int64_t w, std::int64_t c, F f) {
  Image image(h, w, c);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t k = 0; k < c; ++k) image.at(y, x, k) = static_cast<float>(f(y, x, k));
  return image;
}

// warp_patch's answer, image and mask.
Image warp(const Image& source, double centre_y, double centre_x, const SpatialDraw& draw, std::int64_t out_h,
           std::int64_t out_w, float image_fill = -1, std::uint8_t mask_fill = 255) {
  Image out(out_h, out_w, source.channels);
  warp_patch(source.values.data(), source.height, source.width, source.channels, source.mask.data(), centre_y,
             centre_x, draw, image_fill, mask_fill, out_h, out_w, out.values.data(), out.mask.data());
  return out;
}

// The reference crop: the out_h x out_w window whose centre is (centre_y, centre_x), fills outside.
Image plain_crop(const Image& source, double centre_y, double centre_x, std::int64_t out_h,
                 std::int64_t out_w, float image_fill, std::uint8_t mask_fill) {
  const auto top = static_cast<std::int64_t>(centre_y - static_cast<double>(out_h - 1) / 2);
  const auto left = static_cast<std::int64_t>(centre_x - static_cast<double>(out_w - 1) / 2);
  Image out(out_h, out_w, source.channels);
  for (std::int64_t i = 0; i < out_h; ++i)
    for (std::int64_t j = 0; j < out_w; ++j) {
      const std::int64_t y = top + i, x = left + j;
      const bool inside = y >= 0 && y < source.height && x >= 0 && x < source.width;
      for (std::int64_t k = 0; k < source.channels; ++k)
        out.at(i, j, k) = inside ? source.at(y, x, k) : image_fill;
      out.label(i, j) = inside ? source.mask[static_cast<std::size_t>(y * source.width + x)] : mask_fill;
    }
  return out;
}

bool same_bytes(const Image& a, const Image& b) {
  return a.values.size() == b.values.size() && a.mask == b.mask &&
         std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

double max_difference(const Image& a, const Image& b, std::int64_t border = 0) {
  double worst = 0;
  for (std::int64_t y = border; y < a.height - border; ++y)
    for (std::int64_t x = border; x < a.width - border; ++x)
      for (std::int64_t k = 0; k < a.channels; ++k)
        worst = std::max(worst, std::abs(double(a.at(y, x, k)) - b.at(y, x, k)));
  return worst;
}

// A config under which nothing happens; tests switch on what they look at.
AugmentConfig nothing() {
  AugmentConfig c;
  c.flips = false;
  c.rotation_p = c.scale_p = c.elastic_p = c.brightness_p = c.contrast_p = c.gamma_p = c.noise_p = c.blur_p =
      0;
  return c;
}

// The source coordinates each output pixel reads: a two-channel image holding each pixel's own (y, x), warped
// (bilinear resampling is exact on linear functions).
Image source_coordinates(std::int64_t h, std::int64_t w, double centre_y, double centre_x,
                         const SpatialDraw& draw, std::int64_t out_h, std::int64_t out_w) {
  const Image ramp = image_of(h, w, 2, [](auto y, auto x, auto k) { return k == 0 ? y : x; });
  Image out(out_h, out_w, 2);
  warp_patch(ramp.values.data(), h, w, 2, nullptr, centre_y, centre_x, draw, -1, 0, out_h, out_w,
             out.values.data(), nullptr);
  return out;
}

std::string config_error(const json& j) {
  try {
    config_from_json(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The per-channel statistics apply_intensity's contrast and gamma use, computed here in double.
struct Stats {
  double mean = 0, min = 1e300, max = -1e300;
};
Stats channel_stats(const Image& image, std::int64_t k) {
  Stats s;
  for (std::int64_t y = 0; y < image.height; ++y)
    for (std::int64_t x = 0; x < image.width; ++x) {
      const double v = image.at(y, x, k);
      s.mean += v;
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
    }
  s.mean /= static_cast<double>(image.height * image.width);
  return s;
}

}  // namespace

class TestAugment : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- geometry ------------------------------------------------------------------------------------------

  void identity_draw_is_a_plain_crop_data() {
    QTest::addColumn<double>("centre_y");
    QTest::addColumn<double>("centre_x");
    QTest::addColumn<int>("out_h");
    QTest::addColumn<int>("out_w");
    QTest::newRow("inside, odd") << 10.0 << 9.0 << 7 << 5;
    QTest::newRow("inside, even") << 10.5 << 8.5 << 8 << 6;
    QTest::newRow("over the top-left corner") << 1.0 << 0.5 << 9 << 10;
    QTest::newRow("over the bottom-right corner") << 19.5 << 16.0 << 12 << 11;
    QTest::newRow("larger than the source") << 9.5 << 8.0 << 30 << 25;
    QTest::newRow("wholly outside") << -40.0 << 60.0 << 6 << 6;
  }
  void identity_draw_is_a_plain_crop() {
    QFETCH(double, centre_y);
    QFETCH(double, centre_x);
    QFETCH(int, out_h);
    QFETCH(int, out_w);
    const Image source = random_image(20, 17, 3, 1);
    const Image patch = warp(source, centre_y, centre_x, SpatialDraw{}, out_h, out_w, -2.5f, 9);
    QVERIFY(same_bytes(patch, plain_crop(source, centre_y, centre_x, out_h, out_w, -2.5f, 9)));
  }

  // Flips and turns on the pixel grid: the crop as data/augment.h's apply() turns it, bit for bit.
  void flips_and_turns_are_augment_h_on_the_crop() {
    const Image source = random_image(24, 21, 3, 2);
    for (const bool square : {true, false}) {
      const std::int64_t out_h = 9, out_w = square ? 9 : 12;
      const double centre_y = 11, centre_x = square ? 10 : 9.5;
      const Image crop = plain_crop(source, centre_y, centre_x, out_h, out_w, 0, 0);
      for (int code = 0; code < 16; ++code) {
        const Augmentation turns{(code & 1) != 0, (code & 2) != 0, code >> 2};
        if (!square && turns.rotate90 % 2 == 1) continue;
        Sample expected{out_h, out_w, 3, {}, crop.mask, "crop", {}, {}};
        expected.image = crop.values;
        expected.weights.assign(crop.mask.begin(), crop.mask.end());  // apply() moves weights as the mask
        apply(turns, expected);
        QVERIFY2(expected.weights == std::vector<float>(expected.mask.begin(), expected.mask.end()),
                 to_string(turns).c_str());

        SpatialDraw draw;
        draw.flip_h = turns.flip_horizontal;
        draw.flip_v = turns.flip_vertical;
        draw.rotate90 = turns.rotate90;
        const Image patch = warp(source, centre_y, centre_x, draw, expected.height, expected.width);
        QVERIFY2(patch.values == expected.image, to_string(turns).c_str());
        QVERIFY2(patch.mask == expected.mask, to_string(turns).c_str());
      }
    }
  }

  // A sample's pixel weights take its mask's geometry in a batch (step/data_plan.h's assemble_batch). The
  // weights are the mask as floats: through flips and turns they stay the batch's mask, bit for bit; through
  // rotation, scale and an elastic field they are resampled as the image is (linearly, through the same map):
  // the image here is the mask as floats less 1, so that its fill 0 is the weights' fill 1 less 1 and the
  // weights less 1 are the image wherever a pixel reads, also across the edges of the labels and of the
  // source. Away from the labels' edges they are still the (nearest-neighbour) mask.
  void weights_follow_the_mask_in_a_batch() {
    Sample s;
    s.height = 40;
    s.width = 40;
    s.channels = 1;
    s.source = "blocks";
    for (std::int64_t y = 0; y < 40; ++y)
      for (std::int64_t x = 0; x < 40; ++x) {
        const std::uint8_t label = std::array<std::uint8_t, 3>{0, 2, 5}[((y / 7) + (x / 9) + (y > x)) % 3];
        s.mask.push_back(label);
        s.weights.push_back(static_cast<float>(label));
        s.image.push_back(static_cast<float>(label) - 1.0f);
      }
    const test::HeldDataset dataset({s});
    const std::vector<std::size_t> samples(8, 0);
    std::vector<std::int64_t> positions(8);
    std::iota(positions.begin(), positions.end(), 0);
    BatchRecipe recipe;
    recipe.augment = true;
    recipe.seed = 3;
    recipe.augmentation = nothing();
    recipe.augmentation.flips = true;
    HostBatch batch;
    assemble_batch(dataset, samples, positions, 0, recipe, batch);
    std::vector<float> mask_as_floats(batch.masks.begin(), batch.masks.end());
    QCOMPARE(batch.weights, mask_as_floats);
    bool flipped = false;
    for (std::size_t n = 0; n < 8; ++n)
      flipped = flipped || !std::equal(s.mask.begin(), s.mask.end(), batch.masks.begin() + n * 1600);
    QVERIFY(flipped);

    recipe.augmentation.rotation_p = recipe.augmentation.scale_p = recipe.augmentation.elastic_p = 1;
    recipe.augmentation.elastic_sigma = 3;
    assemble_batch(dataset, samples, positions, 0, recipe, batch);
    QCOMPARE(batch.weights.size(), batch.pixels.size());
    std::size_t on_mask = 0;
    for (std::size_t i = 0; i < batch.weights.size(); ++i) {
      QVERIFY2(
          std::abs(batch.weights[i] - 1.0f - batch.pixels[i]) < 1e-5f,
          qPrintable(
              QString("pixel %1: weight %2, image %3").arg(i).arg(batch.weights[i]).arg(batch.pixels[i])));
      on_mask += batch.weights[i] == static_cast<float>(batch.masks[i]) ? 1 : 0;
    }
    QVERIFY2(on_mask > batch.weights.size() / 2, qPrintable(QString::number(on_mask)));
    mask_as_floats.assign(batch.masks.begin(), batch.masks.end());
    QVERIFY(batch.weights != mask_as_floats);  // resampled: values between the labels at their edges
  }

  // +90 degrees by angle resamples; one quarter turn permutes: the same picture on a smooth image.
  void rotation_by_ninety_degrees_is_a_quarter_turn() {
    const Image source = image_of(64, 64, 2, [](auto y, auto x, auto k) {
      return std::sin(0.11 * double(y) + 0.3 * double(k)) * std::cos(0.07 * double(x)) + 0.01 * double(x);
    });
    for (const double centre_x : {33.0, 33.25}) {  // on the grid (the fast path) and off it (both resample)
      SpatialDraw turned, rotated;
      turned.rotate90 = 1;
      rotated.angle_rad = std::numbers::pi / 2;
      const Image a = warp(source, 30, centre_x, turned, 32, 32),
                  b = warp(source, 30, centre_x, rotated, 32, 32);
      QVERIFY2(max_difference(a, b, 1) < 1e-4, qPrintable(QString::number(max_difference(a, b, 1))));
      // And it is a rotation at all: not the unturned patch.
      QVERIFY(max_difference(a, warp(source, 30, centre_x, SpatialDraw{}, 32, 32), 1) > 0.1);
    }
  }

  // Magnifying by 2 halves a linear ramp's slope; bilinear resampling is exact on linear functions.
  void scale_two_halves_a_ramps_slope() {
    const Image ramp =
        image_of(64, 80, 1, [](auto y, auto x, auto) { return 0.5 * double(y) + 0.25 * double(x); });
    SpatialDraw draw;
    draw.scale = 2;
    const double centre_y = 30, centre_x = 41;
    const Image patch = warp(ramp, centre_y, centre_x, draw, 16, 20);
    for (std::int64_t i = 0; i < 16; ++i)
      for (std::int64_t j = 0; j < 20; ++j) {
        const double expected =
            0.5 * (centre_y + (double(i) - 7.5) / 2) + 0.25 * (centre_x + (double(j) - 9.5) / 2);
        QVERIFY2(std::abs(patch.at(i, j, 0) - expected) < 1e-4, qPrintable(QString("%1,%2").arg(i).arg(j)));
      }
  }

  // Nearest-neighbour masks hold only the source's labels and the fill, whatever the draw.
  void mask_values_stay_source_labels() {
    Image source = random_image(40, 36, 1, 3);
    for (std::uint8_t& m : source.mask) m = m < 2 ? 0 : (m < 4 ? 3 : 7);
    AugmentConfig config = nothing();
    config.rotation_p = config.scale_p = config.elastic_p = 1;
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      Rng rng(seed);
      const AugmentDraw draw = draw_augmentation(config, true, rng);
      const Image patch = warp(source, 20.3, 17.8, draw.spatial, 32, 32, 0, 200);
      const std::set<std::uint8_t> labels(patch.mask.begin(), patch.mask.end());
      for (const std::uint8_t l : labels)
        QVERIFY2(l == 0 || l == 3 || l == 7 || l == 200, describe(draw).c_str());
      QVERIFY(labels.size() >= 3);
    }
  }

  // The image is the mask as float; wherever the source pixels around the point an output pixel reads all
  // hold one label, image and mask hold it there too: the same geometry for both.
  void image_and_mask_share_geometry() {
    Image source(80, 90, 1);
    for (std::int64_t y = 0; y < 80; ++y)
      for (std::int64_t x = 0; x < 90; ++x) {
        const std::uint8_t label =
            ((y / 9) + (x / 11)) % 3 == 0 ? 0 : static_cast<std::uint8_t>(1 + (x / 11) % 2);
        source.label(y, x) = label;
        source.at(y, x, 0) = label;
      }
    AugmentConfig config = nothing();
    config.rotation_p = config.elastic_p = config.scale_p = 1;
    config.elastic_sigma = 4;
    Rng rng(7);
    const SpatialDraw draw = draw_augmentation(config, true, rng).spatial;
    QVERIFY(draw.angle_rad != 0 && !draw.elastic_dy.empty());
    const double centre_y = 40.2, centre_x = 44.6;
    const Image patch = warp(source, centre_y, centre_x, draw, 48, 48);
    const Image at = source_coordinates(80, 90, centre_y, centre_x, draw, 48, 48);
    int checked = 0;
    for (std::int64_t i = 0; i < 48; ++i)
      for (std::int64_t j = 0; j < 48; ++j) {
        const auto y = std::llround(at.at(i, j, 0)), x = std::llround(at.at(i, j, 1));
        if (y < 1 || y + 1 >= 80 || x < 1 || x + 1 >= 90) continue;
        const std::uint8_t label = source.mask[static_cast<std::size_t>(y * 90 + x)];
        bool agree = true;
        for (std::int64_t dy = -1; dy <= 1; ++dy)
          for (std::int64_t dx = -1; dx <= 1; ++dx)
            agree = agree && source.mask[static_cast<std::size_t>((y + dy) * 90 + x + dx)] == label;
        if (!agree) continue;
        ++checked;
        QCOMPARE(patch.mask[static_cast<std::size_t>(i * 48 + j)], label);
        QVERIFY2(std::abs(patch.at(i, j, 0) - label) < 1e-5, qPrintable(QString("%1,%2").arg(i).arg(j)));
      }
    QVERIFY2(checked > 48 * 48 / 2, qPrintable(QString::number(checked)));
  }

  void elastic_with_zero_sigma_is_the_identity() {
    AugmentConfig config = nothing();
    config.elastic_p = 1;
    config.elastic_sigma = 0;
    Rng rng(4);
    const SpatialDraw draw = draw_augmentation(config, true, rng).spatial;
    QCOMPARE(draw.grid, 3);
    QCOMPARE(draw.elastic_dy, std::vector<float>(9, 0.0f));
    const Image source = random_image(30, 30, 2, 5);
    QVERIFY(same_bytes(warp(source, 14.5, 15.5, draw, 16, 16, -1, 9),
                       plain_crop(source, 14.5, 15.5, 16, 16, -1, 9)));
  }

  // The field interpolated from a 3 x 3 grid of sigma-10 displacements moves pixels by many pixels, but
  // neighbouring pixels by far less than sigma: it is smooth.
  void elastic_field_is_smooth() {
    AugmentConfig config = nothing();
    config.elastic_p = 1;
    Rng rng(11);
    const SpatialDraw draw = draw_augmentation(config, true, rng).spatial;
    const Image at = source_coordinates(400, 400, 200, 200, draw, 128, 128);
    double largest = 0, steepest = 0;
    for (std::int64_t i = 0; i < 128; ++i)
      for (std::int64_t j = 0; j < 128; ++j) {
        const double ey = at.at(i, j, 0) - (200 + double(i) - 63.5),
                     ex = at.at(i, j, 1) - (200 + double(j) - 63.5);
        largest = std::max({largest, std::abs(ey), std::abs(ex)});
        if (j + 1 < 128) {
          const double next_ey = at.at(i, j + 1, 0) - (200 + double(i) - 63.5);
          const double next_ex = at.at(i, j + 1, 1) - (200 + double(j + 1) - 63.5);
          steepest = std::max({steepest, std::abs(next_ey - ey), std::abs(next_ex - ex)});
        }
      }
    QVERIFY2(largest > 3, qPrintable(QString::number(largest)));
    QVERIFY2(steepest < 1.0, qPrintable(QString::number(steepest)));
  }

  // A slide wider than remap's 16-bit coordinates: the patch read from a region of it, as from a copy.
  void a_patch_of_a_source_wider_than_remap_reaches() {
    const Image wide = image_of(
        40, 40000, 1, [](auto y, auto x, auto) { return std::sin(0.01 * double(x)) + 0.1 * double(y); });
    const Image part = image_of(40, 200, 1, [](auto y, auto x, auto) {
      return std::sin(0.01 * double(x + 39700)) + 0.1 * double(y);
    });
    SpatialDraw draw;
    draw.angle_rad = 0.3;
    draw.scale = 1.2;
    const Image a = warp(wide, 20.5, 39800.25, draw, 24, 24), b = warp(part, 20.5, 100.25, draw, 24, 24);
    QCOMPARE(max_difference(a, b), 0.0);
  }

  // Outside the source every channel is the fill, beyond OpenCV's four-value border colour too.
  void fill_outside_the_source_in_every_channel() {
    const Image source = random_image(16, 16, 6, 8);
    SpatialDraw draw;
    draw.angle_rad = 0.5;
    const Image patch = warp(source, 0, 0, draw, 20, 20, -3, 77);
    for (std::int64_t k = 0; k < 6; ++k) QCOMPARE(patch.at(0, 0, k), -3.0f);
    QCOMPARE(patch.mask[0], std::uint8_t{77});
    // A rotated patch that reaches no source pixel at all.
    const Image away = warp(source, 100, -50, draw, 10, 10, -3, 77);
    QVERIFY(std::all_of(away.values.begin(), away.values.end(), [](float v) { return v == -3.0f; }));
    QVERIFY(std::all_of(away.mask.begin(), away.mask.end(), [](std::uint8_t m) { return m == 77; }));
  }

  void bad_calls_are_refused() {
    const Image source = random_image(8, 8, 1, 9);
    Image out(4, 4, 1);
    SpatialDraw uneven;
    uneven.grid = 3;
    uneven.elastic_dy.assign(9, 0);
    uneven.elastic_dx.assign(4, 0);
    QVERIFY_THROWS_EXCEPTION(Error, warp_patch(source.values.data(), 8, 8, 1, nullptr, 4, 4, uneven, 0, 0, 4,
                                               4, out.values.data(), nullptr));
    QVERIFY_THROWS_EXCEPTION(Error, warp_patch(source.values.data(), 8, 8, 1, source.mask.data(), 4, 4,
                                               SpatialDraw{}, 0, 0, 4, 4, out.values.data(), nullptr));
    QVERIFY_THROWS_EXCEPTION(Error, warp_patch(source.values.data(), 8, 8, 1, nullptr, 4, 4, SpatialDraw{}, 0,
                                               0, 0, 4, out.values.data(), nullptr));
  }

  // --- values --------------------------------------------------------------------------------------------

  void brightness_multiplies_exactly() {
    const Image source = random_image(9, 7, 3, 10);
    Image out = source;
    IntensityDraw draw;
    draw.brightness = 1.17;
    apply_intensity(draw, out.values.data(), 9, 7, 3);
    for (std::size_t i = 0; i < out.values.size(); ++i) QCOMPARE(out.values[i], source.values[i] * 1.17f);
  }

  void contrast_and_gamma_follow_their_formulas() {
    const Image source = image_of(12, 10, 2, [](auto y, auto x, auto k) {
      return 0.1 * double(y) - 0.05 * double(x * x) / 10 + (k == 1 ? 2.0 : 0.0);
    });
    for (const double factor : {0.75, 1.25}) {
      Image out = source;
      IntensityDraw draw;
      draw.contrast = factor;
      apply_intensity(draw, out.values.data(), 12, 10, 2);
      for (std::int64_t k = 0; k < 2; ++k) {
        const Stats s = channel_stats(source, k);
        for (const auto& [y, x] : {std::pair{0, 0}, std::pair{11, 0}, std::pair{5, 9}, std::pair{6, 4}}) {
          const double expected = std::clamp((source.at(y, x, k) - s.mean) * factor + s.mean, s.min, s.max);
          QVERIFY2(std::abs(out.at(y, x, k) - expected) < 1e-5,
                   qPrintable(QString("contrast %1 at %2,%3").arg(factor).arg(y).arg(x)));
        }
      }
    }
    Image out = source;
    IntensityDraw draw;
    draw.gamma = 0.8;
    apply_intensity(draw, out.values.data(), 12, 10, 2);
    for (std::int64_t k = 0; k < 2; ++k) {
      const Stats s = channel_stats(source, k);
      for (const auto& [y, x] : {std::pair{0, 0}, std::pair{11, 9}, std::pair{5, 9}, std::pair{6, 4}}) {
        const double expected =
            s.min + (s.max - s.min) * std::pow((source.at(y, x, k) - s.min) / (s.max - s.min), 0.8);
        QVERIFY2(std::abs(out.at(y, x, k) - expected) < 1e-5,
                 qPrintable(QString("gamma at %1,%2").arg(y).arg(x)));
      }
    }
  }

  void noise_is_seeded_and_of_its_sigma() {
    const Image source = image_of(256, 256, 1, [](auto y, auto x, auto) { return 0.001 * double(y * x); });
    IntensityDraw draw;
    draw.noise_sigma = 0.1;
    draw.noise_seed = 42;
    Image a = source, b = source, c = source;
    apply_intensity(draw, a.values.data(), 256, 256, 1);
    apply_intensity(draw, b.values.data(), 256, 256, 1);
    draw.noise_seed = 43;
    apply_intensity(draw, c.values.data(), 256, 256, 1);
    QVERIFY(same_bytes(a, b));
    QVERIFY(!same_bytes(a, c));
    double sum = 0, squares = 0;
    for (std::size_t i = 0; i < a.values.size(); ++i) {
      const double d = double(a.values[i]) - source.values[i];
      sum += d;
      squares += d * d;
    }
    const auto n = static_cast<double>(a.values.size());
    const double sigma = std::sqrt(squares / n - (sum / n) * (sum / n));
    QVERIFY2(std::abs(sigma - 0.1) < 0.01, qPrintable(QString::number(sigma)));
  }

  // OpenCV 4.6's rule for float images: a kernel of cvRound(8 sigma + 1) | 1 taps, exp(-t^2 / (2 sigma^2))
  // normalised, applied along rows then columns; at an interior pixel no border rule matters.
  void blur_is_a_separable_gaussian_data() {
    QTest::addColumn<double>("sigma");
    QTest::newRow("0.5") << 0.5;
    QTest::newRow("0.8") << 0.8;
    QTest::newRow("1.0") << 1.0;
  }
  void blur_is_a_separable_gaussian() {
    QFETCH(double, sigma);
    const Image source = random_image(24, 24, 2, 12);
    Image out = source;
    IntensityDraw draw;
    draw.blur_sigma = sigma;
    apply_intensity(draw, out.values.data(), 24, 24, 2);
    const int taps = static_cast<int>(std::lround(sigma * 8 + 1)) | 1, half = taps / 2;
    std::vector<double> kernel(static_cast<std::size_t>(taps));
    double total = 0;
    for (int t = 0; t < taps; ++t)
      total += kernel[static_cast<std::size_t>(t)] =
          std::exp(-double((t - half) * (t - half)) / (2 * sigma * sigma));
    for (double& w : kernel) w /= total;
    for (std::int64_t k = 0; k < 2; ++k)
      for (const auto& [y, x] : {std::pair{12, 12}, std::pair{8, 15}}) {
        double expected = 0;
        for (int a = -half; a <= half; ++a)
          for (int b = -half; b <= half; ++b)
            expected += kernel[static_cast<std::size_t>(a + half)] *
                        kernel[static_cast<std::size_t>(b + half)] * source.at(y + a, x + b, k);
        QVERIFY2(std::abs(out.at(y, x, k) - expected) < 1e-3,
                 qPrintable(QString("%1 vs %2").arg(out.at(y, x, k)).arg(expected)));
      }
  }

  // --- draws ---------------------------------------------------------------------------------------------

  void nothing_is_drawn_at_probability_zero() {
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      Rng rng(seed);
      QCOMPARE(draw_augmentation(nothing(), true, rng), AugmentDraw{});
    }
  }

  void everything_is_drawn_within_its_range_at_probability_one() {
    AugmentConfig c;
    c.rotation_p = c.scale_p = c.elastic_p = c.brightness_p = c.contrast_p = c.gamma_p = c.noise_p =
        c.blur_p = 1;
    c.rotation_deg = 30;
    c.scale_range = {1.1, 1.2};
    c.elastic_grid = 4;
    c.brightness_range = {0.5, 0.6};
    c.contrast_range = {1.3, 1.4};
    c.gamma_range = {2.0, 2.5};
    c.noise_sigma = 0.05;
    c.blur_sigma = {1.5, 1.6};
    bool flipped = false, turned_odd = false;
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      Rng rng(seed);
      const AugmentDraw d = draw_augmentation(c, seed % 2 == 0, rng);
      QVERIFY(std::abs(d.spatial.angle_rad) <= 30 * std::numbers::pi / 180 && d.spatial.angle_rad != 0);
      QVERIFY(d.spatial.scale >= 1.1 && d.spatial.scale <= 1.2);
      QCOMPARE(d.spatial.grid, 4);
      QCOMPARE(d.spatial.elastic_dx.size(), std::size_t{16});
      QVERIFY(*d.intensity.brightness >= 0.5 && *d.intensity.brightness <= 0.6);
      QVERIFY(*d.intensity.contrast >= 1.3 && *d.intensity.contrast <= 1.4);
      QVERIFY(*d.intensity.gamma >= 2.0 && *d.intensity.gamma <= 2.5);
      QVERIFY(d.intensity.noise_sigma > 0 && d.intensity.noise_sigma <= 0.05);
      QVERIFY(*d.intensity.blur_sigma >= 1.5 && *d.intensity.blur_sigma <= 1.6);
      flipped = flipped || d.spatial.flip_h || d.spatial.flip_v;
      if (seed % 2 == 1) QVERIFY(d.spatial.rotate90 % 2 == 0);  // not square: no odd quarter turns
      turned_odd = turned_odd || d.spatial.rotate90 % 2 == 1;
    }
    QVERIFY(flipped && turned_odd);
  }

  // augment.elastic_sigma is the displacements' standard deviation.
  void elastic_displacements_have_sigma() {
    AugmentConfig c = nothing();
    c.elastic_p = 1;
    c.elastic_sigma = 6;
    double squares = 0;
    int n = 0;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      Rng rng(seed);
      const SpatialDraw d = draw_augmentation(c, true, rng).spatial;
      for (const float v : d.elastic_dy) squares += double(v) * v, ++n;
      for (const float v : d.elastic_dx) squares += double(v) * v, ++n;
    }
    QVERIFY2(std::abs(std::sqrt(squares / n) - 6) < 0.3, qPrintable(QString::number(std::sqrt(squares / n))));
  }

  void the_same_seed_draws_the_same() {
    const AugmentConfig c;  // the defaults
    std::set<std::string> seen;
    for (std::uint64_t seed = 0; seed < 30; ++seed) {
      Rng a(seed), b(seed);
      const AugmentDraw first = draw_augmentation(c, true, a);
      QCOMPARE(draw_augmentation(c, true, b), first);
      seen.insert(describe(first));
    }
    QVERIFY(seen.size() > 10);
  }

  // One transform's settings leave every other transform's draw as it was.
  void one_key_changes_only_its_own_transform() {
    AugmentConfig c, other;
    c.rotation_p = c.elastic_p = c.gamma_p = 0.5;
    other = c;
    other.rotation_p = 1;
    other.elastic_grid = 5;
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      Rng a(seed), b(seed);
      const AugmentDraw x = draw_augmentation(c, true, a), y = draw_augmentation(other, true, b);
      QCOMPARE(y.intensity, x.intensity);
      QCOMPARE(y.spatial.scale, x.spatial.scale);
      QCOMPARE(y.spatial.elastic_dy.empty(), x.spatial.elastic_dy.empty());
      if (x.spatial.angle_rad != 0) QCOMPARE(y.spatial.angle_rad, x.spatial.angle_rad);
    }
    AugmentConfig no_flips;
    no_flips.flips = false;
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      Rng a(seed);
      const SpatialDraw d = draw_augmentation(no_flips, true, a).spatial;
      QVERIFY(!d.flip_h && !d.flip_v && d.rotate90 == 0);
    }
  }

  void describe_says_what_a_draw_does() {
    AugmentDraw d;
    QCOMPARE(describe(d), std::string("identity"));
    d.spatial.angle_rad = 37.2 * std::numbers::pi / 180;
    d.spatial.scale = 1.12;
    d.spatial.grid = 1;
    d.spatial.elastic_dy = d.spatial.elastic_dx = {0.5f};
    d.spatial.flip_h = true;
    d.intensity.gamma = 0.81;
    QCOMPARE(describe(d), std::string("rot 37.2° scale 1.12 elastic flip_h gamma 0.81"));
    d = AugmentDraw{};
    d.spatial.rotate90 = 3;
    d.intensity.brightness = 0.9;
    d.intensity.contrast = 1.1;
    d.intensity.noise_sigma = 0.042;
    d.intensity.blur_sigma = 0.7;
    QCOMPARE(describe(d), std::string("rot270 brightness 0.90 contrast 1.10 noise 0.042 blur 0.70"));
  }

  // OpenCV's thread count changes nothing: the whole pipeline at 1 thread and at the default, byte for byte.
  void results_do_not_depend_on_opencvs_threads() {
    const Image source = image_of(300, 280, 3, [](auto y, auto x, auto k) {
      return std::sin(0.05 * double(y * (k + 1))) + std::cos(0.03 * double(x));
    });
    AugmentConfig c;
    c.rotation_p = c.scale_p = c.elastic_p = c.brightness_p = c.contrast_p = c.gamma_p = c.noise_p =
        c.blur_p = 1;
    const auto run = [&] {
      Rng rng(5);
      const AugmentDraw d = draw_augmentation(c, true, rng);
      Image out = warp(source, 150.3, 139.7, d.spatial, 256, 256);
      apply_intensity(d.intensity, out.values.data(), 256, 256, 3);
      return out;
    };
    const int threads = cv::getNumThreads();
    const Image many = run();
    cv::setNumThreads(1);
    const Image one = run();
    cv::setNumThreads(threads);
    QVERIFY(same_bytes(many, one));
  }

  // --- config --------------------------------------------------------------------------------------------

  void every_key_has_its_documented_default() {
    const Config c = config_from_json(json::object());
    const AugmentConfig& a = c.augment;
    QCOMPARE(a.flips, true);
    QCOMPARE(a.rotation_p, 0.2);
    QCOMPARE(a.rotation_deg, 180.0);
    QCOMPARE(a.scale_p, 0.2);
    QCOMPARE(a.scale_range, (std::array<double, 2>{0.7, 1.4}));
    QCOMPARE(a.elastic_p, 0.0);
    QCOMPARE(a.elastic_grid, std::int64_t{3});
    QCOMPARE(a.elastic_sigma, 10.0);
    QCOMPARE(a.brightness_p, 0.15);
    QCOMPARE(a.brightness_range, (std::array<double, 2>{0.75, 1.25}));
    QCOMPARE(a.contrast_p, 0.15);
    QCOMPARE(a.contrast_range, (std::array<double, 2>{0.75, 1.25}));
    QCOMPARE(a.gamma_p, 0.3);
    QCOMPARE(a.gamma_range, (std::array<double, 2>{0.7, 1.5}));
    QCOMPARE(a.noise_p, 0.1);
    QCOMPARE(a.noise_sigma, 0.1);
    QCOMPARE(a.blur_p, 0.2);
    QCOMPARE(a.blur_sigma, (std::array<double, 2>{0.5, 1.0}));
    // And a value set is read back.
    const Config set =
        config_from_json(json::parse(R"({"augment": {"scale_range": [0.9, 1.1], "elastic_grid": 5}})"));
    QCOMPARE(set.augment.scale_range, (std::array<double, 2>{0.9, 1.1}));
    QCOMPARE(set.augment.elastic_grid, std::int64_t{5});
    QCOMPARE(config_from_json(config_to_json(set)).augment, set.augment);
  }

  void out_of_range_values_are_refused_by_name_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("says");
    struct Row {
      const char *name, *key, *value, *says;
    };
    const Row rows[] = {
        {"probability above 1", "rotation_p", "1.5", "<= 1"},
        {"probability below 0", "blur_p", "-0.1", ">= 0"},
        {"angle above 180", "rotation_deg", "200", "<= 180"},
        {"range upside down", "scale_range", "[1.4, 0.7]", "low <= high"},
        {"range of one value", "gamma_range", "[0.7]", "[low, high]"},
        {"range of three values", "brightness_range", "[0.7, 0.8, 0.9]", "[low, high]"},
        {"zero scale", "scale_range", "[0, 1]", "> 0"},
        {"negative contrast", "contrast_range", "[-0.1, 1]", "must be in 0..16"},
        {"zero blur", "blur_sigma", "[0, 1]", "> 0"},
        {"grid of one", "elastic_grid", "1", "must be in 2..64"},
        {"negative sigma", "elastic_sigma", "-1", ">= 0"},
        {"negative noise", "noise_sigma", "-0.1", ">= 0"},
        {"flips not a boolean", "flips", "1", "true or false"},
    };
    for (const Row& row : rows) QTest::newRow(row.name) << row.key << row.value << row.says;
  }
  void out_of_range_values_are_refused_by_name() {
    QFETCH(QString, key);
    QFETCH(QString, value);
    QFETCH(QString, says);
    json j;
    j["augment"][key.toStdString()] = json::parse(value.toStdString());
    const std::string error = config_error(j);
    QVERIFY2(error.find("augment." + key.toStdString()) != std::string::npos, error.c_str());
    QVERIFY2(error.find(says.toStdString()) != std::string::npos, error.c_str());
  }

  // data.augment is the master switch; a transform's settings matter only when it can happen.
  void keys_that_cannot_act_are_marked_unread() {
    Config c;
    std::string why;
    QVERIFY(key_applies(c, "augment.rotation_deg", &why));
    QVERIFY(key_applies(c, "augment.flips", &why));
    c.augment.rotation_p = 0;
    QVERIFY(!key_applies(c, "augment.rotation_deg", &why));
    QCOMPARE(why, std::string("augment.rotation_p is 0 (it never happens)"));
    QVERIFY(key_applies(c, "augment.rotation_p", &why));
    QVERIFY(!key_applies(c, "augment.elastic_sigma", &why));  // elastic_p is 0 by default (nnU-Net's)
    QCOMPARE(why, std::string("augment.elastic_p is 0 (it never happens)"));
    c.augment.elastic_p = 0.2;
    QVERIFY(key_applies(c, "augment.elastic_sigma", &why));
    c.data.augment = false;
    for (const char* key : {"augment.flips", "augment.rotation_p", "augment.elastic_sigma"}) {
      QVERIFY(!key_applies(c, key, &why));
      QCOMPARE(why, std::string("data.augment is false (no augmentation)"));
    }
  }
};

QTEST_GUILESS_MAIN(TestAugment)
#include "test_augment.moc"
