// The image module: every PNG kind (8/16-bit, gray/gray+alpha/RGB/RGBA, palette with and without tRNS, 1/2/4
// bits, interlaced) and gray/RGB/progressive JPEG decode to hand-known pixels; masks keep raw values; the PNG
// writer round-trips; damaged and foreign files are refused with their path and their problem (and nothing
// reaches stderr); conversions and resizes match values computed by hand. PNG fixtures are built chunk by
// chunk (image_fixtures.h: zlib for the data and the CRCs), so that the decoder is checked against the
// format, not against libpng's own writer; JPEG fixtures are written with libjpeg.
#include <QTemporaryDir>
#include <atomic>
#include <thread>

#include "image_fixtures.h"
#include "test_support.h"
#include "unet/core/error.h"
#include "unet/io/image.h"

using namespace unet;
using namespace unet::test;
namespace fs = std::filesystem;

namespace {

Image make_image(std::int64_t h, std::int64_t w, std::int64_t c, std::vector<std::uint8_t> pixels) {
  Image image;
  image.height = h;
  image.width = w;
  image.channels = c;
  image.pixels = std::move(pixels);
  return image;
}

}  // namespace

Q_DECLARE_METATYPE(std::vector<std::uint8_t>)

class TestImage : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  fs::path fixture(const QString& name, const QByteArray& bytes) {
    const fs::path path = fs::path(dir_.path().toStdString()) / name.toStdString();
    write_bytes(path, bytes);
    return path;
  }

 private slots:
  void initTestCase() {
    test::fail_on_warnings();
    QVERIFY(dir_.isValid());
  }

  // ---- decoding ----

  void decodes_png_kinds_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("channels");
    QTest::addColumn<int>("bit_depth");
    QTest::addColumn<QByteArray>("expected");

    const auto plain = [](const char* row, int w, int h, int color_type) {
      const int count = w * h * samples_per_pixel(color_type);
      const std::vector<int> v = pattern(count, 255, w + h);
      QTest::newRow(row) << build_png(spec(w, h, 8, color_type, v)) << h << w << samples_per_pixel(color_type)
                         << 8 << bytes_of(v);
    };
    plain("gray8 1x1", 1, 1, kGray);
    plain("gray8 3x5", 5, 3, kGray);
    plain("gray+alpha8 7x2", 2, 7, kGrayAlpha);
    plain("rgb8 3x5", 5, 3, kRgb);
    plain("rgb8 1x1", 1, 1, kRgb);
    plain("rgba8 7x2", 2, 7, kRgba);
    plain("rgba8 2x7", 7, 2, kRgba);

    // 16-bit: v8 = (v16 * 255 + 32767) / 65535, worked out by hand.
    QTest::newRow("gray16 2x4") << build_png(
                                       spec(4, 2, 16, kGray, {0, 1, 128, 129, 257, 32767, 32768, 65535}))
                                << 2 << 4 << 1 << 16
                                << bytes_of(std::vector<int>{0, 0, 0, 1, 1, 127, 128, 255});
    QTest::newRow("rgb16 1x2") << build_png(spec(2, 1, 16, kRgb, {65534, 300, 40000, 1000, 12345, 50000}))
                               << 1 << 2 << 3 << 16 << bytes_of(std::vector<int>{255, 1, 156, 4, 48, 195});

    // Gray below 8 bits is scaled: 1 bit x 255, 2 bits x 85, 4 bits x 17.
    QTest::newRow("gray1 3x5")
        << build_png(spec(5, 3, 1, kGray, {1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1})) << 3 << 5 << 1 << 1
        << bytes_of(std::vector<int>{255, 0, 255, 255, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255});
    QTest::newRow("gray2 1x5") << build_png(spec(5, 1, 2, kGray, {0, 1, 2, 3, 2})) << 1 << 5 << 1 << 2
                               << bytes_of(std::vector<int>{0, 85, 170, 255, 170});
    QTest::newRow("gray4 1x3") << build_png(spec(3, 1, 4, kGray, {0, 7, 15})) << 1 << 3 << 1 << 4
                               << bytes_of(std::vector<int>{0, 119, 255});

    // A palette becomes RGB; with tRNS, RGBA (alpha 255 past the tRNS entries).
    PngSpec pal = spec(3, 2, 4, kPalette, {0, 1, 2, 2, 1, 0});
    pal.palette = bytes_of(std::vector<int>{10, 20, 30, 40, 50, 60, 70, 80, 90});
    QTest::newRow("palette4 2x3") << build_png(pal) << 2 << 3 << 3 << 4
                                  << bytes_of(std::vector<int>{10, 20, 30, 40, 50, 60, 70, 80, 90, 70, 80, 90,
                                                               40, 50, 60, 10, 20, 30});
    PngSpec pal_t = spec(2, 2, 8, kPalette, {0, 1, 2, 0});
    pal_t.palette = pal.palette;
    pal_t.trns = bytes_of(std::vector<int>{0, 128});
    QTest::newRow("palette8 tRNS 2x2")
        << build_png(pal_t) << 2 << 2 << 4 << 8
        << bytes_of(std::vector<int>{10, 20, 30, 0, 40, 50, 60, 128, 70, 80, 90, 255, 10, 20, 30, 0});

    // The colour-key tRNS of a gray image adds no channel: pixels as stored.
    PngSpec gray_t = spec(2, 1, 8, kGray, {7, 9});
    gray_t.trns = bytes_of(std::vector<int>{0, 7});
    QTest::newRow("gray8 colour-key tRNS")
        << build_png(gray_t) << 1 << 2 << 1 << 8 << bytes_of(std::vector<int>{7, 9});

    // Interlaced: the same pixels as the plain file.
    const std::vector<int> big = pattern(11 * 9 * 3, 255, 4);
    PngSpec inter = spec(11, 9, 8, kRgb, big);
    inter.interlaced = true;
    QTest::newRow("rgb8 interlaced 9x11") << build_png(inter) << 9 << 11 << 3 << 8 << bytes_of(big);
    PngSpec split = spec(11, 9, 8, kRgb, big);
    split.idat_chunks = 4;
    QTest::newRow("rgb8 in 4 IDAT chunks 9x11") << build_png(split) << 9 << 11 << 3 << 8 << bytes_of(big);
    const std::vector<int> big16 = pattern(3 * 5 * 2, 65535, 2);
    std::vector<int> big16_8;
    for (const int v : big16) big16_8.push_back((v * 255 + 32767) / 65535);
    PngSpec inter16 = spec(3, 5, 16, kGrayAlpha, big16);
    inter16.interlaced = true;
    QTest::newRow("gray+alpha16 interlaced 5x3")
        << build_png(inter16) << 5 << 3 << 2 << 16 << bytes_of(big16_8);
  }

  void decodes_png_kinds() {
    QFETCH(QByteArray, file);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(int, channels);
    QFETCH(int, bit_depth);
    QFETCH(QByteArray, expected);

    const Image image = decode_image(span_of(file), "memory.png");
    QCOMPARE(image.height, height);
    QCOMPARE(image.width, width);
    QCOMPARE(image.channels, channels);
    QCOMPARE(bytes_of(image.pixels), expected);

    const fs::path path = fixture(QStringLiteral("kind.png"), file);
    QVERIFY(read_image(path) == image);
    const ImageInfo info{ImageFormat::png, width, height, channels, bit_depth};
    QVERIFY(probe_image(path) == info);
    QVERIFY(probe_image_bytes(span_of(file), "memory.png") == info);
  }

  void decodes_jpeg_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("channels");
    QTest::addColumn<std::vector<std::uint8_t>>("expected");

    const auto row = [](const char* name, int w, int h, const std::vector<std::uint8_t>& colour,
                        bool progressive) {
      const auto pixels = flat(w, h, colour);
      QTest::newRow(name) << build_jpeg(pixels, w, h, int(colour.size()), progressive) << h << w
                          << int(colour.size()) << pixels;
    };
    row("gray 1x1", 1, 1, {77}, false);
    row("gray 3x5", 5, 3, {200}, false);
    row("gray 7x2", 2, 7, {13}, false);
    row("rgb 1x1", 1, 1, {200, 40, 90}, false);
    row("rgb 3x5", 5, 3, {20, 180, 250}, false);
    row("rgb 7x2", 2, 7, {255, 255, 0}, false);
    row("rgb progressive 9x16", 16, 9, {90, 60, 30}, true);

    // Four flat 8x8 gray blocks, so that rows and columns are where they belong.
    std::vector<std::uint8_t> quads(16 * 16);
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x)
        quads[std::size_t(y * 16 + x)] = std::uint8_t((y < 8 ? 0 : 160) + (x < 8 ? 0 : 80));
    }
    QTest::newRow("gray quadrants 16x16") << build_jpeg(quads, 16, 16, 1) << 16 << 16 << 1 << quads;
  }

  void decodes_jpeg() {
    QFETCH(QByteArray, file);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(int, channels);
    QFETCH(std::vector<std::uint8_t>, expected);
    QVERIFY(!file.isEmpty());

    const fs::path path = fixture(QStringLiteral("kind.jpg"), file);
    const Image image = read_image(path);
    QCOMPARE(image.height, height);
    QCOMPARE(image.width, width);
    QCOMPARE(image.channels, channels);
    QCOMPARE(image.pixels.size(), expected.size());
    int worst = 0;
    for (std::size_t i = 0; i < expected.size(); ++i)
      worst = std::max(worst, std::abs(image.pixels[i] - expected[i]));
    QVERIFY2(worst <= 2, qPrintable(QStringLiteral("largest difference %1").arg(worst)));
    QVERIFY(decode_image(span_of(file), "memory.jpg") == image);
    QVERIFY((probe_image(path) == ImageInfo{ImageFormat::jpeg, width, height, channels, 8}));
  }

  // The extension means nothing: a PNG named .jpg is a PNG, and the other way round.
  void format_from_bytes_not_extension() {
    const QByteArray png = build_png(spec(2, 1, 8, kGray, {3, 4}));
    QCOMPARE(probe_image(fixture(QStringLiteral("really_png.jpg"), png)).format, ImageFormat::png);
    const QByteArray jpeg = build_jpeg(flat(2, 2, {9}), 2, 2, 1);
    QCOMPARE(probe_image(fixture(QStringLiteral("really_jpeg.png"), jpeg)).format, ImageFormat::jpeg);
    QCOMPARE(std::string(to_string(ImageFormat::jpeg)), std::string("JPEG"));
  }

  // ---- masks ----

  void reads_masks_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<QList<int>>("expected");
    QTest::addColumn<bool>("all_equal");

    QTest::newRow("gray8 0/255") << build_png(spec(3, 2, 8, kGray, {0, 255, 255, 0, 0, 255})) << 2 << 3
                                 << QList<int>{0, 255, 255, 0, 0, 255} << true;
    QTest::newRow("gray16 raw up to 300")
        << build_png(spec(4, 2, 16, kGray, {0, 1, 2, 3, 255, 256, 299, 300})) << 2 << 4
        << QList<int>{0, 1, 2, 3, 255, 256, 299, 300} << true;
    QTest::newRow("gray1 raw 0/1") << build_png(spec(3, 1, 1, kGray, {1, 0, 1})) << 1 << 3
                                   << QList<int>{1, 0, 1} << true;
    QTest::newRow("gray4 raw") << build_png(spec(3, 1, 4, kGray, {0, 3, 15})) << 1 << 3
                               << QList<int>{0, 3, 15} << true;
    QTest::newRow("gray+alpha: the gray")
        << build_png(spec(2, 1, 8, kGrayAlpha, {5, 0, 6, 255})) << 1 << 2 << QList<int>{5, 6} << true;
    QTest::newRow("rgb channels equal")
        << build_png(spec(2, 1, 8, kRgb, {0, 0, 0, 255, 255, 255})) << 1 << 2 << QList<int>{0, 255} << true;
    QTest::newRow("rgb channels disagree")
        << build_png(spec(2, 1, 8, kRgb, {0, 0, 0, 255, 255, 254})) << 1 << 2 << QList<int>{0, 255} << false;
    QTest::newRow("rgba equal, alpha ignored")
        << build_png(spec(2, 1, 8, kRgba, {1, 1, 1, 255, 2, 2, 2, 0})) << 1 << 2 << QList<int>{1, 2} << true;
    QTest::newRow("rgb16 disagree in the low byte")
        << build_png(spec(1, 1, 16, kRgb, {0x0102, 0x0102, 0x0103})) << 1 << 1 << QList<int>{0x0102} << false;
    PngSpec pal = spec(3, 1, 2, kPalette, {2, 0, 1});
    pal.palette = bytes_of(std::vector<int>{255, 255, 255, 0, 0, 0, 128, 0, 0});
    QTest::newRow("palette: indices, not colours") << build_png(pal) << 1 << 3 << QList<int>{2, 0, 1} << true;
  }

  void reads_masks() {
    QFETCH(QByteArray, file);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(QList<int>, expected);
    QFETCH(bool, all_equal);

    const MaskImage mask = read_mask(fixture(QStringLiteral("mask.png"), file));
    QCOMPARE(mask.height, height);
    QCOMPARE(mask.width, width);
    QCOMPARE(QList<int>(mask.values.begin(), mask.values.end()), expected);
    QCOMPARE(mask.all_channels_equal, all_equal);
    const MaskImage again = decode_mask(span_of(file), "memory.png");
    QVERIFY(again.values == mask.values);
  }

  void reads_jpeg_masks() {
    const QByteArray gray = build_jpeg(flat(5, 3, {255}), 5, 3, 1);
    const MaskImage mask = decode_mask(span_of(gray), "mask.jpg");
    QCOMPARE(mask.height, 3);
    QCOMPARE(mask.width, 5);
    for (const auto v : mask.values) QVERIFY(v >= 253 && v <= 255);
    QVERIFY(mask.all_channels_equal);
    // An RGB JPEG: the first channel; lossy chroma may make the channels differ, so only R is checked.
    const QByteArray rgb = build_jpeg(flat(4, 4, {200, 10, 10}), 4, 4, 3);
    for (const auto v : decode_mask(span_of(rgb), "mask.jpg").values) QVERIFY(v >= 198 && v <= 202);
  }

  // ---- writing ----

  void round_trips_data() {
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("channels");
    for (int c = 1; c <= 4; ++c) {
      for (const auto& [h, w] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{7, 2}, std::pair{33, 64}}) {
        QTest::addRow("%dx%dx%d", h, w, c) << h << w << c;
      }
    }
  }

  void round_trips() {
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(int, channels);
    std::vector<std::uint8_t> pixels;
    for (const int v : pattern(height * width * channels, 255, channels)) pixels.push_back(std::uint8_t(v));
    const Image image = make_image(height, width, channels, pixels);

    const fs::path folder = fs::path(dir_.path().toStdString()) / "round_trip";
    fs::create_directories(folder);
    const fs::path path = folder / "out.png";
    write_png(path, image);
    QVERIFY(read_image(path) == image);
    QVERIFY((probe_image(path) == ImageInfo{ImageFormat::png, width, height, channels, 8}));
    QCOMPARE(std::distance(fs::directory_iterator(folder), fs::directory_iterator()),
             1);  // no temporary left

    const std::vector<std::byte> encoded = encode_png(image);
    QVERIFY(decode_image(encoded, "memory.png") == image);
  }

  void refuses_to_write_bad_images() {
    const fs::path path = fs::path(dir_.path().toStdString()) / "never.png";
    const auto check = [&](const Image& image, const char* problem) {
      const Refusal r = refusal_of([&] { write_png(path, image); });
      HELPER_VERIFY(r.refused);
      HELPER_COMPARE(r.kind, ErrorKind::usage);
      HELPER_VERIFY2(contains(r.message, QString::fromStdString(path.string())), r.message.c_str());
      HELPER_VERIFY2(contains(r.message, QString::fromLatin1(problem)), r.message.c_str());
      HELPER_VERIFY(!fs::exists(path));
      return true;
    };
    QVERIFY(check(make_image(2, 2, 5, std::vector<std::uint8_t>(20)), "5 channels (1 to 4 can be written)"));
    QVERIFY(check(make_image(2, 2, 3, std::vector<std::uint8_t>(11)),
                  "11 bytes of pixels for a 2x2x3 image (12 expected)"));
    QVERIFY(check(make_image(0, 2, 1, {}), "cannot write a 0x2 image"));
  }

  // ---- refusals ----

  void refuses_bad_files_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<int>("kind");
    QTest::addColumn<QString>("problem");
    QTest::addColumn<bool>("probe_refuses");  // false where the damage lies past the header
    const int io = int(ErrorKind::io), unsupported = int(ErrorKind::unsupported), data = int(ErrorKind::data);

    QTest::newRow("empty") << QByteArray() << io << "not a PNG, JPEG or TIFF image (empty file)" << true;
    QTest::newRow("3 bytes") << QByteArray("\x01\x02\x03", 3) << unsupported
                             << "not a PNG, JPEG or TIFF image (unrecognised data, starting 01 02 03)"
                             << true;
    QTest::newRow("text") << QByteArray("hello, world\nsecond line\n") << unsupported
                          << "not a PNG, JPEG or TIFF image (text, starting \"hello, world\")" << true;
    QTest::newRow("git lfs pointer") << QByteArray(
                                            "version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
                                     << unsupported << "(a Git LFS pointer; fetch the file with git lfs pull)"
                                     << true;
    QByteArray bmp("BM", 2);
    bmp += QByteArray(52, '\0');
    QTest::newRow("BMP") << bmp << unsupported << "not a PNG, JPEG or TIFF image (BMP)" << true;
    QTest::newRow("GIF") << QByteArray("GIF89a\x01\x00\x01\x00", 10) << unsupported << "(GIF)" << true;
    // A TIFF header whose first directory is missing: read by libtiff, refused as damaged.
    QTest::newRow("TIFF") << QByteArray("II*\0\x08\0\0\0", 8) << io
                          << "corrupt TIFF data: Can not read TIFF directory count" << true;
    QTest::newRow("WebP") << QByteArray("RIFF\x10\0\0\0WEBPVP8 ", 16) << unsupported << "(WebP)" << true;
    QTest::newRow("5 bytes of PNG signature")
        << signature().left(5) << io << "truncated: the data ends after 5 bytes, inside the PNG signature"
        << true;
    QTest::newRow("JPEG SOI only") << QByteArray("\xff\xd8", 2) << io
                                   << "truncated: the data ends after 2 bytes, inside the JPEG signature"
                                   << true;

    // A PNG with enough noise to have a long IDAT, cut at several lengths.
    const QByteArray png = build_png(spec(16, 16, 8, kRgb, pattern(16 * 16 * 3, 255, 9)));
    const qsizetype idat = chunk_offset(png, "IDAT"), iend = chunk_offset(png, "IEND");
    QVERIFY(idat > 0 && iend > idat + 100);
    for (const qsizetype cut : {qsizetype(8), qsizetype(20), qsizetype(33), idat + 4, idat + 8, idat + 50,
                                iend - 2, iend, png.size() - 1}) {
      QTest::addRow("PNG cut at %lld of %lld", qlonglong(cut), qlonglong(png.size()))
          << png.left(cut) << io
          << QStringLiteral("truncated: the data ends after %1 bytes, inside the PNG stream").arg(cut)
          << (cut < idat + 8);
    }
    // A flipped data byte: zlib's checksum or the chunk's CRC, whichever libpng reaches first.
    QByteArray bad_data = png;
    bad_data[idat + 30] = char(bad_data[idat + 30] ^ 0x10);
    QTest::newRow("PNG data byte flipped")
        << bad_data << io << "corrupt PNG data: IDAT: incorrect data check" << false;
    PngSpec split = spec(16, 16, 8, kRgb, pattern(16 * 16 * 3, 255, 9));
    split.idat_chunks = 3;
    QByteArray bad_split = build_png(split);
    const qsizetype first_idat = chunk_offset(bad_split, "IDAT");
    bad_split[first_idat + 30] = char(bad_split[first_idat + 30] ^ 0x10);
    QTest::newRow("PNG data byte flipped, 3 IDATs")
        << bad_split << io << "corrupt PNG data: IDAT: CRC error" << false;
    QByteArray bad_crc = png;
    bad_crc[iend - 1] = char(bad_crc[iend - 1] ^ 0x01);
    QTest::newRow("PNG IDAT CRC flipped") << bad_crc << io << "corrupt PNG data: IDAT: CRC error" << false;
    QByteArray bad_ihdr = png;
    bad_ihdr[30] = char(bad_ihdr[30] ^ 0x01);
    QTest::newRow("PNG IHDR CRC flipped") << bad_ihdr << io << "corrupt PNG data: IHDR: CRC error" << true;
    QByteArray bad_iend = png;
    bad_iend[png.size() - 1] = char(bad_iend[png.size() - 1] ^ 0x01);
    QTest::newRow("PNG IEND CRC flipped") << bad_iend << io << "corrupt PNG data: IEND: CRC error" << false;
    // The zlib stream broken while every CRC is right.
    const QByteArray broken_zlib =
        signature() + ihdr(16, 16, 8, kRgb) + chunk("IDAT", QByteArray(40, '\x55')) + chunk("IEND", {});
    QTest::newRow("PNG zlib data broken, CRCs right")
        << broken_zlib << io << "corrupt PNG data: IDAT:" << false;
    QByteArray bad_ancillary = signature() + ihdr(1, 1, 8, kGray) + chunk("tEXt", QByteArray("Title\0x", 7));
    bad_ancillary[bad_ancillary.size() - 1] = char(bad_ancillary[bad_ancillary.size() - 1] ^ 0x01);
    bad_ancillary += chunk("IDAT", zlib_compress(QByteArray(2, '\0'))) + chunk("IEND", {});
    QTest::newRow("PNG ancillary CRC flipped")
        << bad_ancillary << io << "corrupt PNG data: tEXt: CRC error" << true;

    // A header that asks for 100000 x 100000 pixels, and nothing after it: refused from the header.
    QTest::newRow("PNG declares 100000x100000")
        << signature() + ihdr(100000, 100000, 8, kRgb) << data
        << "declared 100000x100000, over the 16384x16384 limit" << true;
    QTest::newRow("PNG declares 20000x1") << signature() + ihdr(20000, 1, 8, kGray) + chunk("IEND", {})
                                          << data << "declared 20000x1, over the 16384x16384 limit" << true;

    std::vector<std::uint8_t> noise;
    for (const int v : pattern(24 * 16 * 3, 255, 3)) noise.push_back(std::uint8_t(v));
    const QByteArray jpeg = build_jpeg(noise, 24, 16, 3, false, 90);
    const qsizetype sos = marker_offset(jpeg, 0xda);
    QVERIFY(sos > 0 && jpeg.size() > sos + 40);
    for (const qsizetype cut :
         {qsizetype(3), qsizetype(20), sos, sos + 20, jpeg.size() - 2, jpeg.size() - 1}) {
      QTest::addRow("JPEG cut at %lld of %lld", qlonglong(cut), qlonglong(jpeg.size()))
          << jpeg.left(cut) << io
          << QStringLiteral("truncated: the data ends after %1 bytes, inside the JPEG stream").arg(cut)
          << (cut < sos + 10);
    }
    QByteArray twelve = jpeg;
    twelve[marker_offset(jpeg, 0xc0) + 4] = 12;  // the sample precision of SOF0
    QTest::newRow("JPEG 12-bit") << twelve << unsupported
                                 << "unsupported JPEG: 12-bit samples (only 8-bit JPEG is read)" << true;
    QTest::newRow("JPEG CMYK") << build_jpeg(flat(4, 4, {0, 50, 100, 0}), 4, 4, 4) << unsupported
                               << "unsupported JPEG: CMYK colour with 4 components" << true;
    QByteArray early_end = jpeg;
    early_end[sos + 30] = char(0xff);
    early_end[sos + 31] = char(0xd9);  // an end-of-image marker in the middle of the scan
    QTest::newRow("JPEG scan cut by a marker")
        << early_end << io << "corrupt JPEG data: premature end of data segment" << false;
  }

  void refuses_bad_files() {
    QFETCH(QByteArray, bytes);
    QFETCH(int, kind);
    QFETCH(QString, problem);
    QFETCH(bool, probe_refuses);

    const fs::path path = fixture(QStringLiteral("hostile.img"), bytes);
    const QString where = QString::fromStdString(path.string()) + QStringLiteral(": ");
    const auto check = [&](const Refusal& r, const QString& name) {
      HELPER_VERIFY2(r.refused, "accepted");
      HELPER_VERIFY2(QString::fromStdString(r.message).startsWith(name), r.message.c_str());
      HELPER_VERIFY2(contains(r.message, problem), r.message.c_str());
      HELPER_COMPARE(int(r.kind), kind);
      return true;
    };
    QVERIFY(check(refusal_of([&] { read_image(path); }), where));
    QVERIFY(check(refusal_of([&] { read_mask(path); }), where));
    QVERIFY(check(refusal_of([&] { decode_image(span_of(bytes), "memory.img"); }),
                  QStringLiteral("memory.img: ")));
    const Refusal probe = refusal_of([&] { probe_image(path); });
    if (probe_refuses) {
      QVERIFY(check(probe, where));
    } else {
      QVERIFY2(!probe.refused, probe.message.c_str());  // the header alone is fine
    }
  }

  void refuses_missing_and_odd_paths() {
    const fs::path missing = fs::path(dir_.path().toStdString()) / "no_such.png";
    Refusal r = refusal_of([&] { read_image(missing); });
    QCOMPARE(r.kind, ErrorKind::io);
    QVERIFY2(contains(r.message, QString::fromStdString(missing.string()) + ": cannot open: No such file"),
             r.message.c_str());
    r = refusal_of([&] { probe_image(dir_.path().toStdString()); });
    QCOMPARE(r.kind, ErrorKind::io);
    QVERIFY2(contains(r.message, QStringLiteral(": is a folder, not an image file")), r.message.c_str());
  }

  // Custom limits apply to PNG and JPEG, from the header.
  void applies_limits() {
    const ImageLimits small{4, 4};
    const QByteArray png = build_png(spec(5, 3, 8, kGray, pattern(15, 255)));
    Refusal r = refusal_of([&] { probe_image(fixture(QStringLiteral("wide.png"), png), small); });
    QCOMPARE(r.kind, ErrorKind::data);
    QVERIFY2(contains(r.message, QStringLiteral("wide.png: declared 5x3, over the 4x4 limit")),
             r.message.c_str());
    const QByteArray jpeg = build_jpeg(flat(3, 6, {1}), 3, 6, 1);
    r = refusal_of([&] { read_image(fixture(QStringLiteral("tall.jpg"), jpeg), small); });
    QCOMPARE(r.kind, ErrorKind::data);
    QVERIFY2(contains(r.message, QStringLiteral("tall.jpg: declared 3x6, over the 4x4 limit")),
             r.message.c_str());
    QCOMPARE(read_image(fixture(QStringLiteral("ok.png"), png), ImageLimits{5, 3}).width, 5);
  }

  // Files that make libpng and libjpeg warn decode, and nothing reaches stderr, warnings or errors.
  void keeps_stderr_silent() {
    PngSpec noisy = spec(2, 1, 8, kGray, {40, 50});
    noisy.ancillary = {chunk("gAMA", QByteArray(4, '\0')),             // a zero gamma: invalid
                       chunk("iCCP", QByteArray("x\0\0garbage", 10)),  // a profile that does not inflate
                       chunk("tEXt", QByteArray("\0empty keyword", 14))};
    const QByteArray noisy_png = build_png(noisy);
    const QByteArray jpeg = build_jpeg(flat(8, 8, {120}), 8, 8, 1);
    // Stray bytes after the APP0 segment: libjpeg warns "extraneous bytes before marker", harmless.
    QByteArray stray = jpeg;
    QCOMPARE(uchar(jpeg[3]), uchar(0xe0));
    stray.insert(4 + ((uchar(jpeg[4]) << 8) | uchar(jpeg[5])), QByteArray("\x00\x00\x00", 3));

    const fs::path log = fs::path(dir_.path().toStdString()) / "stderr.txt";
    Image from_png, from_jpeg;
    Refusal truncated, corrupt;
    {
      StderrCapture capture(log);
      from_png = decode_image(span_of(noisy_png), "noisy.png");
      from_jpeg = decode_image(span_of(stray), "stray.jpg");
      truncated = refusal_of([&] { decode_image(span_of(jpeg.left(jpeg.size() / 2)), "half.jpg"); });
      QByteArray bad = noisy_png;
      bad[20] = char(bad[20] ^ 1);
      corrupt = refusal_of([&] { decode_image(span_of(bad), "bad.png"); });
    }
    QCOMPARE(bytes_of(from_png.pixels), bytes_of(std::vector<int>{40, 50}));
    QCOMPARE(from_jpeg.pixels.size(), std::size_t{64});
    for (const auto v : from_jpeg.pixels) QVERIFY(std::abs(v - 120) <= 2);
    QVERIFY(truncated.refused && corrupt.refused);
    QCOMPARE(fs::file_size(log), std::uintmax_t{0});
  }

  // Decoders on several threads at once give the same pixels (no shared state).
  void decodes_on_many_threads() {
    const std::vector<int> values = pattern(40 * 30 * 3, 255, 1);
    const QByteArray png = build_png(spec(40, 30, 8, kRgb, values));
    const QByteArray jpeg = build_jpeg(flat(40, 30, {10, 100, 200}), 40, 30, 3);
    const Image png_ref = decode_image(span_of(png), "a.png"),
                jpeg_ref = decode_image(span_of(jpeg), "a.jpg");
    const QByteArray bad = png.left(png.size() / 2);
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          if (!(decode_image(span_of(png), "a.png") == png_ref)) ++mismatches;
          if (!(decode_image(span_of(jpeg), "a.jpg") == jpeg_ref)) ++mismatches;
          if (!refusal_of([&] { decode_image(span_of(bad), "bad.png"); }).refused) ++mismatches;
        }
      });
    }
    for (auto& t : threads) t.join();
    QCOMPARE(mismatches.load(), 0);
  }

  // ---- conversions ----

  void converts_channels_data() {
    QTest::addColumn<int>("from");
    QTest::addColumn<QByteArray>("pixels");  // two pixels
    QTest::addColumn<int>("to");
    QTest::addColumn<QByteArray>("expected");
    const auto b = [](std::vector<int> v) { return bytes_of(v); };
    // luma = (299 R + 587 G + 114 B + 500) / 1000: (10, 200, 30) -> 123810 -> 124; (0, 12, 4) -> 7500 -> 8
    QTest::newRow("rgb -> gray") << 3 << b({10, 200, 30, 0, 12, 4}) << 1 << b({124, 8});
    QTest::newRow("rgba -> gray") << 4 << b({10, 200, 30, 7, 255, 255, 255, 0}) << 1 << b({124, 255});
    QTest::newRow("gray+alpha -> gray") << 2 << b({77, 9, 1, 2}) << 1 << b({77, 1});
    QTest::newRow("gray -> rgb") << 1 << b({77, 3}) << 3 << b({77, 77, 77, 3, 3, 3});
    QTest::newRow("gray+alpha -> rgb") << 2 << b({77, 9, 1, 2}) << 3 << b({77, 77, 77, 1, 1, 1});
    QTest::newRow("rgba -> rgb") << 4 << b({1, 2, 3, 4, 5, 6, 7, 8}) << 3 << b({1, 2, 3, 5, 6, 7});
    QTest::newRow("gray -> rgba") << 1 << b({77, 3}) << 4 << b({77, 77, 77, 255, 3, 3, 3, 255});
    QTest::newRow("gray+alpha -> rgba") << 2 << b({77, 9, 1, 2}) << 4 << b({77, 77, 77, 9, 1, 1, 1, 2});
    QTest::newRow("rgb -> rgba") << 3 << b({1, 2, 3, 4, 5, 6}) << 4 << b({1, 2, 3, 255, 4, 5, 6, 255});
    QTest::newRow("rgba -> rgba") << 4 << b({1, 2, 3, 4, 5, 6, 7, 8}) << 4 << b({1, 2, 3, 4, 5, 6, 7, 8});
    QTest::newRow("gray+alpha -> gray+alpha") << 2 << b({77, 9, 1, 2}) << 2 << b({77, 9, 1, 2});
  }

  void converts_channels() {
    QFETCH(int, from);
    QFETCH(QByteArray, pixels);
    QFETCH(int, to);
    QFETCH(QByteArray, expected);
    const Image image = make_image(1, 2, from, std::vector<std::uint8_t>(pixels.begin(), pixels.end()));
    const Image out = convert_channels(image, to, "x.png");
    QCOMPARE(out.channels, to);
    QCOMPARE(out.height, 1);
    QCOMPARE(out.width, 2);
    QCOMPARE(bytes_of(out.pixels), expected);
  }

  void refuses_undefined_conversions_data() {
    QTest::addColumn<int>("from");
    QTest::addColumn<int>("to");
    QTest::newRow("3 -> 5") << 3 << 5;
    QTest::newRow("3 -> 2") << 3 << 2;
    QTest::newRow("1 -> 2") << 1 << 2;
    QTest::newRow("4 -> 0") << 4 << 0;
    QTest::newRow("5 -> 3") << 5 << 3;
  }

  void refuses_undefined_conversions() {
    QFETCH(int, from);
    QFETCH(int, to);
    const Image image = make_image(1, 1, from, std::vector<std::uint8_t>(std::size_t(from), 1));
    const Refusal r = refusal_of([&] { convert_channels(image, to, "cells/a.png"); });
    QCOMPARE(r.kind, ErrorKind::data);
    QVERIFY2(
        contains(
            r.message,
            QStringLiteral("cells/a.png: cannot convert an image of %1 channels to %2").arg(from).arg(to)),
        r.message.c_str());
  }

  // ---- resizing ----

  void resizes_images_data() {
    QTest::addColumn<int>("h");
    QTest::addColumn<int>("w");
    QTest::addColumn<int>("c");
    QTest::addColumn<QByteArray>("pixels");
    QTest::addColumn<int>("new_h");
    QTest::addColumn<int>("new_w");
    QTest::addColumn<QByteArray>("expected");
    const auto b = [](std::vector<int> v) { return bytes_of(v); };

    // Area: each output pixel is the mean of a 2x2 block, halves rounded up: (0+1+4+5)/4 = 2.5 -> 3.
    QTest::newRow("area 4x4 -> 2x2") << 4 << 4 << 1
                                     << b({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) << 2 << 2
                                     << b({3, 5, 11, 13});
    QTest::newRow("area 2x4x2 -> 1x2x2") << 2 << 4 << 2
                                         << b({0, 100, 10, 100, 20, 0, 40, 0,  //
                                               2, 100, 12, 100, 22, 0, 44, 0})
                                         << 1 << 2 << b({6, 100, 32, 0});
    // Width 3 -> 2: output 0 covers input [0, 1.5): (2 * 0 + 30) / 3 = 10; output 1: (30 + 2 * 90) / 3 = 70.
    QTest::newRow("area 1x3 -> 1x2") << 1 << 3 << 1 << b({0, 30, 90}) << 1 << 2 << b({10, 70});
    // 3x3 -> 2x2: weights (2/3, 1/3, 0) and (0, 1/3, 2/3) on each axis. Rows across first:
    //   row 0 (0, 30, 90) -> (10, 70); row 1 (90, 0, 30) -> (60, 20); row 2 (30, 90, 0) -> (50, 30)
    //   then down: (2 * 10 + 60) / 3 = 26.7 -> 27, (2 * 70 + 20) / 3 = 53.3 -> 53,
    //              (60 + 2 * 50) / 3 = 53.3 -> 53, (20 + 2 * 30) / 3 = 26.7 -> 27
    QTest::newRow("area 3x3 -> 2x2") << 3 << 3 << 1 << b({0, 30, 90, 90, 0, 30, 30, 90, 0}) << 2 << 2
                                     << b({27, 53, 53, 27});
    // Bilinear 2 -> 4: output i samples (i + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped
    // to 1), so the weights on (first, second) are (1, 0), (0.75, 0.25), (0.25, 0.75), (0, 1).
    // Rows of [[0, 100], [200, 40]] across: (0, 25, 75, 100) and (200, 160, 80, 40); then down:
    //   0.75 r0 + 0.25 r1 = (50, 58.75, 76.25, 85) -> (50, 59, 76, 85)
    //   0.25 r0 + 0.75 r1 = (150, 126.25, 78.75, 55) -> (150, 126, 79, 55)
    QTest::newRow("bilinear 2x2 -> 4x4")
        << 2 << 2 << 1 << b({0, 100, 200, 40}) << 4 << 4
        << b({0, 25, 75, 100, 50, 59, 76, 85, 150, 126, 79, 55, 200, 160, 80, 40});
    // Shrink rows by area (mean of each pair), enlarge columns bilinearly (1 -> 3: all the one column).
    QTest::newRow("area down, bilinear across")
        << 4 << 1 << 1 << b({10, 20, 30, 41}) << 2 << 3 << b({15, 15, 15, 36, 36, 36});
    // 1x2 -> 1x3: samples at -1/6 (clamped: 0), 0.5, 7/6 (clamped: 1): (0, 50, 100); RGB channels apart.
    QTest::newRow("bilinear rgb 1x2 -> 1x3") << 1 << 2 << 3 << b({0, 10, 255, 100, 20, 255}) << 1 << 3
                                             << b({0, 10, 255, 50, 15, 255, 100, 20, 255});
    QTest::newRow("same size: copy") << 2 << 3 << 2 << b({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) << 2 << 3
                                     << b({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  }

  void resizes_images() {
    QFETCH(int, h);
    QFETCH(int, w);
    QFETCH(int, c);
    QFETCH(QByteArray, pixels);
    QFETCH(int, new_h);
    QFETCH(int, new_w);
    QFETCH(QByteArray, expected);
    const Image out = resize_image(
        make_image(h, w, c, std::vector<std::uint8_t>(pixels.begin(), pixels.end())), new_h, new_w);
    QCOMPARE(out.height, new_h);
    QCOMPARE(out.width, new_w);
    QCOMPARE(out.channels, c);
    QCOMPARE(bytes_of(out.pixels), expected);
  }

  void resizes_masks_nearest() {
    // 2 -> 3: input index floor((i + 0.5) * 2 / 3) = 0, 1, 1.
    QCOMPARE(resize_mask({1, 2, 3, 4}, 2, 2, 3, 3), (std::vector<std::uint8_t>{1, 2, 2, 3, 4, 4, 3, 4, 4}));
    // 4 -> 2: floor((i + 0.5) * 2) = 1, 3.
    std::vector<std::uint8_t> four(16);
    for (std::size_t i = 0; i < 16; ++i) four[i] = std::uint8_t(i);
    QCOMPARE(resize_mask(four, 4, 4, 2, 2), (std::vector<std::uint8_t>{5, 7, 13, 15}));
    // 3 -> 5: floor((i + 0.5) * 3 / 5) = 0, 0, 1, 2, 2; classes never blend.
    QCOMPARE(resize_mask({0, 1, 2}, 1, 3, 1, 5), (std::vector<std::uint8_t>{0, 0, 1, 2, 2}));
    QCOMPARE(resize_mask({7, 8}, 1, 2, 1, 2), (std::vector<std::uint8_t>{7, 8}));
  }

  void resizes_probabilities_bilinear() {
    // Two channels; channel 0 is the 2x2 -> 4x4 example above without rounding, channel 1 is 1 - channel 0 /
    // 200.
    const std::vector<float> map = {0.f, 1.f, 100.f, 0.5f, 200.f, 0.f, 40.f, 0.8f};
    const std::vector<float> out = resize_probabilities(map, 2, 2, 2, 4, 4);
    const std::vector<float> c0 = {0,   25,      75,     100, 50,  58.75f, 76.25f, 85,
                                   150, 126.25f, 78.75f, 55,  200, 160,    80,     40};
    // Channel 1 is [[1, 0.5], [0, 0.8]]: across (1, 0.875, 0.625, 0.5) and (0, 0.2, 0.6, 0.8); down with
    // 0.75/0.25.
    const std::vector<float> c1 = {1,     0.875f,   0.625f,   0.5f,   0.75f, 0.70625f, 0.61875f, 0.575f,
                                   0.25f, 0.36875f, 0.60625f, 0.725f, 0,     0.2f,     0.6f,     0.8f};
    QCOMPARE(out.size(), std::size_t{32});
    for (std::size_t i = 0; i < 16; ++i) {
      QVERIFY2(std::fabs(out[2 * i] - c0[i]) < 1e-4f, qPrintable(QString::number(i)));
      QVERIFY2(std::fabs(out[2 * i + 1] - c1[i]) < 1e-5f, qPrintable(QString::number(i)));
    }
    // Shrinking is bilinear too: 4 -> 2 samples at 0.5 and 2.5, the means of neighbours.
    const std::vector<float> shrunk = resize_probabilities({0.f, 0.2f, 0.6f, 1.f}, 1, 4, 1, 1, 2);
    QCOMPARE(shrunk.size(), std::size_t{2});
    QVERIFY(std::fabs(shrunk[0] - 0.1f) < 1e-6f && std::fabs(shrunk[1] - 0.8f) < 1e-6f);
    QCOMPARE(resize_probabilities({0.25f, 0.5f}, 1, 1, 2, 1, 1), (std::vector<float>{0.25f, 0.5f}));
  }

  void refuses_bad_resize_arguments() {
    Refusal r = refusal_of([] { resize_image(make_image(2, 2, 1, {1, 2, 3}), 4, 4); });
    QCOMPARE(r.kind, ErrorKind::usage);
    QVERIFY2(contains(r.message, QStringLiteral("resize_image: 3 values for a shape of 4")),
             r.message.c_str());
    r = refusal_of([] { resize_image(make_image(1, 1, 1, {1}), 0, 4); });
    QVERIFY2(contains(r.message, QStringLiteral("resize_image: invalid size 0x4x1")), r.message.c_str());
    r = refusal_of([] { resize_mask({1, 2}, 1, 3, 2, 2); });
    QVERIFY2(contains(r.message, QStringLiteral("resize_mask: 2 values for a shape of 3")),
             r.message.c_str());
    r = refusal_of([] { resize_probabilities({1.f}, 1, 1, 1, -1, 2); });
    QVERIFY2(contains(r.message, QStringLiteral("resize_probabilities: invalid size -1x2x1")),
             r.message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestImage)
#include "test_image.moc"
