// TIFF decoding through libtiff, for image.cpp: 1/2/4/8/16/32-bit integer and 16/32/64-bit float samples,
// gray (min-is-black and min-is-white), RGB, palette and any number of extra samples, chunky or planar, in
// strips or tiles, with whatever compression Debian's libtiff decodes, one page (directory) at a time.
// The one non-obvious rule: libtiff must never print, exit or touch process-wide state, because other threads
// decode at the same time. So every handle is opened by TIFFClientOpenExt with its own error and warning
// handlers (which record the message in this call's TiffMessages and tell libtiff to stop there), never with
// TIFFSetErrorHandler, and reads through this file's procs (pread on the caller's file, or the caller's
// bytes). Before any pixel buffer exists the page's size is checked against the limits, and its strips or
// tiles against the input's size, so that a forged header cannot make this allocate what the file cannot
// hold.
#include <tiffio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "unet/core/error.h"
#include "unet/io/image_codec.h"
#include "unet/io/tiff_handles.h"

namespace unet::image_detail {
namespace {

constexpr std::int64_t kMaxPages = std::int64_t{1} << 16;
constexpr std::uint16_t kMaxChannels = 64;

// ---- the input, as libtiff reads it ----

struct TiffSource {
  int fd = -1;                         // a file, read by pread; or, when < 0,
  const std::uint8_t* data = nullptr;  // bytes in memory
  std::uint64_t size = 0;
  std::uint64_t pos = 0;
  int read_errno = 0;  // non-zero after a failed pread
};

TiffSource& source_of(thandle_t handle) {
  return *static_cast<TiffSource*>(handle);
}

tmsize_t on_tiff_read(thandle_t handle, void* out, tmsize_t count) {
  TiffSource& source = source_of(handle);
  if (count <= 0 || source.pos >= source.size) return 0;
  const auto want = static_cast<std::size_t>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(count), source.size - source.pos));
  if (source.fd < 0) {
    std::memcpy(out, source.data + source.pos, want);
    source.pos += want;
    return static_cast<tmsize_t>(want);
  }
  std::size_t done = 0;
  while (done < want) {
    const ssize_t n = ::pread(source.fd, static_cast<char*>(out) + done, want - done,
                              static_cast<off_t>(source.pos + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      source.read_errno = errno;
      return -1;
    }
    if (n == 0) break;  // the file shrank since it was measured
    done += static_cast<std::size_t>(n);
  }
  source.pos += done;
  return static_cast<tmsize_t>(done);
}

tmsize_t on_tiff_write(thandle_t, void*, tmsize_t) {
  return -1;  // opened for reading only
}

toff_t on_tiff_seek(thandle_t handle, toff_t offset, int whence) {
  TiffSource& source = source_of(handle);
  const toff_t to = seek_target(source.pos, source.size, offset, whence);
  if (to != kFailedSeek) source.pos = to;
  return to;
}

int on_tiff_close(thandle_t) {
  return 0;  // the caller owns the file and the bytes
}

toff_t on_tiff_size(thandle_t handle) {
  return source_of(handle).size;
}

int on_tiff_map(thandle_t, void**, toff_t*) {
  return 0;  // no mapping: libtiff reads through on_tiff_read
}

void on_tiff_unmap(thandle_t, void*, toff_t) {}

// Everything one decode holds; libtiff keeps pointers to `source` and `messages`, so it is not movable.
struct TiffReader {
  TiffSource source;
  TiffMessages messages;
  std::unique_ptr<TIFF, TiffClose> tif;
  std::string name;

  TiffReader() = default;
  TiffReader(const TiffReader&) = delete;
  TiffReader& operator=(const TiffReader&) = delete;

