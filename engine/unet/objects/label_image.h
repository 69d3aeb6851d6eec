// An instance label image: each pixel holds the id of the object it belongs to, 0 for the background. Ids
// need not be consecutive (a DSB 2018 folder's objects are numbered by file, a label TIFF keeps its own);
// what matters is that two pixels with the same non-zero id are the same object. The objects/ folder reads
// and writes these: the training targets made from them (boundary classes, border weights), the objects found
// in a network's output, and the object metrics that match one label image against another.
#pragma once
#include <cstdint>
#include <vector>

namespace unet {

using ObjectId = std::uint32_t;

struct LabelImage {
  std::int64_t height = 0, width = 0;
  std::vector<ObjectId> ids;  // [height, width], row-major; 0: background

  LabelImage() = default;
  LabelImage(std::int64_t h, std::int64_t w) : height(h), width(w), ids(static_cast<std::size_t>(h * w), 0) {}

  ObjectId at(std::int64_t y, std::int64_t x) const { return ids[static_cast<std::size_t>(y * width + x)]; }
  ObjectId& at(std::int64_t y, std::int64_t x) { return ids[static_cast<std::size_t>(y * width + x)]; }
};

}  // namespace unet
