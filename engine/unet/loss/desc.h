// The training loss as the config holds it and every backend takes it (LossDesc, docs/MODEL.md "Losses"),
// and the by-value parameters (loss_math::LossParams) that both backends' loss math reads. The kind's terms
// come from the kinds table (kLossKinds, loss/terms.h), never from a list of kinds written here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "unet/loss/kinds.h"
#include "unet/loss/terms.h"

namespace unet {

// Every class index a mask may hold is < this (masks are u8).
inline constexpr int kMaxLossClasses = 256;

struct LossDesc {
  LossKind kind = LossKind::cross_entropy;
  // The two terms' weights; the backend never applies them (the caller folds them into the gradient scales
  // and combines the sums). cross_entropy_weight weighs the kind's per-pixel term (cross-entropy or focal),
  // dice_weight its per-image term.
  // Doubles, as the config holds them (a float would not write back as the number the user gave).
  double cross_entropy_weight = 1.0, dice_weight = 1.0;
  double focal_gamma = 2.0;
  double focal_alpha = 0.25;  // binary focal only (torchvision's alpha); < 0: none
  // Empty: every class weighs 1. Binary models: [background, foreground]; softmax: one per class. They weight
  // each pixel's cross-entropy/focal term by its true class, and the mean over classes of the Dice term.
  std::vector<double> class_weights;
  int ignore_index = -1;  // a mask value whose pixels add no loss and no gradient; -1: none
  double dice_smooth = 1.0;
  bool dice_include_background = false;
  bool operator==(const LossDesc&) const = default;

  PixelTerm pixel_term() const { return loss_kind_info(kind).pixel_term; }
  ImageTerm image_term() const { return loss_kind_info(kind).image_term; }
  // Whether the kind has a per-pixel term (cross-entropy or focal), and a per-image term (Dice).
  bool has_cross_entropy() const { return pixel_term() != PixelTerm::none; }
  bool has_dice() const { return image_term() != ImageTerm::none; }
  bool ignores(std::uint8_t target) const { return ignore_index == static_cast<int>(target); }
  // The weight of a pixel of (binary: 0 or 1) class `c`.
  double class_weight(std::int64_t c) const {
    return class_weights.empty() ? 1.0 : class_weights[static_cast<std::size_t>(c)];
  }
};

// The loss math's parameters for a LossDesc that check_loss_desc (backend.h) has accepted.
inline loss_math::LossParams loss_params(const LossDesc& d) {
  loss_math::LossParams p;
  p.pixel_term = d.pixel_term();
  p.image_term = d.image_term();
  p.dice_include_background = d.dice_include_background;
  p.weighted = !d.class_weights.empty();
  p.ignore_index = d.ignore_index;
  p.focal_gamma = d.focal_gamma;
  p.focal_alpha = d.focal_alpha;
  p.dice_smooth = d.dice_smooth;
  // check_loss_desc has bounded the count by the classes (<= 255)
  for (std::size_t c = 0; c < d.class_weights.size() && c < std::size(p.class_weight); ++c)
    p.class_weight[c] = d.class_weights[c];
  return p;
}

}  // namespace unet
