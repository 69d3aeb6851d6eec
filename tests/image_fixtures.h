// PNG and JPEG test fixtures written from the format up: PNG chunk by chunk (zlib for the data and the CRCs),
// so that decoders are checked against the format rather than against libpng's own writer, and JPEG through
// libjpeg; plus how the image suites look at a refusal (its kind and message) and at stderr. Shared by the
// image and dataset suites; the one rule: these writers never go through the engine's image module, which is
// what they test.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>  // jpeglib.h needs FILE declared first

#include <jpeglib.h>
#include <zlib.h>

#include <QByteArray>
#include <QString>
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "unet/core/error.h"

namespace unet::test {

// ---- PNG, chunk by chunk ----

enum PngColor { kGray = 0, kRgb = 2, kPalette = 3, kGrayAlpha = 4, kRgba = 6 };

inline int samples_per_pixel(int color_type) {
  switch (color_type) {
    case kGray:
      return 1;
    case kRgb:
      return 3;
    case kPalette:
      return 1;
    case kGrayAlpha:
      return 2;
    default:
      return 4;
  }
}

inline void put32(QByteArray& out, quint32 v) {
  out.append(char(v >> 24)).append(char(v >> 16)).append(char(v >> 8)).append(char(v));
}

inline QByteArray chunk(const char* type, const QByteArray& data) {
  QByteArray out;
  put32(out, quint32(data.size()));
  const QByteArray body = QByteArray(type, 4) + data;
  out += body;
  put32(out, quint32(crc32(0, reinterpret_cast<const Bytef*>(body.constData()), uInt(body.size()))));
  return out;
}

inline QByteArray signature() {
  return QByteArray("\x89PNG\r\n\x1a\n", 8);
}

inline QByteArray ihdr(quint32 width, quint32 height, int bit_depth, int color_type,
                       bool interlaced = false) {
  QByteArray d;
  put32(d, width);
  put32(d, height);
  d.append(char(bit_depth))
      .append(char(color_type))
      .append('\0')
      .append('\0')
      .append(char(interlaced ? 1 : 0));
  return chunk("IHDR", d);
}

struct PngSpec {
  int width = 1, height = 1, bit_depth = 8, color_type = kGray;
  bool interlaced = false;
  std::vector<int> samples;     // [height, width, samples_per_pixel] raw values (indices for a palette)
  QByteArray palette;           // RGB triples
  QByteArray trns;              // tRNS chunk data
  QList<QByteArray> ancillary;  // extra chunks, written before IDAT
  int idat_chunks = 1;          // the compressed data split over this many IDAT chunks
};

// One filtered scanline (filter type 0) of the pixels (x0 + k dx, y) for k = 0, 1, ...
inline QByteArray scanline(const PngSpec& s, int y, int x0, int dx) {
  const int spp = samples_per_pixel(s.color_type);
  QByteArray row(1, '\0');
  int bits = 0, acc = 0;
  for (int x = x0; x < s.width; x += dx) {
    for (int c = 0; c < spp; ++c) {
      const int v = s.samples[std::size_t((y * s.width + x) * spp + c)];
      if (s.bit_depth == 16) {
        row.append(char(v >> 8)).append(char(v & 0xff));
      } else if (s.bit_depth == 8) {
        row.append(char(v));
      } else {
        acc = (acc << s.bit_depth) | v;
        bits += s.bit_depth;
        if (bits == 8) {
          row.append(char(acc));
          bits = acc = 0;
        }
      }
    }
  }
  if (bits > 0) row.append(char(acc << (8 - bits)));
  return row;
}

inline QByteArray raw_image_data(const PngSpec& s) {
  QByteArray raw;
  if (!s.interlaced) {
    for (int y = 0; y < s.height; ++y) raw += scanline(s, y, 0, 1);
    return raw;
  }
  // Adam7: (x0, y0, dx, dy) of the seven passes; empty passes have no rows at all.
  static constexpr int kPasses[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                        {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  for (const auto& p : kPasses) {
    if (p[0] >= s.width) continue;
    for (int y = p[1]; y < s.height; y += p[3]) raw += scanline(s, y, p[0], p[2]);
  }
  return raw;
}

inline QByteArray zlib_compress(const QByteArray& raw) {
  uLongf size = compressBound(uLong(raw.size()));
  QByteArray out(int(size), '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.constData()),
            uLong(raw.size()), 9);
  out.resize(int(size));
  return out;
}

inline QByteArray build_png(const PngSpec& s) {
  QByteArray png =
      signature() + ihdr(quint32(s.width), quint32(s.height), s.bit_depth, s.color_type, s.interlaced);
  for (const auto& c : s.ancillary) png += c;
  if (!s.palette.isEmpty()) png += chunk("PLTE", s.palette);
  if (!s.trns.isEmpty()) png += chunk("tRNS", s.trns);
  const QByteArray compressed = zlib_compress(raw_image_data(s));
  const qsizetype part = (compressed.size() + s.idat_chunks - 1) / s.idat_chunks;
  for (qsizetype at = 0; at < compressed.size(); at += part) png += chunk("IDAT", compressed.mid(at, part));
  png += chunk("IEND", {});
  return png;
}

// A sample pattern that differs from pixel to pixel and channel to channel.
inline std::vector<int> pattern(int count, int max_value, int seed = 0) {
  std::vector<int> v(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) v[std::size_t(i)] = (i * 37 + seed * 11 + 5) % (max_value + 1);
  return v;
}

inline PngSpec spec(int width, int height, int bit_depth, int color_type, std::vector<int> samples) {
  PngSpec s;
  s.width = width;
  s.height = height;
  s.bit_depth = bit_depth;
  s.color_type = color_type;
  s.samples = std::move(samples);
  return s;
}

inline QByteArray bytes_of(const std::vector<int>& v) {
  QByteArray out;
  for (const int x : v) out.append(char(x));
  return out;
}

inline QByteArray bytes_of(const std::vector<std::uint8_t>& v) {
  return QByteArray(reinterpret_cast<const char*>(v.data()), qsizetype(v.size()));
}

inline std::span<const std::byte> span_of(const QByteArray& b) {
  return std::as_bytes(std::span(b.constData(), std::size_t(b.size())));
}

// Where each chunk starts (its length field) in a PNG.
inline qsizetype chunk_offset(const QByteArray& png, const char* type) {
  qsizetype at = 8;
  while (at + 8 <= png.size()) {
    const quint32 length = (quint32(uchar(png[at])) << 24) | (quint32(uchar(png[at + 1])) << 16) |
                           (quint32(uchar(png[at + 2])) << 8) | quint32(uchar(png[at + 3]));
    if (png.mid(at + 4, 4) == QByteArray(type)) return at;
    at += 12 + qsizetype(length);
  }
  return -1;
}

// ---- JPEG, through libjpeg ----

struct JpegWriter {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr errors;
  std::jmp_buf jump;
  unsigned char* out;
  unsigned long size;
};

[[noreturn]] inline void on_writer_error(j_common_ptr cinfo) {
  std::longjmp(static_cast<JpegWriter*>(cinfo->client_data)->jump, 1);
}
inline void on_writer_output(j_common_ptr) {}

inline bool guarded_compress(JpegWriter* w, const std::uint8_t* pixels, int width, int height, int components,
                             J_COLOR_SPACE space, int quality, bool progressive) {
  if (setjmp(w->jump) != 0) return false;
  jpeg_create_compress(&w->cinfo);
  jpeg_mem_dest(&w->cinfo, &w->out, &w->size);
  w->cinfo.image_width = JDIMENSION(width);
  w->cinfo.image_height = JDIMENSION(height);
  w->cinfo.input_components = components;
  w->cinfo.in_color_space = space;
  jpeg_set_defaults(&w->cinfo);
  jpeg_set_quality(&w->cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&w->cinfo);
  jpeg_start_compress(&w->cinfo, TRUE);
  while (w->cinfo.next_scanline < w->cinfo.image_height) {
    JSAMPROW row =
        const_cast<JSAMPROW>(pixels + std::size_t(w->cinfo.next_scanline) * std::size_t(width * components));
    jpeg_write_scanlines(&w->cinfo, &row, 1);
  }
  jpeg_finish_compress(&w->cinfo);
  return true;
}

inline QByteArray build_jpeg(const std::vector<std::uint8_t>& pixels, int width, int height, int components,
                             bool progressive = false, int quality = 95) {
  JpegWriter w{};
  w.cinfo.err = jpeg_std_error(&w.errors);
  w.errors.error_exit = on_writer_error;
  w.errors.output_message = on_writer_output;
  w.cinfo.client_data = &w;
  const J_COLOR_SPACE space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  const bool ok = guarded_compress(&w, pixels.data(), width, height, components, space, quality, progressive);
  jpeg_destroy_compress(&w.cinfo);
  QByteArray out = ok ? QByteArray(reinterpret_cast<const char*>(w.out), qsizetype(w.size)) : QByteArray();
  std::free(w.out);
  return out;
}

inline std::vector<std::uint8_t> flat(int width, int height, const std::vector<std::uint8_t>& colour) {
  std::vector<std::uint8_t> out;
  for (int i = 0; i < width * height; ++i) out.insert(out.end(), colour.begin(), colour.end());
  return out;
}

inline qsizetype marker_offset(const QByteArray& jpeg, uchar marker) {
  for (qsizetype i = 2; i + 1 < jpeg.size(); ++i) {
    if (uchar(jpeg[i]) == 0xff && uchar(jpeg[i + 1]) == marker) return i;
  }
  return -1;
}

// ---- refusals and stderr ----

struct Refusal {
  bool refused = false;
  ErrorKind kind = ErrorKind::io;
  std::string message;
};

template <class F>
Refusal refusal_of(F&& f) {
  Refusal r;
  try {
    f();
  } catch (const Error& e) {
    r.refused = true;
    r.kind = e.kind();
    r.message = e.what();
  }
  return r;
}

inline bool contains(const std::string& text, const QString& part) {
  return text.find(part.toStdString()) != std::string::npos;
}

// Captures what is written to file descriptor 2 while it lives.
class StderrCapture {
 public:
  explicit StderrCapture(const std::filesystem::path& file) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() { restore(); }
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }

 private:
  int saved_ = -1;
};

// ---- files ----

inline void write_bytes(const std::filesystem::path& path, const QByteArray& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.constData(), bytes.size());
}

}  // namespace unet::test
