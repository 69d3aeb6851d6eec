// The image module's front: opening files, deciding the format from the first bytes, turning what the PNG,
// JPEG and TIFF decoders give into Image, ValueImage and MaskImage, and the channel conversions. The one
// non-obvious rule: a file is read through a small buffer as the decoder asks for bytes, never whole, so that
// probe_image reads only the header and a truncated file is found where it ends (TIFF, which needs random
// access, reads the same file by offset).
#include "unet/io/image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>
#include <string_view>
#include <system_error>

#include "unet/core/error.h"
#include "unet/core/unique_fd.h"
#include "unet/io/atomic_file.h"
#include "unet/io/image_codec.h"

namespace unet {
namespace image_detail {

std::size_t reader_ensure(ByteReader& reader, std::size_t want) noexcept {
  const std::size_t available = reader.size - reader.pos;
  if (available >= want || reader.fd < 0 || reader.at_end || reader.read_errno != 0) return available;
  if (reader.pos > 0) {
    std::memmove(reader.buffer, reader.buffer + reader.pos, available);
    reader.window_offset += reader.pos;
    reader.pos = 0;
    reader.size = available;
  }
  want = std::min(want, reader.capacity);
  while (reader.size < want) {
    const ssize_t n = ::read(reader.fd, reader.buffer + reader.size, reader.capacity - reader.size);
    if (n < 0) {
      if (errno == EINTR) continue;
      reader.read_errno = errno;
      break;
    }
    if (n == 0) {
      reader.at_end = true;
      break;
    }
    reader.size += static_cast<std::size_t>(n);
  }
  return reader.size - reader.pos;
}

namespace {

std::string system_reason(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace

void throw_failure(const std::string& name, const char* format_name, Failure failure,
                   const char* library_message, const ByteReader& reader) {
  const std::string format(format_name);
  switch (failure) {
    case Failure::truncated:
      throw Error(ErrorKind::io, name + ": truncated: the data ends after " +
                                     std::to_string(reader_position(reader)) + " bytes, inside the " +
                                     format + " stream");
    case Failure::read_error:
      throw Error(ErrorKind::io, name + ": cannot read: " + system_reason(reader.read_errno));
    case Failure::unsupported:
      throw Error(ErrorKind::unsupported, name + ": unsupported " + format + ": " + library_message);
    case Failure::corrupt:
    case Failure::none:
      break;
  }
  throw Error(ErrorKind::io, name + ": corrupt " + format + " data: " + library_message);
}

void throw_over_limit(const std::string& name, std::uint64_t width, std::uint64_t height,
                      const ImageLimits& limits) {
  throw Error(ErrorKind::data, name + ": declared " + std::to_string(width) + "x" + std::to_string(height) +
                                   ", over the " + std::to_string(limits.max_width) + "x" +
                                   std::to_string(limits.max_height) + " limit");
}

void check_limits(const std::string& name, std::uint64_t width, std::uint64_t height,
                  const ImageLimits& limits) {
  if (limits.max_width < 0 || limits.max_height < 0 || width > static_cast<std::uint64_t>(limits.max_width) ||
      height > static_cast<std::uint64_t>(limits.max_height)) {
    throw_over_limit(name, width, height, limits);
  }
}

void write_encoded(const std::filesystem::path& path, const std::function<std::vector<std::byte>()>& encode) {
  std::vector<std::byte> bytes;
  try {
    bytes = encode();
  } catch (const Error& e) {
    throw Error(e.kind(), path.string() + ": " + e.message());
  }
  write_file_atomically(path, bytes);
}

void check_values_shape(const char* what, std::int64_t height, std::int64_t width, std::size_t count,
                        std::int64_t max_side) {
  if (height < 1 || width < 1 || height > max_side || width > max_side) {
    throw Error(ErrorKind::usage, std::string(what) + ": cannot write a " + std::to_string(height) + "x" +
                                      std::to_string(width) + " image");
  }
  const auto expected = static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(width);
  if (count != expected) {
    throw Error(ErrorKind::usage, std::string(what) + ": " + std::to_string(count) + " values for a " +
                                      std::to_string(height) + "x" + std::to_string(width) + " image (" +
                                      std::to_string(expected) + " expected)");
  }
}

void check_input_can_hold(const std::string& name, const char* format, std::uint64_t decoded_bytes,
                          std::uint64_t max_ratio, const ByteReader& reader) {
  if (reader.input_bytes == 0) return;
  std::uint64_t most = 0;
  if (__builtin_mul_overflow(reader.input_bytes, max_ratio, &most) || decoded_bytes <= most) return;
  throw Error(ErrorKind::data, name + ": the " + format + " header declares " +
                                   std::to_string(decoded_bytes) + " bytes of pixel data, more than its " +
                                   std::to_string(reader.input_bytes) +
                                   " bytes can hold at the format's best compression (" +
                                   std::to_string(max_ratio) + ":1): a truncated or forged file");
}

std::vector<std::uint8_t> allocate_pixels(const std::string& name, std::uint64_t height,
                                          std::uint64_t row_bytes) {
  std::uint64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(height, row_bytes, &bytes);
  std::vector<std::uint8_t> pixels;
  try {
    if (overflow || bytes > pixels.max_size()) throw std::bad_alloc();
    pixels.resize(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::out_of_memory, name + ": cannot hold the decoded pixels in memory (" +
                                              (overflow ? std::string("too many") : std::to_string(bytes)) +
                                              " bytes)");
  }
  return pixels;
}

}  // namespace image_detail

namespace {

using image_detail::ByteReader;
using image_detail::Decoded;
using image_detail::DecodeMode;

constexpr std::array<std::uint8_t, 8> kPngSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr std::array<std::uint8_t, 3> kJpegSignature = {0xff, 0xd8, 0xff};
// Little- and big-endian TIFF, then BigTIFF (64-bit offsets), which libtiff reads too.
constexpr std::array<std::array<std::uint8_t, 4>, 4> kTiffSignatures = {
    {{'I', 'I', 42, 0}, {'M', 'M', 0, 42}, {'I', 'I', 43, 0}, {'M', 'M', 0, 43}}};
constexpr std::size_t kSniffBytes = 64;
constexpr std::size_t kFileBufferBytes = std::size_t{64} << 10;

bool starts_with(std::string_view bytes, std::string_view prefix) {
  return bytes.substr(0, prefix.size()) == prefix;
}

template <std::size_t N>
bool is_prefix_of(std::string_view bytes, const std::array<std::uint8_t, N>& signature) {
  if (bytes.empty() || bytes.size() >= N) return false;
  return std::equal(bytes.begin(), bytes.end(), signature.begin(),
                    [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; });
}

bool looks_like_text(std::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r';
  });
}

// What the first bytes of a file that is neither PNG nor JPEG look like, for the message.
std::string describe_other(std::string_view bytes) {
  if (starts_with(bytes, "BM")) return "BMP";
  if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a")) return "GIF";
  if (starts_with(bytes, "RIFF") && bytes.size() >= 12 && bytes.substr(8, 4) == "WEBP") return "WebP";
  if (starts_with(bytes, std::string_view("\0\0\0\x0cjP  ", 8)) || starts_with(bytes, "\xff\x4f\xff\x51"))
    return "JPEG 2000";
  if (bytes.size() >= 12 && bytes.substr(4, 4) == "ftyp") return "HEIF/AVIF or another ISO media file";
  if (starts_with(bytes, "\x93NUMPY")) return "a NumPy .npy array";
  if (starts_with(bytes, "PK\x03\x04")) return "a zip archive";
  if (starts_with(bytes, "\x1f\x8b")) return "gzip data";
  if (starts_with(bytes, "%PDF")) return "PDF";
  if (starts_with(bytes, "version https://git-lfs"))
    return "a Git LFS pointer; fetch the file with git lfs pull";
  if (looks_like_text(bytes)) {
    std::string start(bytes.substr(0, std::min(bytes.find_first_of("\r\n"), std::size_t{32})));
    return start.empty() ? std::string("text") : "text, starting \"" + start + "\"";
  }
  std::string hex = "unrecognised data, starting";
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 8); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    hex += ' ';
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

Decoded decode(ByteReader& reader, const std::string& name, DecodeMode mode, const ImageLimits& limits,
               std::int64_t page) {
  const std::size_t n = reader_ensure(reader, kSniffBytes);
  if (reader.read_errno != 0 && n < kSniffBytes) {
    throw Error(ErrorKind::io, name + ": cannot read: " +
                                   std::error_code(reader.read_errno, std::generic_category()).message());
  }
  if (n == 0) throw Error(ErrorKind::io, name + ": not a PNG, JPEG or TIFF image (empty file)");
  const std::string_view head(reinterpret_cast<const char*>(reader.data + reader.pos), n);
  const auto starts_with_signature = [&](const auto& signature) {
    return n >= signature.size() && std::equal(signature.begin(), signature.end(), reader.data + reader.pos);
  };
  if (std::any_of(kTiffSignatures.begin(), kTiffSignatures.end(), starts_with_signature)) {
    return image_detail::decode_tiff(reader, name, mode, limits, page);
  }
  // PNG and JPEG hold one page, and their values are their 8-bit samples (16-bit kept).
  image_detail::check_page(name, page, 1);
  const DecodeMode png_jpeg_mode = mode == DecodeMode::values ? DecodeMode::image : mode;
  if (starts_with_signature(kPngSignature))
    return image_detail::decode_png(reader, name, png_jpeg_mode, limits);
  if (starts_with_signature(kJpegSignature))
    return image_detail::decode_jpeg(reader, name, png_jpeg_mode, limits);
  const bool partial_tiff = std::any_of(kTiffSignatures.begin(), kTiffSignatures.end(),
                                        [&](const auto& signature) { return is_prefix_of(head, signature); });
  const char* partial = is_prefix_of(head, kPngSignature)    ? "PNG"
                        : is_prefix_of(head, kJpegSignature) ? "JPEG"
                        : partial_tiff                       ? "TIFF"
                                                             : nullptr;
  if (partial != nullptr) {
    throw Error(ErrorKind::io, name + ": truncated: the data ends after " + std::to_string(n) +
                                   " bytes, inside the " + partial + " signature");
  }
  throw Error(ErrorKind::unsupported,
              name + ": not a PNG, JPEG or TIFF image (" + describe_other(head) + ")");
}

Decoded decode_file(const std::filesystem::path& path, DecodeMode mode, const ImageLimits& limits,
                    std::int64_t page) {
  const std::string name = path.string();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO must not block the open
  if (!fd) {
    throw Error(ErrorKind::io,
                name + ": cannot open: " + std::error_code(errno, std::generic_category()).message());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw Error(ErrorKind::io,
                name + ": cannot stat: " + std::error_code(errno, std::generic_category()).message());
  }
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::io, name + ": is a folder, not an image file");
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::io, name + ": not a regular file");

