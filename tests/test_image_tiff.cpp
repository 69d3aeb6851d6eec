// TIFF in the image module, and the values API: every sample kind (1/2/4/8/16/32-bit unsigned, 8/16/32-bit
// signed, 16/32/64-bit float), gray/RGB/RGBA/5 channels/palette, min-is-white, chunky and planar, strips and
// tiles, LZW/Deflate/PackBits, pages; masks of 8/16 bits and their pages; what probe reports; and the
// refusals (over the limits, truncated, forged, damaged, a page past the last, float masks, 32-bit for the
// 8-bit API) with nothing on stderr. References are independent of the decoder: the committed files in
// tests/data/tiff were written by tifffile and ImageMagick (make.sh there gives the formula of every value),
// the odd cases are written here with libtiff's writer from formulas, and the forged ones byte by byte.
#include <tiffio.h>

#include <QTemporaryDir>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "image_fixtures.h"
#include "test_support.h"
#include "tiff_writer.h"
#include "unet/core/error.h"
#include "unet/io/image.h"

using namespace unet;
using namespace unet::test;
namespace fs = std::filesystem;
using namespace test_tiff;

Q_DECLARE_METATYPE(unet::ErrorKind)

namespace {

fs::path fixture(const char* name) {
  return fs::path(UNET_SOURCE_DIR) / "tests/data/tiff" / name;
}

QByteArray file_bytes(const fs::path& path) {
  const std::vector<std::byte> bytes = read_all(path);
  return QByteArray(reinterpret_cast<const char*>(bytes.data()), qsizetype(bytes.size()));
}

// The expected [h, w, c] values from a formula of (x, y, c).
std::vector<float> expected(std::int64_t h, std::int64_t w, std::int64_t c,
                            const std::function<double(int, int, int)>& value) {
  std::vector<float> out;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) out.push_back(static_cast<float>(value(x, y, k)));
  return out;
}

#define CHECK_VALUES(image, h, w, c, formula)                                                    \
  do {                                                                                           \
    QCOMPARE((image).height, std::int64_t(h));                                                   \
    QCOMPARE((image).width, std::int64_t(w));                                                    \
    QCOMPARE((image).channels, std::int64_t(c));                                                 \
    const std::vector<float> want_ = expected(h, w, c, formula);                                 \
    QCOMPARE((image).values.size(), want_.size());                                               \
    for (std::size_t i_ = 0; i_ < want_.size(); ++i_)                                            \
      QVERIFY2((image).values[i_] == want_[i_], qPrintable(QString("sample %1: %2, expected %3") \
                                                               .arg(i_)                          \
                                                               .arg(double((image).values[i_]))  \
                                                               .arg(double(want_[i_]))));        \
  } while (false)

// ---- writing with libtiff ----

// ---- writing byte by byte (for headers no writer would make) ----

struct Entry {
  std::uint16_t tag;
  std::uint32_t value;  // one SHORT (tags < 256 but 273, 279: LONG) value
};

// A little-endian classic TIFF: header, `data` at offset 8, then one IFD of `entries` (sorted by tag).
QByteArray forged_tiff(const std::vector<Entry>& entries, const QByteArray& data) {
  QByteArray out("II*\0", 4);
  const auto put16 = [&](std::uint32_t v) { out.append(char(v & 0xff)).append(char((v >> 8) & 0xff)); };
  const auto put32 = [&](std::uint32_t v) {
    put16(v & 0xffff);
    put16(v >> 16);
  };
  put32(std::uint32_t(8 + data.size()));
  out += data;
  put16(std::uint32_t(entries.size()));
  for (const Entry& e : entries) {
    const bool is_long = e.tag == TIFFTAG_IMAGEWIDTH || e.tag == TIFFTAG_IMAGELENGTH ||
                         e.tag == TIFFTAG_STRIPOFFSETS || e.tag == TIFFTAG_STRIPBYTECOUNTS ||
                         e.tag == TIFFTAG_ROWSPERSTRIP;
    put16(e.tag);
    put16(is_long ? 4 : 3);
    put32(1);
    if (is_long) {
      put32(e.value);
    } else {
      put16(e.value);
      put16(0);
    }
  }
  put32(0);
  return out;
}

