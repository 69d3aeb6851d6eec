// Internal to the image module: what image.cpp (files, format detection, the public functions) shares with
// the PNG, JPEG and TIFF decoders. The one non-obvious rule: ByteReader and the decoders' contexts are plain
// data, because libpng and libjpeg report errors by longjmp, and a longjmp must never skip a C++ destructor.
// The memory and owners they point to live in the C++ callers, outside the setjmp regions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "unet/io/image.h"

namespace unet::image_detail {

// Bytes from memory (fd < 0: the window is the whole input) or from a file descriptor through a buffer.
struct ByteReader {
  const std::uint8_t* data = nullptr;  // the window: data[pos, size) are not consumed yet
  std::size_t size = 0;
  std::size_t pos = 0;
  std::uint64_t window_offset = 0;  // offset in the input of data[0]
  int fd = -1;
  std::uint8_t* buffer = nullptr;  // fd mode: the window lives here
  std::size_t capacity = 0;
  bool at_end = false;            // the input has no bytes beyond the window
  int read_errno = 0;             // non-zero after a failed read()
  std::uint64_t input_bytes = 0;  // the whole input's size (a file's, from stat); 0: unknown
};

// Makes at least `want` (<= capacity in fd mode) unconsumed bytes available, or all that remain; returns how
// many are available. Never throws.
std::size_t reader_ensure(ByteReader& reader, std::size_t want) noexcept;
// Bytes consumed so far.
inline std::uint64_t reader_position(const ByteReader& reader) noexcept {
  return reader.window_offset + reader.pos;
}

enum class DecodeMode {
  header,  // ImageInfo only: no pixel data is read
  image,   // 8-bit samples after palette expansion and low-bit-depth scaling (16-bit kept for image.cpp)
  mask,    // raw values: palette indices, unscaled low bit depths, 16-bit kept
  values,  // TIFF only (PNG and JPEG are decoded as `image`): the stored values as floats, in `values`
};

struct Decoded {
  ImageInfo info;
  std::int64_t channels = 0;          // channels of `samples` or `values` (1 for a palette mask)
  int sample_bytes = 1;               // 1, or 2 for 16-bit samples (big-endian, as PNG stores them)
  std::vector<std::uint8_t> samples;  // [height, width, channels] of sample_bytes each
  std::vector<float> values;          // DecodeMode::values: [height, width, channels]
  int value_bit_depth = 8;            // DecodeMode::values: the bit depth ValueImage reports
};

// The 16-bit to 8-bit rule of the 8-bit API: rounded to nearest.
inline std::uint8_t scale_16_to_8(std::uint32_t v16) noexcept {
  return static_cast<std::uint8_t>((v16 * 255 + 32767) / 65535);
}

// Why a decoder stopped. Set by the callbacks before they longjmp; the first failure wins.
enum class Failure { none, truncated, read_error, corrupt, unsupported };

// Throw unet::Error naming `name`: what the decoders and image.cpp use to report.
[[noreturn]] void throw_failure(const std::string& name, const char* format_name, Failure failure,
                                const char* library_message, const ByteReader& reader);
[[noreturn]] void throw_over_limit(const std::string& name, std::uint64_t width, std::uint64_t height,
                                   const ImageLimits& limits);
// A decoder holds a whole image before it can tell whether the file's data is all there, so a header of a few
// bytes that declares 16384x16384 would cost hundreds of MiB per file. Compression has a bound, `max_ratio`
// decoded bytes per input byte, so an input too small for the `decoded_bytes` it declares is refused (data)
// before anything is allocated. Does nothing when the input's size is unknown.
void check_input_can_hold(const std::string& name, const char* format, std::uint64_t decoded_bytes,
                          std::uint64_t max_ratio, const ByteReader& reader);
// Writes what `encode` returns to `path` atomically (atomic_file.h); an Error of `encode` is rethrown, of the
// same kind, with the path in front of its message. What write_png, write_png16 and write_tiff_uint do.
void write_encoded(const std::filesystem::path& path, const std::function<std::vector<std::byte>()>& encode);
// What an encoder of one-channel values (encode_png16, encode_tiff_uint) checks before it writes: a size of
// 1..max_side on each side (else Error(usage) "<what>: cannot write a HxW image") and `count` values, one a
// pixel (else Error(usage) naming both counts).
void check_values_shape(const char* what, std::int64_t height, std::int64_t width, std::size_t count,
                        std::int64_t max_side);
// Throws unless width x height (both >= 1) is within the limits.
void check_limits(const std::string& name, std::uint64_t width, std::uint64_t height,
                  const ImageLimits& limits);
// The bytes of `height` rows of `row_bytes`; throws unet::Error(out_of_memory) naming the image when the
// host cannot hold them.
std::vector<std::uint8_t> allocate_pixels(const std::string& name, std::uint64_t height,
                                          std::uint64_t row_bytes);

// The reader is positioned at the start of the PNG / JPEG stream (its signature).
Decoded decode_png(ByteReader& reader, const std::string& name, DecodeMode mode, const ImageLimits& limits);
Decoded decode_jpeg(ByteReader& reader, const std::string& name, DecodeMode mode, const ImageLimits& limits);
// TIFF needs random access: it reads the reader's file by pread (reader.fd, reader.input_bytes) or its bytes
// in memory (the whole input is the window), wherever the reader stands. `page` is a directory from 0.
Decoded decode_tiff(const ByteReader& input, const std::string& name, DecodeMode mode,
                    const ImageLimits& limits, std::int64_t page);
// Error(usage) for a page at or past `pages` (or negative).
void check_page(const std::string& name, std::int64_t page, std::int64_t pages);

}  // namespace unet::image_detail
