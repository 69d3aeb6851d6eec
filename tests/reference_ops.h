// Naive double-precision references for the U-Net's operations and the whole model, in logical NCHW order.
// Slow and obviously right: the tests compare the engine with them, and take finite differences on them in
// double precision, where steps can be tiny without f32 rounding or ReLU kinks getting in the way.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/core/shape.h"

namespace unet::reference {

using Vec = std::vector<double>;

inline std::size_t at(const ActShape& s, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return static_cast<std::size_t>(((n * s.c + c) * s.h + h) * s.w + w);
}

// 'same' convolution, stride 1; weights [out, in, k, k] or, depthwise, [c, 1, k, k]; bias optional.
inline Vec conv(const Vec& x, const ActShape& s, const Vec& w, const Vec* b, std::int64_t c_out, int k,
                bool depthwise, bool relu) {
  const ActShape out{s.n, c_out, s.h, s.w};
  Vec y(static_cast<std::size_t>(out.numel()));
  const int pad = k / 2;
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t oc = 0; oc < c_out; ++oc)
      for (std::int64_t h = 0; h < s.h; ++h)
        for (std::int64_t ww = 0; ww < s.w; ++ww) {
          double acc = b ? (*b)[static_cast<std::size_t>(oc)] : 0.0;
          const std::int64_t ic_begin = depthwise ? oc : 0, ic_end = depthwise ? oc + 1 : s.c;
          for (std::int64_t ic = ic_begin; ic < ic_end; ++ic)
            for (int kh = 0; kh < k; ++kh)
              for (int kw = 0; kw < k; ++kw) {
                const std::int64_t ih = h + kh - pad, iw = ww + kw - pad;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                const std::int64_t wi =
                    depthwise ? (oc * k + kh) * k + kw : ((oc * s.c + ic) * k + kh) * k + kw;
                acc += w[static_cast<std::size_t>(wi)] * x[at(s, n, ic, ih, iw)];
              }
          y[at(out, n, oc, h, ww)] = relu ? std::max(acc, 0.0) : acc;
        }
  return y;
}

// Transposed convolution 2x2 stride 2, PyTorch's ConvTranspose2d weight layout [in, out, 2, 2].
inline Vec upconv(const Vec& x, const ActShape& s, const Vec& w, const Vec& b, std::int64_t c_out) {
  const ActShape out{s.n, c_out, 2 * s.h, 2 * s.w};
  Vec y(static_cast<std::size_t>(out.numel()));
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t o = 0; o < c_out; ++o)
      for (std::int64_t h = 0; h < out.h; ++h)
        for (std::int64_t ww = 0; ww < out.w; ++ww) {
          double acc = b[static_cast<std::size_t>(o)];
          const std::int64_t kh = h % 2, kw = ww % 2;
          for (std::int64_t i = 0; i < s.c; ++i)
            acc += w[static_cast<std::size_t>(((i * c_out + o) * 2 + kh) * 2 + kw)] *
                   x[at(s, n, i, h / 2, ww / 2)];
          y[at(out, n, o, h, ww)] = acc;
        }
  return y;
}

inline Vec maxpool(const Vec& x, const ActShape& s) {
  const ActShape out{s.n, s.c, s.h / 2, s.w / 2};
  Vec y(static_cast<std::size_t>(out.numel()));
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t c = 0; c < s.c; ++c)
      for (std::int64_t h = 0; h < out.h; ++h)
        for (std::int64_t w = 0; w < out.w; ++w) {
          double m = -INFINITY;
          for (int a = 0; a < 2; ++a)
            for (int bb = 0; bb < 2; ++bb) m = std::max(m, x[at(s, n, c, 2 * h + a, 2 * w + bb)]);
          y[at(out, n, c, h, w)] = m;
        }
  return y;
}

// [a, b] along channels.
inline Vec concat(const Vec& a, const ActShape& sa, const Vec& b, const ActShape& sb) {
  const ActShape out{sa.n, sa.c + sb.c, sa.h, sa.w};
  Vec y(static_cast<std::size_t>(out.numel()));
  for (std::int64_t n = 0; n < out.n; ++n)
    for (std::int64_t c = 0; c < out.c; ++c)
      for (std::int64_t h = 0; h < out.h; ++h)
        for (std::int64_t w = 0; w < out.w; ++w)
          y[at(out, n, c, h, w)] = c < sa.c ? a[at(sa, n, c, h, w)] : b[at(sb, n, c - sa.c, h, w)];
  return y;
}

