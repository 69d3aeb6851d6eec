// Training targets that separate touching objects, made from an instance label image (issue 27). A binary
// mask loses the line where two objects touch: a network trained on it paints one blob over both. Two
// remedies, both from the instance labels:
// - boundary_classes: three classes, background, interior and a boundary band inside each object (the DSB
//   2018 winners' target); the objects are then the interior's components grown back over interior +
//   boundary (objects/instance_extraction.h).
// - border_weights: the U-Net paper's per-pixel loss weights (Ronneberger et al. 2015, eq. 2), large on the
//   thin background gaps between objects, so that a binary network learns to keep those gaps open.
// Ids may be any uint32 (not consecutive); an id is one object even where its pixels are not connected.
// Distances are Euclidean between pixel centres, from OpenCV's exact distance transform (DIST_L2,
// DIST_MASK_PRECISE).
#pragma once

#include <cstdint>
#include <vector>

#include "unet/objects/label_image.h"

namespace unet {

// The classes boundary_classes writes.
inline constexpr std::uint8_t kBackgroundClass = 0;
inline constexpr std::uint8_t kInteriorClass = 1;
inline constexpr std::uint8_t kBoundaryClass = 2;

// The U-Net paper's values of border_weights' w0 and sigma (sigma in pixels).
inline constexpr double kBorderWeightW0 = 10.0;
inline constexpr double kBorderWeightSigma = 5.0;

// [height * width], row-major: kBackgroundClass where the id is 0; for a pixel of an object, kBoundaryClass
// when its distance to the nearest edge pixel of the same object is < boundary_width, else kInteriorClass. An
// edge pixel is an object pixel with a 4-neighbour inside the image whose id differs (the background or
// another object); the image's border is not an edge. So width 1 marks the edge pixels alone, width 2 also
// the pixels within distance < 2 of them (their 4- and diagonal neighbours), and two touching objects are
// separated by a band of boundary pixels on both sides of the line where they meet. An object without edge
// pixels (one that fills the image) is all interior. Throws ErrorKind::usage for boundary_width < 1 or a
// malformed label image.
std::vector<std::uint8_t> boundary_classes(const LabelImage& labels, int boundary_width);

// The labels with a background ridge between touching objects, as the U-Net paper's training labels had and
// as Falk et al. 2019 (Nature Methods 16:67) insert one: a pixel of object a becomes background (0) where one
// of its 8-neighbours belongs to another object b < a. Where two objects meet, the one with the larger id
// gives up its contact pixels (diagonal contacts included), a ridge about one pixel wide, and afterwards no
// two objects are 8-neighbours: the binary mask of the result keeps every pair apart (for 8-connected
// components too), and border_weights puts its large weights on the ridge. The other pixels keep their ids;
// an object may lose all its pixels (one of a single pixel, say). Throws ErrorKind::usage for a malformed
// label image.
LabelImage separate_touching(const LabelImage& labels);

// [height * width], row-major: the U-Net paper's weight map
//   w(x) = w_c(x) + w0 * exp(-(d1(x) + d2(x))^2 / (2 sigma^2))
// where d1 and d2 are the distances from background pixel x to the nearest pixel of the nearest and of the
// second-nearest object. The exponential term is added on background pixels only (object pixels get w_c
// alone), the common reading of the paper, whose term is meant for the gaps between cells; with fewer than
// two objects in the image it is 0 everywhere. It is also 0 where d1 + d2 >= sqrt(2 ln 1000) * sigma, where
// it would be below w0 / 1000: this cut-off bounds the cost, since each object's distances are computed only
// within its bounding box enlarged by that distance, so an image with hundreds of objects costs about the sum
// of those windows. w_c is 1 everywhere, or with balance_classes the class balance of this image, w_c(class)
// = N / (2 N_class) for the background (id 0) and the foreground (every object) among N pixels; an image
// without one of the two classes has nothing to balance and gets w_c = 1 everywhere (so that w_c averages 1
// over every image). Throws ErrorKind::usage for w0 < 0, sigma <= 0 (either not finite) or a malformed label
// image.
std::vector<float> border_weights(const LabelImage& labels, double w0, double sigma, bool balance_classes);

}  // namespace unet
