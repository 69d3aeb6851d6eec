// TIFF encoding through libtiff, for image.h's encode_tiff_uint: one page, one channel of unsigned integers
// in 16 or 32 bits, Adobe Deflate with horizontal differencing (label images are runs of equal ids, which
// that pair shrinks to a few per cent), in strips of about 256 KiB. As in the decoder (image_tiff.cpp),
// libtiff is opened with this call's own error and warning handlers (tiff_handles.h) and writes into memory
// through this file's procs, so it never prints or touches process-wide state.
#include <tiffio.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "unet/core/error.h"
#include "unet/io/image.h"
#include "unet/io/image_codec.h"
#include "unet/io/tiff_handles.h"

namespace unet {

namespace {

using image_detail::on_tiff_error;
using image_detail::on_tiff_warning;
using image_detail::OptionsFree;
using image_detail::TiffClose;
using image_detail::TiffMessages;

// The file as it is written: libtiff seeks back to patch offsets, so a position apart from the size.
struct TiffSink {
  std::vector<std::byte> bytes;
  std::uint64_t pos = 0;
};

TiffSink& sink_of(thandle_t handle) {
  return *static_cast<TiffSink*>(handle);
}

tmsize_t on_sink_read(thandle_t handle, void* out, tmsize_t count) {
  TiffSink& sink = sink_of(handle);
  if (count <= 0 || sink.pos >= sink.bytes.size()) return 0;
  const auto n = static_cast<std::size_t>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(count), sink.bytes.size() - sink.pos));
  std::memcpy(out, sink.bytes.data() + sink.pos, n);
  sink.pos += n;
  return static_cast<tmsize_t>(n);
}

tmsize_t on_sink_write(thandle_t handle, void* in, tmsize_t count) {
  TiffSink& sink = sink_of(handle);
  if (count < 0) return -1;
  const std::uint64_t end = sink.pos + static_cast<std::uint64_t>(count);
  try {
    if (end > sink.bytes.size()) sink.bytes.resize(end);  // a seek past the end leaves zeros between
  } catch (const std::bad_alloc&) {
    return -1;  // libtiff reports a failed write
  }
  std::memcpy(sink.bytes.data() + sink.pos, in, static_cast<std::size_t>(count));
  sink.pos = end;
  return count;
}

toff_t on_sink_seek(thandle_t handle, toff_t offset, int whence) {
  TiffSink& sink = sink_of(handle);
  const toff_t to = image_detail::seek_target(sink.pos, sink.bytes.size(), offset, whence);
  if (to != image_detail::kFailedSeek) sink.pos = to;
  return to;
}

int on_sink_close(thandle_t) {
  return 0;  // the bytes are the caller's
}

toff_t on_sink_size(thandle_t handle) {
  return sink_of(handle).bytes.size();
}

int on_sink_map(thandle_t, void**, toff_t*) {
  return 0;  // no mapping
}

void on_sink_unmap(thandle_t, void*, toff_t) {}

[[noreturn]] void fail(const TiffMessages& messages, const char* step) {
  throw Error(ErrorKind::io, std::string("encode_tiff_uint: libtiff failed to ") + step +
                                 (messages.has_error ? std::string(": ") + messages.error : std::string()));
}

template <typename Sample>
void write_rows(TIFF* tif, const TiffMessages& messages, std::int64_t height, std::int64_t width,
                std::span<const std::uint32_t> values) {
  std::vector<Sample> row(static_cast<std::size_t>(width));
  for (std::int64_t y = 0; y < height; ++y) {
    const std::uint32_t* from = values.data() + y * width;
    std::transform(from, from + width, row.begin(), [](std::uint32_t v) { return static_cast<Sample>(v); });
    if (TIFFWriteScanline(tif, row.data(), static_cast<std::uint32_t>(y), 0) < 0)
      fail(messages, "write a row");
  }
}

}  // namespace