// Mean loss over pixels: binary cross-entropy with logits (one channel) or softmax cross-entropy.
inline double mean_loss(const Vec& logits, const ActShape& s, const std::vector<std::uint8_t>& targets) {
  double sum = 0.0;
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t h = 0; h < s.h; ++h)
      for (std::int64_t w = 0; w < s.w; ++w) {
        const std::uint8_t t = targets[static_cast<std::size_t>((n * s.h + h) * s.w + w)];
        if (s.c == 1) {
          const double z = logits[at(s, n, 0, h, w)], target = t ? 1.0 : 0.0;
          sum += std::max(z, 0.0) - z * target + std::log1p(std::exp(-std::fabs(z)));
        } else {
          double m = -INFINITY, acc = 0.0;
          for (std::int64_t c = 0; c < s.c; ++c) m = std::max(m, logits[at(s, n, c, h, w)]);
          for (std::int64_t c = 0; c < s.c; ++c) acc += std::exp(logits[at(s, n, c, h, w)] - m);
          sum += m + std::log(acc) - logits[at(s, n, t, h, w)];
        }
      }
  return sum / static_cast<double>(s.n * s.h * s.w);
}

// The canonical U-Net of docs/MODEL.md from named parameters ("enc.0.c1.pw.weight" -> values).
struct UNetReference {
  int depth = 1;
  bool separable = false;
  std::int64_t classes = 1;
  std::map<std::string, Vec> params;

  const Vec& p(const std::string& name) const { return params.at(name); }

  Vec conv3x3_relu(const std::string& name, const Vec& x, ActShape& s, std::int64_t c_out) const {
    Vec y;
    if (separable) {
      const Vec t = conv(x, s, p(name + ".dw.weight"), nullptr, s.c, 3, true, false);
      y = conv(t, s, p(name + ".pw.weight"), &p(name + ".pw.bias"), c_out, 1, false, true);
    } else {
      y = conv(x, s, p(name + ".pw.weight"), &p(name + ".pw.bias"), c_out, 3, false, true);
    }
    s.c = c_out;
    return y;
  }

  // pixels: [n, h, w, c] bytes. Returns logits [n, classes, h, w].
  Vec forward(const std::vector<std::uint8_t>& pixels, ActShape in, ActShape* out_shape = nullptr) const {
    Vec x(static_cast<std::size_t>(in.numel()));
    for (std::int64_t n = 0; n < in.n; ++n)
      for (std::int64_t c = 0; c < in.c; ++c)
        for (std::int64_t h = 0; h < in.h; ++h)
          for (std::int64_t w = 0; w < in.w; ++w)
            x[at(in, n, c, h, w)] =
                pixels[static_cast<std::size_t>(((n * in.h + h) * in.w + w) * in.c + c)] / 255.0;
    ActShape s = in;
    std::vector<Vec> skips;
    std::vector<ActShape> skip_shapes;
    for (int l = 0; l < depth; ++l) {
      const std::int64_t c = p("enc." + std::to_string(l) + ".c2.pw.bias").size();
      x = conv3x3_relu("enc." + std::to_string(l) + ".c1", x, s, c);
      x = conv3x3_relu("enc." + std::to_string(l) + ".c2", x, s, c);
      skips.push_back(x);
      skip_shapes.push_back(s);
      x = maxpool(x, s);
      s = {s.n, s.c, s.h / 2, s.w / 2};
    }
    const std::int64_t c_mid = p("mid.c2.pw.bias").size();
    x = conv3x3_relu("mid.c1", x, s, c_mid);
    x = conv3x3_relu("mid.c2", x, s, c_mid);
    for (int i = 0; i < depth; ++i) {
      const std::string up = "up." + std::to_string(i);
      const std::int64_t c = p(up + ".bias").size();
      Vec u = upconv(x, s, p(up + ".weight"), p(up + ".bias"), c);
      const ActShape us{s.n, c, 2 * s.h, 2 * s.w};
      const auto l = static_cast<std::size_t>(depth - 1 - i);
      x = concat(u, us, skips[l], skip_shapes[l]);
      s = {us.n, us.c + skip_shapes[l].c, us.h, us.w};
      x = conv3x3_relu("dec." + std::to_string(i) + ".c1", x, s, c);
      x = conv3x3_relu("dec." + std::to_string(i) + ".c2", x, s, c);
    }
    x = conv(x, s, p("head.weight"), &p("head.bias"), classes, 1, false, false);
    s.c = classes;
    if (out_shape) *out_shape = s;
    return x;
  }
};

}  // namespace unet::reference
