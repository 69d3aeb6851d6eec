// Every layer kind, forward and backward, on every device (rows cpu:0, cuda:0, ...; a device this machine
// lacks is skipped):
// - forward against a naive double-precision reference written here;
// - backward against central finite differences of f = sum(y * r) for a random r, element by element on a
//   sample of inputs, weights and biases. Convolutions are linear in each element between ReLU kinks, so the
//   differences are exact up to rounding; samples whose perturbation flips an output's ReLU state (seen from
//   the outputs at +eps and -eps) are skipped, and max-pool inputs are spaced wider than the step so that no
//   window's winner changes.
// Rows cover both layouts, odd sizes, and the accumulate flag.
#include <functional>
#include <memory>

#include "reference_ops.h"
#include "test_support.h"
#include "unet/layers/conv.h"
#include "unet/layers/max_pool.h"
#include "unet/layers/up_conv.h"

using namespace unet;

namespace {

// Host activations are kept in logical NCHW order; these convert to and from a device layout.
std::vector<float> to_layout(const std::vector<float>& nchw, const ActShape& s, Layout layout) {
  if (layout == Layout::nchw) return nchw;
  std::vector<float> out(nchw.size());
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t c = 0; c < s.c; ++c)
      for (std::int64_t h = 0; h < s.h; ++h)
        for (std::int64_t w = 0; w < s.w; ++w)
          out[static_cast<std::size_t>(((n * s.h + h) * s.w + w) * s.c + c)] =
              nchw[static_cast<std::size_t>(((n * s.c + c) * s.h + h) * s.w + w)];
  return out;
}

std::vector<float> from_layout(const std::vector<float>& data, const ActShape& s, Layout layout) {
  if (layout == Layout::nchw) return data;
  std::vector<float> out(data.size());
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t c = 0; c < s.c; ++c)
      for (std::int64_t h = 0; h < s.h; ++h)
        for (std::int64_t w = 0; w < s.w; ++w)
          out[static_cast<std::size_t>(((n * s.c + c) * s.h + h) * s.w + w)] =
              data[static_cast<std::size_t>(((n * s.h + h) * s.w + w) * s.c + c)];
  return out;
}

// --- a layer on a backend, with its own parameter and gradient slabs ---------------------------------------

enum class Kind { conv3x3_relu, conv3x3, conv1x1, depthwise3x3, separable3x3_relu, upconv2x2, maxpool2x2 };

struct Harness {
  Backend& backend;
  std::unique_ptr<Stream> stream = backend.create_stream();
  Layout layout;
  ExecContext ctx{backend, *stream, DType::f32, layout};
  std::unique_ptr<Layer> layer;
  std::vector<Param> params;
  ActShape in;

  Harness(Backend& b, Kind kind, ActShape input, std::int64_t c_out, Layout l)
      : backend(b), layout(l), in(input) {
    switch (kind) {
      case Kind::conv3x3_relu:
        layer = std::make_unique<Conv2d>(
            "c", ConvOptions{.c_in = in.c, .c_out = c_out, .kernel = 3, .relu = true});
        break;
      case Kind::conv3x3:
        layer = std::make_unique<Conv2d>("c", ConvOptions{.c_in = in.c, .c_out = c_out, .kernel = 3});
        break;
      case Kind::conv1x1:
        layer = std::make_unique<Conv2d>("c", ConvOptions{.c_in = in.c, .c_out = c_out, .kernel = 1});
        break;
      case Kind::depthwise3x3:
        layer = std::make_unique<Conv2d>(
            "c", ConvOptions{.c_in = in.c, .c_out = in.c, .kernel = 3, .depthwise = true, .bias = false});
        break;
      case Kind::separable3x3_relu:
        layer = make_conv3x3_relu("s", in.c, c_out, true);
        break;
      case Kind::upconv2x2:
        layer = std::make_unique<UpConv2x2>("u", in.c, c_out);
        break;
      case Kind::maxpool2x2:
        layer = std::make_unique<MaxPool2x2>("p", in.c);
        break;
    }
    params.reserve(layer->param_specs().size());
    std::vector<Param*> bound;
    std::uint64_t seed = 100;
    for (const ParamSpec& ps : layer->param_specs()) {
      const auto values = test::random_values(ps.shape.numel(), seed++, 0.5);
      Param p{ps, test::to_device(backend, *stream, values, ps.shape, MemoryCategory::parameters),
              Tensor::empty(backend.allocator(), ps.shape, DType::f32, MemoryCategory::gradients)};
      backend.fill(*stream, p.grad, 0.0);
      params.push_back(std::move(p));
      bound.push_back(&params.back());
    }
    layer->bind(bound);
  }