  std::vector<std::uint8_t> buffer(kFileBufferBytes);
  ByteReader reader;
  reader.fd = fd.get();
  reader.buffer = buffer.data();
  reader.data = buffer.data();
  reader.capacity = buffer.size();
  reader.input_bytes = static_cast<std::uint64_t>(st.st_size);
  return decode(reader, name, mode, limits, page);
}

Decoded decode_memory(std::span<const std::byte> bytes, const std::string& name, DecodeMode mode,
                      const ImageLimits& limits, std::int64_t page) {
  ByteReader reader;
  reader.data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  reader.size = bytes.size();
  reader.at_end = true;
  reader.input_bytes = bytes.size();
  return decode(reader, name, mode, limits, page);
}

Image to_image(Decoded decoded) {
  Image image;
  image.height = decoded.info.height;
  image.width = decoded.info.width;
  image.channels = decoded.channels;
  if (decoded.sample_bytes == 1) {
    image.pixels = std::move(decoded.samples);
    return image;
  }
  const std::size_t count = decoded.samples.size() / 2;
  image.pixels.resize(count);
  const std::uint8_t* s = decoded.samples.data();
  for (std::size_t i = 0; i < count; ++i)
    image.pixels[i] = image_detail::scale_16_to_8((std::uint32_t{s[2 * i]} << 8) | s[2 * i + 1]);
  return image;
}

