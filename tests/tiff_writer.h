// Test fixtures: TIFF files written with libtiff's own writer, page by page, for the cases the committed
// fixtures (tests/data/tiff) do not cover and for datasets a test builds: any sample format and depth,
// chunky or planar, strips or tiles, a palette, several pages.
#pragma once

#include <tiffio.h>
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

namespace test_tiff {

// One sample's bits: half floats of values a half holds exactly (the formulas below keep to those).
inline std::uint16_t to_half(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(v), &exponent);  // fraction in [0.5, 1)
  const auto mantissa = static_cast<std::uint16_t>(std::lround((fraction * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(sign | ((exponent - 1 + 15) << 10) | mantissa);
}

struct LibtiffSpec {
  std::uint32_t width = 1, height = 1;
  std::uint16_t samples = 1, bits = 8, format = SAMPLEFORMAT_UINT, photometric = PHOTOMETRIC_MINISBLACK;
  std::uint16_t planar = PLANARCONFIG_CONTIG, compression = COMPRESSION_NONE;
  std::uint32_t tile = 0;  // 0: strips
  std::uint32_t rows_per_strip = 1;
  std::vector<std::uint16_t> colormap;  // 3 << bits entries: red, green, blue
  std::function<double(int, int, int)> value;
};

// The samples x0 .. x0 + count - 1 of row y (all channels when chunky, `plane` when planar), packed.
inline std::vector<std::uint8_t> pack_row(const LibtiffSpec& s, int y, int x0, int count, int plane) {
  const int per_pixel = s.planar == PLANARCONFIG_SEPARATE ? 1 : s.samples;
  std::vector<std::uint8_t> out((std::size_t(count) * per_pixel * s.bits + 7) / 8);
  std::size_t at = 0;
  for (int x = x0; x < x0 + count; ++x) {
    for (int k = 0; k < per_pixel; ++k) {
      const double v = x < int(s.width) ? s.value(x, y, per_pixel == 1 ? plane : k) : 0;
      if (s.bits < 8) {
        const std::size_t bit = at * s.bits;
        out[bit / 8] |= std::uint8_t(int(v) << (8 - s.bits - int(bit % 8)));
      } else {
        std::uint8_t bytes[8] = {};
        if (s.format == SAMPLEFORMAT_IEEEFP && s.bits == 16) {
          const std::uint16_t h = to_half(v);
          std::memcpy(bytes, &h, 2);
        } else if (s.format == SAMPLEFORMAT_IEEEFP && s.bits == 32) {
          const auto f = float(v);
          std::memcpy(bytes, &f, 4);
        } else if (s.format == SAMPLEFORMAT_IEEEFP) {
          std::memcpy(bytes, &v, 8);
        } else {
          const auto i = std::int64_t(v);  // two's complement, little-endian host: the low bytes
          std::memcpy(bytes, &i, 8);
        }
        std::memcpy(out.data() + at * (s.bits / 8), bytes, s.bits / 8);
      }
      ++at;
    }
  }
  return out;
}

// `mode` "w8" writes BigTIFF.
inline void write_libtiff(const std::filesystem::path& path, const std::vector<LibtiffSpec>& pages,
                          const char* mode = "w") {
  TIFF* tif = TIFFOpen(path.c_str(), mode);
  QVERIFY(tif != nullptr);
  for (const LibtiffSpec& s : pages) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, s.width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, s.height);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, s.samples);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, s.bits);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, s.format);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, s.photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, s.planar);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, s.compression);
    if (s.compression == COMPRESSION_JPEG) {
      TIFFSetField(tif, TIFFTAG_JPEGQUALITY, 95);
      // libjpeg takes RGB scanlines and stores YCbCr
      if (s.photometric == PHOTOMETRIC_YCBCR) TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    }
    if (s.photometric == PHOTOMETRIC_RGB && s.samples == 4) {
      const std::uint16_t alpha = EXTRASAMPLE_UNASSALPHA;
      TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &alpha);
    }
    if (!s.colormap.empty()) {
      const std::size_t n = std::size_t(1) << s.bits;
      TIFFSetField(tif, TIFFTAG_COLORMAP, s.colormap.data(), s.colormap.data() + n,
                   s.colormap.data() + 2 * n);
    }
    const int planes = s.planar == PLANARCONFIG_SEPARATE ? s.samples : 1;
    if (s.tile == 0) {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, s.rows_per_strip);
      for (int plane = 0; plane < planes; ++plane) {
        for (std::uint32_t y = 0; y < s.height; ++y) {
          std::vector<std::uint8_t> row = pack_row(s, int(y), 0, int(s.width), plane);
          QVERIFY(TIFFWriteScanline(tif, row.data(), y, std::uint16_t(plane)) == 1);
        }
      }
    } else {
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, s.tile);
      TIFFSetField(tif, TIFFTAG_TILELENGTH, s.tile);
      for (int plane = 0; plane < planes; ++plane) {
        for (std::uint32_t ty = 0; ty < s.height; ty += s.tile) {
          for (std::uint32_t tx = 0; tx < s.width; tx += s.tile) {
            std::vector<std::uint8_t> tile;
            for (std::uint32_t r = 0; r < s.tile; ++r) {
              const std::vector<std::uint8_t> row =
                  ty + r < s.height ? pack_row(s, int(ty + r), int(tx), int(s.tile), plane)
                                    : std::vector<std::uint8_t>(pack_row(s, 0, 0, int(s.tile), plane).size());
              tile.insert(tile.end(), row.begin(), row.end());
            }
            const std::uint32_t index = TIFFComputeTile(tif, tx, ty, 0, std::uint16_t(plane));
            QVERIFY(TIFFWriteEncodedTile(tif, index, tile.data(), tmsize_t(tile.size())) >= 0);
          }
        }
      }
    }
    QVERIFY(TIFFWriteDirectory(tif) == 1);
  }
  TIFFClose(tif);
}

}  // namespace test_tiff
