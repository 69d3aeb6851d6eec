// From a network's output to objects (issue 27): seeds where the network is sure of an object's inside, grown
// over the foreground by a seeded watershed, so that two touching objects whose seeds are apart come out as
// two.
//
// How an output becomes the two maps extract_objects takes:
// - trained on boundary_classes (three softmax classes, objects/instance_targets.h):
//   seed = p_interior, foreground = p_interior + p_boundary (= 1 - p_background);
// - trained on border_weights (a binary sigmoid p): seed = foreground = p, with the seed threshold above the
//   foreground one (say 0.7 and 0.5): the seeds are the cores of the objects, the gap that the weights taught
//   the network to keep open appears as a dip of p between two cores.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "unet/objects/label_image.h"

namespace unet {

struct ExtractionThresholds {
  // A pixel is a seed where seed probability > seed and foreground probability > foreground. 0.5 is the most
  // probable class of the boundary target's softmax; raise it above `foreground` for a binary output.
  double seed = 0.5;
  // A pixel is foreground where foreground probability > foreground.
  double foreground = 0.5;
  // Objects of fewer pixels are removed (their pixels become background). 0 keeps every object: what is small
  // depends on the images' scale, so the default removes nothing.
  std::int64_t min_size = 0;
};

// The objects in one image's output; both maps [height, width], row-major, probabilities in [0, 1]:
// 1. the seeds: the 8-connected components of (seed probability > seed and foreground probability >
//    foreground);
// 2. the seeds grown over the foreground (foreground probability > foreground) by OpenCV's seeded watershed
//    (cv::watershed, 4-connected), flooding in order of the seed probability's complement (in 64 levels): a
//    region crosses its object's inside first and two regions meet where the seed probability dips between
//    them (the boundary target's foreground is ~1 across that line, so its complement would not place it); on
//    a plateau of one level, such as a boundary band, the regions advance together and meet halfway. The
//    pixels outside the foreground are one more marker, which floods into the foreground only after the seeds
//    have taken all they can reach;
// 3. every foreground pixel left without a seed's label (a watershed line between two regions, a rim pixel
//    where a region meets the background, a part reached only through such pixels) joins the object of the
//    nearest labelled pixel through the foreground (breadth first, 8-connected, ties to the earlier pixel in
//    raster order), so that the objects tile every foreground component that holds a seed;
// 4. a foreground component (8-connected) without a seed becomes one object of its own: the network saw
//    something there, and dropping it silently would hide it from the object metrics;
// 5. objects of fewer than min_size pixels are removed; the rest are numbered 1..n in the raster order of
//    their first pixel.
// Throws ErrorKind::usage for a negative size, a null map of a non-empty image, a threshold outside [0, 1] or
// not finite, or a negative min_size. A NaN probability counts as below every threshold.
LabelImage extract_objects(const float* seed_probability, const float* foreground_probability,
                           std::int64_t height, std::int64_t width, const ExtractionThresholds& thresholds);

// One object of a label image: predict's CSV rows.
struct ObjectDescription {
  ObjectId id = 0;
  std::int64_t area = 0;                        // pixels
  double centroid_y = 0, centroid_x = 0;        // the mean row and column of its pixels
  std::int64_t y0 = 0, x0 = 0, y1 = 0, x1 = 0;  // bounding box; y1 and x1 exclusive
  std::optional<double> mean_probability;       // the mean over its pixels; none when no map was given
};

// Every object (id but 0), in ascending id order.
using ObjectTable = std::vector<ObjectDescription>;

// Describes the objects of a label image; probability [height, width] (say the foreground probability) or
// nullptr. Throws ErrorKind::usage for a malformed label image.
ObjectTable describe_objects(const LabelImage& labels, const float* probability);

}  // namespace unet