  ActShape out() const { return layer->output_shape(in); }

  Tensor upload(const std::vector<float>& nchw, const ActShape& s) {
    return test::to_device(backend, *stream, to_layout(nchw, s, layout), s.shape(),
                           MemoryCategory::activations, layout);
  }

  // y in logical NCHW order.
  std::vector<float> forward(const std::vector<float>& x) {
    Tensor xt = upload(x, in);
    Tensor y = layer->forward(ctx, xt, nullptr);
    return from_layout(test::to_host(backend, *stream, y), out(), layout);
  }

  // Runs forward and backward with dy = r; returns dx (NCHW) and leaves the gradients in params.
  std::vector<float> backward(const std::vector<float>& x, const std::vector<float>& r, bool accumulate) {
    Tensor xt = upload(x, in);
    std::unique_ptr<LayerState> state;
    Tensor y = layer->forward(ctx, xt, &state);
    Tensor dx = layer->backward(ctx, *state, upload(r, out()), true, accumulate);
    return from_layout(test::to_host(backend, *stream, dx), in, layout);
  }

  std::vector<float> host(const Tensor& t) { return test::to_host(backend, *stream, t); }
  void set(Tensor& t, const std::vector<float>& v) { backend.copy_from_host(*stream, v.data(), t); }
};

double project(const std::vector<float>& y, const std::vector<float>& r) {
  double f = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) f += static_cast<double>(y[i]) * r[i];
  return f;
}

bool same_support(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if ((a[i] > 0) != (b[i] > 0)) return false;
  return true;
}

// Inputs with distinct values (gaps of at least 0.02) so that max-pool winners are stable under small steps.
std::vector<float> distinct_values(std::int64_t count, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 0.02f * static_cast<float>(i) - 0.01f * static_cast<float>(count);
  Rng rng(seed);
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  return v;
}

}  // namespace

Q_DECLARE_METATYPE(Kind)

class TestLayers : public QObject {
  Q_OBJECT

