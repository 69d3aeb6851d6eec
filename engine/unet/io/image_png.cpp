// PNG through libpng: decoding for image.cpp, and the 8-bit writer. The one non-obvious rule: libpng reports
// errors by longjmp, so every libpng call runs inside a small guarded_* function that does the setjmp and
// owns no C++ object; the owners of the png structs and of the pixel buffers live in the callers, outside the
// jump. The error callbacks store libpng's message in a plain context before they jump; warnings are dropped
// (libpng's benign complaints, such as a wrong sRGB profile, are no business of a training run).
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "unet/core/error.h"
#include "unet/io/image.h"
#include "unet/io/image_codec.h"

namespace unet::image_detail {
namespace {

constexpr std::size_t kIhdrEnd = 33;  // signature (8) + length, "IHDR", 13 bytes of fields, CRC

// What the error callbacks fill in; plain data, see the file comment.
struct PngStatus {
  Failure failure = Failure::none;
  char message[256] = {};
};

void record(PngStatus& status, Failure failure, const char* message) {
  if (status.failure != Failure::none) return;  // the first failure is the cause; later ones follow from it
  status.failure = failure;
  std::snprintf(status.message, sizeof status.message, "%s", message);
}

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  record(*static_cast<PngStatus*>(png_get_error_ptr(png)), Failure::corrupt, message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

struct PngReadContext {
  PngStatus status;
  ByteReader* reader = nullptr;
  DecodeMode mode = DecodeMode::header;
  png_uint_32 limit_width = 0, limit_height = 0;
  // Filled by guarded_read_header.
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  bool has_trns = false;
  // Given to guarded_read_pixels.
  png_size_t expected_row_bytes = 0;
  png_byte expected_channels = 0;
  png_bytepp rows = nullptr;
};

void on_png_read(png_structp png, png_bytep out, png_size_t count) {
  auto* context = static_cast<PngReadContext*>(png_get_io_ptr(png));
  ByteReader& reader = *context->reader;
  while (count > 0) {
    const std::size_t available = reader_ensure(reader, 1);
    if (available == 0) {
      record(context->status, reader.read_errno != 0 ? Failure::read_error : Failure::truncated, "");
      png_error(png, "unexpected end of input");
    }
    const std::size_t n = std::min(available, count);
    std::memcpy(out, reader.data + reader.pos, n);
    reader.pos += n;
    out += n;
    count -= n;
  }
}

bool guarded_read_header(PngReadContext* context, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  png_set_read_fn(png, context, on_png_read);
  // A CRC error in any chunk, ancillary ones included, means a damaged file: refuse it.
  png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
  png_set_user_limits(png, context->limit_width, context->limit_height);
  png_set_option(png, PNG_SKIP_sRGB_CHECK_PROFILE, PNG_OPTION_ON);
  png_read_info(png, info);
  int interlace = 0;
  png_get_IHDR(png, info, &context->width, &context->height, &context->bit_depth, &context->color_type,
               &interlace, nullptr, nullptr);
  context->has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  return true;
}

bool guarded_read_pixels(PngReadContext* context, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  const bool image = context->mode == DecodeMode::image;
  if (context->color_type == PNG_COLOR_TYPE_PALETTE) {
    if (image) {
      png_set_palette_to_rgb(png);  // RGBA when the palette has tRNS
    } else {
      png_set_packing(png);  // the indices, one byte each
    }
  } else if (context->bit_depth < 8) {
    if (image) {
      png_set_expand_gray_1_2_4_to_8(png);  // scaled: 1 bit gives 0/255 (no tRNS expansion: as stored)
    } else {
      png_set_packing(png);  // raw values
    }
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != context->expected_row_bytes ||
      png_get_channels(png, info) != context->expected_channels) {
    png_error(png, "unexpected row layout after the transforms");
  }
  png_read_image(png, context->rows);
  png_read_end(png, nullptr);  // checks the CRCs up to IEND
  return true;
}

class PngReadStruct {
 public:
  PngReadStruct(PngStatus* status, const std::string& name) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, status, on_png_error, on_png_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    if (png_ == nullptr || info_ == nullptr) {
      destroy();
      throw Error(ErrorKind::out_of_memory, name + ": cannot create a libpng decoder");
    }
  }
  PngReadStruct(const PngReadStruct&) = delete;
  PngReadStruct& operator=(const PngReadStruct&) = delete;
  ~PngReadStruct() { destroy(); }

  png_structp png() const noexcept { return png_; }
  png_infop info() const noexcept { return info_; }

 private:
  void destroy() noexcept {
    if (png_ != nullptr) png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr);
    png_ = nullptr;
    info_ = nullptr;
  }
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

// libpng reads every chunk up to the first IDAT before it tells the size, so a file that declares a huge
// image and then ends would be reported as truncated. The size is checked from the raw IHDR first; anything
// odd about that chunk is left for libpng to report.
void check_ihdr_limits(ByteReader& reader, const std::string& name, const ImageLimits& limits,
                       DecodeMode mode) {
  if (reader_ensure(reader, kIhdrEnd) < kIhdrEnd) return;
  const std::uint8_t* p = reader.data + reader.pos;
  if (be32(p + 8) != 13 || std::memcmp(p + 12, "IHDR", 4) != 0) return;
  if (crc32(p + 12, 17) != be32(p + 29)) return;
  const std::uint32_t width = be32(p + 16), height = be32(p + 20);
  if (width == 0 || height == 0) return;
  check_limits(name, width, height, limits);
  if (mode == DecodeMode::header) return;
  // The filtered rows deflate compresses: a filter byte and the row's samples each. Deflate expands at most
  // 1032:1 (a 258-byte match per 2-bit code).
  const std::uint64_t bit_depth = p[24];
  const std::uint8_t color_type = p[25];
  const std::uint64_t samples = color_type == 2 ? 3 : color_type == 4 ? 2 : color_type == 6 ? 4 : 1;
  const std::uint64_t row_bytes = 1 + (std::uint64_t{width} * samples * bit_depth + 7) / 8;
  check_input_can_hold(name, "PNG", row_bytes * height, 1032, reader);
}

png_uint_32 libpng_limit(std::int64_t limit) {
  return static_cast<png_uint_32>(std::clamp<std::int64_t>(limit, 1, PNG_UINT_31_MAX));
}

// ---- writing ----

struct PngWriteContext {
  PngStatus status;
  std::vector<std::byte>* out = nullptr;
  const std::uint8_t* pixels = nullptr;
  png_uint_32 width = 0, height = 0;
  int color_type = 0;
  int bit_depth = 8;  // 16: each sample two bytes, most significant first (PNG's order)
  std::size_t row_bytes = 0;
};

void on_png_write(png_structp png, png_bytep data, png_size_t count) {
  auto* context = static_cast<PngWriteContext*>(png_get_io_ptr(png));
  bool appended = true;
  try {
    const auto bytes = std::as_bytes(std::span(data, count));
    context->out->insert(context->out->end(), bytes.begin(), bytes.end());
  } catch (...) {
    appended = false;
  }
  // Outside the handler: the jump must not leave a live exception behind.
  if (!appended) png_error(png, "out of memory for the encoded PNG");
}

void on_png_flush(png_structp) {}

bool guarded_write(PngWriteContext* context, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  png_set_write_fn(png, context, on_png_write, on_png_flush);
  png_set_IHDR(png, info, context->width, context->height, context->bit_depth, context->color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (png_uint_32 y = 0; y < context->height; ++y)
    png_write_row(png, context->pixels + y * context->row_bytes);
  png_write_end(png, nullptr);
  return true;
}

class PngWriteStruct {
 public:
  explicit PngWriteStruct(PngStatus* status) {
    png_ = png_create_write_struct(PNG_LIBPNG_VER_STRING, status, on_png_error, on_png_warning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    if (png_ == nullptr || info_ == nullptr) {
      destroy();
      throw Error(ErrorKind::out_of_memory, "cannot create a libpng encoder");
    }
  }
  PngWriteStruct(const PngWriteStruct&) = delete;
  PngWriteStruct& operator=(const PngWriteStruct&) = delete;
  ~PngWriteStruct() { destroy(); }

  png_structp png() const noexcept { return png_; }
  png_infop info() const noexcept { return info_; }

 private:
  void destroy() noexcept {
    if (png_ != nullptr) png_destroy_write_struct(&png_, info_ != nullptr ? &info_ : nullptr);
    png_ = nullptr;
    info_ = nullptr;
  }
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

}  // namespace

Decoded decode_png(ByteReader& reader, const std::string& name, DecodeMode mode, const ImageLimits& limits) {
  check_ihdr_limits(reader, name, limits, mode);

  PngReadContext context;
  context.reader = &reader;
  context.mode = mode;
  context.limit_width = libpng_limit(limits.max_width);
  context.limit_height = libpng_limit(limits.max_height);
  PngReadStruct png(&context.status, name);
  if (!guarded_read_header(&context, png.png(), png.info())) {
    throw_failure(name, "PNG", context.status.failure, context.status.message, reader);
  }
  check_limits(name, context.width, context.height, limits);

  Decoded out;
  const bool palette = context.color_type == PNG_COLOR_TYPE_PALETTE;
  std::int64_t channels = 1;
  switch (context.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      channels = 1;
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      channels = 2;
      break;
    case PNG_COLOR_TYPE_RGB:
      channels = 3;
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      channels = 4;
      break;
    case PNG_COLOR_TYPE_PALETTE:
      channels = context.has_trns ? 4 : 3;
      break;
    default:  // libpng refuses other colour types itself; kept for safety
      throw Error(ErrorKind::unsupported,
                  name + ": unsupported PNG colour type " + std::to_string(context.color_type));
  }
  out.info = ImageInfo{ImageFormat::png, context.width, context.height, channels, context.bit_depth};
  if (mode == DecodeMode::header) return out;

  out.channels = (palette && mode == DecodeMode::mask) ? 1 : channels;
  out.sample_bytes = context.bit_depth == 16 ? 2 : 1;
  const std::uint64_t row_bytes = std::uint64_t{context.width} * static_cast<std::uint64_t>(out.channels) *
                                  static_cast<std::uint64_t>(out.sample_bytes);
  out.samples = allocate_pixels(name, context.height, row_bytes);
  std::vector<png_bytep> rows(context.height);
  for (png_uint_32 y = 0; y < context.height; ++y) rows[y] = out.samples.data() + y * row_bytes;

  context.expected_row_bytes = static_cast<png_size_t>(row_bytes);
  context.expected_channels = static_cast<png_byte>(out.channels);
  context.rows = rows.data();
  if (!guarded_read_pixels(&context, png.png(), png.info())) {
    throw_failure(name, "PNG", context.status.failure, context.status.message, reader);
  }
  return out;
}

}  // namespace unet::image_detail

namespace unet {

std::vector<std::byte> encode_png(const Image& image) {
  const std::int64_t c = image.channels;
  if (c < 1 || c > 4) {
    throw Error(ErrorKind::usage, "encode_png: " + std::to_string(c) + " channels (1 to 4 can be written)");
  }
  constexpr std::int64_t kMaxSide = PNG_UINT_31_MAX;
  if (image.height < 1 || image.width < 1 || image.height > kMaxSide || image.width > kMaxSide) {
    throw Error(ErrorKind::usage, "encode_png: cannot write a " + std::to_string(image.height) + "x" +
                                      std::to_string(image.width) + " image");
  }
  const auto expected = static_cast<std::uint64_t>(image.height) * static_cast<std::uint64_t>(image.width) *
                        static_cast<std::uint64_t>(c);
  if (image.pixels.size() != expected) {
    throw Error(ErrorKind::usage, "encode_png: " + std::to_string(image.pixels.size()) +
                                      " bytes of pixels for a " + std::to_string(image.height) + "x" +
                                      std::to_string(image.width) + "x" + std::to_string(c) + " image (" +
                                      std::to_string(expected) + " expected)");
  }
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                        PNG_COLOR_TYPE_RGB_ALPHA};

  std::vector<std::byte> out;
  out.reserve(image.pixels.size() / 2 + 1024);
  image_detail::PngWriteContext context;
  context.out = &out;
  context.pixels = image.pixels.data();
  context.width = static_cast<png_uint_32>(image.width);
  context.height = static_cast<png_uint_32>(image.height);
  context.color_type = kColorTypes[c - 1];
  context.row_bytes = static_cast<std::size_t>(image.width * c);
  image_detail::PngWriteStruct png(&context.status);
  if (!image_detail::guarded_write(&context, png.png(), png.info())) {
    throw Error(ErrorKind::io, std::string("encode_png: libpng failed: ") + context.status.message);
  }
  return out;
}

std::vector<std::byte> encode_png16(std::int64_t height, std::int64_t width,
                                    std::span<const std::uint16_t> values) {
  image_detail::check_values_shape("encode_png16", height, width, values.size(), PNG_UINT_31_MAX);
  // PNG stores 16-bit samples most significant byte first, whatever the machine's order.
  std::vector<std::uint8_t> big_endian(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    big_endian[2 * i] = static_cast<std::uint8_t>(values[i] >> 8);
    big_endian[2 * i + 1] = static_cast<std::uint8_t>(values[i] & 0xFF);
  }
  std::vector<std::byte> out;
  out.reserve(big_endian.size() / 4 + 1024);
  image_detail::PngWriteContext context;
  context.out = &out;
  context.pixels = big_endian.data();
  context.width = static_cast<png_uint_32>(width);
  context.height = static_cast<png_uint_32>(height);
  context.color_type = PNG_COLOR_TYPE_GRAY;
  context.bit_depth = 16;
  context.row_bytes = static_cast<std::size_t>(width) * 2;
  image_detail::PngWriteStruct png(&context.status);
  if (!image_detail::guarded_write(&context, png.png(), png.info())) {
    throw Error(ErrorKind::io, std::string("encode_png16: libpng failed: ") + context.status.message);
  }
  return out;
}

void write_png16(const std::filesystem::path& path, std::int64_t height, std::int64_t width,
                 std::span<const std::uint16_t> values) {
  image_detail::write_encoded(path, [&] { return encode_png16(height, width, values); });
}

void write_png(const std::filesystem::path& path, const Image& image) {
  image_detail::write_encoded(path, [&] { return encode_png(image); });
}

}  // namespace unet