  // io: the read error, or libtiff's message (`what` when it said nothing).
  [[noreturn]] void fail(const std::string& what) const {
    if (source.read_errno != 0) {
      throw Error(ErrorKind::io, name + ": cannot read: " +
                                     std::error_code(source.read_errno, std::generic_category()).message());
    }
    std::string_view message = messages.has_error ? std::string_view(messages.error) : std::string_view(what);
    // libtiff starts most messages with the name it was given, which this one already has
    if (message.substr(0, name.size() + 2) == name + ": ") message.remove_prefix(name.size() + 2);
    throw Error(ErrorKind::io, name + ": corrupt TIFF data: " + std::string(message));
  }
};

void open_tiff(TiffReader& reader, const ByteReader& input) {
  if (input.fd >= 0) {
    reader.source.fd = input.fd;
    reader.source.size = input.input_bytes;
  } else {
    reader.source.data = input.data;
    reader.source.size = input.size;
  }
  std::unique_ptr<TIFFOpenOptions, OptionsFree> options(TIFFOpenOptionsAlloc());
  if (!options) throw Error(ErrorKind::out_of_memory, reader.name + ": cannot create a libtiff decoder");
  TIFFOpenOptionsSetErrorHandlerExtR(options.get(), on_tiff_error, &reader.messages);
  TIFFOpenOptionsSetWarningHandlerExtR(options.get(), on_tiff_warning, &reader.messages);
  // libtiff's own buffers are the strips' compressed bytes and tag arrays, all bounded by the input's size;
  // this stops a forged field from asking for more.
  const std::uint64_t most = std::max<std::uint64_t>(std::uint64_t{256} << 20, 2 * reader.source.size);
  TIFFOpenOptionsSetMaxSingleMemAlloc(
      options.get(), static_cast<tmsize_t>(std::min<std::uint64_t>(most, std::uint64_t{1} << 40)));
  // "m": no memory mapping (the procs have none); "r": read only.
  reader.tif.reset(TIFFClientOpenExt(reader.name.c_str(), "rm", &reader.source, on_tiff_read, on_tiff_write,
                                     on_tiff_seek, on_tiff_close, on_tiff_size, on_tiff_map, on_tiff_unmap,
                                     options.get()));
  if (!reader.tif) reader.fail("not a readable TIFF header");
}

// ---- the page's layout ----

enum class SampleKind { unsigned_int, signed_int, floating };

struct Layout {
  std::uint32_t width = 0, height = 0;
  std::uint16_t samples = 1;  // per pixel, as stored
  std::uint16_t bits = 1;
  SampleKind kind = SampleKind::unsigned_int;
  std::uint16_t photometric = PHOTOMETRIC_MINISBLACK;
  bool planar = false;  // PLANARCONFIG_SEPARATE with more than one sample
  std::uint16_t compression = COMPRESSION_NONE;
  bool palette = false;
  bool min_is_white = false;
  int element_bytes = 1;  // of one unpacked sample: 1 (1 to 8 bits), 2, 4 or 8
};

const char* photometric_name(std::uint16_t photometric) {
  switch (photometric) {
    case PHOTOMETRIC_SEPARATED:
      return "CMYK (separated)";
    case PHOTOMETRIC_YCBCR:
      return "YCbCr without JPEG compression";
    case PHOTOMETRIC_CIELAB:
    case PHOTOMETRIC_ICCLAB:
    case PHOTOMETRIC_ITULAB:
      return "CIELab";
    case PHOTOMETRIC_LOGL:
    case PHOTOMETRIC_LOGLUV:
      return "LogLuv";
    case PHOTOMETRIC_MASK:
      return "transparency mask";
    default:
      return "unknown";
  }
}

[[noreturn]] void unsupported(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::unsupported, name + ": unsupported TIFF: " + what);
}

std::string sample_text(const Layout& layout) {
  const char* kind = layout.kind == SampleKind::floating     ? " float"
                     : layout.kind == SampleKind::signed_int ? " signed integer"
                                                             : " integer";
  return std::to_string(layout.bits) + "-bit" + kind;
}

