#include "unet/backend/cpu/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "unet/core/error.h"
#include "unet/loss/terms.h"

namespace unet::cpu {
namespace {

// Sums are formed per fixed-size chunk and the chunks added in order, so that results do not depend on the
// number of threads or their timing.
constexpr std::int64_t reduction_chunk = 4096;

template <class T>
float load(const T* p, std::int64_t i) {
  if constexpr (std::is_same_v<T, std::uint16_t>)
    return bf16_to_float(p[i]);
  else
    return p[i];
}

template <class T>
void store(T* p, std::int64_t i, float v) {
  if constexpr (std::is_same_v<T, std::uint16_t>)
    p[i] = float_to_bf16(v);
  else
    p[i] = v;
}

// Calls fn with a typed null pointer selecting f32 (float) or bf16 (uint16_t) element access.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn(static_cast<float*>(nullptr));
    case DType::bf16:
      return fn(static_cast<std::uint16_t*>(nullptr));
    default:
      throw Error(ErrorKind::unsupported,
                  "the CPU backend has no " + std::string(to_string(dtype)) + " kernels for this operation");
  }
}

}  // namespace

ActStrides act_strides(const ActShape& s, Layout layout) {
  if (layout == Layout::nhwc) return {s.h * s.w * s.c, 1, s.w * s.c, s.c};
  return {s.c * s.h * s.w, s.h * s.w, s.w, 1};
}

float bf16_to_float(std::uint16_t v) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16);
}

std::uint16_t float_to_bf16(float v) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  if (std::isnan(v)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

namespace {
template <class P>
void input_from_typed(const P* pixels, const ActShape& s, void* x, DType dtype, Layout layout, float scale) {
  dispatch_float(dtype, [&]<class T>(T*) {
    T* out = static_cast<T*>(x);
    if (layout == Layout::nhwc) {
      const std::int64_t total = s.numel();
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < total; ++i) store(out, i, scale * static_cast<float>(pixels[i]));
    } else {
      const ActStrides st = act_strides(s, layout);
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t n = 0; n < s.n; ++n)
        for (std::int64_t y = 0; y < s.h; ++y)
          for (std::int64_t xx = 0; xx < s.w; ++xx)
            for (std::int64_t c = 0; c < s.c; ++c)
              store(out, n * st.n + c * st.c + y * st.h + xx * st.w,
                    scale * static_cast<float>(pixels[((n * s.h + y) * s.w + xx) * s.c + c]));
    }
  });
}
}  // namespace

void input_from_pixels(const void* pixels, DType pixel_dtype, const ActShape& s, void* x, DType dtype,
                       Layout layout, float scale) {
  if (pixel_dtype == DType::u8) {
    input_from_typed(static_cast<const std::uint8_t*>(pixels), s, x, dtype, layout, scale);
  } else {
    input_from_typed(static_cast<const float*>(pixels), s, x, dtype, layout, scale);
  }
}

void concat_channels(const void* a, std::int64_t ca, const void* b, std::int64_t cb, void* out,
                     const ActShape& s, DType dtype, Layout layout) {
  const std::size_t es = dtype_size(dtype);
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  auto* po = static_cast<char*>(out);
  if (layout == Layout::nhwc) {
    const std::int64_t pixels = s.n * s.h * s.w;
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < pixels; ++p) {
      std::memcpy(po + static_cast<std::size_t>(p * s.c) * es, pa + static_cast<std::size_t>(p * ca) * es,
                  static_cast<std::size_t>(ca) * es);
      std::memcpy(po + static_cast<std::size_t>(p * s.c + ca) * es,
                  pb + static_cast<std::size_t>(p * cb) * es, static_cast<std::size_t>(cb) * es);
    }
  } else {
    const std::int64_t plane = s.h * s.w;
#pragma omp parallel for schedule(static)
    for (std::int64_t n = 0; n < s.n; ++n) {
      std::memcpy(po + static_cast<std::size_t>(n * s.c * plane) * es,
                  pa + static_cast<std::size_t>(n * ca * plane) * es,
                  static_cast<std::size_t>(ca * plane) * es);
      std::memcpy(po + static_cast<std::size_t>((n * s.c + ca) * plane) * es,
                  pb + static_cast<std::size_t>(n * cb * plane) * es,
                  static_cast<std::size_t>(cb * plane) * es);
    }
  }
}

