// The canonical U-Net: parameter names and shapes as docs/MODEL.md lists them, the initialisation, the whole
// model's gradient against central finite differences, and learning (loss falls on a fixed batch).
//
// The gradient check: the engine's gradient of the real training loss (mean over pixels, computed by the
// backend) against central finite differences taken in double precision on an independent reference U-Net
// (reference_ops.h), after checking that both compute the same loss. Per parameter tensor, along the
// gradient, along its largest element and along a random direction, for every tensor of the model, over rows
// of depth, width, separable, channels, classes and layout.
//
// The tests of the model at work run on every device (rows cpu:0, cuda:0, ...; a device this machine lacks is
// skipped); a device other than the CPU is also compared with the CPU's fp32 gradients in each precision it
// supports.
#include "reference_ops.h"
#include "test_support.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/model/unet.h"
#include "unet/step/optimizer.h"

using namespace unet;

namespace {

struct Model {
  Backend& backend;
  std::unique_ptr<Stream> stream = backend.create_stream();
  ExecContext ctx;
  UNet net;
  Tensor pixels, targets;
  std::int64_t pixel_count = 0;

  Model(Backend& b, const UNetSpec& spec, std::int64_t n, std::int64_t h, std::int64_t w,
        Layout layout = Layout::nhwc, DType compute = DType::f32,
        std::uint64_t seed = qEnvironmentVariableIntValue("UNET_TEST_SEED"))
      : backend(b), ctx{backend, *stream, compute, layout}, net(spec, backend.allocator()) {
    net.initialize(ctx, 5 + seed);
    Rng rng(9 + seed);
    std::vector<std::uint8_t> px(static_cast<std::size_t>(n * h * w * spec.in_channels));
    for (auto& p : px) p = static_cast<std::uint8_t>(rng.below(256));
    // Targets in coherent bands (class = column band): per-pixel errors add up instead of cancelling as
    // random targets' would, so gradients stand well above finite-difference noise.
    std::vector<std::uint8_t> tg(static_cast<std::size_t>(n * h * w));
    const std::int64_t bands = std::max(spec.classes, 2);
    for (std::size_t i = 0; i < tg.size(); ++i)
      tg[i] = static_cast<std::uint8_t>((static_cast<std::int64_t>(i) % w) * bands / w);
    pixels = Tensor::empty(backend.allocator(), Shape{n, h, w, spec.in_channels}, DType::u8,
                           MemoryCategory::input_batch);
    targets = Tensor::empty(backend.allocator(), Shape{n, h, w}, DType::u8, MemoryCategory::input_batch);
    backend.copy_from_host(*stream, px.data(), pixels);
    backend.copy_from_host(*stream, tg.data(), targets);
    pixel_count = n * h * w;
  }

  // Mean loss; with `gradients`, also runs backward into the gradient slab.
  double loss(bool gradients) {
    Tensor sum = Tensor::empty(backend.allocator(), Shape{kLossSums}, DType::f64, MemoryCategory::other);
    backend.fill(*stream, sum, 0.0);
    UNet::Pass pass = net.forward(ctx, pixels, gradients);
    Tensor dlogits;
    if (gradients) dlogits = ctx.activation(pass.logits.act());
    backend.loss(*stream, LossDesc{}, pass.logits, targets, nullptr, gradients ? &dlogits : nullptr,
                 {.cross_entropy = 1.0f / static_cast<float>(pixel_count)}, sum, {});
    if (gradients) net.backward(ctx, pass, dlogits, false);
    return test::to_host<double>(backend, *stream, sum)[0] / static_cast<double>(pixel_count);
  }
};

UNetSpec spec_of(int in_channels, int classes, int width, int depth, bool separable) {
  UNetSpec s;
  s.in_channels = in_channels;
  s.classes = classes;
  s.width = width;
  s.depth = depth;
  s.separable = separable;
  return s;
}

}  // namespace

