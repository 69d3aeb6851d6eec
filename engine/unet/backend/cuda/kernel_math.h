// What each CUDA kernel computes per element or per pixel, as inline functions that nvcc compiles for the
// device and g++ for the host. A kernel is a thin loop over these; tests/test_kernel_math.cpp runs the same
// functions on the host against the CPU backend, so the GPU's arithmetic is checked without a GPU.
//
// The reference is the CPU backend (engine/unet/backend/cpu): its own loops in cpu_kernels.cpp and, where it
// calls oneDNN (ReLU backward, max pooling, the convolution's bias and ReLU), oneDNN's documented behaviour
// as the tests observe it. Each function names the rule it copies. Operation order follows the CPU code; what
// can still differ on the GPU is (a) nvcc contracting a*b+c into one FMA (g++ in ISO mode does not) and (b)
// CUDA's expf/logf/log1pf/exp/log, which are within a few ulps of glibc's but not identical.
//
// No CUDA headers and of the engine only the loss math (unet/loss/terms.h): only what device code may use.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "unet/loss/terms.h"  // the loss math, and UNET_HD

namespace unet::kmath {

// --- bits --------------------------------------------------------------------------------------------------

UNET_HD inline std::uint32_t bits_of(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
#endif
}

UNET_HD inline float float_of(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
#endif
}

// --- bfloat16 and IEEE half, round to nearest even ---------------------------------------------------------

// bf16 is the upper half of an f32: widening is exact.
UNET_HD inline float bf16_to_float(std::uint16_t v) {
  return float_of(static_cast<std::uint32_t>(v) << 16);
}

// As the CPU backend (cpu::float_to_bf16) and oneDNN: a NaN keeps its sign and upper payload and gets the
// quiet bit (so a NaN whose payload is all in the dropped half does not become infinity); everything else is
// rounded to nearest, ties to even, by adding 0x7FFF plus the lowest kept bit. Infinities stay infinite,
// values past the largest bf16 round to infinity, subnormals are rounded like any other value (no flush).
UNET_HD inline std::uint16_t float_to_bf16(float v) {
  std::uint32_t b = bits_of(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x40u);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}

// IEEE binary16 to f32, exact. Subnormal halves become normal floats; a NaN keeps its sign and payload and
// gets the quiet bit, as x86's F16C (vcvtph2ps) and IEEE 754 convertFormat do.
UNET_HD inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {
    const std::uint32_t quiet = mantissa ? 0x00400000u : 0u;
    return float_of(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return float_of(sign);
    // value = mantissa * 2^-24: shift the leading one into the implicit bit, lowering the exponent as we go
    std::uint32_t biased = 127 - 14;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --biased;
    }
    return float_of(sign | (biased << 23) | ((mantissa & 0x3FFu) << 13));
  }
  return float_of(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

// f32 to IEEE binary16, round to nearest even (the CPU backend has no f16 kernels; this is IEEE 754's
// conversion, as F16C's vcvtps2ph with rounding mode 0 and GCC's _Float16 do). Results below half's smallest
// subnormal round to zero, from 65520 up to infinity; a NaN stays a quiet NaN with its sign and upper
// payload.
UNET_HD inline std::uint16_t float_to_f16(float v) {
  const std::uint32_t b = bits_of(v);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t magnitude = b & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520, inf
  if (magnitude >= 0x38800000u) {                                                   // >= 2^-14: normal
    // Re-bias the exponent (127 -> 15) and round the 13 dropped bits; a carry may step into the exponent,
    // which is the right answer.
    const std::uint32_t rebased = magnitude - ((127u - 15u) << 23);
    return static_cast<std::uint16_t>(sign | ((rebased + 0xFFFu + ((rebased >> 13) & 1u)) >> 13));
  }
  if (magnitude < 0x33000000u) return sign;  // < 2^-25: zero (2^-25 itself is a tie and goes to even, 0)
  // Subnormal: value = full mantissa * 2^(exponent - 150) = result * 2^-24, so shift by 126 - exponent.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t full = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24
  const std::uint32_t kept = full >> shift;
  const std::uint32_t rest = full & ((1u << shift) - 1u);
  const std::uint32_t half_way = 1u << (shift - 1u);
  const std::uint32_t rounded = kept + ((rest > half_way || (rest == half_way && (kept & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | rounded);  // 0x400 (carry) is the smallest normal: still right
}

// Element codecs: how a kernel loads and stores an activation of the compute dtype, as float.
struct F32 {
  using storage = float;
  UNET_HD static float load(float v) { return v; }
  UNET_HD static float store(float v) { return v; }
};
struct BF16 {
  using storage = std::uint16_t;
  UNET_HD static float load(std::uint16_t v) { return bf16_to_float(v); }
  UNET_HD static std::uint16_t store(float v) { return float_to_bf16(v); }
};
struct F16 {
  using storage = std::uint16_t;
  UNET_HD static float load(std::uint16_t v) { return f16_to_float(v); }
  UNET_HD static std::uint16_t store(float v) { return float_to_f16(v); }
};

// --- non-finite --------------------------------------------------------------------------------------------

// By the exponent bits, so that it holds under --use_fast_math too (where isfinite may be folded away).
UNET_HD inline bool is_non_finite(float v) {
  return (bits_of(v) & 0x7F800000u) == 0x7F800000u;
}
UNET_HD inline bool is_non_finite_bf16(std::uint16_t v) {
  return (v & 0x7F80u) == 0x7F80u;
}
UNET_HD inline bool is_non_finite_f16(std::uint16_t v) {
  return (v & 0x7C00u) == 0x7C00u;
}

// --- activation indexing -----------------------------------------------------------------------------------

// A 4-D activation [n, c, h, w] and its memory order.
struct Dims {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  bool nhwc = true;
};

struct Coord {
  std::int64_t n, c, h, w;
};

UNET_HD inline std::int64_t offset_of(const Dims& d, std::int64_t n, std::int64_t c, std::int64_t h,
                                      std::int64_t w) {
  return d.nhwc ? ((n * d.h + h) * d.w + w) * d.c + c : ((n * d.c + c) * d.h + h) * d.w + w;
}

UNET_HD inline Coord coord_of(const Dims& d, std::int64_t index) {
  if (d.nhwc) {
    const std::int64_t c = index % d.c, pixel = index / d.c;
    return {pixel / (d.h * d.w), c, (pixel / d.w) % d.h, pixel % d.w};
  }
  const std::int64_t w = index % d.w, rest = index / d.w;
  return {rest / (d.h * d.c), (rest / d.h) % d.c, rest % d.h, w};
}

// Distance between two channels of one pixel: 1 in NHWC, a plane in NCHW.
UNET_HD inline std::int64_t channel_stride(const Dims& d) {
  return d.nhwc ? 1 : d.h * d.w;
}

// Offset of channel 0 of pixel p (p counts n, then y, then x, as the targets [n, h, w] do).
UNET_HD inline std::int64_t pixel_base(const Dims& d, std::int64_t pixel) {
  const std::int64_t plane = d.h * d.w;
  const std::int64_t n = pixel / plane, yx = pixel % plane;
  return offset_of(d, n, 0, yx / d.w, yx % d.w);
}

// --- input, epilogue, ReLU backward ------------------------------------------------------------------------

// Index into the u8 pixels [n, h, w, c] (images are stored channels-last) of activation element `index`.
UNET_HD inline std::int64_t input_pixel_index(const Dims& x, std::int64_t index) {
  if (x.nhwc) return index;
  const Coord at = coord_of(x, index);
  return ((at.n * x.h + at.h) * x.w + at.w) * x.c + at.c;
}

// x = scale * pixel, as the CPU: the product in float, then rounded to the compute dtype.
template <class Pixel>
UNET_HD inline float input_from_pixels(Pixel pixel, float scale) {
  return scale * static_cast<float>(pixel);
}

// The channel of activation element `index`, for the bias.
UNET_HD inline std::int64_t channel_of(const Dims& d, std::int64_t index) {
  return d.nhwc ? index % d.c : (index / (d.h * d.w)) % d.c;
}

// After cuDNN's convolution (y holds conv(x, w) in the compute dtype): y = [relu](y + b[c]). The ReLU is the
// CPU backend's oneDNN post-op, eltwise_relu with alpha 0. oneDNN's reference code documents it as
// "v > 0 ? v : alpha * v", but what the CPU backend gives in NHWC (the engine's layout) is max(v, 0) with
// a NaN becoming +0, as x86's maxps(v, 0) does (it returns the second operand when either is NaN); the tests
// observe exactly that. That is the rule here, so that both backends agree on whether a step diverged. The
// CPU is not consistent across its own kernels: with NCHW and several channels oneDNN runs another
// convolution kernel whose ReLU follows the reference rule (NaN stays NaN, a negative value gives -0). This
// returns +0 in every case; the tests compare zeros by value and accept the NCHW kernel's NaN.
UNET_HD inline float bias_relu(float conv, float bias, bool relu) {
  const float v = conv + bias;
  if (!relu) return v;
  return v > 0.0f ? v : 0.0f;
}

// dz = dy * (y > 0) as the CPU backend's oneDNN eltwise_relu_use_dst_for_bwd (alpha 0) computes it on x86,
// observed by the tests: a derivative that is 1 where y > 0 or y is NaN (an unordered "not <= 0" comparison)
// and 0 elsewhere, multiplied by dy. So a NaN y passes dy through; where y <= 0 an infinite or NaN dy still
// gives NaN (0 * inf), and a negative dy gives -0. A select (y > 0 ? dy : 0), as docs/CUDA_BACKEND.md has
// it, would hide a diverging gradient that the CPU reports.
UNET_HD inline float relu_backward(float y, float dy) {
  return dy * (y <= 0.0f ? 0.0f : 1.0f);
}

// y += x of add() and of split_channels' accumulate: in float, the destination first, then rounded to the
// element type (the CPU's store(out, load(out) + load(in))).
UNET_HD inline float add_into(float y, float x) {
  return y + x;
}

// scale(): f32 only.
UNET_HD inline float scale_value(float v, float factor) {
  return v * factor;
}

// --- losses: unet/loss/terms.h over stored logits ---------------------------------------------------------

// A pixel's logits in memory, channel k at k * stride, as loss_math's accessors read them.
template <class E>
struct StoredLogits {
  const typename E::storage* at;
  std::int64_t stride;
  UNET_HD float operator()(std::int64_t k) const { return E::load(at[k * stride]); }
};

// A softmax pixel's probabilities, recomputed at each read: a thread holds no array of up to 256 of them.
template <class E>
struct RecomputedProbabilities {
  StoredLogits<E> logit;
  loss_math::SoftmaxStats sm;
  UNET_HD double operator()(std::int64_t k) const { return loss_math::class_probability(logit(k), sm); }
};

// Where loss_math::pixel_loss writes a pixel's gradient: the logits' type and layout.
template <class E>
struct StoredGradient {
  typename E::storage* at;
  std::int64_t stride;
  UNET_HD void operator()(std::int64_t k, float g) const { at[k * stride] = E::store(g); }
};

// Largest of `count` values at `stride` (loss_math::logit_max: NaN never replaces the running maximum).
template <class E>
UNET_HD float channel_max(const typename E::storage* at, std::int64_t stride, std::int64_t count) {
  return loss_math::logit_max(StoredLogits<E>{at, stride}, count);
}

// Softmax probabilities of one pixel into `out` (contiguous), in float as the CPU's probabilities():
// exponentials of the max-subtracted logits, summed in class order, then each divided by the sum.
template <class E>
UNET_HD void softmax_probabilities(const typename E::storage* logits, std::int64_t stride,
                                   std::int64_t classes, float* out) {
  const float mx = channel_max<E>(logits, stride, classes);
  float denom = 0.0f;
  for (std::int64_t k = 0; k < classes; ++k) {
    out[k] = std::exp(E::load(logits[k * stride]) - mx);
    denom += out[k];
  }
  for (std::int64_t k = 0; k < classes; ++k) out[k] /= denom;
}

// loss_math::dice_pixel_sums of stored logits: the pixel's probability of Dice class c's class.
template <class E>
UNET_HD loss_math::DiceSums dice_pixel_sums(const typename E::storage* logits, std::int64_t stride,
                                            std::int64_t channels, std::uint8_t target,
                                            std::int64_t dice_class) {
  const StoredLogits<E> logit{logits, stride};
  const double p = channels == 1 ? loss_math::sigmoid_double(static_cast<double>(logit(0)))
                                 : loss_math::class_probability(logit(dice_class),
                                                                loss_math::softmax_stats(logit, channels));
  return loss_math::dice_pixel_sums(channels, p, target, dice_class);
}

// loss_math::pixel_loss of stored logits and the pixel's weight (1 without pixel weights); dlogits (may be
// null) in their type and layout.
template <class E>
UNET_HD loss_math::PixelLossResult pixel_loss(const loss_math::LossParams& lp,
                                              const typename E::storage* logits, std::int64_t stride,
                                              std::int64_t channels, std::uint8_t target, float pixel_weight,
                                              float ce_scale, float dice_scale, const double* image_terms,
                                              typename E::storage* dlogits) {
  const StoredLogits<E> logit{logits, stride};
  const bool softmax = channels > 1 && !loss_math::loss_ignores(lp, target) && target < channels;
  const loss_math::SoftmaxStats sm =
      softmax ? loss_math::softmax_stats(logit, channels) : loss_math::SoftmaxStats{0.0f, 0.0};
  const RecomputedProbabilities<E> prob{logit, sm};
  if (!dlogits)
    return loss_math::pixel_loss(lp, logit, prob, sm, channels, target, static_cast<double>(pixel_weight),
                                 ce_scale, dice_scale, image_terms, nullptr);
  return loss_math::pixel_loss(lp, logit, prob, sm, channels, target, static_cast<double>(pixel_weight),
                               ce_scale, dice_scale, image_terms, StoredGradient<E>{dlogits, stride});
}

// --- segmentation counts -----------------------------------------------------------------------------------

// Predicted and true class of one pixel. Binary (one logit): foreground when the logit is > 0, so 0, -0 and
// NaN are background (class 0); the target is 1 when non-zero. Several logits: the arg-max, ties to the
// lowest class (a later class must be strictly larger) and NaN logits never chosen unless the first one
// is NaN, in which case nothing compares larger and class 0 stands; the target as it is (it may be
// >= classes: then it counts no false negative, see below).
struct PixelClasses {
  std::int64_t predicted, truth;
};

template <class E>
UNET_HD PixelClasses classify_pixel(const typename E::storage* logits, std::int64_t stride,
                                    std::int64_t channels, std::uint8_t target) {
  if (channels == 1) return {E::load(logits[0]) > 0.0f ? 1 : 0, target ? 1 : 0};
  std::int64_t predicted = 0;
  float best = E::load(logits[0]);
  for (std::int64_t k = 1; k < channels; ++k) {
    const float v = E::load(logits[k * stride]);
    if (v > best) best = v, predicted = k;
  }
  return {predicted, target};
}

// The counters one pixel increments, as indices into the counts of segmentation_counts_size(classes)
// (3 per class: true positive, false positive, false negative; then correct pixels, all pixels). `classes`
// is the model's, at least 2 (a binary model counts background and foreground). Always three slots, -1 for
// none, so that a kernel's loop over them has a fixed trip count and keeps them in registers.
struct CountIncrements {
  static constexpr int slot_count = 3;
  std::int64_t index[slot_count];
};

UNET_HD inline CountIncrements count_increments(PixelClasses p, std::int64_t classes) {
  const std::int64_t all_pixels = 3 * classes + 1;
  if (p.predicted == p.truth) return {{3 * p.predicted, 3 * classes, all_pixels}};  // true positive, correct
  // a false positive of the prediction; a false negative of the true class, if it is a class at all
  return {{3 * p.predicted + 1, p.truth < classes ? 3 * p.truth + 2 : -1, all_pixels}};
}

// --- Adam / AdamW ------------------------------------------------------------------------------------------

// The per-step constants, computed once on the host as the CPU backend does (bias corrections in double,
// then rounded to float), so that every element sees the same values.
struct AdamScalars {
  float step_size;   // lr / (1 - beta1^t)
  float bias2_sqrt;  // sqrt(1 - beta2^t)
  float decay;       // AdamW: 1 - lr * weight_decay (float arithmetic, as the CPU)
  float l2;          // Adam: weight_decay, added to the gradient as l2 * param
  float beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale;
  bool decoupled;  // AdamW with weight_decay != 0
};

inline AdamScalars adam_scalars(float lr, float beta1, float beta2, float eps, float weight_decay,
                                bool decoupled_weight_decay, std::int64_t step, float grad_scale) {
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  return {static_cast<float>(static_cast<double>(lr) / bias1),
          static_cast<float>(std::sqrt(bias2)),
          1.0f - lr * weight_decay,
          decoupled_weight_decay ? 0.0f : weight_decay,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          eps,
          grad_scale,
          decoupled_weight_decay && weight_decay != 0.0f};
}

// torch.optim.Adam/AdamW single-tensor order: scale the gradient first, add Adam's L2 term or decay the
// parameter (AdamW), m += (1 - b1)(g - m), v = b2 v + (1 - b2) g g, p -= step_size * m / (sqrt(v) /
// sqrt(bc2) + eps).
UNET_HD inline void adam_update(const AdamScalars& a, float& param, float grad, float& m, float& v) {
  float g = grad * a.grad_scale;
  if (a.l2 != 0.0f) g += a.l2 * param;
  if (a.decoupled) param *= a.decay;
  const float mi = m + a.one_minus_beta1 * (g - m);
  const float vi = a.beta2 * v + a.one_minus_beta2 * g * g;
  m = mi;
  v = vi;
  param -= a.step_size * (mi / (std::sqrt(vi) / a.bias2_sqrt + a.eps));
}

// --- SGD ---------------------------------------------------------------------------------------------------

struct SgdScalars {
  float lr, momentum, weight_decay, grad_scale;
  bool nesterov;
};

// torch.optim.SGD (dampening 0), one value; `buffer` is used only with momentum. A zero buffer gives the
// first step's buffer = d, which is torch's clone of the first gradient.
UNET_HD inline void sgd_update(const SgdScalars& a, float& param, float grad, float* buffer) {
  float d = grad * a.grad_scale;
  if (a.weight_decay != 0.0f) d += a.weight_decay * param;
  if (a.momentum != 0.0f) {
    const float buf = a.momentum * *buffer + d;
    *buffer = buf;
    d = a.nesterov ? d + a.momentum * buf : buf;
  }
  param -= a.lr * d;
}

// --- max pooling 2x2, stride 2 -----------------------------------------------------------------------------

// Window positions 0..3 are (0,0), (0,1), (1,0), (1,1): oneDNN's kernel index kh * 2 + kw, which is what the
// CPU backend saves (its pooling workspace, u8 in the destination's layout).
//
// oneDNN's max pooling, as the tests observe it (ties, NaN, all-NaN and all -inf windows), starts from the
// lowest finite value with index 0 and takes a later element only when it is strictly greater. Hence: a tie
// goes to the first position in that order; a NaN is never taken (NaN > x is false); and a window of only NaN
// or -inf values gives -FLT_MAX (the lowest finite float, not -inf) with index 0. docs/CUDA_BACKEND.md's "NaN
// wins" is not what the CPU does. Stored in bf16 that -FLT_MAX rounds to -inf. (oneDNN's x86 JIT kernel also
// starts from the f32 lowest, but bf16 pooling does not run on the CPUs the tests have seen, without AVX512,
// so that case is unverified.)
struct PoolResult {
  float value;
  std::uint8_t index;
};

UNET_HD inline PoolResult max_of_window(const float (&window)[4]) {
  PoolResult r{-FLT_MAX, 0};
  for (std::uint8_t k = 0; k < 4; ++k)
    if (window[k] > r.value) r = {window[k], k};
  return r;
}

// Offsets of the 4 inputs of output (n, c, oy, ox), in window order.
UNET_HD inline void pool_window_offsets(const Dims& x, std::int64_t n, std::int64_t c, std::int64_t oy,
                                        std::int64_t ox, std::int64_t (&offsets)[4]) {
  for (int k = 0; k < 4; ++k) offsets[k] = offset_of(x, n, c, 2 * oy + k / 2, 2 * ox + k % 2);
}

// dx of window position k: the output's gradient where it was the maximum, 0 elsewhere; with accumulate,
// added to what dx holds. oneDNN's backward zeroes dx and then adds dy at the saved index, so the routed
// value is 0 + dy: a -0 gradient arrives as +0 (a plain "is_max ? dy : 0" would keep -0 and differ in the
// bits). With accumulate the CPU routes into scratch and adds that to dx, so 0 is added where it was not the
// maximum too (a -0 in dx becomes +0). Rows and columns past 2 * (h / 2) belong to no window: 0, or dx + 0.
UNET_HD inline float pool_backward(float dy, bool is_max, float dx_before, bool accumulate) {
  const float routed = is_max ? 0.0f + dy : 0.0f;
  return accumulate ? dx_before + routed : routed;
}

// --- channel concatenation / split -------------------------------------------------------------------------

// Where element `index` of the concatenation out = [a, b] (dims `out`, out.c = a_channels + b channels)
// comes from: the first input or the second, and the index there. split_channels uses the same map the other
// way round (da / db element from dout element).
struct ConcatSource {
  bool from_b;
  std::int64_t index;
};

UNET_HD inline ConcatSource concat_source(const Dims& out, std::int64_t a_channels, std::int64_t index) {
  const std::int64_t b_channels = out.c - a_channels;
  if (out.nhwc) {
    const std::int64_t pixel = index / out.c, c = index % out.c;
    return c < a_channels ? ConcatSource{false, pixel * a_channels + c}
                          : ConcatSource{true, pixel * b_channels + (c - a_channels)};
  }
  const std::int64_t plane = out.h * out.w;
  const std::int64_t n = index / (out.c * plane), c = (index / plane) % out.c, yx = index % plane;
  return c < a_channels ? ConcatSource{false, (n * a_channels + c) * plane + yx}
                        : ConcatSource{true, (n * b_channels + (c - a_channels)) * plane + yx};
}

// --- cuDNN's filters and tensor-core padding ---------------------------------------------------------------

// Index of filter element (k, c, rs) in cuDNN's packed order, for a packed filter of `c_stride` channels and
// `rs_count` taps per channel: KRSC (krsc = true: cuDNN's NHWC filter layout) or KCRS (the canonical
// [k, c, r, s] order itself). c_stride >= the real channel count when the packed filter is padded.
UNET_HD inline std::int64_t packed_filter_index(std::int64_t k, std::int64_t c, std::int64_t rs,
                                                std::int64_t c_stride, std::int64_t rs_count, bool krsc) {
  return krsc ? (k * rs_count + rs) * c_stride + c : (k * c_stride + c) * rs_count + rs;
}

// Where element `index` of a packed filter of k_pad x c_pad x rs_count values (packed_filter_index's order)
// comes from in the canonical [k_count, c_count, rs_count] filter: its index there, or -1 for a padding
// element (k >= k_count or c >= c_count), which holds zero. Without padding every element has a source and
// this is packed_filter_index's inverse.
UNET_HD inline std::int64_t packed_filter_source(std::int64_t index, std::int64_t k_count,
                                                 std::int64_t c_count, std::int64_t rs_count,
                                                 std::int64_t c_pad, bool krsc) {
  std::int64_t k, c, rs;
  if (krsc) {
    c = index % c_pad;
    rs = index / c_pad % rs_count;
    k = index / (c_pad * rs_count);
  } else {
    rs = index % rs_count;
    c = index / rs_count % c_pad;
    k = index / (rs_count * c_pad);
  }
  return k < k_count && c < c_count ? (k * c_count + c) * rs_count + rs : -1;
}

// Channel padding of NHWC activations: element `index` of dst [pixels, dst_channels] is src [pixels,
// src_channels]'s element of the same pixel and channel, or zero (-1) for a channel src lacks. With
// dst_channels > src_channels this pads (zeros after the real channels); with fewer it drops the padding.
UNET_HD inline std::int64_t channel_copy_source(std::int64_t index, std::int64_t src_channels,
                                                std::int64_t dst_channels) {
  const std::int64_t pixel = index / dst_channels, c = index % dst_channels;
  return c < src_channels ? pixel * src_channels + c : -1;
}

// --- summing across replicas (DeviceCommunicator) ----------------------------------------------------------

// The elements [begin, end) of n that `rank` of `ranks` sums: ceil(n / ranks) each, the last ones fewer or
// none, as SharedMemoryCommunicator shares them.
struct ShareRange {
  std::int64_t begin, end;
};
UNET_HD inline ShareRange share_range(std::int64_t n, int ranks, int rank) {
  const std::int64_t share = (n + ranks - 1) / ranks;
  const std::int64_t begin = share * rank < n ? share * rank : n;
  return {begin, begin + share < n ? begin + share : n};
}

// Element i summed over the ranks' buffers from 0.0f in rank order, as SharedMemoryCommunicator adds them:
// the same bits on every rank, and the same as CPU replicas get.
UNET_HD inline float rank_order_sum(const float* const* buffers, int ranks, std::int64_t i) {
  float sum = 0.0f;
  for (int r = 0; r < ranks; ++r) sum += buffers[r][i];
  return sum;
}

}  // namespace unet::kmath