void split_channels(const void* dout, const ActShape& s, void* da, std::int64_t ca, void* db, std::int64_t cb,
                    bool accumulate_b, DType dtype, Layout layout) {
  dispatch_float(dtype, [&]<class T>(T*) {
    const T* in = static_cast<const T*>(dout);
    T* out_a = static_cast<T*>(da);
    T* out_b = static_cast<T*>(db);
    // Per pixel (NHWC) or per image (NCHW), the channels of a come first, then those of b.
    const bool nhwc = layout == Layout::nhwc;
    const std::int64_t groups = nhwc ? s.n * s.h * s.w : s.n;
    const std::int64_t inner = nhwc ? 1 : s.h * s.w;
#pragma omp parallel for schedule(static)
    for (std::int64_t g = 0; g < groups; ++g) {
      const T* src = in + g * s.c * inner;
      std::memcpy(out_a + g * ca * inner, src, static_cast<std::size_t>(ca * inner) * sizeof(T));
      T* dst_b = out_b + g * cb * inner;
      const T* src_b = src + ca * inner;
      if (accumulate_b) {
        for (std::int64_t i = 0; i < cb * inner; ++i) store(dst_b, i, load(dst_b, i) + load(src_b, i));
      } else {
        std::memcpy(dst_b, src_b, static_cast<std::size_t>(cb * inner) * sizeof(T));
      }
    }
  });
}

namespace {

// A pixel's logits: channel k at base + k * channel_stride.
template <class T>
struct PixelView {
  const T* z;
  std::int64_t base, channel_stride;
  float logit(std::int64_t k) const { return load(z, base + k * channel_stride); }
};

// A pixel's softmax probabilities into `probs`, computed once for the loss math to read (loss/terms.h).
template <class T>
loss_math::SoftmaxStats softmax_into(const PixelView<T>& px, std::int64_t classes,
                                     std::vector<double>& probs) {
  const auto logit = [&px](std::int64_t k) { return px.logit(k); };
  const loss_math::SoftmaxStats sm = loss_math::softmax_stats(logit, classes);
  for (std::int64_t k = 0; k < classes; ++k)
    probs[static_cast<std::size_t>(k)] = loss_math::class_probability(px.logit(k), sm);
  return sm;
}

}  // namespace

std::size_t loss_scratch_bytes(const LossDesc& d, const ActShape& s) {
  if (!d.has_dice()) return 0;
  return static_cast<std::size_t>(loss_math::image_scratch_doubles(s.n, s.c)) * sizeof(double);
}

// The math is loss/terms.h's, shared with the CUDA kernels; here the loops, the order of the sums and the
// probabilities, computed once per pixel.
void loss(const LossDesc& d, const void* logits, const ActShape& s, DType dtype, Layout layout,
          const std::uint8_t* targets, const float* pixel_weights, void* dlogits, LossGradScales scales,
          double* sums, double* scratch) {
  namespace lm = loss_math;
  const lm::LossParams lp = loss_params(d);
  dispatch_float(dtype, [&]<class T>(T*) {
    const T* z = static_cast<const T*>(logits);
    T* dz = static_cast<T*>(dlogits);
    const ActStrides st = act_strides(s, layout);
    const std::int64_t plane = s.h * s.w;
    const std::int64_t pixels = s.n * plane;
    const std::int64_t channels = s.c;
    const std::int64_t dice_classes = lm::dice_classes(channels);
    const std::int64_t per_image = lm::image_terms_size(channels) + 1;  // the image's terms, then its loss
    const auto view = [&](std::int64_t p) {
      const std::int64_t n = p / plane, yx = p % plane;
      return PixelView<T>{z, n * st.n + (yx / s.w) * st.h + (yx % s.w) * st.w, st.c};
    };
    // A softmax target must name a class, unless it is the ignored label.
    bool bad_target = false;
    if (channels > 1)
      for (std::int64_t p = 0; p < pixels; ++p)
        if (!d.ignores(targets[p]) && targets[p] >= channels) bad_target = true;
    if (bad_target)
      throw Error(ErrorKind::data,
                  "a mask holds a class index >= model.classes (" + std::to_string(channels) + ")");

    // The image term: each image's sums over its labelled pixels (one image per thread, pixels in order),
    // then its loss and the coefficients of the gradient.
    if (lm::has_image_term(lp)) {
#pragma omp parallel for schedule(static)
      for (std::int64_t n = 0; n < s.n; ++n) {
        double* image = scratch + n * per_image;
        std::fill_n(image, per_image, 0.0);
        std::vector<double> probs(static_cast<std::size_t>(channels));
        for (std::int64_t q = n * plane; q < (n + 1) * plane; ++q) {
          if (d.ignores(targets[q])) continue;
          const PixelView<T> px = view(q);
          if (channels == 1)
            probs[0] = lm::sigmoid_double(static_cast<double>(px.logit(0)));
          else
            softmax_into(px, channels, probs);
          for (std::int64_t c = 0; c < dice_classes; ++c)
            lm::add_dice_sums(image + 3 * c,
                              lm::dice_pixel_sums(channels, probs[channels == 1 ? 0 : c], targets[q], c));
        }
        image[per_image - 1] = lm::dice_image_loss(lp, image, channels);
      }
      for (std::int64_t n = 0; n < s.n; ++n) sums[loss_sum_dice] += scratch[n * per_image + per_image - 1];
    }

    // The per-pixel term and the gradient, per fixed-size chunk of pixels.
    const std::int64_t chunks = (pixels + reduction_chunk - 1) / reduction_chunk;
    std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static)
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      std::vector<double> probs(static_cast<std::size_t>(channels));
      double sum = 0.0;
      const std::int64_t end = std::min(pixels, (chunk + 1) * reduction_chunk);
      for (std::int64_t q = chunk * reduction_chunk; q < end; ++q) {
        const PixelView<T> px = view(q);
        const std::uint8_t target = targets[q];
        // binary pixels read no probabilities, ignored ones nothing
        const lm::SoftmaxStats sm =
            channels > 1 && !d.ignores(target) ? softmax_into(px, channels, probs) : lm::SoftmaxStats{};
        const auto logit = [&px](std::int64_t k) { return px.logit(k); };
        const auto prob = [&probs](std::int64_t k) { return probs[static_cast<std::size_t>(k)]; };
        const double* image_terms = lm::has_image_term(lp) ? scratch + (q / plane) * per_image : nullptr;
        const double weight = pixel_weights ? static_cast<double>(pixel_weights[q]) : 1.0;
        if (dz) {
          const auto write = [&](std::int64_t k, float g) { store(dz, px.base + k * st.c, g); };
          sum += lm::pixel_loss(lp, logit, prob, sm, channels, target, weight, scales.cross_entropy,
                                scales.dice, image_terms, write)
                     .loss;
        } else {
          sum += lm::pixel_loss(lp, logit, prob, sm, channels, target, weight, 0.0f, 0.0f, nullptr, nullptr)
                     .loss;
        }
      }
      partial[static_cast<std::size_t>(chunk)] = sum;
    }
    for (double v : partial) sums[loss_sum_cross_entropy] += v;
  });
}