// A one-strip gray 8-bit image of `width` x `height` whose strip is `data` (at offset 8), with `compression`.
QByteArray forged_gray(std::uint32_t width, std::uint32_t height, const QByteArray& data,
                       std::uint32_t compression = COMPRESSION_NONE) {
  return forged_tiff({{TIFFTAG_IMAGEWIDTH, width},
                      {TIFFTAG_IMAGELENGTH, height},
                      {TIFFTAG_BITSPERSAMPLE, 8},
                      {TIFFTAG_COMPRESSION, compression},
                      {TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK},
                      {TIFFTAG_STRIPOFFSETS, 8},
                      {TIFFTAG_SAMPLESPERPIXEL, 1},
                      {TIFFTAG_ROWSPERSTRIP, height},
                      {TIFFTAG_STRIPBYTECOUNTS, std::uint32_t(data.size())}},
                     data);
}

}  // namespace

class TestImageTiff : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { fail_on_warnings(); }

  // ---- the committed fixtures (tifffile, ImageMagick) ----

  void gray8LzwStrips() {
    const ValueImage v = read_image_values(fixture("gray8_lzw.tif"));
    QCOMPARE(v.bit_depth, 8);
    QVERIFY(!v.floating);
    CHECK_VALUES(v, 3, 7, 1, [](int x, int y, int) { return x + 100 * y; });
    const Image image = read_image(fixture("gray8_lzw.tif"));  // the 8-bit API: as is
    QCOMPARE(image.pixels[std::size_t(2 * 7 + 6)], std::uint8_t(206));
  }

  void sixteenBitKeepsItsValues() {
    const ValueImage lzw = read_image_values(fixture("gray16_lzw.tif"));
    QCOMPARE(lzw.bit_depth, 16);
    CHECK_VALUES(lzw, 2, 6, 1, [](int x, int y, int) { return 1000 * x + 300 * y + 7; });
    const ValueImage tiled = read_image_values(fixture("gray16_deflate_tiled.tif"));
    CHECK_VALUES(tiled, 18, 20, 1, [](int x, int y, int) { return 1000 * x + 3 * y; });
    // The 8-bit API scales as for a 16-bit PNG: (v * 255 + 32767) / 65535.
    const Image image = read_image(fixture("gray16_deflate_tiled.tif"));
    const std::uint32_t v = 1000 * 19 + 3 * 17;
    QCOMPARE(image.pixels.back(), std::uint8_t((v * 255 + 32767) / 65535));
  }

  void floatsAndWideIntegers() {
    const ValueImage f32 = read_image_values(fixture("float32.tif"));
    QVERIFY(f32.floating);
    QCOMPARE(f32.bit_depth, 32);
    CHECK_VALUES(f32, 4, 5, 1, [](int x, int y, int) { return -1.5 + 0.25 * x + 0.5 * y; });
    const ValueImage f64 = read_image_values(fixture("float64.tif"));
    QCOMPARE(f64.bit_depth, 64);
    CHECK_VALUES(f64, 2, 3, 1, [](int x, int y, int) { return x - 0.125 * y; });
    const ValueImage i16 = read_image_values(fixture("int16.tif"));
    QVERIFY(i16.is_signed);
    CHECK_VALUES(i16, 3, 4, 1, [](int x, int y, int) { return -300 + 100 * x + 37 * y; });
    const ValueImage u32 = read_image_values(fixture("uint32.tif"));
    QCOMPARE(u32.bit_depth, 32);
    CHECK_VALUES(u32, 2, 3, 1, [](int x, int y, int) { return 70000 * x + 5 * y; });
    const ValueImage i32 = read_image_values(fixture("int32.tif"));
    CHECK_VALUES(i32, 2, 3, 1, [](int x, int y, int) { return -100000 + 1000 * x + y; });
    const ValueImage i8 = read_image_values(fixture("int8.tif"));
    CHECK_VALUES(i8, 2, 4, 1, [](int x, int y, int) { return -100 + 50 * x + 7 * y; });
  }

  void colourAndExtraChannels() {
    const ValueImage planar = read_image_values(fixture("rgb8_planar.tif"));
    CHECK_VALUES(planar, 3, 4, 3, [](int x, int y, int c) { return c == 0 ? x : c == 1 ? 10 * y : 200; });
    const ValueImage rgba = read_image_values(fixture("rgba8.tif"));
    CHECK_VALUES(rgba, 2, 3, 4, [](int x, int y, int c) {
      return c == 0 ? x : c == 1 ? y : c == 2 ? 7 : 255 - x;
    });
    const Image rgba8 = read_image(fixture("rgba8.tif"));
    QCOMPARE(rgba8.channels, std::int64_t(4));
    QCOMPARE(rgba8.pixels[3], std::uint8_t(255));
    const ValueImage five = read_image_values(fixture("five16.tif"));
    CHECK_VALUES(five, 2, 3, 5, [](int x, int y, int c) { return 1000 * c + 10 * x + y; });
  }

  void bilevelPaletteAndMinIsWhite() {
    const ValueImage bilevel = read_image_values(fixture("bilevel.tif"));
    QCOMPARE(bilevel.bit_depth, 8);  // scaled, as read_image does
    CHECK_VALUES(bilevel, 2, 10, 1, [](int x, int y, int) { return (x + y) % 2 == 1 ? 255 : 0; });
    const ValueImage palette = read_image_values(fixture("palette8.tif"));
    CHECK_VALUES(palette, 2, 4, 3, [](int x, int y, int c) {
      const int i = x + 4 * y + (x == 3 ? 240 : 0);
      return c == 0 ? i : c == 1 ? 255 - i : (3 * i) % 256;
    });
    const ValueImage white = read_image_values(fixture("miniswhite8.tif"));
    CHECK_VALUES(white, 2, 4, 1, [](int x, int y, int) { return 255 - (x + 10 * y); });
  }

  void pagesAreReadOneByOne() {
    const ValueImage first = read_image_values(fixture("two_pages.tif"));
    CHECK_VALUES(first, 3, 4, 1, [](int x, int y, int) { return x + y; });
    const ValueImage second = read_image_values(fixture("two_pages.tif"), 1);
    CHECK_VALUES(second, 2, 5, 1, [](int x, int, int) { return 100 + x; });
  }

  void probeReportsThePage() {
    const ImageInfo five = probe_image(fixture("five16.tif"));
    QCOMPARE(five.format, ImageFormat::tiff);
    QCOMPARE(five.channels, std::int64_t(5));
    QCOMPARE(five.bit_depth, 16);
    QCOMPARE(five.pages, std::int64_t(1));
    QVERIFY(!five.floating);
    const ImageInfo f = probe_image(fixture("float32.tif"));
    QVERIFY(f.floating);
    QCOMPARE(f.bit_depth, 32);
    QCOMPARE(probe_image(fixture("bilevel.tif")).bit_depth, 1);
    QCOMPARE(probe_image(fixture("palette8.tif")).channels, std::int64_t(3));
    QVERIFY(probe_image(fixture("int16.tif")).is_signed);
    const ImageInfo second = probe_image(fixture("two_pages.tif"), {}, 1);
    QCOMPARE(second.pages, std::int64_t(2));
    QCOMPARE(second.width, std::int64_t(5));
    QCOMPARE(second.height, std::int64_t(2));
    QCOMPARE(QString(to_string(ImageFormat::tiff)), QString("TIFF"));
    // Probe reads the directories only: a file whose strips (bytes 8 to 29, before its directory at 30) are
    // garbage still probes; reading its pixels is refused.
    QByteArray garbled = file_bytes(fixture("gray8_lzw.tif"));
    for (int i = 8; i < 30; ++i) garbled[i] = char(0xff);
    QCOMPARE(probe_image_bytes(span_of(garbled), "x.tif").width, std::int64_t(7));
    const Refusal r = refusal_of([&] { decode_image_values(span_of(garbled), "x.tif"); });
    QCOMPARE(r.kind, ErrorKind::io);
    QVERIFY2(contains(r.message, "x.tif: corrupt TIFF data: "), r.message.c_str());
  }

  void bigTiff() {
    QTemporaryDir dir;
    const fs::path path = fs::path(dir.path().toStdString()) / "big.tif";
    const auto f = [](int x, int y, int) { return 1000.0 * x + y; };
    write_libtiff(path,
                  {{5,
                    4,
                    1,
                    16,
                    SAMPLEFORMAT_UINT,
                    PHOTOMETRIC_MINISBLACK,
                    PLANARCONFIG_CONTIG,
                    COMPRESSION_LZW,
                    0,
                    2,
                    {},
                    f}},
                  "w8");
    QCOMPARE(file_bytes(path).left(4), QByteArray("II+\0", 4));
    const ValueImage v = read_image_values(path);
    CHECK_VALUES(v, 4, 5, 1, f);
  }

  void masks() {
    const MaskImage m8 = read_mask(fixture("mask8.tif"));
    QCOMPARE(m8.width, std::int64_t(4));
    for (int i = 0; i < 12; ++i) QCOMPARE(int(m8.values[std::size_t(i)]), (i % 4 + i / 4) % 3);
    const MaskImage m16 = read_mask(fixture("mask16.tif"));
    for (int i = 0; i < 12; ++i) QCOMPARE(int(m16.values[std::size_t(i)]), 300 * (i % 4) + i / 4);
    const MaskImage page0 = read_mask(fixture("mask_pages.tif"));
    const MaskImage page1 = read_mask(fixture("mask_pages.tif"), {}, 1);
    QCOMPARE(page0.values, std::vector<std::uint16_t>(6, 1));
    QCOMPARE(page1.values, (std::vector<std::uint16_t>{0, 1, 0, 0, 1, 0}));
    // A palette mask gives its indices; a bilevel one 0/1; an RGB one compares its channels.
    QCOMPARE(int(read_mask(fixture("palette8.tif")).values[3]), 243);
    QCOMPARE(int(read_mask(fixture("bilevel.tif")).values[1]), 1);
    QVERIFY(!read_mask(fixture("rgb8_planar.tif")).all_channels_equal);
    // Signed masks are read while they hold no negative value.
    const Refusal negative = refusal_of([] { read_mask(fixture("int16.tif")); });
    QVERIFY(negative.refused);
    QCOMPARE(negative.kind, ErrorKind::data);
    QVERIFY2(contains(negative.message, "mask value -300 at x 0, y 0"), negative.message.c_str());
  }

  // ---- written here with libtiff ----

  void libtiffWrittenOddCases() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    struct Case {
      const char* name;
      LibtiffSpec spec;
      std::int64_t channels;
      std::function<double(int, int, int)> want;
    };
    const auto rgb16 = [](int x, int y, int c) { return 20000.0 * c + 100 * x + y; };
    const auto half = [](int x, int y, int) { return -2.25 + 0.5 * x + 64.0 * y; };
    const auto gray2 = [](int x, int y, int) { return double((x + y) % 4); };
    std::vector<std::uint16_t> map(3 * 16);
    for (int i = 0; i < 16; ++i) {
      map[std::size_t(i)] = std::uint16_t(257 * 17 * i);          // red: 17 i in 8 bits
      map[std::size_t(16 + i)] = std::uint16_t(257 * (255 - i));  // green
      map[std::size_t(32 + i)] = std::uint16_t(257 * 100);        // blue
    }
    const std::vector<Case> cases = {
        {"tiled planar RGB 16-bit LZW",
         {20,
          18,
          3,
          16,
          SAMPLEFORMAT_UINT,
          PHOTOMETRIC_RGB,
          PLANARCONFIG_SEPARATE,
          COMPRESSION_LZW,
          16,
          1,
          {},
          rgb16},
         3,
         rgb16},
        {"strips of 3 rows, planar RGBA 8-bit Deflate",
         {7,
          8,
          4,
          8,
          SAMPLEFORMAT_UINT,
          PHOTOMETRIC_RGB,
          PLANARCONFIG_SEPARATE,
          COMPRESSION_ADOBE_DEFLATE,
          0,
          3,
          {},
          [](int x, int y, int c) { return 30.0 * c + x + 2 * y; }},
         4,
         [](int x, int y, int c) { return 30.0 * c + x + 2 * y; }},
        {"min-is-white 16-bit",
         {5,
          3,
          1,
          16,
          SAMPLEFORMAT_UINT,
          PHOTOMETRIC_MINISWHITE,
          PLANARCONFIG_CONTIG,
          COMPRESSION_NONE,
          0,
          2,
          {},
          [](int x, int y, int) { return 1000.0 * x + y; }},
         1,
         [](int x, int y, int) { return 65535 - (1000.0 * x + y); }},
        {"min-is-white signed 16-bit",
         {3,
          2,
          1,
          16,
          SAMPLEFORMAT_INT,
          PHOTOMETRIC_MINISWHITE,
          PLANARCONFIG_CONTIG,
          COMPRESSION_NONE,
          0,
          1,
          {},
          [](int x, int y, int) { return -500.0 + 400 * x + y; }},
         1,
         [](int x, int y, int) { return -1 - (-500.0 + 400 * x + y); }},
        {"signed 16-bit PackBits",
         {9,
          4,
          1,
          16,
          SAMPLEFORMAT_INT,
          PHOTOMETRIC_MINISBLACK,
          PLANARCONFIG_CONTIG,
          COMPRESSION_PACKBITS,
          0,
          4,
          {},
          [](int x, int y, int) { return -32768.0 + 8000 * x + y; }},
         1,
         [](int x, int y, int) { return -32768.0 + 8000 * x + y; }},
        {"16-bit float tiled Deflate",
         {17,
          3,
          1,
          16,
          SAMPLEFORMAT_IEEEFP,
          PHOTOMETRIC_MINISBLACK,
          PLANARCONFIG_CONTIG,
          COMPRESSION_ADOBE_DEFLATE,
          16,
          1,
          {},
          half},
         1,
         half},
        {"2-bit gray, scaled to 0..255",
         {11,
          2,
          1,
          2,
          SAMPLEFORMAT_UINT,
          PHOTOMETRIC_MINISBLACK,
          PLANARCONFIG_CONTIG,
          COMPRESSION_NONE,
          0,
          1,
          {},
          gray2},
         1,
         [&](int x, int y, int c) { return 85 * gray2(x, y, c); }},
        {"1-bit min-is-white",
         {9,
          2,
          1,
          1,
          SAMPLEFORMAT_UINT,
          PHOTOMETRIC_MINISWHITE,
          PLANARCONFIG_CONTIG,
          COMPRESSION_NONE,
          0,
          2,
          {},
          [](int x, int, int) { return double(x % 3 == 0); }},
         1,
         [](int x, int, int) { return x % 3 == 0 ? 0.0 : 255.0; }},
        {"4-bit palette",
         {5, 3, 1, 4, SAMPLEFORMAT_UINT, PHOTOMETRIC_PALETTE, PLANARCONFIG_CONTIG, COMPRESSION_LZW, 0, 3, map,
          [](int x, int y, int) { return double((x + 5 * y) % 16); }},
         3,
         [](int x, int y, int c) {
           const int i = (x + 5 * y) % 16;
           return c == 0 ? 17.0 * i : c == 1 ? 255.0 - i : 100.0;
         }},
    };
    for (const Case& c : cases) {
      const fs::path path = root / "odd.tif";
      write_libtiff(path, {c.spec});
      ValueImage v;
      try {
        v = read_image_values(path);
      } catch (const Error& e) {
        QFAIL(qPrintable(QString("%1: %2").arg(c.name, e.what())));
      }
      CHECK_VALUES(v, c.spec.height, c.spec.width, c.channels, c.want);
      QCOMPARE(probe_image(path).bit_depth, int(c.spec.bits));
    }
    // The 8-bit API and masks on the same kinds.
    write_libtiff(root / "white1.tif", {cases[7].spec});
    QCOMPARE(read_image(root / "white1.tif").pixels[0], std::uint8_t(0));
    QCOMPARE(read_image(root / "white1.tif").pixels[1], std::uint8_t(255));
    QCOMPARE(int(read_mask(root / "white1.tif").values[1]), 1);
    write_libtiff(root / "palette4.tif", {cases[8].spec});
    QCOMPARE(int(read_mask(root / "palette4.tif").values[6]), 6);
    write_libtiff(root / "planar16.tif", {cases[0].spec});
    QCOMPARE(int(read_mask(root / "planar16.tif").values[21]), int(rgb16(1, 1, 0)));
  }

  void zstdWhenThisLibtiffHasIt() {
    if (TIFFIsCODECConfigured(COMPRESSION_ZSTD) != 1) QSKIP("this libtiff has no zstd");
    QTemporaryDir dir;
    const fs::path path = fs::path(dir.path().toStdString()) / "zstd.tif";
    const auto f = [](int x, int y, int) { return 0.5 * x - 3.0 * y; };
    write_libtiff(path, {{6,
                          5,
                          1,
                          32,
                          SAMPLEFORMAT_IEEEFP,
                          PHOTOMETRIC_MINISBLACK,
                          PLANARCONFIG_CONTIG,
                          COMPRESSION_ZSTD,
                          0,
                          2,
                          {},
                          f}});
    const ValueImage v = read_image_values(path);
    CHECK_VALUES(v, 5, 6, 1, f);
  }

  void jpegCompressedYCbCrReadsAsRgb() {
    // The usual JPEG-in-TIFF (photometric YCbCr, chroma subsampled): libjpeg gives RGB. Lossy, so near the
    // flat colour, not at it.
    QTemporaryDir dir;
    const fs::path path = fs::path(dir.path().toStdString()) / "jpeg.tif";
    write_libtiff(path, {{32,
                          16,
                          3,
                          8,
                          SAMPLEFORMAT_UINT,
                          PHOTOMETRIC_YCBCR,
                          PLANARCONFIG_CONTIG,
                          COMPRESSION_JPEG,
                          0,
                          16,
                          {},
                          [](int, int, int c) { return c == 0   ? 200.0
                                                       : c == 1 ? 60.0
                                                                : 30.0; }}});
    const ImageInfo info = probe_image(path);
    QCOMPARE(info.channels, std::int64_t(3));
    const ValueImage v = read_image_values(path);
    QCOMPARE(v.channels, std::int64_t(3));
    QCOMPARE(v.values.size(), std::size_t(32 * 16 * 3));
    const float want[3] = {200, 60, 30};
    for (std::size_t i = 0; i < v.values.size(); ++i)
      QVERIFY2(std::fabs(v.values[i] - want[i % 3]) <= 3, qPrintable(QString::number(double(v.values[i]))));
    QCOMPARE(read_image(path).pixels.size(), v.values.size());
  }

  void threePagesOfDifferentKinds() {
    QTemporaryDir dir;
    const fs::path path = fs::path(dir.path().toStdString()) / "pages.tif";
    const auto a = [](int x, int y, int) { return double(x + y); };
    const auto b = [](int x, int y, int) { return 5000.0 * x + y; };
    const auto c = [](int x, int, int k) { return -0.5 * x + k; };
    write_libtiff(path, {{3,
                          2,
                          1,
                          8,
                          SAMPLEFORMAT_UINT,
                          PHOTOMETRIC_MINISBLACK,
                          PLANARCONFIG_CONTIG,
                          COMPRESSION_LZW,
                          0,
                          1,
                          {},
                          a},
                         {4,
                          3,
                          1,
                          16,
                          SAMPLEFORMAT_UINT,
                          PHOTOMETRIC_MINISBLACK,
                          PLANARCONFIG_CONTIG,
                          COMPRESSION_NONE,
                          0,
                          3,
                          {},
                          b},
                         {2,
                          2,
                          2,
                          32,
                          SAMPLEFORMAT_IEEEFP,
                          PHOTOMETRIC_MINISBLACK,
                          PLANARCONFIG_CONTIG,
                          COMPRESSION_NONE,
                          0,
                          2,
                          {},
                          c}});
    const ValueImage v1 = read_image_values(path, 1);
    QCOMPARE(v1.bit_depth, 16);
    CHECK_VALUES(v1, 3, 4, 1, b);
    const ValueImage v2 = read_image_values(path, 2);
    QVERIFY(v2.floating);
    CHECK_VALUES(v2, 2, 2, 2, c);
    QCOMPARE(probe_image(path, {}, 2).pages, std::int64_t(3));
    QCOMPARE(int(read_mask(path, {}, 1).values[4]), int(b(0, 1, 0)));
  }

  void sixteenBitPngKeepsItsValues() {
    const QByteArray png = build_png(spec(3, 1, 16, kGray, {0, 300, 65535}));
    const ValueImage v = decode_image_values(span_of(png), "a.png");
    QCOMPARE(v.bit_depth, 16);
    QCOMPARE(v.values, (std::vector<float>{0, 300, 65535}));
    // 8-bit PNGs and JPEGs give their 8-bit samples.
    const QByteArray rgb = build_png(spec(2, 1, 8, kRgb, {1, 2, 3, 250, 251, 252}));
    const ValueImage v8 = decode_image_values(span_of(rgb), "b.png");
    QCOMPARE(v8.bit_depth, 8);
    QCOMPARE(v8.channels, std::int64_t(3));
    QCOMPARE(v8.values, (std::vector<float>{1, 2, 3, 250, 251, 252}));
    const QByteArray jpeg = build_jpeg(flat(8, 8, {90}), 8, 8, 1);
    const Image decoded = decode_image(span_of(jpeg), "c.jpg");
    const ValueImage vj = decode_image_values(span_of(jpeg), "c.jpg");
    QCOMPARE(vj.bit_depth, 8);
    QCOMPARE(vj.values.size(), decoded.pixels.size());
    QCOMPARE(vj.values[9], float(decoded.pixels[9]));
    // One page only.
    const Refusal page = refusal_of([&] { decode_image_values(span_of(png), "a.png", 1); });
    QCOMPARE(page.kind, ErrorKind::usage);
    QVERIFY2(contains(page.message, "a.png: page 1 asked for, but the file has 1 page"),
             page.message.c_str());
  }

  // ---- refusals ----

  void refusals_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("call");  // values, image, mask, probe
    QTest::addColumn<std::int64_t>("page");
    QTest::addColumn<ErrorKind>("kind");
    QTest::addColumn<QString>("message");

    QTest::newRow("100000x100000 declared")
        << forged_gray(100000, 100000, QByteArray(16, '\0')) << "values" << std::int64_t(0) << ErrorKind::data
        << "x.tif: declared 100000x100000, over the 16384x16384 limit";
    QTest::newRow("100000x100000 probed")
        << forged_gray(100000, 100000, QByteArray(16, '\0')) << "probe" << std::int64_t(0) << ErrorKind::data
        << "over the 16384x16384 limit";
    QTest::newRow("much smaller than its header")
        << forged_gray(3000, 3000, QByteArray(20, '\x80'), COMPRESSION_LZW) << "values" << std::int64_t(0)
        << ErrorKind::data << "x.tif: the TIFF header declares 9000000 bytes of pixel data";
    QTest::newRow("strip past the end")
        << forged_tiff({{TIFFTAG_IMAGEWIDTH, 4},
                        {TIFFTAG_IMAGELENGTH, 4},
                        {TIFFTAG_BITSPERSAMPLE, 8},
                        {TIFFTAG_COMPRESSION, COMPRESSION_LZW},
                        {TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK},
                        {TIFFTAG_STRIPOFFSETS, 1000},
                        {TIFFTAG_STRIPBYTECOUNTS, 16}},
                       QByteArray(16, '\0'))
        << "values" << std::int64_t(0) << ErrorKind::io
        << "x.tif: truncated: strip 0 of page 0 ends at byte 1016, past the end";
    const QByteArray tiled = file_bytes(fixture("gray16_deflate_tiled.tif"));
    QTest::newRow("truncated") << tiled.left(tiled.size() - 200) << "values" << std::int64_t(0)
                               << ErrorKind::io << "x.tif: truncated: tile";
    QTest::newRow("II* then nothing of TIFF")
        << QByteArray("II*\0\xff\xff\xff\x7fnot a tiff at all", 25) << "values" << std::int64_t(0)
        << ErrorKind::io << "x.tif: corrupt TIFF data: ";
    QTest::newRow("II* cut short")
        << QByteArray("II*", 3) << "values" << std::int64_t(0) << ErrorKind::io
        << "x.tif: truncated: the data ends after 3 bytes, inside the TIFF signature";
    const QByteArray two = file_bytes(fixture("two_pages.tif"));
    QTest::newRow("page past the last") << two << "values" << std::int64_t(2) << ErrorKind::usage
                                        << "x.tif: page 2 asked for, but the file has 2 pages (0 to 1)";
    QTest::newRow("negative page") << two << "mask" << std::int64_t(-1) << ErrorKind::usage
                                   << "page -1 asked for";
    QTest::newRow("float mask") << file_bytes(fixture("float32.tif")) << "mask" << std::int64_t(0)
                                << ErrorKind::data
                                << "x.tif: a mask of 32-bit float samples: masks are 8/16-bit class indices";
    QTest::newRow("32-bit mask") << file_bytes(fixture("uint32.tif")) << "mask" << std::int64_t(0)
                                 << ErrorKind::data << "masks are 8/16-bit class indices";
    QTest::newRow("float as 8-bit") << file_bytes(fixture("float32.tif")) << "image" << std::int64_t(0)
                                    << ErrorKind::data << "32-bit float samples: the 8-bit reader";
    QTest::newRow("signed as 8-bit") << file_bytes(fixture("int8.tif")) << "image" << std::int64_t(0)
                                     << ErrorKind::data << "values API";
    QTest::newRow("CMYK") << forged_tiff({{TIFFTAG_IMAGEWIDTH, 1},
                                          {TIFFTAG_IMAGELENGTH, 1},
                                          {TIFFTAG_BITSPERSAMPLE, 8},
                                          {TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_SEPARATED},
                                          {TIFFTAG_STRIPOFFSETS, 8},
                                          {TIFFTAG_SAMPLESPERPIXEL, 4},
                                          {TIFFTAG_STRIPBYTECOUNTS, 4}},
                                         QByteArray(4, '\0'))
                          << "values" << std::int64_t(0) << ErrorKind::unsupported
                          << "unsupported TIFF: CMYK";
    QTest::newRow("12-bit") << forged_tiff({{TIFFTAG_IMAGEWIDTH, 2},
                                            {TIFFTAG_IMAGELENGTH, 1},
                                            {TIFFTAG_BITSPERSAMPLE, 12},
                                            {TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK},
                                            {TIFFTAG_STRIPOFFSETS, 8},
                                            {TIFFTAG_STRIPBYTECOUNTS, 3}},
                                           QByteArray(3, '\0'))
                            << "values" << std::int64_t(0) << ErrorKind::unsupported
                            << "12-bit integer samples";
  }

  void refusals() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, call);
    QFETCH(std::int64_t, page);
    QFETCH(ErrorKind, kind);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const fs::path err = fs::path(dir.path().toStdString()) / "stderr";
    Refusal r;
    {
      StderrCapture capture(err);
      r = refusal_of([&] {
        if (call == "values") decode_image_values(span_of(bytes), "x.tif", page);
        if (call == "image") decode_image(span_of(bytes), "x.tif");
        if (call == "mask") decode_mask(span_of(bytes), "x.tif", {}, page);
        if (call == "probe") probe_image_bytes(span_of(bytes), "x.tif", {}, page);
      });
    }
    QVERIFY2(r.refused, "accepted");
    QVERIFY2(contains(r.message, message), r.message.c_str());
    QCOMPARE(r.kind, kind);
    QCOMPARE(fs::file_size(err), std::uintmax_t(0));  // libtiff said nothing on stderr
  }

  void filesAreReadByOffset() {
    // The same refusals and values through a file as through bytes.
    QTemporaryDir dir;
    const fs::path cut = fs::path(dir.path().toStdString()) / "cut.tif";
    const QByteArray tiled = file_bytes(fixture("gray16_deflate_tiled.tif"));
    write_bytes(cut, tiled.left(tiled.size() - 200));
    const Refusal r = refusal_of([&] { read_image_values(cut); });
    QCOMPARE(r.kind, ErrorKind::io);
    QVERIFY2(contains(r.message, QString::fromStdString(cut.string() + ": truncated: tile")),
             r.message.c_str());
    const QByteArray five = file_bytes(fixture("five16.tif"));
    QCOMPARE(read_image_values(fixture("five16.tif")).values,
             decode_image_values(span_of(five), "five").values);
  }

  void decodesInParallel() {
    // No shared state: threads decoding good and damaged files at once each get their own answer.
    const QByteArray good = file_bytes(fixture("gray16_deflate_tiled.tif"));
    const QByteArray bad = good.left(good.size() - 200);
    const std::vector<float> want = decode_image_values(span_of(good), "good").values;
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          if (t % 2 == 0) {
            if (decode_image_values(span_of(good), "good").values != want) ++wrong;
          } else {
            const Refusal r = refusal_of([&] { decode_image_values(span_of(bad), "bad"); });
            if (!r.refused || !contains(r.message, "bad: truncated")) ++wrong;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    QCOMPARE(wrong.load(), 0);
  }
};

QTEST_GUILESS_MAIN(TestImageTiff)
#include "test_image_tiff.moc"
