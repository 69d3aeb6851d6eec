// libFuzzer target: the PNG, JPEG and TIFF decoders' front door (probe, decode as an image, as values page by
// page, as a mask) on any bytes, under small limits so that a header claiming a huge image must be refused
// before pixels are allocated. Refusals must be unet::Error; anything else escaping, a crash, a leak,
// undefined behaviour or an allocation past libFuzzer's limit is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "unet/core/error.h"
#include "unet/io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  unet::ImageLimits limits;
  limits.max_width = limits.max_height = 4096;
  std::int64_t pages = 0;  // 0 while unknown: probe refused the first page, the others may still be read
  try {
    const unet::ImageInfo info = unet::probe_image_bytes(bytes, "fuzz", limits);
    if (info.width <= 0 || info.height <= 0 || info.width > limits.max_width ||
        info.height > limits.max_height || info.pages < 1 || info.channels < 1 || info.channels > 64)
      __builtin_trap();  // probe accepted a size the limits refuse, or reported no page or channel
    pages = info.pages;
  } catch (const unet::Error&) {
  }
  try {
    const unet::Image image = unet::decode_image(bytes, "fuzz", limits);
    if (image.pixels.size() != static_cast<std::size_t>(image.width * image.height * image.channels))
      __builtin_trap();
  } catch (const unet::Error&) {
  }
  // The first few pages (and the one past the last, which must be refused).
  for (std::int64_t page = 0; page <= std::min<std::int64_t>(pages > 0 ? pages : 3, 3); ++page) {
    try {
      const unet::ValueImage values = unet::decode_image_values(bytes, "fuzz", page, limits);
      if ((pages > 0 && page >= pages) ||
          values.values.size() != static_cast<std::size_t>(values.width * values.height * values.channels))
        __builtin_trap();
    } catch (const unet::Error&) {
    }
  }
  try {
    (void)unet::decode_mask(bytes, "fuzz", limits, pages > 1 ? 1 : 0);
  } catch (const unet::Error&) {
  }
  return 0;
}
