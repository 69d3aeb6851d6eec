// JPEG decoding through libjpeg-turbo, for image.cpp. The one non-obvious rule: libjpeg's default error
// handler calls exit() and its data source pads a truncated file with a fake end marker and a warning. Here
// every error and every warning that means damaged pixels longjmp out of the library to a setjmp in a small
// guarded_* function that owns no C++ object (the decompressor's owner and the pixel buffer live in
// decode_jpeg, outside the jump), and the data source refuses to invent bytes: running out is "truncated".
#include <cstdio>  // jpeglib.h needs FILE declared first

#include <jerror.h>
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>

#include "unet/core/error.h"
#include "unet/io/image_codec.h"

namespace unet::image_detail {
namespace {

// Everything libjpeg and the callbacks touch; plain data, see the file comment.
struct JpegContext {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr errors;
  jpeg_source_mgr source;
  std::jmp_buf jump;
  ByteReader* reader;
  Failure failure;
  char message[JMSG_LENGTH_MAX];
  bool created;
  // Given to guarded_read_pixels.
  J_COLOR_SPACE out_color_space;
  int expected_components;
  std::uint8_t* pixels;
  std::size_t row_bytes;
};

template <class Cinfo>
JpegContext& context_of(Cinfo cinfo) {
  return *static_cast<JpegContext*>(cinfo->client_data);
}

[[noreturn]] void fail(JpegContext& context, Failure failure, const char* message) {
  if (context.failure == Failure::none) {
    context.failure = failure;
    std::snprintf(context.message, sizeof context.message, "%s", message);
  }
  std::longjmp(context.jump, 1);
}

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  JpegContext& context = context_of(cinfo);
  char text[JMSG_LENGTH_MAX] = {};
  if (cinfo->err->msg_code == JERR_BAD_PRECISION) {
    std::snprintf(text, sizeof text, "%d-bit samples (only 8-bit JPEG is read)", cinfo->err->msg_parm.i[0]);
    fail(context, Failure::unsupported, text);
  }
  (*cinfo->err->format_message)(cinfo, text);
  // The caller says "corrupt JPEG data: " already.
  constexpr char kPrefix[] = "Corrupt JPEG data: ";
  const bool prefixed = std::strncmp(text, kPrefix, sizeof kPrefix - 1) == 0;
  fail(context, Failure::corrupt, prefixed ? text + sizeof kPrefix - 1 : text);
}

// Trace messages (level >= 0) are dropped. Warnings (level -1) are errors, except the few that leave every
// pixel as the encoder meant it.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  switch (cinfo->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:  // stray bytes between markers, outside the image data
    case JWRN_JFIF_MAJOR:       // a JFIF version number from the future
    case JWRN_ADOBE_XFORM:      // an unknown Adobe transform code; the component count decides
    case JWRN_BOGUS_ICC:        // a bad ICC profile marker, which is not used here
      return;
    default:
      on_jpeg_error(cinfo);
  }
}

void on_jpeg_output(j_common_ptr) {}

void source_init(j_decompress_ptr) {}
void source_term(j_decompress_ptr) {}

// Hands libjpeg the reader's whole window (libjpeg has consumed the previous one when it asks again).
boolean source_fill(j_decompress_ptr cinfo) {
  JpegContext& context = context_of(cinfo);
  ByteReader& reader = *context.reader;
  if (reader_ensure(reader, 1) == 0) {
    fail(context, reader.read_errno != 0 ? Failure::read_error : Failure::truncated, "");
  }
  context.source.next_input_byte = reader.data + reader.pos;
  context.source.bytes_in_buffer = reader.size - reader.pos;
  reader.pos = reader.size;
  return TRUE;
}

void source_skip(j_decompress_ptr cinfo, long count) {
  if (count <= 0) return;
  jpeg_source_mgr& source = *cinfo->src;
  auto remaining = static_cast<std::size_t>(count);
  while (remaining > source.bytes_in_buffer) {
    remaining -= source.bytes_in_buffer;
    source.bytes_in_buffer = 0;
    source_fill(cinfo);
  }
  source.next_input_byte += remaining;
  source.bytes_in_buffer -= remaining;
}

bool guarded_read_header(JpegContext* context) {
  if (setjmp(context->jump) != 0) return false;
  context->created = true;  // jpeg_destroy is safe on a half-created (zeroed) struct
  jpeg_create_decompress(&context->cinfo);
  context->cinfo.src = &context->source;
  jpeg_read_header(&context->cinfo, TRUE);
  return true;
}