void segmentation_counts(const void* logits, const ActShape& s, DType dtype, Layout layout,
                         const std::uint8_t* targets, std::int64_t* counts, int ignore_index) {
  dispatch_float(dtype, [&]<class T>(T*) {
    const T* z = static_cast<const T*>(logits);
    const ActStrides st = act_strides(s, layout);
    const std::int64_t plane = s.h * s.w;
    const std::int64_t pixels = s.n * plane;
    const std::int64_t classes = s.c > 1 ? s.c : 2;
    const auto size = static_cast<std::size_t>(3 * classes + 2);
    const std::int64_t chunks = (pixels + reduction_chunk - 1) / reduction_chunk;
    std::vector<std::int64_t> partial(static_cast<std::size_t>(chunks) * size, 0);
#pragma omp parallel for schedule(static)
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      std::int64_t* c = partial.data() + static_cast<std::size_t>(chunk) * size;
      const std::int64_t end = std::min(pixels, (chunk + 1) * reduction_chunk);
      for (std::int64_t p = chunk * reduction_chunk; p < end; ++p) {
        if (static_cast<int>(targets[p]) == ignore_index) continue;
        const std::int64_t n = p / plane, yx = p % plane;
        const std::int64_t base = n * st.n + (yx / s.w) * st.h + (yx % s.w) * st.w;
        std::int64_t pred = 0, truth = targets[p];
        if (s.c == 1) {
          pred = load(z, base) > 0.0f ? 1 : 0;
          truth = truth ? 1 : 0;
        } else {
          float best = load(z, base);
          for (std::int64_t k = 1; k < s.c; ++k) {
            const float v = load(z, base + k * st.c);
            if (v > best) best = v, pred = k;
          }
        }
        if (pred == truth) {
          c[3 * pred] += 1;  // true positive of its class
          c[3 * classes] += 1;
        } else {
          c[3 * pred + 1] += 1;                        // false positive of the predicted class
          if (truth < classes) c[3 * truth + 2] += 1;  // false negative of the true class
        }
        c[3 * classes + 1] += 1;
      }
    }
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
      for (std::size_t i = 0; i < size; ++i) counts[i] += partial[static_cast<std::size_t>(chunk) * size + i];
  });
}