ValueImage to_values(Decoded decoded) {
  ValueImage image;
  image.height = decoded.info.height;
  image.width = decoded.info.width;
  image.channels = decoded.channels;
  if (decoded.info.format == ImageFormat::tiff) {
    image.bit_depth = decoded.value_bit_depth;
    image.floating = decoded.info.floating;
    image.is_signed = decoded.info.is_signed;
    image.values = std::move(decoded.values);
    return image;
  }
  // PNG and JPEG, decoded as for read_image: 8-bit samples, or 16-bit ones (big-endian) kept.
  image.bit_depth = decoded.sample_bytes * 8;
  const std::uint8_t* s = decoded.samples.data();
  const std::size_t count = decoded.samples.size() / static_cast<std::size_t>(decoded.sample_bytes);
  image.values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    image.values[i] =
        decoded.sample_bytes == 1 ? float(s[i]) : float((unsigned{s[2 * i]} << 8) | s[2 * i + 1]);
  }
  return image;
}

MaskImage to_mask(const Decoded& decoded) {
  MaskImage mask;
  mask.height = decoded.info.height;
  mask.width = decoded.info.width;
  const auto pixels = static_cast<std::size_t>(mask.height * mask.width);
  const auto c = static_cast<std::size_t>(decoded.channels);
  mask.values.resize(pixels);
  const std::uint8_t* s = decoded.samples.data();
  bool equal = true;
  if (decoded.sample_bytes == 1) {
    for (std::size_t i = 0; i < pixels; ++i) {
      const std::uint8_t* p = s + i * c;
      mask.values[i] = p[0];
      if (c >= 3) equal = equal && p[0] == p[1] && p[0] == p[2];
    }
  } else {
    const auto at = [](const std::uint8_t* p) -> std::uint16_t {
      return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
    };
    for (std::size_t i = 0; i < pixels; ++i) {
      const std::uint8_t* p = s + i * c * 2;
      mask.values[i] = at(p);
      if (c >= 3) equal = equal && at(p) == at(p + 2) && at(p) == at(p + 4);
    }
  }
  mask.all_channels_equal = equal;
  return mask;
}

}  // namespace

