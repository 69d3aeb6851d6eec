// Reading and writing the images and masks users bring: PNG (libpng), baseline/progressive JPEG
// (libjpeg-turbo) and TIFF (libtiff) in, 8-bit PNG out (and 16-bit gray PNG or 16/32-bit TIFF for label
// images), plus the explicit channel conversions and resizes the data layer may ask for. Nothing here
// converts or resizes on its own. The one non-obvious rule: the format is decided by the file's first bytes,
// never its extension, and every failure is a unet::Error naming the file and its problem. Dimensions are
// checked against ImageLimits from the header, before any pixel buffer exists, and no libpng/libjpeg/libtiff
// error or warning ever reaches exit(), abort() or stderr.
//
// Two ways to read pixels: the 8-bit API (read_image, decode_image) for what displays and trains as 0..255,
// and the values API (read_image_values, decode_image_values) for the values as stored at their own bit depth
// (16-bit, 32-bit integers, floats), which the data layer normalizes itself. A multi-page TIFF holds one
// image per page (directory); PNG and JPEG have one page.
//
// Error kinds: io for files that cannot be read or are damaged (missing, empty, truncated, corrupt data, CRC
// errors); data for valid files that do not fit (over the limits, a conversion that is not defined, a file
// much smaller than its header declares, 32-bit or float samples asked for as 8-bit or as a mask);
// unsupported for formats not read here (BMP, GIF, WebP..., 12-bit or CMYK JPEG, CMYK or CIELab TIFF,
// 12- or 24-bit TIFF samples); usage for calls that break a precondition (an Image whose pixel count does not
// match its shape, a page past the file's last).
//
// All functions are thread-safe: they share no mutable state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace unet {

enum class ImageFormat { png, jpeg, tiff };

const char* to_string(ImageFormat format) noexcept;  // "PNG", "JPEG", "TIFF"

struct ImageInfo {
  ImageFormat format = ImageFormat::png;
  std::int64_t width = 0, height = 0;
  // The channels read_image returns: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA. A palette PNG counts as 3, or 4
  // when it has a tRNS chunk (it is expanded); the colour-key tRNS of a gray or RGB PNG adds no channel. A
  // TIFF has its samples per pixel (1 to 64; alpha and other extra samples count), a palette TIFF 3.
  std::int64_t channels = 0;
  // As stored: 1, 2, 4, 8 or 16 for PNG (the index depth for a palette), 8 for JPEG, 1, 2, 4, 8, 16, 32 or
  // 64 for TIFF (64: floats only).
  int bit_depth = 8;
  std::int64_t pages = 1;  // a multi-page TIFF's directories (at most 65536); PNG and JPEG 1
  bool floating = false;   // IEEE floating-point samples (TIFF only)
  bool is_signed = false;  // signed integer samples (TIFF only)

  bool operator==(const ImageInfo&) const = default;
};

struct ImageLimits {
  std::int64_t max_width = 16384, max_height = 16384;
};

struct Image {
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<std::uint8_t> pixels;  // [height, width, channels], row-major (HWC)

  bool operator==(const Image&) const = default;
};

// Only the header (PNG: the chunks before the first IDAT; JPEG: the markers before the first scan; TIFF: the
// directories, never a strip or tile): no pixel data is decoded or even read, so a preflight over thousands
// of files is cheap. The fields are those of `page` (a TIFF's directory; pages says how many there are).
// Errors as for read_image, except that damage in the pixel data is only found by reading it.
ImageInfo probe_image(const std::filesystem::path& path, const ImageLimits& limits = {},
                      std::int64_t page = 0);
ImageInfo probe_image_bytes(std::span<const std::byte> bytes, const std::string& name,
                            const ImageLimits& limits = {}, std::int64_t page = 0);

