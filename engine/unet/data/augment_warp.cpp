// warp_patch: the map from output pixel to source coordinate is built here (an affine part and the elastic
// field that cv::resize interpolates from the draw's grid) and cv::remap resamples through it. cv::remap
// keeps coordinates in 16 bits, so it reads a view of the source region the patch can reach (the bounding box
// of the map), never the whole image: a 40000-pixel-wide slide works as well as a 256-pixel tile, and the
// region is what limits a patch.
#include "unet/data/augment_warp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "unet/core/error.h"

namespace unet {

namespace {

constexpr std::int64_t kRemapLimit = 32767;  // cv::remap's coordinates (and so its images) are 16-bit

struct Offset {
  double y = 0, x = 0;
};

// The linear part of the map from an output offset to a source offset:
// source dy = yy * dy + yx * dx, source dx = xy * dy + xx * dx.
struct Linear {
  double yy = 1, yx = 0, xy = 0, xx = 1;
  Offset operator()(Offset d) const { return {yy * d.y + yx * d.x, xy * d.y + xx * d.x}; }
};

// An offset in the turned and flipped patch, taken back to the source's orientation: data/augment.h flips
// left-right, then top-bottom, then turns counter-clockwise, so the turns are undone first.
Offset undo_turns(const SpatialDraw& draw, Offset p) {
  const int turns = ((draw.rotate90 % 4) + 4) % 4;
  for (int t = 0; t < turns; ++t) p = {p.x, -p.y};  // one clockwise quarter turn
  if (draw.flip_v) p.y = -p.y;
  if (draw.flip_h) p.x = -p.x;
  return p;
}

Linear source_map(const SpatialDraw& draw) {
  // Undo the scaling, then the counter-clockwise rotation (a rotation by -angle), then the turns. Read off as
  // the images of the two unit offsets.
  const double c = std::cos(draw.angle_rad) / draw.scale, s = std::sin(draw.angle_rad) / draw.scale;
  const auto through = [&](Offset d) { return undo_turns(draw, {c * d.y + s * d.x, -s * d.y + c * d.x}); };
  const Offset unit_y = through({1, 0}), unit_x = through({0, 1});
  return {unit_y.y, unit_x.y, unit_y.x, unit_x.x};
}

bool is_whole(double v) {
  return v == std::floor(v);
}

void check_dimensions(std::int64_t height, std::int64_t width, std::int64_t channels,
                      const std::uint8_t* mask, const SpatialDraw& draw, std::int64_t out_h,
                      std::int64_t out_w, const std::uint8_t* out_mask) {
  const auto dims = [](std::int64_t h, std::int64_t w) {
    return std::to_string(h) + "x" + std::to_string(w);
  };
  UNET_CHECK(height >= 1 && width >= 1 && channels >= 1 && channels <= CV_CN_MAX, usage,
             "warp_patch: source " + dims(height, width) + "x" + std::to_string(channels) +
                 ": each side at least 1, at most " + std::to_string(CV_CN_MAX) + " channels");
  UNET_CHECK(out_h >= 1 && out_w >= 1 && out_h < kRemapLimit && out_w < kRemapLimit, usage,
             "warp_patch: a patch of " + dims(out_h, out_w) + ": each side from 1 to " +
                 std::to_string(kRemapLimit - 1));
  UNET_CHECK((mask == nullptr) == (out_mask == nullptr), usage,
             "warp_patch: a mask needs its output and an output its mask");
  const auto points = static_cast<std::size_t>(std::max(draw.grid, 0)) * static_cast<std::size_t>(draw.grid);
  UNET_CHECK(draw.elastic_dy.size() == draw.elastic_dx.size() &&
                 (draw.elastic_dy.empty() || (draw.grid >= 1 && draw.elastic_dy.size() == points)),
             usage,
             "warp_patch: an elastic grid of " + std::to_string(draw.grid) + " per side with " +
                 std::to_string(draw.elastic_dy.size()) + " and " + std::to_string(draw.elastic_dx.size()) +
                 " displacements");
}

// The fast path: every output pixel reads one source pixel (an integer map), copied as it is.
template <typename T>
void permute_patch(const T* source, std::int64_t height, std::int64_t width, std::int64_t depth, Offset first,
                   const Linear& m, T fill, std::int64_t out_h, std::int64_t out_w, T* out) {
  const auto y0 = static_cast<std::int64_t>(first.y), x0 = static_cast<std::int64_t>(first.x);
  const auto yy = static_cast<std::int64_t>(m.yy), yx = static_cast<std::int64_t>(m.yx);
  const auto xy = static_cast<std::int64_t>(m.xy), xx = static_cast<std::int64_t>(m.xx);
  for (std::int64_t i = 0; i < out_h; ++i) {
    for (std::int64_t j = 0; j < out_w; ++j, out += depth) {
      const std::int64_t y = y0 + yy * i + yx * j, x = x0 + xy * i + xx * j;
      if (y < 0 || y >= height || x < 0 || x >= width) {
        std::fill(out, out + depth, fill);
      } else {
        const T* from = source + (y * width + x) * depth;
        std::copy(from, from + depth, out);
      }
    }
  }
}

// The elastic field's component over the patch: the grid interpolated bicubically.
cv::Mat elastic_field(const std::vector<float>& grid_values, int grid, std::int64_t out_h,
                      std::int64_t out_w) {
  // cv::Mat takes a non-const pointer; cv::resize only reads its input.
  const cv::Mat coarse(grid, grid, CV_32F, const_cast<float*>(grid_values.data()));
  cv::Mat field;
  cv::resize(coarse, field, cv::Size(static_cast<int>(out_w), static_cast<int>(out_h)), 0, 0,
             cv::INTER_CUBIC);
  return field;
}

// The source rows or columns [begin, end) that coordinates in [low, high] can read (bilinear reads the next
// pixel too), within [0, size).
struct Span {
  std::int64_t begin = 0, end = 0;
};
Span reach(double low, double high, std::int64_t size) {
  const double begin = std::max(0.0, std::floor(low) - 1),
               end = std::min(static_cast<double>(size), std::ceil(high) + 2);
  return begin < end ? Span{static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end)} : Span{};
}

}  // namespace