Layout read_layout(TiffReader& reader) {
  TIFF* tif = reader.tif.get();
  const std::string& name = reader.name;
  Layout layout;
  if (TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &layout.width) != 1 ||
      TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &layout.height) != 1) {
    reader.fail("no image width or length");
  }
  if (layout.width == 0 || layout.height == 0) reader.fail("an image of zero width or height");
  std::uint16_t format = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG;
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &layout.samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &layout.bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &layout.compression);
  if (TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &layout.photometric) != 1) {
    // libtiff guesses a missing one on reading the directory; this is what it would guess
    layout.photometric = layout.samples >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
  }
  if (layout.samples == 0 || layout.samples > kMaxChannels) {
    unsupported(name, std::to_string(layout.samples) + " samples per pixel (1 to " +
                          std::to_string(kMaxChannels) + " are read)");
  }
  layout.planar = planar == PLANARCONFIG_SEPARATE && layout.samples > 1;
  switch (format) {
    case SAMPLEFORMAT_UINT:
    case SAMPLEFORMAT_VOID:  // "untyped": read as unsigned
      layout.kind = SampleKind::unsigned_int;
      break;
    case SAMPLEFORMAT_INT:
      layout.kind = SampleKind::signed_int;
      break;
    case SAMPLEFORMAT_IEEEFP:
      layout.kind = SampleKind::floating;
      break;
    default:
      unsupported(name, "complex samples (sample format " + std::to_string(format) + ")");
  }
  const std::uint16_t b = layout.bits;
  const bool bits_read = layout.kind == SampleKind::floating ? (b == 16 || b == 32 || b == 64)
                         : layout.kind == SampleKind::signed_int
                             ? (b == 8 || b == 16 || b == 32)
                             : (b == 1 || b == 2 || b == 4 || b == 8 || b == 16 || b == 32);
  if (!bits_read) {
    unsupported(name, sample_text(layout) +
                          " samples (read: 1, 2, 4, 8, 16 and 32-bit unsigned, 8, 16 and 32-bit signed "
                          "integers, 16, 32 and 64-bit floats)");
  }
  layout.element_bytes = b <= 8 ? 1 : b / 8;

  if (TIFFIsCODECConfigured(layout.compression) != 1) {
    const TIFFCodec* codec = TIFFFindCODEC(layout.compression);
    unsupported(name, "compression " + std::to_string(layout.compression) +
                          (codec != nullptr ? std::string(" (") + codec->name + ")" : std::string()) +
                          ", which this libtiff does not decode");
  }
  switch (layout.photometric) {
    case PHOTOMETRIC_MINISWHITE:
      layout.min_is_white = true;
      break;
    case PHOTOMETRIC_MINISBLACK:
      break;
    case PHOTOMETRIC_RGB:
      if (layout.samples < 3) {
        reader.fail("RGB with " + std::to_string(layout.samples) + " samples per pixel");
      }
      break;
    case PHOTOMETRIC_PALETTE: {
      std::uint16_t *r = nullptr, *g = nullptr, *bl = nullptr;
      if (layout.samples != 1 || layout.kind != SampleKind::unsigned_int || layout.bits > 16) {
        unsupported(name, "a palette image of " + std::to_string(layout.samples) + " " + sample_text(layout) +
                              " samples per pixel (one index of 1 to 16 bits is read)");
      }
      if (TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &bl) != 1)
        reader.fail("a palette image without a colour map");
      layout.palette = true;
      break;
    }
    case PHOTOMETRIC_YCBCR:
      if (layout.compression == COMPRESSION_JPEG && layout.samples == 3 && layout.bits == 8 &&
          layout.kind == SampleKind::unsigned_int) {
        // libjpeg converts to RGB as it decodes (and upsamples the chroma): read as an RGB image
        if (TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB) != 1) reader.fail("JPEG colour mode");
        layout.photometric = PHOTOMETRIC_RGB;
        layout.planar = false;
        break;
      }
      [[fallthrough]];
    default:
      unsupported(name, std::string(photometric_name(layout.photometric)) + " photometric interpretation (" +
                            std::to_string(layout.photometric) +
                            "); read: gray (min-is-black or min-is-white), RGB and palette");
  }
  return layout;
}

std::uint64_t checked_product(const std::string& name, std::initializer_list<std::uint64_t> factors) {
  std::uint64_t product = 1;
  for (const std::uint64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) {
      throw Error(ErrorKind::data, name + ": the TIFF header declares more pixel data than can be addressed");
    }
  }
  return product;
}

// Decoded bytes per input byte at a codec's best compression, so that a header declaring more than its input
// can hold is refused before anything is allocated: PackBits repeats a byte at most 128 times per 2 bytes,
// Deflate expands at most 1032:1, LZW's longest string (about 3800 bytes) takes one 12-bit code; the others
// (JPEG, CCITT fax, zstd, LZMA, WebP...) get a bound past any of theirs on real data.
std::uint64_t best_ratio(std::uint16_t compression) {
  switch (compression) {
    case COMPRESSION_NONE:
      return 1;
    case COMPRESSION_PACKBITS:
      return 64;
    case COMPRESSION_ADOBE_DEFLATE:
    case COMPRESSION_DEFLATE:
      return 1032;
    case COMPRESSION_LZW:
      return 4096;
    default:
      return std::uint64_t{1} << 16;
  }
}

// ---- reading the samples ----

