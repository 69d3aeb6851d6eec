// Small fixed-capacity shapes: 1-D (biases, flat slabs) up to 4-D (weights, activations).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "unet/core/checked_math.h"
#include "unet/core/error.h"

namespace unet {

struct Shape {
  static constexpr int max_rank = 4;
  std::array<std::int64_t, max_rank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d) {
    UNET_CHECK(d.size() <= static_cast<std::size_t>(max_rank), usage,
               "a shape of " + std::to_string(d.size()) + " dimensions; at most 4 are supported");
    for (auto v : d) dims[static_cast<std::size_t>(rank++)] = v;
  }

  std::int64_t operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims[static_cast<std::size_t>(i)]; }
  // Throws when the product does not fit int64 (shapes can come from user numbers).
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n = checked_mul(n, dims[static_cast<std::size_t>(i)], "a tensor");
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[static_cast<std::size_t>(i)] != o.dims[static_cast<std::size_t>(i)]) return false;
    return true;
  }
  // "[8, 16, 128, 128]"
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims[static_cast<std::size_t>(i)]);
    }
    return s + "]";
  }
};

// The logical shape of an activation, whatever its layout.
struct ActShape {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t numel() const {
    return checked_mul(checked_mul(checked_mul(n, c, "an activation"), h, "an activation"), w,
                       "an activation");
  }
  bool operator==(const ActShape&) const = default;
  Shape shape() const { return Shape{n, c, h, w}; }
  std::string str() const {
    return "[" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
           std::to_string(w) + "]";
  }
};

}  // namespace unet