class TestUNet : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void parameterNamesAndShapesFollowTheSpec() {
    CountingAllocator alloc("plan", 0);
    UNet net(spec_of(3, 1, 16, 2, false), alloc);
    std::vector<std::pair<std::string, std::string>> got;
    for (const Param& p : net.params()) got.emplace_back(p.spec.name, p.spec.shape.str());
    const std::vector<std::pair<std::string, std::string>> expected{
        {"enc.0.c1.pw.weight", "[16, 3, 3, 3]"},  {"enc.0.c1.pw.bias", "[16]"},
        {"enc.0.c2.pw.weight", "[16, 16, 3, 3]"}, {"enc.0.c2.pw.bias", "[16]"},
        {"enc.1.c1.pw.weight", "[32, 16, 3, 3]"}, {"enc.1.c1.pw.bias", "[32]"},
        {"enc.1.c2.pw.weight", "[32, 32, 3, 3]"}, {"enc.1.c2.pw.bias", "[32]"},
        {"mid.c1.pw.weight", "[64, 32, 3, 3]"},   {"mid.c1.pw.bias", "[64]"},
        {"mid.c2.pw.weight", "[64, 64, 3, 3]"},   {"mid.c2.pw.bias", "[64]"},
        {"up.0.weight", "[64, 32, 2, 2]"},        {"up.0.bias", "[32]"},
        {"dec.0.c1.pw.weight", "[32, 64, 3, 3]"}, {"dec.0.c1.pw.bias", "[32]"},
        {"dec.0.c2.pw.weight", "[32, 32, 3, 3]"}, {"dec.0.c2.pw.bias", "[32]"},
        {"up.1.weight", "[32, 16, 2, 2]"},        {"up.1.bias", "[16]"},
        {"dec.1.c1.pw.weight", "[16, 32, 3, 3]"}, {"dec.1.c1.pw.bias", "[16]"},
        {"dec.1.c2.pw.weight", "[16, 16, 3, 3]"}, {"dec.1.c2.pw.bias", "[16]"},
        {"head.weight", "[1, 16, 1, 1]"},         {"head.bias", "[1]"}};
    QCOMPARE(got, expected);
    std::int64_t total = 0;
    for (const auto& p : net.params()) total += p.spec.shape.numel();
    QCOMPARE(net.parameter_count(), total);
  }

  void separableNamesFollowTheSpec() {
    CountingAllocator alloc("plan", 0);
    UNet net(spec_of(1, 3, 8, 1, true), alloc);
    std::vector<std::string> names;
    for (const Param& p : net.params()) names.push_back(p.spec.name + " " + p.spec.shape.str());
    const std::vector<std::string> expected{"enc.0.c1.dw.weight [1, 1, 3, 3]",
                                            "enc.0.c1.pw.weight [8, 1, 1, 1]",
                                            "enc.0.c1.pw.bias [8]",
                                            "enc.0.c2.dw.weight [8, 1, 3, 3]",
                                            "enc.0.c2.pw.weight [8, 8, 1, 1]",
                                            "enc.0.c2.pw.bias [8]",
                                            "mid.c1.dw.weight [8, 1, 3, 3]",
                                            "mid.c1.pw.weight [16, 8, 1, 1]",
                                            "mid.c1.pw.bias [16]",
                                            "mid.c2.dw.weight [16, 1, 3, 3]",
                                            "mid.c2.pw.weight [16, 16, 1, 1]",
                                            "mid.c2.pw.bias [16]",
                                            "up.0.weight [16, 8, 2, 2]",
                                            "up.0.bias [8]",
                                            "dec.0.c1.dw.weight [16, 1, 3, 3]",
                                            "dec.0.c1.pw.weight [8, 16, 1, 1]",
                                            "dec.0.c1.pw.bias [8]",
                                            "dec.0.c2.dw.weight [8, 1, 3, 3]",
                                            "dec.0.c2.pw.weight [8, 8, 1, 1]",
                                            "dec.0.c2.pw.bias [8]",
                                            "head.weight [3, 8, 1, 1]",
                                            "head.bias [3]"};
    QCOMPARE(names, expected);
  }

  void classicUNetHasItsKnownSize() {
    // The classic U-Net (width 64, depth 4, RGB in, 1 class) has 31,031,745 parameters with these conventions
    // (the same count PyTorch gives for this module tree).
    CountingAllocator alloc("plan", 0);
    UNet net(spec_of(3, 1, 64, 4, false), alloc);
    QCOMPARE(net.parameter_count(), 31031745);
  }

  void initialisationIsHeNormalAndSeeded() {
    const UNetSpec spec = spec_of(3, 1, 16, 3, false);
    const auto a = UNet::initial_slab(spec, 1), b = UNet::initial_slab(spec, 1),
               c = UNet::initial_slab(spec, 2);
    QCOMPARE(a, b);
    QVERIFY(a != c);
    CountingAllocator alloc("plan", 0);
    UNet net(spec, alloc);
    for (std::size_t i = 0; i < net.params().size(); ++i) {
      const ParamSpec& ps = net.params()[i].spec;
      const float* v = a.data() + net.offsets()[i];
      double sum = 0, sq = 0;
      const std::int64_t n = ps.shape.numel();
      for (std::int64_t k = 0; k < n; ++k) sum += v[k], sq += static_cast<double>(v[k]) * v[k];
      if (ps.is_bias) {
        QCOMPARE(sq, 0.0);
        continue;
      }
      if (n < 2000) continue;  // too few values for a tight moment check
      const double expected_var = 2.0 / static_cast<double>(ps.fan_in);
      const double var = sq / static_cast<double>(n) - (sum / n) * (sum / n);
      QVERIFY2(std::fabs(var / expected_var - 1.0) < 0.1,
               qPrintable(QString::fromStdString(ps.name) +
                          QString(": variance %1, expected %2").arg(var).arg(expected_var)));
    }
  }

  void gradientMatchesFiniteDifferences_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("in_channels");
    QTest::addColumn<int>("classes");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("depth");
    QTest::addColumn<bool>("separable");
    QTest::addColumn<Layout>("layout");
    for (const QString& d : test::test_devices()) {
      const auto row = [&](const char* name) { return &QTest::newRow(qPrintable(d + " " + name)); };
      *row("depth1 gray binary") << d << 1 << 1 << 4 << 1 << false << Layout::nhwc;
      *row("depth2 rgb binary") << d << 3 << 1 << 3 << 2 << false << Layout::nhwc;
      *row("depth3 rgb 3-class") << d << 3 << 3 << 2 << 3 << false << Layout::nhwc;
      *row("depth2 separable") << d << 3 << 1 << 4 << 2 << true << Layout::nhwc;
      *row("depth2 separable 4-class nchw") << d << 2 << 4 << 3 << 2 << true << Layout::nchw;
    }
  }
  void gradientMatchesFiniteDifferences() {
    QFETCH(int, in_channels);
    QFETCH(int, classes);
    QFETCH(int, width);
    QFETCH(int, depth);
    QFETCH(bool, separable);
    QFETCH(Layout, layout);
    UNET_FETCH_BACKEND(backend);
    const std::int64_t side = std::int64_t{4} << depth;
    Model m(*backend, spec_of(in_channels, classes, width, depth, separable), 2, side, side, layout);

    // Zero biases (the initialisation) put units whose whole input window is dead exactly on the ReLU's kink,
    // where the loss has no derivative; random biases move every unit off it.
    auto theta = m.net.get_parameters(m.ctx);
    Rng bias_rng(77);
    for (std::size_t i = 0; i < m.net.params().size(); ++i)
      if (m.net.params()[i].spec.is_bias)
        for (std::int64_t k = 0; k < m.net.params()[i].spec.shape.numel(); ++k)
          theta[static_cast<std::size_t>(m.net.offsets()[i] + k)] =
              static_cast<float>(0.1 * bias_rng.normal());
    m.net.set_parameters(m.ctx, theta);
    const double engine_loss = m.loss(true);
    const auto grads = test::to_host(m.backend, *m.stream, m.net.gradient_slab());

    // The same model in double precision.
    reference::UNetReference ref;
    ref.depth = depth;
    ref.separable = separable;
    ref.classes = classes;
    for (std::size_t i = 0; i < m.net.params().size(); ++i) {
      const auto begin = theta.begin() + m.net.offsets()[i];
      ref.params[m.net.params()[i].spec.name] =
          reference::Vec(begin, begin + m.net.params()[i].spec.shape.numel());
    }
    const auto pixels = test::to_host<std::uint8_t>(m.backend, *m.stream, m.pixels);
    const auto targets = test::to_host<std::uint8_t>(m.backend, *m.stream, m.targets);
    const ActShape in{2, in_channels, side, side};
    auto ref_loss = [&]() {
      ActShape out;
      const auto logits = ref.forward(pixels, in, &out);
      return reference::mean_loss(logits, out, targets);
    };
    // First: both compute the same function.
    QVERIFY2(std::fabs(ref_loss() - engine_loss) < 1e-5 * std::fabs(engine_loss),
             qPrintable(QString("loss: engine %1, reference %2").arg(engine_loss).arg(ref_loss())));

    Rng rng(21);
    for (std::size_t i = 0; i < m.net.params().size(); ++i) {
      const ParamSpec& ps = m.net.params()[i].spec;
      const auto offset = static_cast<std::size_t>(m.net.offsets()[i]);
      const auto n = static_cast<std::size_t>(ps.shape.numel());
      const std::vector<float> g(grads.begin() + static_cast<std::ptrdiff_t>(offset),
                                 grads.begin() + static_cast<std::ptrdiff_t>(offset + n));
      double g_norm = 0;
      std::size_t largest = 0;
      for (std::size_t k = 0; k < n; ++k) {
        g_norm += static_cast<double>(g[k]) * g[k];
        if (std::fabs(g[k]) > std::fabs(g[largest])) largest = k;
      }
      g_norm = std::sqrt(g_norm);
      QVERIFY2(g_norm > 0, qPrintable(QString::fromStdString(ps.name) + ": zero gradient"));

      // Three unit directions within this tensor: along the gradient (were it wrong, the true slope along it
      // would fall short of its norm), along its largest element, and a random one.
      std::vector<std::vector<double>> directions(3, std::vector<double>(n, 0.0));
      for (std::size_t k = 0; k < n; ++k) directions[0][k] = g[k] / g_norm;
      directions[1][largest] = 1.0;
      double r_norm = 0;
      for (auto& x : directions[2]) {
        x = rng.normal();
        r_norm += x * x;
      }
      for (auto& x : directions[2]) x /= std::sqrt(r_norm);

      reference::Vec& values = ref.params[ps.name];
      const reference::Vec original = values;
      for (std::size_t d = 0; d < directions.size(); ++d) {
        const auto& u = directions[d];
        double analytic = 0;
        for (std::size_t k = 0; k < n; ++k) analytic += g[k] * u[k];
        auto f_at = [&](double e) {
          for (std::size_t k = 0; k < n; ++k) values[k] = original[k] + e * u[k];
          return ref_loss();
        };
        const double coarse = (f_at(1e-6) - f_at(-1e-6)) / 2e-6;
        const double fine = (f_at(1e-7) - f_at(-1e-7)) / 2e-7;
        values = original;
        // In double, both steps agree unless one straddles a kink (rare at these sizes).
        const double numeric = std::fabs(coarse - fine) <= 1e-4 * std::fabs(fine) + 1e-9 ? coarse : fine;
        // Tolerance for f32 accumulation in the engine's gradient; relative to the tensor's gradient norm for
        // the element and random directions, whose slopes can be near zero.
        const double tol = 2e-3 * std::max(std::fabs(analytic), 0.05 * g_norm) + 1e-7;
        QVERIFY2(std::fabs(numeric - analytic) <= tol,
                 qPrintable(QString::fromStdString(ps.name) +
                            QString(" direction %1: engine %2, finite differences %3")
                                .arg(d)
                                .arg(analytic)
                                .arg(numeric)));
      }
    }
  }

  // The same model, weights and batch on a device in a precision, against the CPU in fp32: the loss and every
  // gradient, as normalised errors ||g - g_cpu|| / ||g_cpu|| per parameter tensor. fp32 <= 1e-4. The half
  // types round every layer's activations and gradients, and the deep layers' gradients, at the end of the
  // longest chains, drift most: PyTorch's own bf16 autocast on this model and batch is 0.07 to 0.19 from its
  // fp32 gradients (bench/precision_reference.py, three seeds; the engine's CPU bf16: 0.15), so bf16 <= 0.25;
  // fp16 keeps 3 more bits (8x less rounding), so <= 0.05. The CPU in fp32 is the reference, so that row is
  // not run.
  void gradientsMatchTheCpuInEachPrecision_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<DType>("compute");
    QTest::addColumn<double>("tolerance");
    for (const QString& d : test::test_devices()) {
      if (d != "cpu:0") QTest::newRow(qPrintable(d + " fp32")) << d << DType::f32 << 1e-4;
      QTest::newRow(qPrintable(d + " bf16")) << d << DType::bf16 << 0.25;
      QTest::newRow(qPrintable(d + " fp16")) << d << DType::f16 << 0.05;
    }
    // fp32 with TF32 convolutions: each convolution's products are off by up to 2 * 2^-10 of their
    // magnitudes (operands rounded to a 10-bit mantissa); a gradient at the end of the longest chain passes
    // 2 * 18 convolutions of this depth-3 model (forward and backward: 6 down, 2 at the bottom, 3 x (upconv
    // + 2) up, the head), whose errors add at worst.
    const double tf32 = 2 * 18 * 2.0 * 0x1p-10;
    for (const QString& d : test::tf32_devices())
      QTest::newRow(qPrintable(d + " fp32")) << d << DType::f32 << tf32;
  }
  void gradientsMatchTheCpuInEachPrecision() {
    QFETCH(DType, compute);
    QFETCH(double, tolerance);
    UNET_FETCH_BACKEND(backend);
    if (!backend->supports(compute))
      QSKIP(qPrintable(device + " does not compute in " +
                       QString::fromStdString(std::string(to_string(compute)))));
    const UNetSpec spec = spec_of(3, 3, 8, 3, false);
    CpuBackend cpu{CpuBackendOptions{}};
    Model reference(cpu, spec, 2, 32, 32);
    Model tested(*backend, spec, 2, 32, 32, Layout::nhwc, compute);
    tested.net.set_parameters(tested.ctx, reference.net.get_parameters(reference.ctx));
    const double want = reference.loss(true), got = tested.loss(true);
    // The loss, one sum over every pixel, keeps to the types' precision: 2e-2 for both half types.
    // With TF32, the forward pass alone: half the chain.
    const double loss_tolerance = compute != DType::f32    ? 2e-2
                                  : test::tf32_row(device) ? tolerance / 2
                                                           : tolerance;
    QVERIFY2(std::fabs(got - want) <= loss_tolerance * std::fabs(want),
             qPrintable(QString("loss %1, the CPU's %2").arg(got).arg(want)));
    const auto g_cpu = test::to_host(cpu, *reference.stream, reference.net.gradient_slab());
    const auto g = test::to_host(*backend, *tested.stream, tested.net.gradient_slab());
    for (std::size_t i = 0; i < reference.net.params().size(); ++i) {
      const auto begin = static_cast<std::size_t>(reference.net.offsets()[i]);
      const auto n = static_cast<std::size_t>(reference.net.params()[i].spec.shape.numel());
      const std::vector<float> a(g.begin() + static_cast<std::ptrdiff_t>(begin),
                                 g.begin() + static_cast<std::ptrdiff_t>(begin + n));
      const std::vector<float> b(g_cpu.begin() + static_cast<std::ptrdiff_t>(begin),
                                 g_cpu.begin() + static_cast<std::ptrdiff_t>(begin + n));
      const double e = test::norm_relative_error(a, b);
      QVERIFY2(e <= tolerance, qPrintable(QString::fromStdString(reference.net.params()[i].spec.name) +
                                          QString(": normalised error %1").arg(e)));
    }
  }

  void trainingAndInferenceForwardAgree_data() { test::device_rows(); }
  void trainingAndInferenceForwardAgree() {
    UNET_FETCH_BACKEND(backend);
    Model m(*backend, spec_of(3, 3, 2, 1, false), 2, 16, 16);
    const double a = m.loss(false), b = m.loss(true), c = m.loss(false);
    QCOMPARE(a, c);
    QCOMPARE(a, b);
  }

  void checkpointingKeepsGradientsAndHalvesKeptActivations_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<bool>("separable");
    QTest::addColumn<int>("depth");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " plain depth 4")) << d << false << 4;
      QTest::newRow(qPrintable(d + " separable depth 3")) << d << true << 3;
    }
  }
  void checkpointingKeepsGradientsAndHalvesKeptActivations() {
    QFETCH(bool, separable);
    QFETCH(int, depth);
    UNET_FETCH_BACKEND(backend);
    const UNetSpec spec = spec_of(3, 1, 16, depth, separable);
    struct Measured {
      std::vector<float> grads;
      std::int64_t kept = 0, peak = 0;
    };
    auto run = [&](bool checkpointing) {
      Model m(*backend, spec, 4, 64, 64);
      m.net.set_checkpointing(checkpointing);
      const auto act = static_cast<std::size_t>(MemoryCategory::activations);
      m.backend.allocator().reset_peak();
      const std::int64_t before = m.backend.allocator().stats().in_use_by[act];
      UNet::Pass pass = m.net.forward(m.ctx, m.pixels, true);
      Measured r;
      // What the forward pass keeps for backward (the logits included, in both modes).
      r.kept = m.backend.allocator().stats().in_use_by[act] - before;
      Tensor sum = Tensor::empty(m.backend.allocator(), Shape{kLossSums}, DType::f64, MemoryCategory::other);
      m.backend.fill(*m.stream, sum, 0.0);
      Tensor dlogits = m.ctx.activation(pass.logits.act());
      m.backend.loss(*m.stream, LossDesc{}, pass.logits, m.targets, nullptr, &dlogits,
                     {.cross_entropy = 1e-3f}, sum, {});
      m.net.backward(m.ctx, pass, std::move(dlogits), false);
      r.peak = m.backend.allocator().stats().peak_by[act] - before;
      r.grads = test::to_host(m.backend, *m.stream, m.net.gradient_slab());
      return r;
    };
    const Measured plain = run(false), checkpointed = run(true);
    QCOMPARE(checkpointed.grads, plain.grads);  // recomputation is exact
    qInfo("activations kept for backward: %.2f -> %.2f MiB; activation peak %.2f -> %.2f MiB",
          plain.kept / 1048576.0, checkpointed.kept / 1048576.0, plain.peak / 1048576.0,
          checkpointed.peak / 1048576.0);
    QVERIFY2(2 * checkpointed.kept <= plain.kept, "checkpointing keeps more than half the activations");
    QVERIFY(checkpointed.peak < plain.peak);
  }

  void lossFallsOnAFixedBatch_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("classes");
    QTest::addColumn<bool>("separable");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " binary")) << d << 1 << false;
      QTest::newRow(qPrintable(d + " binary separable")) << d << 1 << true;
      QTest::newRow(qPrintable(d + " 3-class")) << d << 3 << false;
    }
  }
  void lossFallsOnAFixedBatch() {
    QFETCH(int, classes);
    QFETCH(bool, separable);
    UNET_FETCH_BACKEND(backend);
    // A learnable batch: the target is a function of the pixels (bright pixels are foreground, or the class
    // is the brightness band), so a small U-Net can fit it.
    const UNetSpec spec = spec_of(1, classes, 8, 2, separable);
    Model m(*backend, spec, 4, 32, 32);
    Rng rng(4);
    std::vector<std::uint8_t> px(4 * 32 * 32), tg(4 * 32 * 32);
    for (std::size_t i = 0; i < px.size(); ++i) {
      const int y = static_cast<int>(i / 32 % 32), x = static_cast<int>(i % 32),
                img = static_cast<int>(i / 1024);
      const bool inside = (x - 10 - 3 * img) * (x - 10 - 3 * img) + (y - 16) * (y - 16) < 40 + 10 * img;
      px[i] = static_cast<std::uint8_t>(
          std::clamp(40.0 + (inside ? 120.0 : 0.0) + 20.0 * rng.normal(), 0.0, 255.0));
      tg[i] = static_cast<std::uint8_t>(inside ? (classes == 1 ? 1 : 1 + (x > 16)) : 0);
    }
    m.backend.copy_from_host(*m.stream, px.data(), m.pixels);
    m.backend.copy_from_host(*m.stream, tg.data(), m.targets);
    Optimizer adam(m.ctx, m.net, OptimizerOptions{.kind = OptimizerKind::adam, .lr = 3e-3f});
    const double first = m.loss(true);
    double last = first;
    for (int step = 1; step <= 120; ++step) {
      adam.step(m.ctx, {.lr = 3e-3f, .momentum = std::nullopt, .grad_scale = 1.0f});
      last = m.loss(true);
    }
    QVERIFY2(last < 0.2 * first, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
  }
};

QTEST_GUILESS_MAIN(TestUNet)
#include "test_unet.moc"