// The page's samples unpacked to element_bytes each, in the host's byte order, [height, width, samples].
struct RawPage {
  std::vector<std::uint8_t> bytes;
};

// Copies `count` samples of `bits` each (MSB first for 1 to 4 bits) from a strip or tile row to the page,
// every `step` samples there.
void unpack(const std::uint8_t* from, int bits, std::size_t count, std::uint8_t* to, std::size_t step,
            int element_bytes) {
  if (bits >= 8) {
    const auto e = static_cast<std::size_t>(element_bytes);
    if (step == 1) {
      std::memcpy(to, from, count * e);
      return;
    }
    for (std::size_t k = 0; k < count; ++k) std::memcpy(to + k * step * e, from + k * e, e);
    return;
  }
  const unsigned mask = (1u << bits) - 1u;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t bit = k * static_cast<std::size_t>(bits);
    to[k * step] =
        static_cast<std::uint8_t>((from[bit / 8] >> (8 - bits - static_cast<int>(bit % 8))) & mask);
  }
}

// Refuses strips or tiles that run past the input's end (a truncated file), before anything is decoded.
void check_chunks_inside(TiffReader& reader, std::uint32_t chunks, bool tiled, std::int64_t page) {
  TIFF* tif = reader.tif.get();
  for (std::uint32_t i = 0; i < chunks; ++i) {
    int error = 0;
    const std::uint64_t offset = TIFFGetStrileOffsetWithErr(tif, i, &error);
    const std::uint64_t count = error == 0 ? TIFFGetStrileByteCountWithErr(tif, i, &error) : 0;
    if (error != 0) reader.fail("strip or tile " + std::to_string(i) + " has no offset or byte count");
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, count, &end) || end > reader.source.size) {
      throw Error(ErrorKind::io,
                  reader.name + ": truncated: " + (tiled ? "tile " : "strip ") + std::to_string(i) +
                      " of page " + std::to_string(page) + " ends at byte " +
                      (end < offset ? std::string("2^64") : std::to_string(end)) +
                      ", past the end of the data (" + std::to_string(reader.source.size) + " bytes)");
    }
  }
}