void probabilities(const void* logits, const ActShape& s, DType dtype, Layout layout, float* probs) {
  dispatch_float(dtype, [&]<class T>(T*) {
    const T* z = static_cast<const T*>(logits);
    const ActStrides st = act_strides(s, layout);
    const std::int64_t plane = s.h * s.w;
    const std::int64_t pixels = s.n * plane;
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < pixels; ++p) {
      const std::int64_t n = p / plane, yx = p % plane;
      const std::int64_t base = n * st.n + (yx / s.w) * st.h + (yx % s.w) * st.w;
      float* out = probs + p * s.c;
      if (s.c == 1) {
        out[0] = loss_math::sigmoid(load(z, base));
        continue;
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (std::int64_t k = 0; k < s.c; ++k) mx = std::max(mx, load(z, base + k * st.c));
      float denom = 0.0f;
      for (std::int64_t k = 0; k < s.c; ++k) denom += (out[k] = std::exp(load(z, base + k * st.c) - mx));
      for (std::int64_t k = 0; k < s.c; ++k) out[k] /= denom;
    }
  });
}

void fill(void* data, std::int64_t count, DType dtype, double value) {
  switch (dtype) {
    case DType::f32:
      std::fill_n(static_cast<float*>(data), count, static_cast<float>(value));
      return;
    case DType::bf16:
      std::fill_n(static_cast<std::uint16_t*>(data), count, float_to_bf16(static_cast<float>(value)));
      return;
    case DType::i64:
      std::fill_n(static_cast<std::int64_t*>(data), count, static_cast<std::int64_t>(value));
      return;
    case DType::i32:
      std::fill_n(static_cast<std::int32_t*>(data), count, static_cast<std::int32_t>(value));
      return;
    case DType::u8:
      std::fill_n(static_cast<std::uint8_t*>(data), count, static_cast<std::uint8_t>(value));
      return;
    case DType::f64:
      std::fill_n(static_cast<double*>(data), count, value);
      return;
    case DType::f16:
      break;
  }
  throw Error(ErrorKind::unsupported, "fill: the CPU backend has no f16 kernels");
}

void scale(float* data, std::int64_t count, float factor) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) data[i] *= factor;
}

void add(const void* x, void* y, std::int64_t count, DType dtype) {
  dispatch_float(dtype, [&]<class T>(T*) {
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) store(out, i, load(out, i) + load(in, i));
  });
}

void adam_step(const AdamStep& a, float* params, const float* grads, float* m, float* v, std::int64_t count) {
  // torch.optim.Adam / AdamW, single-tensor path: bias corrections in double, the update in float.
  const double t = static_cast<double>(a.step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(a.beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(a.beta2), t);
  const auto step_size = static_cast<float>(static_cast<double>(a.lr) / bias1);
  const auto bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float decay = 1.0f - a.lr * a.weight_decay;
  const float b2 = a.beta2, one_b1 = 1.0f - a.beta1, one_b2 = 1.0f - a.beta2;
  const float eps = a.eps, gscale = a.grad_scale;
  const bool decoupled = a.decoupled_weight_decay && a.weight_decay != 0.0f;
  const float l2 = a.decoupled_weight_decay ? 0.0f : a.weight_decay;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    float g = grads[i] * gscale;
    if (l2 != 0.0f) g += l2 * params[i];
    if (decoupled) params[i] *= decay;
    const float mi = m[i] + one_b1 * (g - m[i]);
    const float vi = b2 * v[i] + one_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= step_size * (mi / (std::sqrt(vi) / bias2_sqrt + eps));
  }
}

void sgd_step(const SgdStep& a, float* params, const float* grads, float* momentum, std::int64_t count) {
  // torch.optim.SGD, single-tensor path, dampening 0.
  const float lr = a.lr, mu = a.momentum, wd = a.weight_decay, gscale = a.grad_scale;
  const bool nesterov = a.nesterov;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    float d = grads[i] * gscale;
    if (wd != 0.0f) d += wd * params[i];
    if (mu != 0.0f) {
      const float buf = mu * momentum[i] + d;
      momentum[i] = buf;
      d = nesterov ? d + mu * buf : buf;
    }
    params[i] -= lr * d;
  }
}

double sum_of_squares(const float* data, std::int64_t count) {
  double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (std::int64_t i = 0; i < count; ++i) sum += static_cast<double>(data[i]) * static_cast<double>(data[i]);
  return sum;
}

std::int64_t count_non_finite(const void* data, std::int64_t count, DType dtype) {
  return dispatch_float(dtype, [&]<class T>(T*) -> std::int64_t {
    const T* p = static_cast<const T*>(data);
    std::int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
    for (std::int64_t i = 0; i < count; ++i) bad += std::isfinite(load(p, i)) ? 0 : 1;
    return bad;
  });
}

}  // namespace unet::cpu
