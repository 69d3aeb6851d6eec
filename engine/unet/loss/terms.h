// The loss terms' math, written once: the per-pixel terms (cross-entropy, focal) and the per-image soft Dice
// term, their values and gradients, as inline functions that g++ compiles for the CPU backend
// (backend/cpu/cpu_kernels.cpp, loss()) and nvcc for the CUDA kernels (backend/cuda/kernels_reduce.cu). Both
// backends call the same functions, so they differ only where the compilers do: nvcc may contract a*b+c into
// one FMA and CUDA's exp/log/log1p are within a few ulps of glibc's (tests/test_kernel_math.cpp).
//
// The one rule: a function here reads a pixel through its caller's accessors (the logit of class k, and for
// softmax models the probability of class k), never through a memory layout or an element type. The CPU
// passes probabilities it computed once per pixel; a GPU thread recomputes them rather than hold an array.
//
// docs/MODEL.md, "Losses", states the formulas. Precision: the logits' max subtraction in float, everything
// after it in double; a pixel's class weight times its own weight (the pixel weights a batch may carry, such
// as the U-Net paper's border weights; 1 without) multiplies its per-pixel term, value and gradient, and
// nothing else: the Dice term never reads pixel weights. A pixel weight of 1 changes no bit. Soft Dice is per
// image: per Dice class c (binary: 0 = background 1 - p, 1 = foreground p; softmax: each class), I = sum p t,
// P = sum p, T = sum t over the image's labelled pixels, dice = (2 I + s) / (P + T + s), and the image's loss
// is 1 - sum over the included classes of a_c dice_c, a_c their class weights normalised to sum 1.
//
// A new term: its enumerator below, its case in each switch, and the kinds that use it (kLossKinds, at the
// end). The kinds table (const char* names) is host data that device code never reads. No engine headers:
// only what device code may use.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#ifndef UNET_HD
#if defined(__CUDACC__)
#define UNET_HD __host__ __device__
#else
#define UNET_HD
#endif
#endif

namespace unet {

// The term every labelled pixel adds, weighted by its class (the "cross_entropy" sum of LossSum).
enum class PixelTerm : std::uint8_t { none, cross_entropy, focal };
// The term every image adds, from sums over its pixels (the "dice" sum of LossSum).
enum class ImageTerm : std::uint8_t { none, dice };

}  // namespace unet