RawPage read_samples(TiffReader& reader, const Layout& layout, std::int64_t page) {
  TIFF* tif = reader.tif.get();
  const std::string& name = reader.name;
  const std::uint64_t w = layout.width, h = layout.height, spp = layout.samples;
  const auto e = static_cast<std::uint64_t>(layout.element_bytes);
  // Rows of the chunks: all samples (chunky) or one (planar), packed to whole bytes.
  const std::uint64_t per_pixel = layout.planar ? 1 : spp;
  const bool tiled = TIFFIsTiled(tif) != 0;
  std::uint32_t chunk_w = layout.width, chunk_h = 0;
  if (tiled) {
    if (TIFFGetField(tif, TIFFTAG_TILEWIDTH, &chunk_w) != 1 ||
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &chunk_h) != 1 || chunk_w == 0 || chunk_h == 0) {
      reader.fail("tiles without a width or length");
    }
  } else {
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &chunk_h);
    chunk_h = std::clamp<std::uint32_t>(chunk_h, 1, layout.height);
  }
  const std::uint64_t across = tiled ? (w + chunk_w - 1) / chunk_w : 1;
  const std::uint64_t down = (h + chunk_h - 1) / chunk_h;
  const std::uint64_t per_plane = across * down;
  const std::uint64_t chunks = per_plane * (layout.planar ? spp : 1);
  const std::uint32_t stored = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
  if (stored != chunks) {
    reader.fail(std::to_string(stored) + (tiled ? " tiles" : " strips") + " where the layout has " +
                std::to_string(chunks));
  }
  // A strip past the end is a truncated file (io); strips inside that cannot hold what the header declares
  // are a forged one (data). Both before anything is allocated.
  check_chunks_inside(reader, stored, tiled, page);
  ByteReader measured;
  measured.input_bytes = reader.source.size;
  check_input_can_hold(name, "TIFF", (checked_product(name, {w, h, spp, layout.bits}) + 7) / 8,
                       best_ratio(layout.compression), measured);

  const std::uint64_t row_bytes = (checked_product(name, {chunk_w, per_pixel, layout.bits}) + 7) / 8;
  const std::uint64_t chunk_bytes = checked_product(name, {row_bytes, chunk_h});
  const std::uint64_t page_bytes = checked_product(name, {w, h, spp, e});
  // A tile may be larger than the image (a 256x256 tile over a 10x10 image), not without bound.
  if (tiled && chunk_bytes > std::max<std::uint64_t>(page_bytes, std::uint64_t{64} << 20)) {
    throw Error(ErrorKind::data, name + ": TIFF tiles of " + std::to_string(chunk_w) + "x" +
                                     std::to_string(chunk_h) + ", far larger than the " + std::to_string(w) +
                                     "x" + std::to_string(h) + " image");
  }
  const auto size_of_chunk = static_cast<std::uint64_t>(tiled ? TIFFTileSize64(tif) : TIFFStripSize64(tif));
  // libtiff's size for one strip or tile is what the layout says (more for subsampled YCbCr, which is read
  // as RGB here); anything else is a directory libtiff and this file disagree on.
  if (size_of_chunk < chunk_bytes || size_of_chunk > 2 * chunk_bytes + 4096) {
    reader.fail("a strip or tile of " + std::to_string(size_of_chunk) + " bytes where the layout has " +
                std::to_string(chunk_bytes));
  }

  RawPage raw;
  raw.bytes = allocate_pixels(name, h, checked_product(name, {w, spp, e}));
  std::vector<std::uint8_t> chunk = allocate_pixels(name, 1, size_of_chunk);
  for (std::uint32_t i = 0; i < stored; ++i) {
    const std::uint64_t plane = layout.planar ? i / per_plane : 0;
    const std::uint64_t at = i % per_plane;
    const std::uint64_t x0 = (at % across) * chunk_w, y0 = (at / across) * chunk_h;
    const std::uint64_t rows = std::min<std::uint64_t>(chunk_h, h - y0);
    const std::uint64_t pixels = std::min<std::uint64_t>(chunk_w, w - x0);
    reader.messages.clear();
    const tmsize_t got =
        tiled ? TIFFReadEncodedTile(tif, i, chunk.data(), static_cast<tmsize_t>(chunk.size()))
              : TIFFReadEncodedStrip(tif, i, chunk.data(), static_cast<tmsize_t>(chunk.size()));
    if (got < 0 || static_cast<std::uint64_t>(got) <
                       (rows - 1) * row_bytes + (pixels * per_pixel * layout.bits + 7) / 8) {
      reader.fail(std::string("cannot decode ") + (tiled ? "tile " : "strip ") + std::to_string(i) +
                  " of page " + std::to_string(page));
    }
    for (std::uint64_t r = 0; r < rows; ++r) {
      std::uint8_t* to = raw.bytes.data() + (((y0 + r) * w + x0) * spp + plane) * e;
      unpack(chunk.data() + r * row_bytes, layout.bits, pixels * per_pixel, to, layout.planar ? spp : 1,
             layout.element_bytes);
    }
  }
  return raw;
}

// ---- from stored samples to what the caller asked for ----

float half_to_float(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude = 0;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude =
        mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  }
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Each sample's value as stored, min-is-white inverted to min-is-black, passed to `f(index, value)`.
template <class F>
void for_each_value(const RawPage& raw, const Layout& layout, F&& f) {
  const std::size_t count = raw.bytes.size() / static_cast<std::size_t>(layout.element_bytes);
  const std::uint8_t* p = raw.bytes.data();
  const bool invert = layout.min_is_white;
  const auto each = [&](auto get, double max) {
    for (std::size_t i = 0; i < count; ++i) {
      const double v = get(i);
      f(i, invert ? max - v : v);
    }
  };
  const double unsigned_max =
      layout.bits >= 32 ? 4294967295.0 : static_cast<double>((1ull << layout.bits) - 1);
  switch (layout.kind) {
    case SampleKind::unsigned_int:
      if (layout.element_bytes == 1) each([&](std::size_t i) { return double(p[i]); }, unsigned_max);
      if (layout.element_bytes == 2)
        each([&](std::size_t i) { return double(load<std::uint16_t>(p + 2 * i)); }, unsigned_max);
      if (layout.element_bytes == 4)
        each([&](std::size_t i) { return double(load<std::uint32_t>(p + 4 * i)); }, unsigned_max);
      break;
    case SampleKind::signed_int:  // -1 - v maps the range onto itself, reversed
      if (layout.element_bytes == 1)
        each([&](std::size_t i) { return double(load<std::int8_t>(p + i)); }, -1.0);
      if (layout.element_bytes == 2)
        each([&](std::size_t i) { return double(load<std::int16_t>(p + 2 * i)); }, -1.0);
      if (layout.element_bytes == 4)
        each([&](std::size_t i) { return double(load<std::int32_t>(p + 4 * i)); }, -1.0);
      break;
    case SampleKind::floating:  // -v
      if (layout.element_bytes == 2)
        each([&](std::size_t i) { return double(half_to_float(load<std::uint16_t>(p + 2 * i))); }, 0.0);
      if (layout.element_bytes == 4) each([&](std::size_t i) { return double(load<float>(p + 4 * i)); }, 0.0);
      if (layout.element_bytes == 8) each([&](std::size_t i) { return load<double>(p + 8 * i); }, 0.0);
      break;
  }
}

