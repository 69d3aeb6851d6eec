// The backends' own operations: losses (value and gradient), segmentation counts, probabilities, Adam,
// channel concat/split, input scaling, non-finite counts and events — each against a hand-computed or
// double-precision reference. One body per operation runs on every device (rows cpu:0, cuda:0, ...; a device
// this machine lacks is skipped).
#include <omp.h>

#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include "reference_ops.h"
#include "test_data_dir.h"
#include "test_support.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/devices.h"
#include "unet/config/config.h"
#include "unet/step/data_parallel.h"

using namespace unet;

namespace {

struct Fixture {
  explicit Fixture(Backend& b) : backend(b) {}
  Backend& backend;
  std::unique_ptr<Stream> stream = backend.create_stream();

  Tensor f32(const std::vector<float>& v, const Shape& shape, Layout layout = Layout::nhwc) {
    return test::to_device(backend, *stream, v, shape, MemoryCategory::other, layout);
  }
  Tensor u8(const std::vector<std::uint8_t>& v, const Shape& shape) {
    Tensor t = Tensor::empty(backend.allocator(), shape, DType::u8, MemoryCategory::input_batch);
    backend.copy_from_host(*stream, v.data(), t);
    return t;
  }
  // Pixel weights f32 [n, h, w].
  Tensor weights(const std::vector<float>& v, const Shape& shape) {
    Tensor t = Tensor::empty(backend.allocator(), shape, DType::f32, MemoryCategory::input_batch);
    backend.copy_from_host(*stream, v.data(), t);
    return t;
  }
  Tensor scalar_f64() {
    Tensor t = Tensor::empty(backend.allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    backend.fill(*stream, t, 0.0);
    return t;
  }
  // Backend::loss with the workspace it asks for: the sums {cross-entropy/focal, Dice}.
  std::array<double, kLossSums> loss(const LossDesc& d, const Tensor& logits, const Tensor& targets,
                                     Tensor* dz, LossGradScales scales,
                                     const Tensor* pixel_weights = nullptr) {
    Tensor sums = Tensor::empty(backend.allocator(), Shape{kLossSums}, DType::f64, MemoryCategory::other);
    backend.fill(*stream, sums, 0.0);
    const Buffer scratch = backend.allocator().allocate(backend.loss_workspace_bytes(d, logits.act()),
                                                        MemoryCategory::workspace);
    backend.loss(*stream, d, logits, targets, pixel_weights, dz, scales, sums,
                 {scratch.data(), scratch.bytes()});
    const auto host_sums = host<double>(sums);
    return {host_sums[0], host_sums[1]};
  }
  template <class T = float>
  std::vector<T> host(const Tensor& t) {
    return test::to_host<T>(backend, *stream, t);
  }
};

// An event from a backend that is not the CPU's: counts how often the host waits for it.
class ForeignEvent final : public Event {
 public:
  int host_waits = 0;
  bool ready() override { return host_waits > 0; }
  void synchronize() override { ++host_waits; }
};

// A LossDesc of the kind named as in the config, with the variant's options: "weighted" class weights,
// "ignore" label 255 (and for binary masks 7 as a second foreground value), "background" Dice of class 0 too
// with gamma 1.5 and no alpha. ("pixel_weights", per-pixel weights, is the caller's: see pixel_weights_for.)
LossDesc loss_variant(LossKind kind, std::int64_t channels, const QString& variant) {
  LossDesc d;
  d.kind = kind;
  if (variant.contains("weighted"))
    d.class_weights = channels == 1 ? std::vector<double>{0.4, 2.5} : std::vector<double>{0.5, 2.0, 1.25};
  if (variant.contains("ignore")) d.ignore_index = 255;
  if (variant.contains("background")) {
    d.dice_include_background = true;
    d.focal_gamma = 1.5;
    d.focal_alpha = -1;
  }
  d.dice_smooth = 0.5;
  return d;
}

// Per-pixel loss weights for `pixels` pixels: from 0 (a pixel that adds nothing) to about 10, as the U-Net
// paper's border weights reach, none of them 1.
std::vector<float> pixel_weights_for(std::int64_t pixels) {
  std::vector<float> v(static_cast<std::size_t>(pixels));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = i % 7 == 3 ? 0.0f : 0.25f + static_cast<float>((i * 5) % 11);
  return v;
}

double ref_bce(double z, double t) {
  return std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::fabs(z)));
}

}  // namespace