namespace unet::loss_math {

// Everything the math needs of a LossDesc, by value (a CUDA kernel argument of about 2 KiB, under CUDA's
// 4 KiB: no device allocation). Doubles, as the config holds its numbers. Built by loss_params (desc.h).
struct LossParams {
  PixelTerm pixel_term = PixelTerm::cross_entropy;
  ImageTerm image_term = ImageTerm::none;
  bool dice_include_background = false;
  bool weighted = false;  // false: every class weighs 1 (class_weight is not read)
  int ignore_index = -1;
  double focal_gamma = 2.0, focal_alpha = 0.25;
  double dice_smooth = 1.0;
  double class_weight[256] = {};
};

UNET_HD inline bool has_image_term(const LossParams& lp) {
  return lp.image_term != ImageTerm::none;
}

UNET_HD inline bool loss_ignores(const LossParams& lp, std::uint8_t target) {
  return lp.ignore_index == static_cast<int>(target);
}

UNET_HD inline double class_weight_of(const LossParams& lp, std::int64_t c) {
  return lp.weighted ? lp.class_weight[c] : 1.0;
}

// --- probabilities -----------------------------------------------------------------------------------------

// The stable sigmoid: never exponentiates a positive number. In float (the binary cross-entropy's gradient
// and the predicted probabilities) and in double (everything else).
UNET_HD inline float sigmoid(float z) {
  return z >= 0.0f ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
}
UNET_HD inline double sigmoid_double(double z) {
  return z >= 0.0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
}

// max(z, 0) - z t + log(1 + e^-|z|), in float: exact for large |z| where log(sigmoid) would overflow.
// "z < 0 ? 0 : z" is std::max(z, 0.0f) (a NaN logit gives a NaN loss either way, through the other terms).
UNET_HD inline float bce_loss(float z, bool foreground) {
  const float target = foreground ? 1.0f : 0.0f;
  const float positive_part = z < 0.0f ? 0.0f : z;
  return positive_part - z * target + std::log1p(std::exp(-std::fabs(z)));
}

// Largest of the first `count` logits, from -inf. As std::max(best, v), a NaN never replaces the running
// maximum (the comparison is false), so NaN logits are skipped.
template <class Logits>
UNET_HD float logit_max(const Logits& logit, std::int64_t count) {
  float best = -INFINITY;
  for (std::int64_t k = 0; k < count; ++k) {
    const float v = logit(k);
    best = best < v ? v : best;
  }
  return best;
}

// A softmax pixel's log-probabilities: log p_k = (z_k - max) - log_denom, the max in float, the sum of
// exponentials and its log in double.
struct SoftmaxStats {
  float max;
  double log_denom;
};

template <class Logits>
UNET_HD SoftmaxStats softmax_stats(const Logits& logit, std::int64_t classes) {
  const float mx = logit_max(logit, classes);
  double denom = 0.0;
  for (std::int64_t k = 0; k < classes; ++k) denom += std::exp(static_cast<double>(logit(k) - mx));
  return {mx, std::log(denom)};
}

UNET_HD inline double class_probability(float logit, SoftmaxStats sm) {
  return std::exp(static_cast<double>(logit - sm.max) - sm.log_denom);
}

// --- the per-image term: soft Dice -------------------------------------------------------------------------

// Dice classes: two for a binary model (background, foreground), one per class otherwise.
UNET_HD inline std::int64_t dice_classes(std::int64_t channels) {
  return channels == 1 ? 2 : channels;
}

UNET_HD inline bool dice_includes(const LossParams& lp, std::int64_t dice_class) {
  return dice_class > 0 || lp.dice_include_background;
}

// Doubles per image of the image term's terms: per Dice class three (its sums, then its terms).
UNET_HD inline std::int64_t image_terms_size(std::int64_t channels) {
  return 3 * dice_classes(channels);
}

// Doubles of scratch the image term needs for `images` images: each image's terms and its loss.
UNET_HD inline std::int64_t image_scratch_doubles(std::int64_t images, std::int64_t channels) {
  return images * (image_terms_size(channels) + 1);
}

// One labelled pixel's contribution to Dice class c's sums. `probability`: the pixel's probability of the
// foreground (binary models) or of class c (softmax).
struct DiceSums {
  double intersection = 0.0, probability = 0.0, truth = 0.0;
};

UNET_HD inline DiceSums dice_pixel_sums(std::int64_t channels, double probability, std::uint8_t target,
                                        std::int64_t dice_class) {
  double p, t;
  if (channels == 1) {
    const bool foreground = target != 0;
    p = dice_class == 1 ? probability : 1.0 - probability;
    t = (dice_class == 1) == foreground ? 1.0 : 0.0;
  } else {
    p = probability;
    t = target == dice_class ? 1.0 : 0.0;
  }
  return {p * t, p, t};
}

// Adds a pixel's sums to class c's three doubles of the image's terms.
UNET_HD inline void add_dice_sums(double* class_terms, DiceSums d) {
  class_terms[0] += d.intersection;
  class_terms[1] += d.probability;
  class_terms[2] += d.truth;
}

// An image's Dice terms, in place: per Dice class c three doubles, its sums {I, P, T} on the way in and
// {dice_c, a_c / (P_c + T_c + s), 0} on the way out (zeros for a class left out), as the gradient needs
// them. Returns the image's Dice loss. When the included classes' weights sum to 0 the loss is 0 and so is
// every coefficient.
UNET_HD inline double dice_image_loss(const LossParams& lp, double* terms, std::int64_t channels) {
  const std::int64_t count = dice_classes(channels);
  double weight_sum = 0.0;
  for (std::int64_t c = 0; c < count; ++c)
    if (dice_includes(lp, c)) weight_sum += class_weight_of(lp, c);
  double weighted_dice = 0.0;
  const double s = lp.dice_smooth;
  for (std::int64_t c = 0; c < count; ++c) {
    double* k = terms + 3 * c;
    const bool included = dice_includes(lp, c) && weight_sum > 0.0;
    const double a = included ? class_weight_of(lp, c) / weight_sum : 0.0;
    const double denominator = k[1] + k[2] + s;
    const double dice = (2.0 * k[0] + s) / denominator;
    weighted_dice += a * dice;
    k[0] = included ? dice : 0.0;
    k[1] = a / denominator;
    k[2] = 0.0;
  }
  return weight_sum > 0.0 ? 1.0 - weighted_dice : 0.0;
}

// d(image's Dice loss)/d(p_c) at one labelled pixel: -a_c (2 t_c - dice_c) / (P_c + T_c + s), from class c's
// terms as dice_image_loss leaves them (0 for a class left out).
UNET_HD inline double dice_probability_gradient(const double* class_terms, double truth) {
  return -class_terms[1] * (2.0 * truth - class_terms[0]);
}

// --- the per-pixel terms and the whole gradient ------------------------------------------------------------

struct PixelLossResult {
  double loss = 0.0;  // class weight x pixel weight x the per-pixel term (0 for an ignored pixel)
  bool target_in_range = true;
};

// A binary model's pixel (one logit z, foreground probability p = sigmoid_double(z), read by the terms
// that need it) of weight `pixel_weight`: its weighted per-pixel term and ce_scale * d(term)/dz.
struct BinaryTerm {
  double loss = 0.0;
  float gradient = 0.0f;
};

UNET_HD inline BinaryTerm binary_pixel_term(const LossParams& lp, float z, double p, bool foreground,
                                            double pixel_weight, float ce_scale) {
  const double w = class_weight_of(lp, foreground ? 1 : 0) * pixel_weight;
  switch (lp.pixel_term) {
    case PixelTerm::none:
      break;
    case PixelTerm::cross_entropy: {
      // the gradient in float, bit for bit the unweighted binary cross-entropy's
      const float gradient = (ce_scale * static_cast<float>(w)) * (sigmoid(z) - (foreground ? 1.0f : 0.0f));
      return {w * static_cast<double>(bce_loss(z, foreground)), gradient};
    }
    case PixelTerm::focal: {
      // torchvision's sigmoid_focal_loss: alpha_t ce (1 - p_t)^gamma
      const double zd = static_cast<double>(z), t = foreground ? 1.0 : 0.0, gamma = lp.focal_gamma;
      const double ce = (zd < 0.0 ? 0.0 : zd) - zd * t + std::log1p(std::exp(-std::fabs(zd)));
      const double q = foreground ? sigmoid_double(-zd) : p;  // 1 - p_t
      const double alpha = lp.focal_alpha < 0.0 ? 1.0 : (foreground ? lp.focal_alpha : 1.0 - lp.focal_alpha);
      const double q_gamma = std::pow(q, gamma);
      // d/dz [alpha ce q^g] = alpha q^g ((p - t) + g ce (1 - q)(1 - 2t)), as dq/dz = (1 - 2t) q (1 - q)
      const double gradient = w * alpha * q_gamma * ((p - t) + gamma * ce * (1.0 - q) * (1.0 - 2.0 * t));
      return {w * alpha * ce * q_gamma, static_cast<float>(static_cast<double>(ce_scale) * gradient)};
    }
  }
  return {};
}

// A softmax pixel of true class y and weight `pixel_weight`: its weighted per-pixel term, and `factor` such
// that the term's gradient for class k follows from softmax_term_gradient.
struct SoftmaxTerm {
  double loss = 0.0, factor = 0.0;
  float weight = 0.0f;
};

template <class Logits, class Probabilities>
UNET_HD SoftmaxTerm softmax_pixel_term(const LossParams& lp, const Logits& logit, const Probabilities& prob,
                                       SoftmaxStats sm, std::int64_t channels, std::int64_t target,
                                       double pixel_weight) {
  const double w = class_weight_of(lp, target) * pixel_weight;
  const float z_target = logit(target);
  switch (lp.pixel_term) {
    case PixelTerm::none:
      break;
    case PixelTerm::cross_entropy:
      return {w * (static_cast<double>(sm.max) + sm.log_denom - static_cast<double>(z_target)), 0.0,
              static_cast<float>(w)};
    case PixelTerm::focal: {
      const double gamma = lp.focal_gamma;
      const double log_p = static_cast<double>(z_target - sm.max) - sm.log_denom;
      double q = 0.0;  // 1 - p_y, summed from the other classes for precision when p_y is near 1
      for (std::int64_t k = 0; k < channels; ++k)
        if (k != target) q += prob(k);
      const double q_gamma = std::pow(q, gamma);
      // dl/dz_k = (g q^(g-1) p_y log p_y - q^g)(onehot_k - p_k); the first term's limit at q = 0 is 0
      const double first = q > 0.0 ? gamma * (q_gamma / q) * std::exp(log_p) * log_p : 0.0;
      return {-w * q_gamma * log_p, w * (first - q_gamma), static_cast<float>(w)};
    }
  }
  return {};
}

// ce_scale * d(term)/dz_k, from softmax_pixel_term's result and p_k.
UNET_HD inline float softmax_term_gradient(const LossParams& lp, SoftmaxTerm term, double prob, double onehot,
                                           float ce_scale) {
  switch (lp.pixel_term) {
    case PixelTerm::none:
      break;
    case PixelTerm::cross_entropy:
      return (ce_scale * term.weight) * static_cast<float>(prob - onehot);
    case PixelTerm::focal:
      return static_cast<float>(static_cast<double>(ce_scale) * term.factor * (onehot - prob));
  }
  return 0.0f;
}

// One pixel of weight `pixel_weight` (1 when the batch has no pixel weights): its weighted per-pixel term
// and, when `write` is given (not null),
// write(k, ce_scale * d(term)/dz_k + dice_scale * d(image's Dice loss)/dz_k) for every class k.
// `logit(k)` reads the pixel's logits; `prob(k)` its softmax probabilities (read only when channels > 1);
// `image_terms` are its image's terms as dice_image_loss leaves them (read only with an image term and
// `write`). An ignored pixel gets zeros; a softmax target >= channels is out of range and gets nothing.
template <class Logits, class Probabilities, class Write>
UNET_HD PixelLossResult pixel_loss(const LossParams& lp, const Logits& logit, const Probabilities& prob,
                                   SoftmaxStats sm, std::int64_t channels, std::uint8_t target,
                                   double pixel_weight, float ce_scale, float dice_scale,
                                   const double* image_terms, const Write& write) {
  constexpr bool with_gradient = !std::is_same_v<Write, std::nullptr_t>;
  if (loss_ignores(lp, target)) {
    if constexpr (with_gradient)
      for (std::int64_t k = 0; k < channels; ++k) write(k, 0.0f);
    return {};
  }
  if (channels > 1 && target >= channels) return {0.0, false};
  const bool dice = has_image_term(lp);
  if (channels == 1) {
    const float z = logit(0);
    const bool foreground = target != 0;
    // one exponential for the focal term and the Dice gradient together
    const double p = lp.pixel_term == PixelTerm::focal || (dice && with_gradient)
                         ? sigmoid_double(static_cast<double>(z))
                         : 0.0;
    const BinaryTerm term = binary_pixel_term(lp, z, p, foreground, pixel_weight, ce_scale);
    if constexpr (with_gradient) {
      float g = term.gradient;
      if (dice) {
        // p_1 = p, p_0 = 1 - p: dL/dp = g_1 - g_0
        double dl_dp = dice_probability_gradient(image_terms + 3, foreground ? 1.0 : 0.0);
        if (lp.dice_include_background)
          dl_dp -= dice_probability_gradient(image_terms, foreground ? 0.0 : 1.0);
        g += static_cast<float>(static_cast<double>(dice_scale) * dl_dp * p * (1.0 - p));
      }
      write(0, g);
    }
    return {term.loss, true};
  }
  const SoftmaxTerm term = softmax_pixel_term(lp, logit, prob, sm, channels, target, pixel_weight);
  if constexpr (with_gradient) {
    // The Dice term's gradient through the softmax: p_k (g_k - sum_c p_c g_c), g_c = dL/dp_c
    double dice_dot = 0.0;
    if (dice)
      for (std::int64_t c = 0; c < channels; ++c)
        dice_dot += prob(c) * dice_probability_gradient(image_terms + 3 * c, c == target ? 1.0 : 0.0);
    for (std::int64_t k = 0; k < channels; ++k) {
      const double p = prob(k), onehot = k == target ? 1.0 : 0.0;
      float g = softmax_term_gradient(lp, term, p, onehot, ce_scale);
      if (dice)
        g += static_cast<float>(static_cast<double>(dice_scale) * p *
                                (dice_probability_gradient(image_terms + 3 * k, onehot) - dice_dot));
      write(k, g);
    }
  }
  return {term.loss, true};
}

}  // namespace unet::loss_math