// The colour map in 8-bit values. Old writers store 8-bit values in the 16-bit entries; like libtiff's own
// RGBA reader, a map with no entry over 255 is taken as such.
std::vector<std::uint8_t> palette_colours(TiffReader& reader, const Layout& layout) {
  std::uint16_t *r = nullptr, *g = nullptr, *b = nullptr;
  if (TIFFGetField(reader.tif.get(), TIFFTAG_COLORMAP, &r, &g, &b) != 1) reader.fail("no colour map");
  const std::size_t entries = std::size_t{1} << layout.bits;
  bool eight_bit = true;
  for (std::size_t i = 0; i < entries; ++i) eight_bit = eight_bit && r[i] < 256 && g[i] < 256 && b[i] < 256;
  std::vector<std::uint8_t> colours(entries * 3);
  for (std::size_t i = 0; i < entries; ++i) {
    const std::uint16_t rgb[3] = {r[i], g[i], b[i]};
    for (std::size_t c = 0; c < 3; ++c)
      colours[i * 3 + c] = eight_bit ? static_cast<std::uint8_t>(rgb[c]) : scale_16_to_8(rgb[c]);
  }
  return colours;
}

// Palette indices to colours, [height, width, 3].
template <class Out>
std::vector<Out> expand_palette(const RawPage& raw, const Layout& layout,
                                const std::vector<std::uint8_t>& colours) {
  const std::size_t pixels = raw.bytes.size() / static_cast<std::size_t>(layout.element_bytes);
  std::vector<Out> out(pixels * 3);
  for (std::size_t i = 0; i < pixels; ++i) {
    const std::size_t index =
        layout.element_bytes == 1 ? raw.bytes[i] : load<std::uint16_t>(raw.bytes.data() + 2 * i);
    for (std::size_t c = 0; c < 3; ++c) out[i * 3 + c] = static_cast<Out>(colours[index * 3 + c]);
  }
  return out;
}

void fill_values(Decoded& out, TiffReader& reader, const Layout& layout, const RawPage& raw) {
  const bool scaled = layout.bits < 8;
  out.value_bit_depth = scaled || layout.palette ? 8 : layout.bits;
  if (layout.palette) {
    out.values = expand_palette<float>(raw, layout, palette_colours(reader, layout));
    return;
  }
  const std::size_t count = raw.bytes.size() / static_cast<std::size_t>(layout.element_bytes);
  out.values.resize(count);
  const double scale = scaled ? 255.0 / static_cast<double>((1u << layout.bits) - 1u) : 1.0;
  for_each_value(raw, layout,
                 [&](std::size_t i, double v) { out.values[i] = static_cast<float>(v * scale); });
}

void fill_image(Decoded& out, TiffReader& reader, const Layout& layout, const RawPage& raw) {
  if (layout.palette) {
    out.samples = expand_palette<std::uint8_t>(raw, layout, palette_colours(reader, layout));
    return;
  }
  out.samples.resize(raw.bytes.size() / static_cast<std::size_t>(layout.element_bytes));
  const unsigned scale = layout.bits < 8 ? 255u / ((1u << layout.bits) - 1u) : 1u;  // 255, 85, 17: exact
  if (layout.bits == 16) {
    for_each_value(raw, layout, [&](std::size_t i, double v) {
      out.samples[i] = scale_16_to_8(static_cast<std::uint32_t>(v));
    });
  } else {
    for_each_value(raw, layout, [&](std::size_t i, double v) {
      out.samples[i] = static_cast<std::uint8_t>(static_cast<unsigned>(v) * scale);
    });
  }
}