// 8-bit samples, channels as ImageInfo::channels says (a TIFF's first page). Gray PNGs and TIFFs of 1, 2 or 4
// bits are scaled to 0..255 (1 bit: 0/255); 16-bit samples become v8 = (v16 * 255 + 32767) / 65535 (rounded
// to nearest). A TIFF of 32-bit, floating-point or signed samples is refused (data): those are read with
// read_image_values. A min-is-white TIFF is inverted to min-is-black (v = max - v), a palette TIFF expanded
// to RGB. Gamma, colour profiles and JPEG EXIF orientation are ignored: the pixels as stored. The zlib
// checksum that ends a PNG's image data is only a warning to libpng (it has a CRC per chunk, which is
// checked: a CRC error in any chunk refuses the file). A JPEG that libjpeg had to patch up (truncated,
// corrupt entropy data) is refused; its harmless warnings (stray bytes between markers, an unknown JFIF
// revision) are not.
Image read_image(const std::filesystem::path& path, const ImageLimits& limits = {});
Image decode_image(std::span<const std::byte> bytes, const std::string& name, const ImageLimits& limits = {});

// The values API: the samples as stored, not scaled: 8-bit 0..255, 16-bit 0..65535, signed integers with
// their sign, 32-bit integers and floats as they are (a float holds integers exactly up to 2^24 = 16777216
// only: larger 32-bit integers lose their low bits; 64-bit floats are narrowed to float). What the 8-bit API
// scales stays scaled here: gray PNGs and TIFFs of 1, 2 or 4 bits give 0..255, palette images their 8-bit
// colours (bit_depth 8). JPEG gives 8-bit values, and so does a JPEG-compressed YCbCr TIFF (as RGB). A
// min-is-white TIFF is inverted to min-is-black: max - v for unsigned integers (max = 2^bits - 1), -1 - v for
// signed ones, -v for floats. `page` is a TIFF's page (directory) from 0; a page at or past the file's page
// count is Error(usage) naming the file, the page and the count.
struct ValueImage {
  std::int64_t height = 0, width = 0, channels = 0;
  int bit_depth = 8;          // of the values: 8, 16, 32 or 64 (1, 2, 4-bit gray and palettes give 8; 16 with
                              // floating: half floats)
  bool floating = false;      // stored as IEEE floats
  bool is_signed = false;     // stored as signed integers
  std::vector<float> values;  // [height, width, channels], row-major (HWC)
};

ValueImage read_image_values(const std::filesystem::path& path, std::int64_t page = 0,
                             const ImageLimits& limits = {});
ValueImage decode_image_values(std::span<const std::byte> bytes, const std::string& name,
                               std::int64_t page = 0, const ImageLimits& limits = {});

// A mask: the raw integer value of each pixel's first channel, not scaled, so that a 16-bit PNG holding
// class 3 gives 3 and a 1-bit PNG gives 0/1. A palette PNG gives its palette indices (as PASCAL VOC masks
// and PIL's mode "P" mean them), not colours. For RGB(A) masks, all_channels_equal says whether R, G and B
// agree everywhere (alpha is not compared); gray+alpha gives the gray value. JPEG is read too, but it is
// lossy: a 0/255 JPEG mask holds values near, not at, 0 and 255, and its channels rarely agree exactly.
// Values above 255 are kept (uint16) so that the caller can report them. A TIFF mask is 1, 2, 4, 8 or 16-bit
// unsigned or signed integers (a negative value is refused, data), min-is-white inverted as for images (so
// that what shows white holds the high value), a palette TIFF gives its indices; 32-bit and float masks are
// refused (data): masks are 8/16-bit class indices. `page` as for read_image_values.
struct MaskImage {
  std::int64_t height = 0, width = 0;
  std::vector<std::uint16_t> values;  // [height, width]
  bool all_channels_equal = true;     // false when an RGB(A) mask's R, G and B disagree somewhere
};

MaskImage read_mask(const std::filesystem::path& path, const ImageLimits& limits = {}, std::int64_t page = 0);
MaskImage decode_mask(std::span<const std::byte> bytes, const std::string& name,
                      const ImageLimits& limits = {}, std::int64_t page = 0);