  // with_tf32: the GPU rows again with TF32 on (forward only: finite differences cannot resolve TF32's
  // rounding, and accumulation is exact either way).
  static void rows(bool with_tf32 = false) {
    QTest::addColumn<QString>("device");
    QTest::addColumn<Kind>("kind");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("c_in");
    QTest::addColumn<int>("c_out");
    QTest::addColumn<int>("h");
    QTest::addColumn<int>("w");
    const std::pair<Layout, const char*> layouts[] = {{Layout::nhwc, "nhwc"}, {Layout::nchw, "nchw"}};
    QStringList devices = test::test_devices();
    if (with_tf32) devices += test::tf32_devices();
    for (const QString& device : devices)
      for (auto [layout, lname] : layouts) {
        auto row = [&](const char* name, Kind k, int n, int ci, int co, int h, int w) {
          QTest::newRow(qPrintable(device + " " + name + "/" + lname))
              << device << k << layout << n << ci << co << h << w;
        };
        row("conv3x3+relu", Kind::conv3x3_relu, 2, 3, 5, 6, 10);
        row("conv3x3+relu wide", Kind::conv3x3_relu, 1, 16, 32, 8, 8);
        row("conv3x3", Kind::conv3x3, 2, 4, 3, 5, 7);
        row("conv1x1", Kind::conv1x1, 2, 8, 3, 6, 6);
        row("depthwise3x3", Kind::depthwise3x3, 2, 6, 6, 7, 5);
        row("separable3x3+relu", Kind::separable3x3_relu, 2, 4, 6, 6, 8);
        row("upconv2x2", Kind::upconv2x2, 2, 6, 3, 3, 5);
        row("maxpool2x2", Kind::maxpool2x2, 2, 5, 5, 6, 8);
      }
  }

 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void forwardMatchesReference_data() { rows(true); }
  void forwardMatchesReference() {
    QFETCH(Kind, kind);
    QFETCH(Layout, layout);
    QFETCH(int, n);
    QFETCH(int, c_in);
    QFETCH(int, c_out);
    QFETCH(int, h);
    QFETCH(int, w);
    UNET_FETCH_BACKEND(backend);
    if (kind == Kind::separable3x3_relu) QSKIP("composite: covered by its parts and by its gradient check");
    Harness hs(*backend, kind, {n, c_in, h, w}, c_out, layout);
    const auto x = test::random_values(hs.in.numel(), 1);
    const std::vector<float> y = hs.forward(x);
    auto doubles = [](const std::vector<float>& v) { return reference::Vec(v.begin(), v.end()); };
    // The layer in double; with magnitudes (absolute values in, no ReLU), the sum of |x| |w| (+ |b|) behind
    // each output, which bounds what rounding the operands can change.
    auto reference_of = [&](bool magnitudes) {
      auto values = [&](const std::vector<float>& v) {
        reference::Vec d = doubles(v);
        if (magnitudes)
          for (double& e : d) e = std::fabs(e);
        return d;
      };
      const reference::Vec xs = values(x);
      switch (kind) {
        case Kind::upconv2x2:
          return reference::upconv(xs, hs.in, values(hs.host(hs.params[0].value)),
                                   values(hs.host(hs.params[1].value)), c_out);
        case Kind::maxpool2x2:
          return reference::maxpool(xs, hs.in);
        default: {
          const ConvOptions& o = static_cast<Conv2d&>(*hs.layer).options();
          reference::Vec bias;
          if (o.bias) bias = values(hs.host(hs.params[1].value));
          return reference::conv(xs, hs.in, values(hs.host(hs.params[0].value)), o.bias ? &bias : nullptr,
                                 o.c_out, o.kernel, o.depthwise, o.relu && !magnitudes);
        }
      }
    };
    const reference::Vec ref = reference_of(false);
    QCOMPARE(y.size(), ref.size());
    // TF32 rounds each operand of a product to a 10-bit mantissa (relative error up to 2^-10 when the
    // hardware truncates), so a product is off by up to 2 * 2^-10 of its magnitude, and a sum of products by
    // that much of the sum of their magnitudes; accumulation stays fp32.
    const reference::Vec bound = test::tf32_row(device) ? reference_of(true) : reference::Vec(y.size(), 0.0);
    double worst = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double allowed = 1e-5 * (1.0 + std::fabs(ref[i])) + 2.0 * 0x1p-10 * bound[i];
      worst = std::max(worst, std::fabs(y[i] - ref[i]) / allowed);
    }
    QVERIFY2(worst < 1.0, qPrintable(QString("max error %1 of what is allowed").arg(worst)));
  }

  void backwardMatchesFiniteDifferences_data() { rows(); }
  void backwardMatchesFiniteDifferences() {
    QFETCH(Kind, kind);
    QFETCH(Layout, layout);
    QFETCH(int, n);
    QFETCH(int, c_in);
    QFETCH(int, c_out);
    QFETCH(int, h);
    QFETCH(int, w);
    UNET_FETCH_BACKEND(backend);
    Harness hs(*backend, kind, {n, c_in, h, w}, c_out, layout);
    const bool pool = kind == Kind::maxpool2x2;
    // Only a ReLU at the output makes f piecewise; its kinks show as outputs that switch between 0 and > 0.
    const bool relu = kind == Kind::conv3x3_relu || kind == Kind::separable3x3_relu;
    std::vector<float> x = pool ? distinct_values(hs.in.numel(), 3) : test::random_values(hs.in.numel(), 3);
    const auto r = test::random_values(hs.out().numel(), 4);
    const std::vector<float> dx = hs.backward(x, r, false);
    // Small steps where f has kinks (fewer samples straddle one), large ones where it is linear (less
    // rounding).
    const float eps = pool ? 0.005f : relu ? 0.004f : 0.05f;

    // f(perturbed) at +eps and -eps; false when the step changed a ReLU state or a pooling winner.
    auto central = [&](const std::function<void(float)>& set_delta, double& derivative) {
      set_delta(eps);
      const auto yp = hs.forward(x);
      set_delta(-eps);
      const auto ym = hs.forward(x);
      set_delta(0.0f);
      if (relu && !same_support(yp, ym)) return false;
      derivative = (project(yp, r) - project(ym, r)) / (2.0 * eps);
      return true;
    };
    auto compare = [&](const char* what, std::size_t i, double analytic, double numeric) {
      const double tol = 2e-3 * std::max({1.0, std::fabs(analytic), std::fabs(numeric)});
      HELPER_VERIFY2(std::fabs(analytic - numeric) <= tol,
                     qPrintable(QString("%1[%2]: analytic %3, finite differences %4")
                                    .arg(what)
                                    .arg(i)
                                    .arg(analytic)
                                    .arg(numeric)));
      return true;
    };

    // Samples `want` elements of a tensor that do not straddle a kink (up to 4x as many tries).
    Rng pick(11);
    auto check_elements = [&](const char* what, std::size_t count, const std::vector<float>& analytic,
                              const std::function<void(std::size_t, float)>& set_delta) {
      const int want = 16;
      int valid = 0;
      for (int tries = 0; tries < 4 * want && valid < want; ++tries) {
        const auto i = static_cast<std::size_t>(pick.below(count));
        double fd = 0.0;
        if (!central([&](float d) { set_delta(i, d); }, fd)) continue;
        if (!compare(what, i, analytic[i], fd)) return false;
        ++valid;
      }
      HELPER_VERIFY2(valid >= want / 2,
                     qPrintable(QString("%1: only %2 samples away from kinks").arg(what).arg(valid)));
      return true;
    };
    const std::vector<float> x0 = x;
    QVERIFY(check_elements("dx", x.size(), dx, [&](std::size_t i, float d) { x[i] = x0[i] + d; }));
    for (Param& param : hs.params) {
      const auto grad = hs.host(param.grad);
      const auto original = hs.host(param.value);
      auto values = original;
      QVERIFY(check_elements(param.spec.name.c_str(), values.size(), grad, [&](std::size_t i, float d) {
        values[i] = original[i] + d;
        hs.set(param.value, values);
      }));
    }
  }

  void accumulateAddsToGradients_data() { rows(); }
  void accumulateAddsToGradients() {
    QFETCH(Kind, kind);
    QFETCH(Layout, layout);
    QFETCH(int, n);
    QFETCH(int, c_in);
    QFETCH(int, c_out);
    QFETCH(int, h);
    QFETCH(int, w);
    UNET_FETCH_BACKEND(backend);
    Harness hs(*backend, kind, {n, c_in, h, w}, c_out, layout);
    if (hs.params.empty()) QSKIP("no parameters");
    const auto x1 = test::random_values(hs.in.numel(), 5), x2 = test::random_values(hs.in.numel(), 6);
    const auto r1 = test::random_values(hs.out().numel(), 7), r2 = test::random_values(hs.out().numel(), 8);
    std::vector<std::vector<float>> g1, g2;
    hs.backward(x1, r1, false);
    for (auto& p : hs.params) g1.push_back(hs.host(p.grad));
    hs.backward(x2, r2, false);
    for (auto& p : hs.params) g2.push_back(hs.host(p.grad));
    hs.backward(x1, r1, false);
    hs.backward(x2, r2, true);
    for (std::size_t p = 0; p < hs.params.size(); ++p) {
      const auto sum = hs.host(hs.params[p].grad);
      std::vector<float> expected(sum.size());
      for (std::size_t i = 0; i < sum.size(); ++i) expected[i] = g1[p][i] + g2[p][i];
      QVERIFY2(test::max_relative_error(sum, expected, 1e-4) < 1e-5, hs.params[p].spec.name.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestLayers)
#include "test_layers.moc"