const char* to_string(ImageFormat format) noexcept {
  switch (format) {
    case ImageFormat::png:
      return "PNG";
    case ImageFormat::jpeg:
      return "JPEG";
    case ImageFormat::tiff:
      return "TIFF";
  }
  return "unknown";
}

ImageInfo probe_image(const std::filesystem::path& path, const ImageLimits& limits, std::int64_t page) {
  return decode_file(path, DecodeMode::header, limits, page).info;
}

ImageInfo probe_image_bytes(std::span<const std::byte> bytes, const std::string& name,
                            const ImageLimits& limits, std::int64_t page) {
  return decode_memory(bytes, name, DecodeMode::header, limits, page).info;
}

Image read_image(const std::filesystem::path& path, const ImageLimits& limits) {
  return to_image(decode_file(path, DecodeMode::image, limits, 0));
}

Image decode_image(std::span<const std::byte> bytes, const std::string& name, const ImageLimits& limits) {
  return to_image(decode_memory(bytes, name, DecodeMode::image, limits, 0));
}

ValueImage read_image_values(const std::filesystem::path& path, std::int64_t page,
                             const ImageLimits& limits) {
  return to_values(decode_file(path, DecodeMode::values, limits, page));
}

ValueImage decode_image_values(std::span<const std::byte> bytes, const std::string& name, std::int64_t page,
                               const ImageLimits& limits) {
  return to_values(decode_memory(bytes, name, DecodeMode::values, limits, page));
}

MaskImage read_mask(const std::filesystem::path& path, const ImageLimits& limits, std::int64_t page) {
  return to_mask(decode_file(path, DecodeMode::mask, limits, page));
}

MaskImage decode_mask(std::span<const std::byte> bytes, const std::string& name, const ImageLimits& limits,
                      std::int64_t page) {
  return to_mask(decode_memory(bytes, name, DecodeMode::mask, limits, page));
}

Image convert_channels(const Image& image, std::int64_t channels, const std::string& name) {
  const std::int64_t from = image.channels;
  const bool defined =
      from >= 1 && from <= 4 && (channels == from || channels == 1 || channels == 3 || channels == 4);
  if (!defined) {
    throw Error(ErrorKind::data, name + ": cannot convert an image of " + std::to_string(from) +
                                     " channels to " + std::to_string(channels) +
                                     " (defined: 1, 2, 3 or 4 channels to 1, 3, 4 or the same count)");
  }
  if (image.height < 0 || image.width < 0 ||
      image.pixels.size() != static_cast<std::size_t>(image.height * image.width * from)) {
    throw Error(ErrorKind::usage, name + ": " + std::to_string(image.pixels.size()) +
                                      " bytes of pixels for a " + std::to_string(image.height) + "x" +
                                      std::to_string(image.width) + "x" + std::to_string(from) + " image");
  }
  if (channels == from) return image;

  const auto pixels = static_cast<std::size_t>(image.height * image.width);
  Image out;
  out.height = image.height;
  out.width = image.width;
  out.channels = channels;
  out.pixels.resize(pixels * static_cast<std::size_t>(channels));
  const auto f = static_cast<std::size_t>(from);
  const auto t = static_cast<std::size_t>(channels);
  const bool colour = from >= 3;
  const bool has_alpha = from == 2 || from == 4;
  for (std::size_t i = 0; i < pixels; ++i) {
    const std::uint8_t* p = image.pixels.data() + i * f;
    std::uint8_t* q = out.pixels.data() + i * t;
    if (t == 1) {
      // BT.601 luma in integers: exact, rounded half up.
      q[0] =
          colour ? static_cast<std::uint8_t>((299u * p[0] + 587u * p[1] + 114u * p[2] + 500u) / 1000u) : p[0];
    } else {
      q[0] = p[0];
      q[1] = colour ? p[1] : p[0];
      q[2] = colour ? p[2] : p[0];
      if (t == 4) q[3] = has_alpha ? p[f - 1] : std::uint8_t{255};
    }
  }
  return out;
}

}  // namespace unet