// 8-bit PNG of 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels. write_png writes atomically (see
// atomic_file.h). An image with another channel count, a zero or negative size, a size over 2^31 - 1 or a
// pixel count that does not match its shape is unet::Error(usage).
void write_png(const std::filesystem::path& path, const Image& image);
std::vector<std::byte> encode_png(const Image& image);
// A 16-bit grayscale PNG of `values` ([height, width], row-major), as predict writes instance label images
// (an object id per pixel); read back by read_mask. Written atomically as write_png; errors as encode_png's.
void write_png16(const std::filesystem::path& path, std::int64_t height, std::int64_t width,
                 std::span<const std::uint16_t> values);
std::vector<std::byte> encode_png16(std::int64_t height, std::int64_t width,
                                    std::span<const std::uint16_t> values);
// A one-page grayscale TIFF of unsigned integers `values` ([height, width], row-major), as predict writes
// instance label images when asked for TIFF: 16-bit samples when every value fits, else 32-bit (a label image
// of more than 65535 objects), Adobe Deflate compressed with horizontal differencing; BigTIFF past 1 GiB of
// raw samples. Read back by read_image_values (and, at 16 bits, read_mask). Written atomically as write_png;
// a zero or negative size, a side over 2^31 - 1 or a count that does not match the shape is Error(usage).
void write_tiff_uint(const std::filesystem::path& path, std::int64_t height, std::int64_t width,
                     std::span<const std::uint32_t> values);
std::vector<std::byte> encode_tiff_uint(std::int64_t height, std::int64_t width,
                                        std::span<const std::uint32_t> values);

// Converts to `channels`, only along these rules (`name` is used in messages):
//   to 1: gray as is; gray+alpha: the gray; RGB and RGBA: luma, ITU-R BT.601,
//         (299 R + 587 G + 114 B) / 1000 rounded half up (alpha dropped)
//   to 3: gray and gray+alpha: the gray replicated; RGB as is; RGBA: RGB (alpha dropped)
//   to 4: as to 3, then alpha: the stored alpha, or 255 where there is none
//   to the same count: an exact copy (2 -> 2 included)
// Anything else (3 -> 2, 3 -> 5, an image of 0 or 5 channels) is unet::Error(data) naming the image and both
// counts.
Image convert_channels(const Image& image, std::int64_t channels, const std::string& name);

// Resizing, pixel-centre aligned (output pixel i maps to input coordinate (i + 0.5) * in / out - 0.5, as
// OpenCV and PyTorch's align_corners=False). Each axis on its own (the filters are separable):
//   resize_image          shrinking: area averaging (each output pixel is the mean of the input area it
//                         covers, partial pixels weighted by coverage, like OpenCV INTER_AREA); enlarging:
//                         bilinear, coordinates clamped at the borders (like INTER_LINEAR); equal: copied.
//                         Results are rounded half up.
//   resize_mask           nearest neighbour: input index floor((i + 0.5) * in / out), so that a class never
//                         blends into another (like OpenCV INTER_NEAREST_EXACT, PyTorch "nearest-exact");
//                         resize_labels alike, for instance labels (ids that must never blend either).
//   resize_probabilities  bilinear in both directions (like PyTorch's bilinear, align_corners=False,
//                         antialias=False), any channel count, HWC.
// The same size gives an exact copy. A zero or negative size, or data whose size does not match its shape, is
// unet::Error(usage).
Image resize_image(const Image& image, std::int64_t height, std::int64_t width);
std::vector<std::uint8_t> resize_mask(const std::vector<std::uint8_t>& mask, std::int64_t height,
                                      std::int64_t width, std::int64_t new_height, std::int64_t new_width);
std::vector<std::uint32_t> resize_labels(const std::vector<std::uint32_t>& labels, std::int64_t height,
                                         std::int64_t width, std::int64_t new_height, std::int64_t new_width);
std::vector<float> resize_probabilities(const std::vector<float>& map, std::int64_t height,
                                        std::int64_t width, std::int64_t channels, std::int64_t new_height,
                                        std::int64_t new_width);

}  // namespace unet
