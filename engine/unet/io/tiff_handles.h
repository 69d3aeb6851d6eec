// What the TIFF decoder (image_tiff.cpp) and encoder (image_tiff_encode.cpp) share of libtiff: per-handle
// error and warning handlers, which record the first error in the caller's TiffMessages and stop libtiff from
// calling its process-wide handlers (other threads decode at the same time), the arithmetic of a seek, and
// the deleters of libtiff's handles. Internal to io/.
#pragma once

#include <tiffio.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace unet::image_detail {

// libtiff's complaints for one call. Handlers return 1: libtiff then calls no global handler.
struct TiffMessages {
  char error[256] = {};
  bool has_error = false;

  void clear() noexcept {
    has_error = false;
    error[0] = '\0';
  }
};

// The module (a libtiff function's name) is left out: the message says what is wrong.
__attribute__((format(printf, 4, 0))) inline int on_tiff_error(TIFF*, void* user, const char*,
                                                               const char* format, va_list args) {
  auto& messages = *static_cast<TiffMessages*>(user);
  if (messages.has_error) return 1;  // the first error is the cause; later ones follow from it
  messages.has_error = true;
  std::vsnprintf(messages.error, sizeof messages.error, format, args);
  return 1;
}

inline int on_tiff_warning(TIFF*, void*, const char*, const char*, va_list) {
  return 1;  // unknown tags, odd but readable fields: no business of a training run
}

// What libtiff's seek proc answers for a seek that cannot be made.
inline constexpr toff_t kFailedSeek = static_cast<toff_t>(-1);

// Where a seek lands in a stream at `pos` of `size` bytes: `offset` from the start (SEEK_SET), `pos`
// (SEEK_CUR) or the end (SEEK_END); kFailedSeek past what an off_t addresses. A seek past the end is allowed
// (a writer fills the gap).
inline toff_t seek_target(std::uint64_t pos, std::uint64_t size, toff_t offset, int whence) noexcept {
  std::uint64_t base = 0;
  if (whence == SEEK_CUR) base = pos;
  if (whence == SEEK_END) base = size;
  std::uint64_t to = 0;
  if (__builtin_add_overflow(base, offset, &to) ||
      to > std::uint64_t{std::numeric_limits<std::int64_t>::max()})
    return kFailedSeek;
  return to;
}

struct OptionsFree {
  void operator()(TIFFOpenOptions* options) const noexcept { TIFFOpenOptionsFree(options); }
};
struct TiffClose {
  void operator()(TIFF* tif) const noexcept { TIFFClose(tif); }
};

}  // namespace unet::image_detail