namespace unet {

// --- the kinds: which terms each name a config may give (loss.kind) adds up --------------------------------
// One table: each kind's name, its description and its terms. The enum<->name mapping and the config's
// choices and help (loss/kinds.h), LossDesc's predicates (loss/desc.h) and the backends' LossParams all come
// from it. Host data only; device code reads the terms from LossParams. Here, beside the terms, so that a new
// term and the kind that uses it are written in one file. Enumerators are only ever appended: a kind's number
// is not stored, but test rows and the GUI list the kinds in this order.

enum class LossKind : std::uint8_t { cross_entropy, dice, cross_entropy_dice, focal, focal_dice };

struct LossKindInfo {
  LossKind kind;
  const char* name;         // as the config spells it
  const char* description;  // one clause of loss.kind's help text
  PixelTerm pixel_term;     // weighted by loss.cross_entropy_weight
  ImageTerm image_term;     // weighted by loss.dice_weight
};

// In enumerator order (checked below).
inline constexpr LossKindInfo kLossKinds[] = {
    {LossKind::cross_entropy, "cross_entropy", "binary (sigmoid) or softmax cross-entropy by model.classes",
     PixelTerm::cross_entropy, ImageTerm::none},
    {LossKind::dice, "dice", "soft Dice per image", PixelTerm::none, ImageTerm::dice},
    {LossKind::cross_entropy_dice, "cross_entropy_dice", "both, weighted (nnU-Net's default)",
     PixelTerm::cross_entropy, ImageTerm::dice},
    {LossKind::focal, "focal", "focal loss", PixelTerm::focal, ImageTerm::none},
    {LossKind::focal_dice, "focal_dice", "focal and Dice", PixelTerm::focal, ImageTerm::dice},
};

constexpr bool loss_kinds_in_order() {
  for (std::size_t i = 0; i < std::size(kLossKinds); ++i)
    if (static_cast<std::size_t>(kLossKinds[i].kind) != i) return false;
  return true;
}
static_assert(loss_kinds_in_order(), "kLossKinds: one row per LossKind, in enumerator order");

constexpr const LossKindInfo& loss_kind_info(LossKind k) {
  return kLossKinds[static_cast<std::size_t>(k)];
}

}  // namespace unet