class TestOps : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // Work on one stream that waits for another stream's event sees what the first stream wrote. On a GPU the
  // streams run concurrently and only the event orders them; on the CPU every stream runs at once.
  void eventsOrderWorkAcrossStreams_data() { test::device_rows(); }
  void eventsOrderWorkAcrossStreams() {
    UNET_FETCH_BACKEND(backend);
    const auto producer = backend->create_stream(), consumer = backend->create_stream();
    const auto written = backend->create_event();
    QVERIFY(written->ready());  // never recorded: nothing to wait for
    Tensor a = Tensor::empty(backend->allocator(), Shape{1 << 20}, DType::f32, MemoryCategory::other);
    Tensor b = Tensor::empty(backend->allocator(), Shape{1 << 20}, DType::f32, MemoryCategory::other);
    backend->fill(*consumer, b, -1.0);
    consumer->synchronize();
    for (int round = 1; round <= 3; ++round) {
      backend->fill(*producer, a, round);
      backend->scale(*producer, a, 0.5f);
      producer->record(*written);
      consumer->wait(*written);
      backend->copy(*consumer, a, b);
      consumer->synchronize();
      QVERIFY(written->ready());
      const std::vector<float> seen = test::to_host<float>(*backend, *consumer, b);
      QVERIFY2(std::all_of(seen.begin(), seen.end(), [&](float v) { return v == 0.5f * round; }),
               qPrintable(QString("round %1: the copy ran before the fill").arg(round)));
    }
  }

  // A convolution that needs a workspace refuses one without memory, on every backend: the CPU backend took a
  // null workspace of any size for a valid one and handed oneDNN null pointers.
  void aConvolutionRefusesAWorkspaceWithoutMemory_data() { test::device_rows(); }
  void aConvolutionRefusesAWorkspaceWithoutMemory() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const ConvDesc d{.n = 1, .c_in = 16, .c_out = 32, .h = 8, .w = 8, .kernel = 3, .bias = false};
    const std::size_t need = backend->conv_workspace_bytes(d, ConvPass::forward);
    if (need == 0) QSKIP("this backend's forward pass needs no workspace for this shape");
    const Tensor x = f.f32(std::vector<float>(static_cast<std::size_t>(d.input().shape().numel()), 1.0f),
                           d.input().shape());
    const Tensor w = f.f32(std::vector<float>(static_cast<std::size_t>(d.weight_shape().numel()), 0.5f),
                           d.weight_shape(), Layout::nchw);
    Tensor y =
        Tensor::empty(backend->allocator(), d.output().shape(), DType::f32, MemoryCategory::activations);
    for (const Workspace without : {Workspace{nullptr, 0}, Workspace{nullptr, need}}) {
      QString refusal = "none";
      try {
        backend->conv_forward(*f.stream, d, x, w, nullptr, y, without);
        f.stream->synchronize();
      } catch (const Error& e) {
        refusal = e.what();
        QCOMPARE(e.kind(), ErrorKind::usage);
      }
      QVERIFY2(
          refusal.contains("workspace too small"),
          qPrintable(QString("a workspace of %1 bytes without memory: %2").arg(without.bytes).arg(refusal)));
    }
  }

  // A CPU backend's call sets the calling thread's OpenMP team to the backend's share of the cores, and gives
  // the thread its own size back after (it left the thread at the backend's share).
  void aCpuCallGivesTheThreadItsOpenMpTeamBack() {
    CpuBackendOptions one;
    one.threads = 1;
    CpuBackend cpu(one);
    omp_set_num_threads(3);
    const ConvDesc d{.n = 1, .c_in = 4, .c_out = 8, .h = 8, .w = 8, .kernel = 3};
    QVERIFY(cpu.conv_workspace_bytes(d, ConvPass::forward) < (std::size_t{1} << 30));
    QCOMPARE(omp_get_max_threads(), 3);
  }

  // A stream that runs work at once cannot queue a wait: waiting for another backend's event is the host
  // waiting for it. Its own events are complete when recorded; it cannot record another backend's event.
  void cpuStreamWaitsForAForeignEventOnTheHost() {
    CpuBackend cpu{CpuBackendOptions{}};
    Fixture f(cpu);
    ForeignEvent foreign;
    f.stream->wait(foreign);
    QCOMPARE(foreign.host_waits, 1);
    const auto own = f.backend.create_event();
    f.stream->record(*own);
    QVERIFY(own->ready());
    bool refused = false;
    try {
      f.stream->record(foreign);
    } catch (const Error& e) {
      refused = e.kind() == ErrorKind::usage;
    }
    QVERIFY(refused);
  }

  // The CPU device's sample is the host's memory now; a CPU has no utilisation, temperature or power to give.
  void cpuDeviceSampleIsTheHostsMemory() {
    CpuBackend cpu{CpuBackendOptions{}};
    Fixture f(cpu);
    const DeviceSample now = f.backend.sample_device();
    QCOMPARE(now.total_bytes, f.backend.info().total_bytes);
    QVERIFY(now.free_bytes > 0 && now.free_bytes <= now.total_bytes);
    QCOMPARE(now.used_by_others_bytes, std::int64_t{-1});
    QCOMPARE(now.utilisation_percent, -1.0);
    QCOMPARE(now.temperature_celsius, -1.0);
    QCOMPARE(now.power_watts, -1.0);
  }

  void binaryCrossEntropyValueAndGradient_data() { test::device_rows(); }
  void binaryCrossEntropyValueAndGradient() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    // Logits from very negative to very positive: the loss must stay exact where a naive log(sigmoid)
    // overflows.
    const std::vector<float> z{-120.0f, -3.5f, -0.25f, 0.0f, 0.7f, 2.0f, 40.0f, 150.0f};
    const std::vector<std::uint8_t> t{0, 1, 0, 1, 0, 1, 255, 0};  // any non-zero is foreground
    Tensor logits = f.f32(z, Shape{2, 1, 2, 2});
    Tensor targets = f.u8(t, Shape{2, 2, 2});
    Tensor dz = Tensor::empty(f.backend.allocator(), Shape{2, 1, 2, 2}, DType::f32, MemoryCategory::other);
    const double value = f.loss({}, logits, targets, &dz, {.cross_entropy = 0.5f})[0];
    double expected = 0.0;
    for (std::size_t i = 0; i < z.size(); ++i) expected += ref_bce(z[i], t[i] ? 1.0 : 0.0);
    QVERIFY(std::fabs(value - expected) < 1e-5 * expected);
    const auto grad = f.host(dz);
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double sigmoid = 1.0 / (1.0 + std::exp(-static_cast<double>(z[i])));
      QVERIFY(std::fabs(grad[i] - 0.5 * (sigmoid - (t[i] ? 1.0 : 0.0))) < 1e-6);
    }
  }

  // The backend's loss of one pixel at extreme logits, against values worked out by hand: a confident right
  // answer costs (almost) nothing, a confident wrong one costs its logit, and nothing overflows on the way
  // (a naive log(sigmoid(z)) gives infinity or NaN here).
  void binaryCrossEntropyAtExtremeLogits_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<float>("logit");
    QTest::addColumn<int>("target");
    QTest::addColumn<double>("expected");
    QTest::addColumn<double>("tolerance");
    for (const QString& d : test::test_devices()) {
      const auto row = [&](const char* name) { return &QTest::newRow(qPrintable(d + " " + name)); };
      *row("150 on background") << d << 150.0f << 0 << 150.0 << 1e-9;
      *row("-120 on foreground") << d << -120.0f << 1 << 120.0 << 1e-9;
      // log1p(exp(-120)) = 7.7e-53 and log1p(exp(-150)) = 7.2e-66: nothing, in float or double.
      *row("-120 on background") << d << -120.0f << 0 << 0.0 << 1e-40;
      *row("150 on foreground") << d << 150.0f << 1 << 0.0 << 1e-40;
      // log(2) at the boundary.
      *row("0 on foreground") << d << 0.0f << 1 << 0.69314718055994531 << 1e-7;
    }
  }

  void binaryCrossEntropyAtExtremeLogits() {
    QFETCH(float, logit);
    QFETCH(int, target);
    QFETCH(double, expected);
    QFETCH(double, tolerance);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor logits = f.f32({logit}, Shape{1, 1, 1, 1});
    Tensor targets = f.u8({static_cast<std::uint8_t>(target)}, Shape{1, 1, 1});
    const double loss = f.loss({}, logits, targets, nullptr, {})[0];
    QVERIFY2(std::isfinite(loss), qPrintable(QString("loss %1").arg(loss)));
    QVERIFY2(loss >= 0 && std::fabs(loss - expected) <= tolerance,
             qPrintable(QString("loss %1, expected %2").arg(loss, 0, 'g', 17).arg(expected, 0, 'g', 17)));
  }

  void softmaxCrossEntropyMatchesFiniteDifferences_data() { test::device_rows(); }
  void softmaxCrossEntropyMatchesFiniteDifferences() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const ActShape s{2, 4, 3, 2};
    const auto z = test::random_values(s.numel(), 3, 2.0);  // NHWC order
    std::vector<std::uint8_t> t(static_cast<std::size_t>(s.n * s.h * s.w));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i % 4);
    Tensor targets = f.u8(t, Shape{s.n, s.h, s.w});
    auto loss_of = [&](const std::vector<float>& values, Tensor* dz) {
      Tensor logits = f.f32(values, s.shape());
      return f.loss({}, logits, targets, dz, {.cross_entropy = 1.0f})[0];
    };
    Tensor dz = Tensor::empty(f.backend.allocator(), s.shape(), DType::f32, MemoryCategory::other);
    const double value = loss_of(z, &dz);
    // Reference value: per pixel, logsumexp - z[target].
    double expected = 0.0;
    for (std::int64_t p = 0; p < s.n * s.h * s.w; ++p) {
      double m = -INFINITY, acc = 0.0;
      for (int k = 0; k < 4; ++k)
        m = std::max(m, static_cast<double>(z[static_cast<std::size_t>(p * 4 + k)]));
      for (int k = 0; k < 4; ++k) acc += std::exp(z[static_cast<std::size_t>(p * 4 + k)] - m);
      expected += m + std::log(acc) - z[static_cast<std::size_t>(p * 4 + t[static_cast<std::size_t>(p)])];
    }
    QVERIFY(std::fabs(value - expected) < 1e-5 * expected);
    const auto grad = f.host(dz);
    for (std::size_t i = 0; i < z.size(); i += 3) {
      auto zp = z, zm = z;
      zp[i] += 1e-2f;
      zm[i] -= 1e-2f;
      const double fd = (loss_of(zp, nullptr) - loss_of(zm, nullptr)) / 2e-2;
      QVERIFY2(std::fabs(fd - grad[i]) < 2e-3,
               qPrintable(QString("%1: %2 vs %3").arg(i).arg(grad[i]).arg(fd)));
    }
  }

  // Every loss kind, binary and softmax, with and without class weights, an ignored label and per-pixel
  // weights: every logit's gradient against the central finite difference of the backend's own loss value
  // (the values themselves are checked against PyTorch in lossMatchesPyTorch and by hand in
  // lossValuesByHand). The two terms get different gradient scales, so a term scaled by the other's factor
  // fails.
  void lossKindsMatchFiniteDifferences_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("channels");
    QTest::addColumn<QString>("variant");
    for (const QString& device : test::test_devices())
      for (const LossKindInfo& row : kLossKinds)
        for (int channels : {1, 3})
          for (const char* variant : {"plain", "weighted", "ignore", "weighted ignore background",
                                      "pixel_weights", "weighted ignore pixel_weights"})
            QTest::newRow(qPrintable(
                QString("%1 %2 %3 %4").arg(device, row.name, channels == 1 ? "binary" : "softmax", variant)))
                << device << static_cast<int>(row.kind) << channels << QString(variant);
  }
  void lossKindsMatchFiniteDifferences() {
    QFETCH(int, kind);
    QFETCH(int, channels);
    QFETCH(QString, variant);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const LossDesc d = loss_variant(static_cast<LossKind>(kind), channels, variant);
    const ActShape s{2, channels, 3, 4};
    const auto z = test::random_values(s.numel(), 11, 1.5);  // NHWC
    std::vector<std::uint8_t> t(static_cast<std::size_t>(s.n * s.h * s.w));
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = static_cast<std::uint8_t>((i * 7 + 3) % (channels == 1 ? 2 : channels));
      if (channels == 1 && i % 5 == 1) t[i] = 7;  // any non-zero value is foreground
      if (d.ignore_index >= 0 && i % 4 == 2) t[i] = 255;
    }
    const Tensor targets = f.u8(t, Shape{s.n, s.h, s.w});
    std::optional<Tensor> weights;
    if (variant.contains("pixel_weights"))
      weights = f.weights(pixel_weights_for(s.n * s.h * s.w), Shape{s.n, s.h, s.w});
    const Tensor* v = weights ? &*weights : nullptr;
    const LossGradScales scales{.cross_entropy = 0.7f, .dice = 1.3f};
    Tensor dz = Tensor::empty(f.backend.allocator(), s.shape(), DType::f32, MemoryCategory::other);
    const auto sums = f.loss(d, f.f32(z, s.shape()), targets, &dz, scales, v);
    const auto grad = f.host(dz);
    if (!d.has_cross_entropy()) QCOMPARE(sums[loss_sum_cross_entropy], 0.0);
    if (!d.has_dice()) QCOMPARE(sums[loss_sum_dice], 0.0);

    // The objective whose gradient dz is: the sums weighted by the scales, in double.
    const auto objective = [&](const std::vector<float>& values) {
      const auto l = f.loss(d, f.f32(values, s.shape()), targets, nullptr, {}, v);
      return static_cast<double>(scales.cross_entropy) * l[loss_sum_cross_entropy] +
             static_cast<double>(scales.dice) * l[loss_sum_dice];
    };
    // Logits are float: the step is one a float holds exactly at these magnitudes (|z| < 8), and large enough
    // that float rounding of the logits (~1e-7) stays far below the tolerance; the central difference's own
    // error is O(h^2).
    constexpr float h = 1.0f / 256;
    for (std::size_t i = 0; i < z.size(); ++i) {
      auto plus = z, minus = z;
      plus[i] += h;
      minus[i] -= h;
      const double fd = (objective(plus) - objective(minus)) / (static_cast<double>(plus[i]) - minus[i]);
      QVERIFY2(std::fabs(fd - grad[i]) <= 1e-4 + 1e-3 * std::fabs(fd),
               qPrintable(QString("logit %1 (target %2): gradient %3, finite difference %4")
                              .arg(i)
                              .arg(t[i / static_cast<std::size_t>(s.c)])
                              .arg(grad[i], 0, 'g', 9)
                              .arg(fd, 0, 'g', 9)));
    }
  }

  // Pixel weights of 1 are no pixel weights, bit for bit (both sums and every gradient), on every kind with
  // class weights, an ignored label and Dice of the background; other weights leave the Dice sum exactly as
  // it was (Dice never reads them) and change the per-pixel sum.
  void pixelWeightsOfOneAreNoWeights_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("channels");
    for (const QString& device : test::test_devices())
      for (const LossKindInfo& row : kLossKinds)
        for (int channels : {1, 3})
          QTest::newRow(
              qPrintable(QString("%1 %2 %3").arg(device, row.name, channels == 1 ? "binary" : "softmax")))
              << device << static_cast<int>(row.kind) << channels;
  }
  void pixelWeightsOfOneAreNoWeights() {
    QFETCH(int, kind);
    QFETCH(int, channels);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const LossDesc d = loss_variant(static_cast<LossKind>(kind), channels, "weighted ignore background");
    const ActShape s{2, channels, 3, 4};
    const std::int64_t pixels = s.n * s.h * s.w;
    const Tensor logits = f.f32(test::random_values(s.numel(), 5, 2.0), s.shape());
    std::vector<std::uint8_t> t(static_cast<std::size_t>(pixels));
    for (std::size_t i = 0; i < t.size(); ++i)
      t[i] = i % 4 == 2 ? 255 : static_cast<std::uint8_t>((i * 5 + 1) % (channels == 1 ? 2 : channels));
    const Tensor targets = f.u8(t, Shape{s.n, s.h, s.w});
    const LossGradScales scales{.cross_entropy = 0.7f, .dice = 1.3f};
    const auto run = [&](const Tensor* weights) {
      Tensor dz = Tensor::empty(f.backend.allocator(), s.shape(), DType::f32, MemoryCategory::other);
      const auto sums = f.loss(d, logits, targets, &dz, scales, weights);
      return std::pair{sums, f.host(dz)};
    };
    const auto [none, none_dz] = run(nullptr);
    const Tensor ones =
        f.weights(std::vector<float>(static_cast<std::size_t>(pixels), 1.0f), Shape{s.n, s.h, s.w});
    const auto [one, one_dz] = run(&ones);
    for (std::size_t k = 0; k < kLossSums; ++k)
      QVERIFY2(one[k] == none[k], qPrintable(QString("sum %1: %2 with weights of 1, %3 without")
                                                 .arg(k)
                                                 .arg(one[k], 0, 'g', 17)
                                                 .arg(none[k], 0, 'g', 17)));
    QCOMPARE(one_dz, none_dz);
    const Tensor varied = f.weights(pixel_weights_for(pixels), Shape{s.n, s.h, s.w});
    const auto [weighted, weighted_dz] = run(&varied);
    QVERIFY2(weighted[loss_sum_dice] == none[loss_sum_dice], "the Dice sum moved with the pixel weights");
    if (d.has_cross_entropy()) {
      QVERIFY2(weighted[loss_sum_cross_entropy] != none[loss_sum_cross_entropy],
               "the per-pixel sum did not move with the pixel weights");
      QVERIFY(weighted_dz != none_dz);
    }
  }

  // Pixel weights by hand, on lossValuesByHand's 2x2 images (one pixel ignored) with class weights, weights
  // 2, 1/2, 0 and 7 (on the ignored pixel): each labelled pixel's term times its class weight and its pixel
  // weight, over the sum of those weights (loss_denominators); Dice as without them. A weight below 0 or not
  // finite is refused.
  void pixelWeightsByHand_data() { test::device_rows(); }
  void pixelWeightsByHand() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const double ln2 = std::log(2.0), ln3 = std::log(3.0);
    const float l3 = static_cast<float>(ln3), l2 = static_cast<float>(ln2);
    const std::vector<std::uint8_t> masks{1, 0, 1, 255};
    const std::vector<float> v{2.0f, 0.5f, 0.0f, 7.0f};
    struct Case {
      const char* name;
      std::int64_t channels;
      std::vector<double> class_weights;
      std::vector<float> logits;  // NHWC
      double cross_entropy, denominator, dice;
    };
    const std::vector<Case> cases{
        // p = 3/4, 1/2, 1/4 of the true class 1, 0, 1 with class weights 3, 1, 3: 3 * 2 ln(4/3) + 1 * 1/2 ln
        // 2
        // + 3 * 0 ln 4 = 12.5 ln 2 - 6 ln 3, over 3 * 2 + 1 * 1/2 + 3 * 0 = 6.5. Dice as lossValuesByHand:
        // 1/3.
        {"binary", 1, {1, 3}, {l3, 0.0f, -l3, 5.0f}, 12.5 * ln2 - 6 * ln3, 6.5, 1.0 / 3},
        // -log p_y = ln 2, ln 2, 2 ln 2 with class weights 2, 1, 2: 2 * 2 ln 2 + 1 * 1/2 ln 2 + 0 = 4.5 ln 2,
        // over 2 * 2 + 1 * 1/2 + 0 = 4.5. Dice as lossValuesByHand: 9/20.
        {"softmax", 3, {1, 2, 3}, {0, l2, 0, l2, 0, 0, 0, 0, l2, 9, -9, 0}, 4.5 * ln2, 4.5, 9.0 / 20},
    };
    for (const Case& c : cases) {
      LossDesc d;
      d.kind = LossKind::cross_entropy_dice;
      d.class_weights = c.class_weights;
      d.ignore_index = 255;
      const Tensor weights = f.weights(v, Shape{1, 2, 2});
      const auto sums = f.loss(d, f.f32(c.logits, Shape{1, c.channels, 2, 2}), f.u8(masks, Shape{1, 2, 2}),
                               nullptr, {}, &weights);
      const HostBatch batch{
          .count = 1, .height = 2, .width = 2, .channels = 1, .pixels = {}, .masks = masks, .weights = v};
      const LossTotals totals = loss_denominators(d, static_cast<int>(c.channels), batch);
      QCOMPARE(totals.labelled_pixels, std::int64_t{3});
      for (const auto& [got, want, what] :
           {std::tuple{sums[0], c.cross_entropy, "cross-entropy"}, std::tuple{sums[1], c.dice, "Dice"},
            std::tuple{totals.class_weight_sum, c.denominator, "denominator"}})
        QVERIFY2(std::fabs(got - want) <= 1e-6 * std::max(1.0, std::fabs(want)),
                 qPrintable(QString("%1: %2 %3, by hand %4")
                                .arg(c.name, what)
                                .arg(got, 0, 'g', 12)
                                .arg(want, 0, 'g', 12)));
    }
    for (const float bad :
         {-0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      const HostBatch batch{.count = 1,
                            .height = 2,
                            .width = 2,
                            .channels = 1,
                            .pixels = {},
                            .masks = masks,
                            .weights = {1.0f, bad, 1.0f, 1.0f}};
      try {
        loss_denominators(LossDesc{}, 1, batch);
        QFAIL(qPrintable(QString("pixel weight %1 accepted").arg(bad)));
      } catch (const Error& e) {
        QCOMPARE(e.kind(), ErrorKind::data);
      }
    }
  }

  // Closed forms worked out by hand on one 2x2 image whose probabilities are simple fractions, with the value
  // PyTorch's functions give (bench/pytorch_reference.py checks these formulas against torch itself).
  void lossValuesByHand_data() { test::device_rows(); }
  void lossValuesByHand() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const double ln2 = std::log(2.0), ln3 = std::log(3.0);
    struct Case {
      const char* name;
      LossDesc desc;
      std::int64_t channels;
      std::vector<float> logits;  // NHWC
      double cross_entropy, dice;
    };
    LossDesc binary_weighted;
    binary_weighted.kind = LossKind::cross_entropy_dice;
    binary_weighted.class_weights = {1, 3};
    binary_weighted.ignore_index = 255;
    LossDesc binary_background = binary_weighted;
    binary_background.kind = LossKind::dice;
    binary_background.dice_include_background = true;
    LossDesc binary_focal;
    binary_focal.kind = LossKind::focal;
    binary_focal.ignore_index = 255;
    LossDesc softmax_weighted;
    softmax_weighted.kind = LossKind::cross_entropy_dice;
    softmax_weighted.class_weights = {1, 2, 3};
    softmax_weighted.ignore_index = 255;
    LossDesc softmax_focal;
    softmax_focal.kind = LossKind::focal_dice;
    softmax_focal.ignore_index = 255;
    const float l3 = static_cast<float>(ln3), l2 = static_cast<float>(ln2);
    // Binary: logits ln 3, 0, -ln 3, 5 give p = 3/4, 1/2, 1/4 (and one pixel ignored); targets 1, 0, 1, 255.
    const std::vector<float> binary_logits{l3, 0.0f, -l3, 5.0f};
    // Softmax, 3 classes: p = (1/4, 1/2, 1/4), (1/2, 1/4, 1/4), (1/4, 1/4, 1/2); targets 1, 0, 1, 255.
    const std::vector<float> softmax_logits{0, l2, 0, l2, 0, 0, 0, 0, l2, 9, -9, 0};
    const std::vector<Case> cases{
        // Cross-entropy: 3 ln(4/3) + ln 2 + 3 ln 4 = 13 ln 2 - 3 ln 3 over the weights 3 + 1 + 3 = 7, i.e.
        // F.cross_entropy(stack([0, z]), t, weight=[1, 3], ignore_index=255) = (13 ln 2 - 3 ln 3) / 7.
        // Dice of the foreground: I = 3/4 + 1/4 = 1, P = 3/2, T = 2: (2 + 1) / (3/2 + 2 + 1) = 2/3; loss 1/3.
        {"binary cross_entropy_dice, weights [1, 3]", binary_weighted, 1, binary_logits, 13 * ln2 - 3 * ln3,
         1.0 / 3},
        // Background too: I = 1/2, P = 3/2, T = 1: (1 + 1) / (3/2 + 1 + 1) = 4/7; weighted mean
        // (1 * 4/7 + 3 * 2/3) / 4 = 9/14; loss 5/14.
        {"binary dice with background, weights [1, 3]", binary_background, 1, binary_logits, 0.0, 5.0 / 14},
        // torchvision sigmoid_focal_loss, gamma 2, alpha 1/4: 1/4 ln(4/3) (1/4)^2 + 3/4 ln 2 (1/2)^2 +
        // 1/4 ln 4 (3/4)^2 = (32 ln 2 - ln 3) / 64, its mean over the 3 labelled pixels / 3.
        {"binary focal", binary_focal, 1, binary_logits, (32 * ln2 - ln3) / 64, 0.0},
        // -log p_y = ln 2, ln 2, 2 ln 2 with weights 2, 1, 2: 7 ln 2, over 5 (F.cross_entropy's mean
        // 7 ln 2 / 5). Dice, classes 1 and 2: class 1 I = 3/4, P = 1, T = 2: 2.5 / 4 = 5/8; class 2 I = 0,
        // P = 1, T = 0: 1/2; weighted (2 * 5/8 + 3 * 1/2) / 5 = 11/20; loss 9/20.
        {"softmax cross_entropy_dice, weights [1, 2, 3]", softmax_weighted, 3, softmax_logits, 7 * ln2,
         9.0 / 20},
        // Focal, gamma 2: (1/2)^2 ln 2 + (1/2)^2 ln 2 + (3/4)^2 2 ln 2 = 13 ln 2 / 8. Dice unweighted:
        // 1 - (5/8 + 1/2) / 2 = 7/16.
        {"softmax focal_dice", softmax_focal, 3, softmax_logits, 13 * ln2 / 8, 7.0 / 16},
    };
    const std::vector<std::uint8_t> targets{1, 0, 1, 255};
    for (const Case& c : cases) {
      const auto sums = f.loss(c.desc, f.f32(c.logits, Shape{1, c.channels, 2, 2}),
                               f.u8(targets, Shape{1, 2, 2}), nullptr, {});
      for (const auto& [got, want, what] :
           {std::tuple{sums[0], c.cross_entropy, "cross-entropy"}, std::tuple{sums[1], c.dice, "Dice"}})
        QVERIFY2(std::fabs(got - want) <= 1e-6 * std::max(1.0, std::fabs(want)),
                 qPrintable(QString("%1: %2 %3, by hand %4")
                                .arg(c.name, what)
                                .arg(got, 0, 'g', 12)
                                .arg(want, 0, 'g', 12)));
    }
  }

  // The cases bench/loss_reference.py computed with PyTorch's own functions (F.cross_entropy with weight and
  // ignore_index, torchvision's sigmoid_focal_loss, autograd for every gradient), kept in
  // tests/data/loss_cases.json: the step's loss as DataParallel forms it (the backend's sums over the host
  // masks' and pixel weights' denominators) and the gradient of that loss. The cases with "pixel_weights"
  // give the batch and the backend those weights.
  void lossMatchesPyTorch_data() { test::device_rows(); }
  void lossMatchesPyTorch() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const std::filesystem::path cases = test::test_data_file("loss_cases.json");
    std::ifstream in(cases);
    QVERIFY2(in, qPrintable(QString("cannot read %1 (UNET_TEST_DATA_DIR names the folder of the test data)")
                                .arg(QString::fromStdString(cases.string()))));
    const nlohmann::json file = nlohmann::json::parse(in);
    // Every kind of the table (kLossKinds, unet/loss/terms.h) has its cases, binary and softmax: a kind added
    // without them fails here.
    std::set<std::tuple<std::string, bool, bool>> covered;  // kind, binary, pixel weights
    for (const nlohmann::json& c : file.at("cases"))
      covered.emplace(c.at("options").at("kind").get<std::string>(), c.at("shape").at(1).get<int>() == 1,
                      c.contains("pixel_weights"));
    for (const LossKindInfo& row : kLossKinds)
      for (const bool binary : {true, false})
        for (const bool weighted : {false, true})
          QVERIFY2(covered.contains({row.name, binary, weighted}),
                   qPrintable(QString("no %1 case%2 for %3")
                                  .arg(binary ? "binary" : "softmax", weighted ? " with pixel weights" : "",
                                       row.name)));
    for (const nlohmann::json& c : file.at("cases")) {
      const std::string name = c.at("name");
      const auto shape = c.at("shape").get<std::vector<std::int64_t>>();
      const ActShape s{shape[0], shape[1], shape[2], shape[3]};
      const Config config = config_from_json(
          {{"model", {{"classes", s.c}}}, {"loss", c.at("options")}});  // the options are a valid config
      const LossDesc& d = config.loss;
      HostBatch batch{
          .count = s.n, .height = s.h, .width = s.w, .channels = 3, .pixels = {}, .masks = {}, .weights = {}};
      for (int m : c.at("masks").get<std::vector<int>>()) batch.masks.push_back(static_cast<std::uint8_t>(m));
      if (c.contains("pixel_weights")) batch.weights = c.at("pixel_weights").get<std::vector<float>>();
      std::optional<Tensor> weights;
      if (!batch.weights.empty()) weights = f.weights(batch.weights, Shape{s.n, s.h, s.w});
      const LossTotals denominators = loss_denominators(d, static_cast<int>(s.c), batch);
      LossGradScales scales;
      if (denominators.class_weight_sum > 0)
        scales.cross_entropy = static_cast<float>(d.cross_entropy_weight / denominators.class_weight_sum);
      scales.dice = static_cast<float>(d.dice_weight / static_cast<double>(denominators.images));
      Tensor dz = Tensor::empty(f.backend.allocator(), s.shape(), DType::f32, MemoryCategory::other);
      const auto sums =
          f.loss(d, f.f32(c.at("logits_nhwc").get<std::vector<float>>(), s.shape()),
                 f.u8(batch.masks, Shape{s.n, s.h, s.w}), &dz, scales, weights ? &*weights : nullptr);
      LossTotals totals = denominators;
      totals.cross_entropy_sum = sums[loss_sum_cross_entropy];
      totals.dice_sum = sums[loss_sum_dice];
      const double torch_loss = c.at("loss");
      QVERIFY2(std::fabs(totals.mean(d) - torch_loss) <= 1e-6 * torch_loss,
               qPrintable(QString("%1: loss %2, PyTorch %3")
                              .arg(name.c_str())
                              .arg(totals.mean(d), 0, 'g', 12)
                              .arg(torch_loss, 0, 'g', 12)));
      const auto torch_gradient = c.at("gradient_nhwc").get<std::vector<double>>();
      const auto gradient = f.host(dz);
      QCOMPARE(gradient.size(), torch_gradient.size());
      for (std::size_t i = 0; i < gradient.size(); ++i)
        QVERIFY2(std::fabs(gradient[i] - torch_gradient[i]) <= 1e-7 + 1e-5 * std::fabs(torch_gradient[i]),
                 qPrintable(QString("%1: dlogit %2 is %3, PyTorch's %4")
                                .arg(name.c_str())
                                .arg(i)
                                .arg(gradient[i], 0, 'g', 9)
                                .arg(torch_gradient[i], 0, 'g', 9)));
    }
  }

  // Ignored pixels are not counted, whatever their prediction.
  void countsLeaveOutIgnoredPixels_data() { test::device_rows(); }
  void countsLeaveOutIgnoredPixels() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    // The binaryCountsByHand pixels plus two more labelled 255: predicted foreground and background.
    Tensor logits = f.f32({2, 0.5f, -1, -0.1f, 3, 0, 4, -4}, Shape{1, 1, 2, 4});
    Tensor targets = f.u8({1, 0, 0, 1, 7, 0, 255, 255}, Shape{1, 2, 4});
    Tensor counts = Tensor::empty(f.backend.allocator(), Shape{segmentation_counts_size(1)}, DType::i64,
                                  MemoryCategory::other);
    f.backend.fill(*f.stream, counts, 0);
    f.backend.segmentation_counts(*f.stream, logits, targets, counts, 255);
    const std::vector<std::int64_t> expected{2, 1, 1, 2, 1, 1, 4, 6};
    QCOMPARE(f.host<std::int64_t>(counts), expected);
    // Without the ignore label, 255 is foreground: one more true positive and one more false negative.
    f.backend.fill(*f.stream, counts, 0);
    f.backend.segmentation_counts(*f.stream, logits, targets, counts, -1);
    const std::vector<std::int64_t> all{2, 2, 1, 3, 1, 2, 5, 8};
    QCOMPARE(f.host<std::int64_t>(counts), all);
  }

  // An ignored softmax pixel may hold any value; a labelled one past the classes is still refused.
  void ignoredLabelIsNotAClass_data() { test::device_rows(); }
  void ignoredLabelIsNotAClass() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    LossDesc d;
    d.ignore_index = 200;
    Tensor logits = f.f32(std::vector<float>(3 * 4, 0.0f), Shape{1, 3, 2, 2});
    Tensor dz = Tensor::empty(f.backend.allocator(), Shape{1, 3, 2, 2}, DType::f32, MemoryCategory::other);
    const auto sums = f.loss(d, logits, f.u8({0, 200, 2, 200}, Shape{1, 2, 2}), &dz, {.cross_entropy = 1.0f});
    QVERIFY(std::fabs(sums[0] - 2 * std::log(3.0)) < 1e-6);
    const auto g = f.host(dz);
    for (int k = 3; k < 6; ++k) QCOMPARE(g[static_cast<std::size_t>(k)], 0.0f);  // pixel 1, ignored
    try {
      f.loss(d, logits, f.u8({0, 200, 3, 200}, Shape{1, 2, 2}), nullptr, {});
      QFAIL("class 3 of 3 accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
    }
  }

  void softmaxRefusesClassOutOfRange_data() { test::device_rows(); }
  void softmaxRefusesClassOutOfRange() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor logits = f.f32(std::vector<float>(3 * 4, 0.0f), Shape{1, 3, 2, 2});
    Tensor targets = f.u8({0, 1, 3, 2}, Shape{1, 2, 2});
    try {
      f.loss({}, logits, targets, nullptr, {});
      QFAIL("class 3 of 3 accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
    }
  }

  void binaryCountsByHand_data() { test::device_rows(); }
  void binaryCountsByHand() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    // predictions (logit > 0): 1 1 0 0 1 0 ; truth: 1 0 0 1 1 0  -> tp 2, fp 1, fn 1, tn 2
    Tensor logits = f.f32({2, 0.5f, -1, -0.1f, 3, 0}, Shape{1, 1, 2, 3});
    Tensor targets = f.u8({1, 0, 0, 1, 7, 0}, Shape{1, 2, 3});
    Tensor counts = Tensor::empty(f.backend.allocator(), Shape{segmentation_counts_size(1)}, DType::i64,
                                  MemoryCategory::other);
    f.backend.fill(*f.stream, counts, 0);
    f.backend.segmentation_counts(*f.stream, logits, targets, counts, -1);
    const auto c = f.host<std::int64_t>(counts);
    // class 0: tp 2 (true negatives), fp 1, fn 1; class 1: tp 2, fp 1, fn 1; correct 4 of 6
    const std::vector<std::int64_t> expected{2, 1, 1, 2, 1, 1, 4, 6};
    QCOMPARE(c, expected);
  }

  void multiClassCountsByHand_data() { test::device_rows(); }
  void multiClassCountsByHand() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    // 3 classes, 4 pixels, NHWC: argmax 0, 2, 1, 2 ; truth 0, 1, 1, 2
    Tensor logits = f.f32({5, 1, 0, 0, 1, 3, 0, 4, 2, -1, 0, 1}, Shape{1, 3, 2, 2});
    Tensor targets = f.u8({0, 1, 1, 2}, Shape{1, 2, 2});
    Tensor counts = Tensor::empty(f.backend.allocator(), Shape{segmentation_counts_size(3)}, DType::i64,
                                  MemoryCategory::other);
    f.backend.fill(*f.stream, counts, 0);
    f.backend.segmentation_counts(*f.stream, logits, targets, counts, -1);
    // class 0: tp1 fp0 fn0; class 1: tp1 fp0 fn1; class 2: tp1 fp1 fn0; correct 3 of 4
    const std::vector<std::int64_t> expected{1, 0, 0, 1, 0, 1, 1, 1, 0, 3, 4};
    QCOMPARE(f.host<std::int64_t>(counts), expected);
  }

  void probabilitiesAreSigmoidOrSoftmax_data() { test::device_rows(); }
  void probabilitiesAreSigmoidOrSoftmax() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor binary = f.f32({0.0f, 2.0f}, Shape{1, 1, 1, 2});
    Tensor pb = Tensor::empty(f.backend.allocator(), Shape{2}, DType::f32, MemoryCategory::other);
    f.backend.probabilities(*f.stream, binary, pb);
    const auto b = f.host(pb);
    QVERIFY(std::fabs(b[0] - 0.5f) < 1e-7f && std::fabs(b[1] - 1.0f / (1.0f + std::exp(-2.0f))) < 1e-6f);
    // NCHW logits come out per pixel, classes last.
    Tensor multi = f.f32({0, 1, std::log(3.0f), 0}, Shape{1, 2, 1, 2}, Layout::nchw);
    Tensor pm = Tensor::empty(f.backend.allocator(), Shape{4}, DType::f32, MemoryCategory::other);
    f.backend.probabilities(*f.stream, multi, pm);
    const auto m = f.host(pm);
    QVERIFY(std::fabs(m[0] - 0.25f) < 1e-6f && std::fabs(m[1] - 0.75f) < 1e-6f);
    QVERIFY(std::fabs(m[2] - 1.0f / (1.0f + std::exp(-1.0f))) < 1e-6f);
  }

  void adamMatchesTorchFormula_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<float>("weight_decay");
    QTest::addColumn<bool>("decoupled");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " adam")) << d << 0.0f << true;
      QTest::newRow(qPrintable(d + " adamw")) << d << 0.1f << true;
      QTest::newRow(qPrintable(d + " adam with L2")) << d << 0.1f << false;
    }
  }
  void adamMatchesTorchFormula() {
    QFETCH(float, weight_decay);
    QFETCH(bool, decoupled);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const std::vector<float> p0{0.5f, -1.0f, 2.0f, 0.0f};
    Tensor p = f.f32(p0, Shape{4}), m = f.f32({0, 0, 0, 0}, Shape{4}), v = f.f32({0, 0, 0, 0}, Shape{4});
    const std::vector<std::vector<float>> grads{
        {0.1f, -0.2f, 0.0f, 3.0f}, {0.2f, 0.1f, -1.0f, 3.0f}, {-0.3f, 0.0f, 0.5f, -3.0f}};
    // torch.optim.AdamW (decoupled) or torch.optim.Adam (L2) written out in double, step by step.
    std::vector<double> rp(p0.begin(), p0.end()), rm(4, 0.0), rv(4, 0.0);
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (std::size_t s = 0; s < grads.size(); ++s) {
      Tensor g = f.f32(grads[s], Shape{4});
      AdamStep step{.lr = 0.01f,
                    .weight_decay = weight_decay,
                    .decoupled_weight_decay = decoupled,
                    .step = static_cast<std::int64_t>(s + 1)};
      f.backend.adam_step(*f.stream, step, p, g, m, v);
      const double t = static_cast<double>(s + 1);
      for (std::size_t i = 0; i < 4; ++i) {
        const double grad = grads[s][i] + (decoupled ? 0.0 : weight_decay * rp[i]);
        if (decoupled) rp[i] *= 1.0 - lr * weight_decay;
        rm[i] = b1 * rm[i] + (1 - b1) * grad;
        rv[i] = b2 * rv[i] + (1 - b2) * grad * grad;
        const double mhat = rm[i] / (1 - std::pow(b1, t)), vhat = rv[i] / (1 - std::pow(b2, t));
        rp[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    }
    const auto got = f.host(p);
    for (std::size_t i = 0; i < 4; ++i)
      QVERIFY2(std::fabs(got[i] - rp[i]) < 1e-6,
               qPrintable(QString("%1: %2 vs %3").arg(i).arg(got[i]).arg(rp[i])));
    // First step moves each parameter with a non-zero gradient by ~lr against its gradient's sign.
    QVERIFY(got[3] < p0[3]);
  }

  void sgdMatchesTorchFormula_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<float>("momentum");
    QTest::addColumn<bool>("nesterov");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " plain")) << d << 0.0f << false;
      QTest::newRow(qPrintable(d + " momentum")) << d << 0.9f << false;
      QTest::newRow(qPrintable(d + " nesterov")) << d << 0.99f << true;
    }
  }
  // torch.optim.SGD (dampening 0, weight decay 0.01) in double over three steps, gradients scaled by 1/2
  // first.
  void sgdMatchesTorchFormula() {
    QFETCH(float, momentum);
    QFETCH(bool, nesterov);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const std::vector<float> p0{0.5f, -1.0f, 2.0f, 0.0f};
    Tensor p = f.f32(p0, Shape{4}), buf = f.f32({0, 0, 0, 0}, Shape{4});
    const std::vector<std::vector<float>> grads{
        {0.2f, -0.4f, 0.0f, 6.0f}, {0.4f, 0.2f, -2.0f, 6.0f}, {-0.6f, 0.0f, 1.0f, -6.0f}};
    std::vector<double> rp(p0.begin(), p0.end()), rb(4, 0.0);
    const double lr = 0.1, wd = 0.01;
    for (std::size_t s = 0; s < grads.size(); ++s) {
      Tensor g = f.f32(grads[s], Shape{4});
      f.backend.sgd_step(
          *f.stream,
          {.lr = 0.1f, .momentum = momentum, .nesterov = nesterov, .weight_decay = 0.01f, .grad_scale = 0.5f},
          p, g, buf);
      for (std::size_t i = 0; i < 4; ++i) {
        double d = 0.5 * grads[s][i] + wd * rp[i];
        if (momentum != 0.0f) {
          rb[i] = s == 0 ? d : momentum * rb[i] + d;  // torch clones the first d into the buffer
          d = nesterov ? d + momentum * rb[i] : rb[i];
        }
        rp[i] -= lr * d;
      }
    }
    const auto got = f.host(p);
    for (std::size_t i = 0; i < 4; ++i)
      QVERIFY2(std::fabs(got[i] - rp[i]) < 1e-6,
               qPrintable(QString("%1: %2 vs %3").arg(i).arg(got[i]).arg(rp[i])));
  }

  // The gradient norm's reduction: a vector long enough to use every block of a GPU's fixed grid.
  void sumOfSquaresByHand_data() { test::device_rows(); }
  void sumOfSquaresByHand() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const std::int64_t n = 1 << 20;
    std::vector<float> values(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      values[static_cast<std::size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i % 7);
    // Each run of 7 holds 0 + 1 + 4 + 9 + 16 + 25 + 36 = 91; integers that double sums exactly.
    double expected = 0;
    for (std::int64_t i = 0; i < n; ++i) expected += static_cast<double>((i % 7) * (i % 7));
    Tensor t = f.f32(values, Shape{n});
    Tensor sum = Tensor::empty(f.backend.allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    f.backend.sum_of_squares(*f.stream, t, sum);
    double got = 0;
    f.backend.copy_to_host(*f.stream, sum, &got);
    f.stream->synchronize();
    QCOMPARE(got, expected);
  }

  void adamAppliesGradScale_data() { test::device_rows(); }
  void adamAppliesGradScale() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor p1 = f.f32({1.0f}, Shape{1}), p2 = f.f32({1.0f}, Shape{1});
    Tensor m1 = f.f32({0}, Shape{1}), v1 = f.f32({0}, Shape{1}), m2 = f.f32({0}, Shape{1}),
           v2 = f.f32({0}, Shape{1});
    Tensor g1 = f.f32({0.25f}, Shape{1}), g2 = f.f32({256.0f}, Shape{1});
    f.backend.adam_step(*f.stream, {.lr = 0.1f, .step = 1}, p1, g1, m1, v1);
    f.backend.adam_step(*f.stream, {.lr = 0.1f, .step = 1, .grad_scale = 1.0f / 1024}, p2, g2, m2, v2);
    QCOMPARE(f.host(m1), f.host(m2));
    QCOMPARE(f.host(p1), f.host(p2));
  }

  void concatAndSplit_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<Layout>("layout");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " nhwc")) << d << Layout::nhwc;
      QTest::newRow(qPrintable(d + " nchw")) << d << Layout::nchw;
    }
  }
  void concatAndSplit() {
    QFETCH(Layout, layout);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    const ActShape sa{2, 3, 2, 3}, sb{2, 2, 2, 3}, so{2, 5, 2, 3};
    const auto a = test::random_values(sa.numel(), 1), b = test::random_values(sb.numel(), 2);
    Tensor ta = f.f32(a, sa.shape(), layout), tb = f.f32(b, sb.shape(), layout);
    Tensor out = Tensor::empty(f.backend.allocator(), so.shape(), DType::f32, MemoryCategory::other, layout);
    f.backend.concat_channels(*f.stream, ta, tb, out);
    const auto o = f.host(out);
    // Element (n, c, h, w) of the output is a's channel c, or b's channel c - 3.
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 5; ++c)
        for (std::int64_t h = 0; h < 2; ++h)
          for (std::int64_t w = 0; w < 3; ++w) {
            auto index = [&](const ActShape& s, std::int64_t cc) {
              return static_cast<std::size_t>(layout == Layout::nhwc ? ((n * s.h + h) * s.w + w) * s.c + cc
                                                                     : ((n * s.c + cc) * s.h + h) * s.w + w);
            };
            const float expected = c < 3 ? a[index(sa, c)] : b[index(sb, c - 3)];
            QCOMPARE(o[index(so, c)], expected);
          }
    // split undoes concat; with accumulate, b's part is added.
    Tensor da = Tensor::empty(f.backend.allocator(), sa.shape(), DType::f32, MemoryCategory::other, layout);
    Tensor db = f.f32(std::vector<float>(b.size(), 1.0f), sb.shape(), layout);
    f.backend.split_channels(*f.stream, out, da, db, false);
    QCOMPARE(f.host(da), a);
    QCOMPARE(f.host(db), b);
    f.backend.split_channels(*f.stream, out, da, db, true);
    auto twice = b;
    for (auto& x : twice) x *= 2.0f;
    QCOMPARE(f.host(db), twice);
  }

  void inputScalesPixels_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<Layout>("layout");
    for (const QString& d : test::test_devices()) {
      QTest::newRow(qPrintable(d + " nhwc")) << d << Layout::nhwc;
      QTest::newRow(qPrintable(d + " nchw")) << d << Layout::nchw;
    }
  }
  void inputScalesPixels() {
    QFETCH(Layout, layout);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    // pixels [n=1, h=1, w=2, c=3]
    Tensor pixels = f.u8({0, 51, 255, 102, 153, 204}, Shape{1, 1, 2, 3});
    Tensor x =
        Tensor::empty(f.backend.allocator(), Shape{1, 3, 1, 2}, DType::f32, MemoryCategory::other, layout);
    f.backend.input_from_pixels(*f.stream, pixels, x, 1.0f / 255.0f);
    const auto v = f.host(x);
    const std::vector<float> nhwc{0.0f, 0.2f, 1.0f, 0.4f, 0.6f, 0.8f},
        nchw{0.0f, 0.4f, 0.2f, 0.6f, 1.0f, 0.8f};
    const auto& expected = layout == Layout::nhwc ? nhwc : nchw;
    for (std::size_t i = 0; i < v.size(); ++i) QVERIFY(std::fabs(v[i] - expected[i]) < 1e-6f);
  }

  // Normalised pixels (what training and prediction give) go in unscaled, only moved into the layout.
  void inputTakesF32Pixels_data() { inputScalesPixels_data(); }
  void inputTakesF32Pixels() {
    QFETCH(Layout, layout);
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor pixels = f.f32({-1.5f, 0.25f, 3.0f, 70000.0f, -0.0f, 2.5f}, Shape{1, 1, 2, 3});
    Tensor x =
        Tensor::empty(f.backend.allocator(), Shape{1, 3, 1, 2}, DType::f32, MemoryCategory::other, layout);
    f.backend.input_from_pixels(*f.stream, pixels, x, 1.0f);
    const std::vector<float> nhwc{-1.5f, 0.25f, 3.0f, 70000.0f, -0.0f, 2.5f},
        nchw{-1.5f, 70000.0f, 0.25f, -0.0f, 3.0f, 2.5f};
    QCOMPARE(f.host(x), layout == Layout::nhwc ? nhwc : nchw);
  }

  void countsNonFinite_data() { test::device_rows(); }
  void countsNonFinite() {
    UNET_FETCH_BACKEND(backend);
    Fixture f(*backend);
    Tensor t = f.f32({1.0f, INFINITY, -2.0f, NAN, -INFINITY}, Shape{5});
    Tensor n = Tensor::empty(f.backend.allocator(), Shape{1}, DType::i64, MemoryCategory::other);
    f.backend.count_non_finite(*f.stream, t, n);
    QCOMPARE(f.host<std::int64_t>(n)[0], 3);
  }
};

QTEST_GUILESS_MAIN(TestOps)
#include "test_ops.moc"
