// The built-in demo dataset: fluorescence-microscopy-like nuclei ("cells") drawn on demand, so that the
// workbench trains out of the box and tests have data without files. The rule that matters: sample i is a
// pure function of (seed, i, height, width, channels, classes, normalisation), so every thread, run and
// machine sees the same bytes, and the mask is exact, i.e. a pixel is foreground iff its centre passes the
// same inside-test that painted it.
// Cells come in clusters of 2..4 whose ellipses meet, as nuclei do, or lie apart: about three cells in four
// touch a neighbour (a pixel 4-adjacent to another cell's; test_synthetic's seeded sets measure 0.72..0.77
// and require more than 0.6, where chance contacts alone, before the clusters, gave 0.38..0.45). Where two
// overlap the later one covers the earlier, and the instance labels say which cell painted each pixel, so
// that training on instances (task "instances") has touching objects to tell apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/io/image.h"

namespace unet {

struct SyntheticOptions {
  std::size_t count = 512;
  std::int64_t height = 128, width = 128, channels = 3;
  // As in the model spec: 1 = binary; otherwise cells carry classes 1..classes-1. With `instances`, the
  // target's classes (3 for boundary, 1 for weight_map), and the cells are all of one kind.
  int classes = 1;
  std::uint64_t seed = 0;
  NormalizeDesc normalize{};  // how the drawn 8-bit values become the samples' (data.normalize)
  // task "instances": get() fills Sample::instances (each visible cell an id 1..n, in painting order) and
  // makes the training target from it (make_instance_target: the mask, and for weight_map the weights).
  // Nothing else changes: the same seed draws the same image as classes 1 without it.
  std::optional<InstancesConfig> instances{};  // {}: designated initialisers may leave it out unwarned
};

// Throws Error(ErrorKind::config) naming the bad option.
void validate(const SyntheticOptions& options);

// One drawn cell: an ellipse in pixel coordinates, where pixel (y, x) covers [y, y+1) x [x, x+1) and has its
// centre at (y + 0.5, x + 0.5).
struct SyntheticCell {
  double center_y = 0, center_x = 0;
  double semi_major = 0, semi_minor = 0;  // pixels
  double angle = 0;                       // radians from +x towards +y, of the major axis
  std::uint8_t label = 1;                 // the value written to the mask
  double brightness = 0;                  // grey levels above the background at the cell's core

  // The inside-test that painting uses: (y, x) lies in the closed ellipse.
  bool contains(double y, double x) const;
};

class SyntheticCells final : public Dataset {
 public:
  explicit SyntheticCells(const SyntheticOptions& options);

  std::size_t size() const override { return options_.count; }
  Sample get(std::size_t index) const override;
  std::int64_t height() const override { return options_.height; }
  std::int64_t width() const override { return options_.width; }
  std::int64_t channels() const override { return options_.channels; }
  int classes() const override { return options_.classes; }
  std::string describe() const override;
  std::string sample_name(std::size_t index) const override { return "synthetic #" + std::to_string(index); }

  const SyntheticOptions& options() const noexcept { return options_; }
  // The cells of sample `index`, in painting order (a later cell covers an earlier one where they overlap).
  // A pixel's instance id is the rank, among the cells that own a pixel, of the last cell that contains its
  // centre: ids 1..n in painting order, a cell covered entirely (rare) having none.
  std::vector<SyntheticCell> cells(std::size_t index) const;
  // Bytes one sample holds in memory: the image's floats and the mask, with `instances` also the instance
  // ids and for weight_map the weights (what a cache of the samples takes, per sample).
  std::int64_t sample_bytes() const noexcept;

 private:
  void check_index(std::size_t index) const;

  SyntheticOptions options_;
};

// The 8-bit image of a sample normalised by scale_255 (the values the demo's cells were drawn with): what
// writes the cells as files, for tests, screenshots and the demo's folders.
Image eight_bit_image(const Sample& sample);

}  // namespace unet