bool guarded_read_pixels(JpegContext* context) {
  if (setjmp(context->jump) != 0) return false;
  j_decompress_ptr cinfo = &context->cinfo;
  cinfo->out_color_space = context->out_color_space;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_width != cinfo->image_width || cinfo->output_height != cinfo->image_height ||
      cinfo->output_components != context->expected_components) {
    fail(*context, Failure::corrupt, "unexpected output layout");
  }
  constexpr JDIMENSION kBatch = 16;
  JSAMPROW rows[kBatch];
  while (cinfo->output_scanline < cinfo->output_height) {
    const JDIMENSION n = std::min(kBatch, cinfo->output_height - cinfo->output_scanline);
    for (JDIMENSION i = 0; i < n; ++i) {
      rows[i] = context->pixels + (std::size_t{cinfo->output_scanline} + i) * context->row_bytes;
    }
    jpeg_read_scanlines(cinfo, rows, n);
  }
  jpeg_finish_decompress(cinfo);  // reads on to the end marker: a file cut after the last row is truncated
  return true;
}

// Owns the context and destroys the decompressor however decode_jpeg leaves.
class JpegDecoder {
 public:
  explicit JpegDecoder(ByteReader& reader) {
    std::memset(&context_, 0, sizeof context_);
    context_.reader = &reader;
    context_.failure = Failure::none;
    context_.cinfo.err = jpeg_std_error(&context_.errors);
    context_.errors.error_exit = on_jpeg_error;
    context_.errors.emit_message = on_jpeg_message;
    context_.errors.output_message = on_jpeg_output;
    context_.cinfo.client_data = &context_;
    context_.source.init_source = source_init;
    context_.source.fill_input_buffer = source_fill;
    context_.source.skip_input_data = source_skip;
    context_.source.resync_to_restart = jpeg_resync_to_restart;
    context_.source.term_source = source_term;
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
  ~JpegDecoder() {
    if (context_.created) jpeg_destroy_decompress(&context_.cinfo);
  }

  JpegContext* context() noexcept { return &context_; }

 private:
  JpegContext context_;
};

}  // namespace

Decoded decode_jpeg(ByteReader& reader, const std::string& name, DecodeMode mode, const ImageLimits& limits) {
  JpegDecoder decoder(reader);
  JpegContext& context = *decoder.context();
  if (!guarded_read_header(&context)) throw_failure(name, "JPEG", context.failure, context.message, reader);
  const jpeg_decompress_struct& cinfo = context.cinfo;
  check_limits(name, cinfo.image_width, cinfo.image_height, limits);
  // Every 8x8 block's DC coefficient takes a Huffman code of at least one bit, so a file has at least a bit
  // per block of pixels (8 x 8 x 3 decoded bytes): 1536:1 at best. Arithmetic coding has no such floor.
  if (mode != DecodeMode::header && !cinfo.arith_code)
    check_input_can_hold(name, "JPEG", std::uint64_t{cinfo.image_width} * cinfo.image_height * 3, 1536,
                         reader);

  std::int64_t channels = 0;
  if (cinfo.num_components == 1) {
    context.out_color_space = JCS_GRAYSCALE;
    channels = 1;
  } else if (cinfo.num_components == 3 &&
             (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB)) {
    context.out_color_space = JCS_RGB;
    channels = 3;
  } else {
    const char* what = cinfo.jpeg_color_space == JCS_CMYK   ? "CMYK colour"
                       : cinfo.jpeg_color_space == JCS_YCCK ? "YCCK (CMYK) colour"
                                                            : "an unknown colour space";
    throw Error(ErrorKind::unsupported,
                name + ": unsupported JPEG: " + what + " with " + std::to_string(cinfo.num_components) +
                    " components (only gray and RGB JPEG are read; convert it to RGB)");
  }

  Decoded out;
  out.info =
      ImageInfo{ImageFormat::jpeg, cinfo.image_width, cinfo.image_height, channels, cinfo.data_precision};
  if (mode == DecodeMode::header) return out;

  out.channels = channels;
  out.sample_bytes = 1;
  const std::uint64_t row_bytes = std::uint64_t{cinfo.image_width} * static_cast<std::uint64_t>(channels);
  out.samples = allocate_pixels(name, cinfo.image_height, row_bytes);
  context.expected_components = static_cast<int>(channels);
  context.pixels = out.samples.data();
  context.row_bytes = static_cast<std::size_t>(row_bytes);
  if (!guarded_read_pixels(&context)) throw_failure(name, "JPEG", context.failure, context.message, reader);
  return out;
}

}  // namespace unet::image_detail