std::vector<std::byte> encode_tiff_uint(std::int64_t height, std::int64_t width,
                                        std::span<const std::uint32_t> values) {
  image_detail::check_values_shape("encode_tiff_uint", height, width, values.size(),
                                   std::numeric_limits<std::int32_t>::max());
  const std::uint32_t largest = *std::max_element(values.begin(), values.end());
  const std::uint16_t bits = largest <= std::numeric_limits<std::uint16_t>::max() ? 16 : 32;
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(width) * (bits / 8);
  // Classic TIFF addresses 4 GiB; past a quarter of that in raw samples, BigTIFF ("8") keeps every offset
  // addressable whatever Deflate leaves of them.
  const bool big = row_bytes * static_cast<std::uint64_t>(height) > (std::uint64_t{1} << 30);

  TiffSink sink;
  TiffMessages messages;
  std::unique_ptr<TIFFOpenOptions, OptionsFree> options(TIFFOpenOptionsAlloc());
  if (!options) throw Error(ErrorKind::out_of_memory, "encode_tiff_uint: cannot create a libtiff encoder");
  TIFFOpenOptionsSetErrorHandlerExtR(options.get(), on_tiff_error, &messages);
  TIFFOpenOptionsSetWarningHandlerExtR(options.get(), on_tiff_warning, &messages);
  // "m": no memory mapping (the procs have none).
  std::unique_ptr<TIFF, TiffClose> tif(
      TIFFClientOpenExt("image", big ? "w8m" : "wm", &sink, on_sink_read, on_sink_write, on_sink_seek,
                        on_sink_close, on_sink_size, on_sink_map, on_sink_unmap, options.get()));
  if (!tif) fail(messages, "start a TIFF");
  constexpr std::uint64_t kStripBytes = std::uint64_t{256} << 10;
  const auto rows_per_strip = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(kStripBytes / row_bytes, 1, static_cast<std::uint64_t>(height)));
  const bool fields =
      TIFFSetField(tif.get(), TIFFTAG_IMAGEWIDTH, static_cast<std::uint32_t>(width)) &&
      TIFFSetField(tif.get(), TIFFTAG_IMAGELENGTH, static_cast<std::uint32_t>(height)) &&
      TIFFSetField(tif.get(), TIFFTAG_BITSPERSAMPLE, bits) &&
      TIFFSetField(tif.get(), TIFFTAG_SAMPLESPERPIXEL, std::uint16_t{1}) &&
      TIFFSetField(tif.get(), TIFFTAG_SAMPLEFORMAT, std::uint16_t{SAMPLEFORMAT_UINT}) &&
      TIFFSetField(tif.get(), TIFFTAG_PHOTOMETRIC, std::uint16_t{PHOTOMETRIC_MINISBLACK}) &&
      TIFFSetField(tif.get(), TIFFTAG_PLANARCONFIG, std::uint16_t{PLANARCONFIG_CONTIG}) &&
      TIFFSetField(tif.get(), TIFFTAG_COMPRESSION, std::uint16_t{COMPRESSION_ADOBE_DEFLATE}) &&
      TIFFSetField(tif.get(), TIFFTAG_PREDICTOR, std::uint16_t{PREDICTOR_HORIZONTAL}) &&
      TIFFSetField(tif.get(), TIFFTAG_ROWSPERSTRIP, rows_per_strip);
  if (!fields) fail(messages, "set the TIFF's fields");
  if (bits == 16)
    write_rows<std::uint16_t>(tif.get(), messages, height, width, values);
  else
    write_rows<std::uint32_t>(tif.get(), messages, height, width, values);
  if (!TIFFWriteDirectory(tif.get())) fail(messages, "finish the TIFF");
  tif.reset();
  return std::move(sink.bytes);
}

void write_tiff_uint(const std::filesystem::path& path, std::int64_t height, std::int64_t width,
                     std::span<const std::uint32_t> values) {
  image_detail::write_encoded(path, [&] { return encode_tiff_uint(height, width, values); });
}

}  // namespace unet