void fill_mask(Decoded& out, TiffReader& reader, const Layout& layout, const RawPage& raw) {
  out.sample_bytes = layout.bits > 8 ? 2 : 1;
  const std::size_t count = raw.bytes.size() / static_cast<std::size_t>(layout.element_bytes);
  out.samples.resize(count * static_cast<std::size_t>(out.sample_bytes));
  double negative = 0;
  std::size_t where = 0;
  for_each_value(raw, layout, [&](std::size_t i, double v) {
    if (v < 0 && negative == 0) {
      negative = v;
      where = i;
    }
    const auto value = static_cast<std::uint16_t>(std::max(v, 0.0));
    if (out.sample_bytes == 1) {
      out.samples[i] = static_cast<std::uint8_t>(value);
    } else {  // big-endian, as image.cpp reads 16-bit samples
      out.samples[2 * i] = static_cast<std::uint8_t>(value >> 8);
      out.samples[2 * i + 1] = static_cast<std::uint8_t>(value & 0xff);
    }
  });
  if (negative < 0) {
    const std::size_t pixel = where / layout.samples;
    throw Error(ErrorKind::data,
                reader.name + ": mask value " + std::to_string(static_cast<long long>(negative)) + " at x " +
                    std::to_string(pixel % layout.width) + ", y " + std::to_string(pixel / layout.width) +
                    ": masks hold class indices from 0");
  }
}

}  // namespace

void check_page(const std::string& name, std::int64_t page, std::int64_t pages) {
  if (page >= 0 && page < pages) return;
  throw Error(ErrorKind::usage, name + ": page " + std::to_string(page) + " asked for, but the file has " +
                                    std::to_string(pages) + (pages == 1 ? " page" : " pages") + " (0 to " +
                                    std::to_string(pages - 1) + ")");
}

Decoded decode_tiff(const ByteReader& input, const std::string& name, DecodeMode mode,
                    const ImageLimits& limits, std::int64_t page) {
  TiffReader reader;
  reader.name = name;
  open_tiff(reader, input);
  TIFF* tif = reader.tif.get();

  reader.messages.clear();
  const tdir_t directories = TIFFNumberOfDirectories(tif);
  if (directories == 0) reader.fail("no image directory");
  if (directories > kMaxPages) {
    throw Error(ErrorKind::data, name + ": a TIFF of " + std::to_string(directories) + " pages (at most " +
                                     std::to_string(kMaxPages) + " are read)");
  }
  check_page(name, page, directories);
  reader.messages.clear();
  if (page > 0 && TIFFSetDirectory(tif, static_cast<tdir_t>(page)) != 1) {
    reader.fail("cannot read the directory of page " + std::to_string(page));
  }

  const Layout layout = read_layout(reader);
  check_limits(name, layout.width, layout.height, limits);
  Decoded out;
  out.info.format = ImageFormat::tiff;
  out.info.width = layout.width;
  out.info.height = layout.height;
  out.info.channels = layout.palette ? 3 : layout.samples;
  out.info.bit_depth = layout.bits;
  out.info.pages = directories;
  out.info.floating = layout.kind == SampleKind::floating;
  out.info.is_signed = layout.kind == SampleKind::signed_int;
  if (mode == DecodeMode::header) return out;

  const bool wide = layout.bits > 16 || layout.kind != SampleKind::unsigned_int;
  if (mode == DecodeMode::image && wide) {
    throw Error(ErrorKind::data,
                name + ": " + sample_text(layout) +
                    " samples: the 8-bit reader takes 1 to 16-bit unsigned integers; read it "
                    "with the values API (data.normalize)");
  }
  if (mode == DecodeMode::mask && (layout.bits > 16 || layout.kind == SampleKind::floating)) {
    throw Error(ErrorKind::data,
                name + ": a mask of " + sample_text(layout) + " samples: masks are 8/16-bit class indices");
  }
  const RawPage raw = read_samples(reader, layout, page);
  out.channels = (layout.palette && mode == DecodeMode::mask) ? 1 : out.info.channels;
  switch (mode) {
    case DecodeMode::values:
      fill_values(out, reader, layout, raw);
      break;
    case DecodeMode::image:
      fill_image(out, reader, layout, raw);
      break;
    case DecodeMode::mask:
      fill_mask(out, reader, layout, raw);
      break;
    case DecodeMode::header:
      break;
  }
  return out;
}

}  // namespace unet::image_detail
