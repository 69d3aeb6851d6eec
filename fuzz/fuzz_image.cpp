// libFuzzer target: the PNG and JPEG decoders' front door (probe, decode as an image, decode as a mask) on
// any bytes, under small limits so that a header claiming a huge image must be refused before pixels are
// allocated. Refusals must be unet::Error; anything else escaping, a crash, a leak, undefined behaviour or an
// allocation past libFuzzer's limit is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "unet/core/error.h"
#include "unet/io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  unet::ImageLimits limits;
  limits.max_width = limits.max_height = 4096;
  try {
    const unet::ImageInfo info = unet::probe_image_bytes(bytes, "fuzz", limits);
    if (info.width <= 0 || info.height <= 0 || info.width > limits.max_width ||
        info.height > limits.max_height)
      __builtin_trap();  // probe accepted a size the limits refuse
  } catch (const unet::Error&) {
  }
  try {
    const unet::Image image = unet::decode_image(bytes, "fuzz", limits);
    if (image.pixels.size() != static_cast<std::size_t>(image.width * image.height * image.channels))
      __builtin_trap();
  } catch (const unet::Error&) {
  }
  try {
    (void)unet::decode_mask(bytes, "fuzz", limits);
  } catch (const unet::Error&) {
  }
  return 0;
}
