// Products of sizes that come from user numbers (batch x channels x pixels, epochs x steps per epoch, a
// count of bytes): they must fail with a message, never wrap around into a small or negative number that
// some later loop or allocation takes at its word.
#pragma once

#include <cstdint>
#include <string>

#include "unet/core/error.h"

namespace unet {

// a * b, or an Error of kind `unsupported` saying that `what` is too large to count.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what = "a size") {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    throw Error(ErrorKind::unsupported,
                std::string(what) + " is too large: " + std::to_string(a) + " x " + std::to_string(b) +
                    " does not fit a 64-bit integer",
                {}, "use smaller sizes (batch, image size, model width, steps)");
  return product;
}

inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what = "a size") {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw Error(ErrorKind::unsupported,
                std::string(what) + " is too large: " + std::to_string(a) + " + " + std::to_string(b) +
                    " does not fit a 64-bit integer",
                {}, "use smaller sizes (batch, image size, model width, steps)");
  return sum;
}

}  // namespace unet
