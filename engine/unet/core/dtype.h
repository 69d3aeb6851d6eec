// Element types and activation layouts that cross the backend boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace unet {

enum class DType : std::uint8_t { f32, f16, bf16, u8, i32, i64, f64 };

constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::u8:
      return 1;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::i64:
    case DType::f64:
      return 8;
  }
  return 0;
}

constexpr std::string_view to_string(DType t) noexcept {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::u8:
      return "u8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::f64:
      return "f64";
  }
  return "?";
}

// Memory order of a 4-D activation [N, C, H, W]. NHWC (channels last) is what oneDNN's fastest CPU kernels
// and cuDNN's tensor-core kernels want, so it is the engine's default.
enum class Layout : std::uint8_t { nchw, nhwc };

constexpr std::string_view to_string(Layout l) noexcept {
  return l == Layout::nchw ? "nchw" : "nhwc";
}

}  // namespace unet
