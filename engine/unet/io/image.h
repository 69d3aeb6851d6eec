// Reading and writing the images and masks users bring: PNG (libpng) and baseline/progressive JPEG
// (libjpeg-turbo) in, 8-bit PNG out, plus the explicit channel conversions and resizes the data layer may ask
// for. Nothing here converts or resizes on its own. The one non-obvious rule: the format is decided by the
// file's first bytes, never its extension, and every failure is a unet::Error naming the file and its
// problem. Dimensions are checked against ImageLimits from the header, before any pixel buffer exists, and
// no libpng/libjpeg error or warning ever reaches exit(), abort() or stderr.
//
// Error kinds: io for files that cannot be read or are damaged (missing, empty, truncated, corrupt data, CRC
// errors); data for valid files that do not fit (over the limits, a conversion that is not defined);
// unsupported for formats not read here (BMP, TIFF, GIF, WebP..., 12-bit or CMYK JPEG); usage for calls that
// break a precondition (an Image whose pixel count does not match its shape).
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

enum class ImageFormat { png, jpeg };

const char* to_string(ImageFormat format) noexcept;  // "PNG", "JPEG"

struct ImageInfo {
  ImageFormat format = ImageFormat::png;
  std::int64_t width = 0, height = 0;
  // The channels read_image returns: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA. A palette PNG counts as 3, or 4
  // when it has a tRNS chunk (it is expanded); the colour-key tRNS of a gray or RGB PNG adds no channel.
  std::int64_t channels = 0;
  int bit_depth = 8;  // as stored: 1, 2, 4, 8 or 16 for PNG (the index depth for a palette), 8 for JPEG

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

// Only the header (PNG: the chunks before the first IDAT; JPEG: the markers before the first scan): no pixel
// data is decoded or even read, so a preflight over thousands of files is cheap. Errors as for read_image,
// except that damage in the pixel data is only found by read_image.
ImageInfo probe_image(const std::filesystem::path& path, const ImageLimits& limits = {});
ImageInfo probe_image_bytes(std::span<const std::byte> bytes, const std::string& name,
                            const ImageLimits& limits = {});

// 8-bit samples, channels as ImageInfo::channels says. Gray PNGs of 1, 2 or 4 bits are scaled to 0..255
// (1 bit: 0/255); 16-bit samples become v8 = (v16 * 255 + 32767) / 65535 (rounded to nearest). Gamma, colour
// profiles and JPEG EXIF orientation are ignored: the pixels as stored. The zlib checksum that ends a PNG's
// image data is only a warning to libpng (it has a CRC per chunk, which is checked: a CRC error in any chunk
// refuses the file). A JPEG that libjpeg had to patch up (truncated, corrupt entropy data) is refused; its
// harmless warnings (stray bytes between markers, an unknown JFIF revision) are not.
Image read_image(const std::filesystem::path& path, const ImageLimits& limits = {});
Image decode_image(std::span<const std::byte> bytes, const std::string& name, const ImageLimits& limits = {});

// A mask: the raw integer value of each pixel's first channel, not scaled, so that a 16-bit PNG holding
// class 3 gives 3 and a 1-bit PNG gives 0/1. A palette PNG gives its palette indices (as PASCAL VOC masks
// and PIL's mode "P" mean them), not colours. For RGB(A) masks, all_channels_equal says whether R, G and B
// agree everywhere (alpha is not compared); gray+alpha gives the gray value. JPEG is read too, but it is
// lossy: a 0/255 JPEG mask holds values near, not at, 0 and 255, and its channels rarely agree exactly.
// Values above 255 are kept (uint16) so that the caller can report them.
struct MaskImage {
  std::int64_t height = 0, width = 0;
  std::vector<std::uint16_t> values;  // [height, width]
  bool all_channels_equal = true;     // false when an RGB(A) mask's R, G and B disagree somewhere
};

MaskImage read_mask(const std::filesystem::path& path, const ImageLimits& limits = {});
MaskImage decode_mask(std::span<const std::byte> bytes, const std::string& name,
                      const ImageLimits& limits = {});

// 8-bit PNG of 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels. write_png writes atomically (see
// atomic_file.h). An image with another channel count, a zero or negative size, a size over 2^31 - 1 or a
// pixel count that does not match its shape is unet::Error(usage).
void write_png(const std::filesystem::path& path, const Image& image);
std::vector<std::byte> encode_png(const Image& image);

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
//                         blends into another (like OpenCV INTER_NEAREST_EXACT, PyTorch "nearest-exact").
//   resize_probabilities  bilinear in both directions (like PyTorch's bilinear, align_corners=False,
//                         antialias=False), any channel count, HWC.
// The same size gives an exact copy. A zero or negative size, or data whose size does not match its shape, is
// unet::Error(usage).
Image resize_image(const Image& image, std::int64_t height, std::int64_t width);
std::vector<std::uint8_t> resize_mask(const std::vector<std::uint8_t>& mask, std::int64_t height,
                                      std::int64_t width, std::int64_t new_height, std::int64_t new_width);
std::vector<float> resize_probabilities(const std::vector<float>& map, std::int64_t height,
                                        std::int64_t width, std::int64_t channels, std::int64_t new_height,
                                        std::int64_t new_width);

}  // namespace unet