void warp_patch(const float* image, std::int64_t height, std::int64_t width, std::int64_t channels,
                const std::uint8_t* mask, double centre_y, double centre_x, const SpatialDraw& draw,
                float image_fill, std::uint8_t mask_fill, std::int64_t out_h, std::int64_t out_w,
                float* out_image, std::uint8_t* out_mask) {
  check_dimensions(height, width, channels, mask, draw, out_h, out_w, out_mask);
  const Linear m = source_map(draw);
  const Offset centre_out{static_cast<double>(out_h - 1) / 2, static_cast<double>(out_w - 1) / 2};
  // Where output pixel (0, 0) reads.
  const Offset first_offset = m({-centre_out.y, -centre_out.x});
  const Offset first{centre_y + first_offset.y, centre_x + first_offset.x};

  const bool elastic = !draw.elastic_dy.empty();
  if (draw.angle_rad == 0 && draw.scale == 1 && !elastic && is_whole(first.y) && is_whole(first.x)) {
    permute_patch(image, height, width, channels, first, m, image_fill, out_h, out_w, out_image);
    if (mask) permute_patch(mask, height, width, 1, first, m, mask_fill, out_h, out_w, out_mask);
    return;
  }

  cv::Mat field_y, field_x;
  double field_min_y = 0, field_max_y = 0, field_min_x = 0, field_max_x = 0;
  if (elastic) {
    field_y = elastic_field(draw.elastic_dy, draw.grid, out_h, out_w);
    field_x = elastic_field(draw.elastic_dx, draw.grid, out_h, out_w);
    cv::minMaxLoc(field_y, &field_min_y, &field_max_y);
    cv::minMaxLoc(field_x, &field_min_x, &field_max_x);
  }
  // The affine part's extremes are at the patch's corners; the field moves them by at most its extremes.
  double min_y = first.y, max_y = first.y, min_x = first.x, max_x = first.x;
  for (const Offset corner :
       {Offset{0, static_cast<double>(out_w - 1)}, Offset{static_cast<double>(out_h - 1), 0},
        Offset{static_cast<double>(out_h - 1), static_cast<double>(out_w - 1)}}) {
    const Offset at = m(corner);
    min_y = std::min(min_y, first.y + at.y);
    max_y = std::max(max_y, first.y + at.y);
    min_x = std::min(min_x, first.x + at.x);
    max_x = std::max(max_x, first.x + at.x);
  }
  const Span rows = reach(min_y + field_min_y, max_y + field_max_y, height);
  const Span cols = reach(min_x + field_min_x, max_x + field_max_x, width);

  if (rows.begin == rows.end || cols.begin == cols.end) {  // the patch lies wholly outside the source
    std::fill(out_image, out_image + out_h * out_w * channels, image_fill);
    if (out_mask) std::fill(out_mask, out_mask + out_h * out_w, mask_fill);
    return;
  }
  UNET_CHECK(rows.end - rows.begin < kRemapLimit && cols.end - cols.begin < kRemapLimit, usage,
             "warp_patch: the patch reads a source region of " + std::to_string(rows.end - rows.begin) + "x" +
                 std::to_string(cols.end - cols.begin) + " pixels; OpenCV's remap reads at most " +
                 std::to_string(kRemapLimit - 1) + " a side (a smaller patch or scale factors nearer 1)");

  // The map, relative to the region's corner: computed in double, so that a far corner of a large image keeps
  // its fractions, and stored as the float maps remap takes.
  const cv::Size out_size(static_cast<int>(out_w), static_cast<int>(out_h));
  cv::Mat map_y(out_size, CV_32FC1), map_x(out_size, CV_32FC1);
  const double base_y = first.y - static_cast<double>(rows.begin),
               base_x = first.x - static_cast<double>(cols.begin);
  for (int i = 0; i < out_size.height; ++i) {
    auto* to_y = map_y.ptr<float>(i);
    auto* to_x = map_x.ptr<float>(i);
    const float* add_y = elastic ? field_y.ptr<float>(i) : nullptr;
    const float* add_x = elastic ? field_x.ptr<float>(i) : nullptr;
    for (int j = 0; j < out_size.width; ++j) {
      const Offset at = m({static_cast<double>(i), static_cast<double>(j)});
      double y = base_y + at.y, x = base_x + at.x;
      if (elastic) {
        y += add_y[j];
        x += add_x[j];
      }
      to_y[j] = static_cast<float>(y);
      to_x[j] = static_cast<float>(x);
    }
  }

  // Views of the region (rows of the whole source's stride); cv::Mat takes non-const pointers, remap only
  // reads its input. The outputs are views too: remap writes into them, as their size and type are the maps'.
  const int region_h = static_cast<int>(rows.end - rows.begin),
            region_w = static_cast<int>(cols.end - cols.begin);
  const std::int64_t region_start = rows.begin * width + cols.begin;  // its first pixel
  const auto source_row = static_cast<std::size_t>(width);
  const cv::Mat source_image(region_h, region_w, CV_32FC(static_cast<int>(channels)),
                             const_cast<float*>(image) + region_start * channels,
                             source_row * static_cast<std::size_t>(channels) * sizeof(float));
  cv::Mat out_image_view(out_size, CV_32FC(static_cast<int>(channels)), out_image);
  cv::remap(source_image, out_image_view, map_x, map_y, cv::INTER_LINEAR, cv::BORDER_CONSTANT,
            cv::Scalar::all(image_fill));
  if (mask) {
    const cv::Mat source_mask(region_h, region_w, CV_8UC1, const_cast<std::uint8_t*>(mask) + region_start,
                              source_row);
    cv::Mat out_mask_view(out_size, CV_8UC1, out_mask);
    cv::remap(source_mask, out_mask_view, map_x, map_y, cv::INTER_NEAREST, cv::BORDER_CONSTANT,
              cv::Scalar::all(mask_fill));
  }
}

}  // namespace unet
