// The CUDA kernels' per-element math (engine/unet/backend/cuda/kernel_math.h), compiled here by g++ and run
// on the host, against the CPU backend's operations on the same data. Each test runs the loop a kernel would
// run over kmath's functions and compares it with a CpuBackend call (or, for the dtype conversions, with
// the engine's own conversion routines and GCC's IEEE _Float16).
//
// Integer and bit results (rounding, counts, arg-max indices, index maps, copies) are compared exactly. Float
// formulas are compared within `ulps` units in the last place where the GPU may legitimately differ: nvcc
// contracts a*b+c into an FMA (g++ in ISO C++ mode does not), and CUDA's expf/log1pf/exp/log are within a
// few ulps of glibc's. On this host both sides run the same operations, so the observed difference is
// usually 0; the tolerance is what the device is allowed. NaN equals NaN (payloads differ between x86 and
// CUDA), and a NaN on one side only is a failure.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cstring>
#include <optional>
#include <thread>

#include "test_support.h"
#include "unet/backend/communicator.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/cpu/cpu_kernels.h"
#include "unet/backend/cuda/kernel_math.h"
#include "unet/config/config.h"

using namespace unet;
namespace km = unet::kmath;
namespace lm = unet::loss_math;  // the loss math (unet/loss/terms.h) that kmath's loss wrappers call

// GCC's IEEE binary16 (libgcc's soft-float conversions, round to nearest even): the f16 reference, as the
// CPU backend has no f16 of its own.
__extension__ typedef _Float16 ieee_half;

namespace {

std::uint16_t half_bits(ieee_half h) {
  std::uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
ieee_half half_of(std::uint16_t b) {
  ieee_half h;
  std::memcpy(&h, &b, sizeof h);
  return h;
}

// --- test data ---------------------------------------------------------------------------------------------

// Named value sets: each row of a data-driven test picks one.
std::vector<float> make_values(const QString& kind, std::int64_t count, std::uint64_t seed) {
  Rng rng(seed, 11);
  std::vector<float> v(static_cast<std::size_t>(count));
  const float specials[] = {0.0f,  -0.0f,   1e-40f,   -1e-40f, FLT_MIN,  -FLT_MIN,  1e30f, -1e30f,
                            88.7f, -88.7f,  100.0f,   -100.0f, INFINITY, -INFINITY, NAN,   1.0f,
                            -1.0f, FLT_MAX, -FLT_MAX, 3.0e-8f, 0.5f,     -0.5f,     1e-7f, -20.0f};
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto normal = static_cast<float>(3.0 * rng.normal());
    if (kind == "normal") {
      v[i] = normal;
    } else if (kind == "specials") {
      v[i] = i % 3 == 2 ? normal : specials[rng.below(std::size(specials))];
    } else if (kind == "ties") {  // few distinct values, -0 among them: many equal maxima
      const float choices[] = {-1.0f, -0.0f, 0.0f, 1.0f, 1.0f};
      v[i] = choices[rng.below(std::size(choices))];
    } else if (kind == "nan") {
      v[i] = rng.below(5) == 0 ? NAN : normal;
    } else if (kind == "large") {
      v[i] = static_cast<float>(rng.uniform(50.0, 200.0)) * (rng.below(2) ? 1.0f : -1.0f);
    } else if (kind == "equal") {  // every value the same: all classes tie
      v[i] = 0.75f;
    } else if (kind == "neg_inf") {
      v[i] = rng.below(3) == 0 ? normal : -INFINITY;
    } else {
      qFatal("unknown value set %s", qPrintable(kind));
    }
  }
  return v;
}

// Class indices below `classes`; a binary mask holds 0 and 255 (any non-zero is foreground).
std::vector<std::uint8_t> make_targets(std::int64_t count, int classes, bool binary_mask, bool out_of_range,
                                       std::uint64_t seed) {
  Rng rng(seed, 12);
  std::vector<std::uint8_t> t(static_cast<std::size_t>(count));
  for (auto& x : t) {
    x = static_cast<std::uint8_t>(rng.below(static_cast<std::uint64_t>(classes)));
    if (binary_mask && x == 1 && rng.below(2)) x = 255;
  }
  if (out_of_range) t[t.size() / 2] = static_cast<std::uint8_t>(classes);  // the first invalid class
  return t;
}

// Activation storage of one dtype as raw bytes, with typed access through kmath's codecs.
struct HostData {
  DType dtype = DType::f32;
  std::vector<std::byte> bytes;

  HostData(DType t, std::int64_t count) : dtype(t), bytes(static_cast<std::size_t>(count) * dtype_size(t)) {}
  HostData(DType t, const std::vector<float>& values)
      : HostData(t, static_cast<std::int64_t>(values.size())) {
    for (std::size_t i = 0; i < values.size(); ++i) set(static_cast<std::int64_t>(i), values[i]);
  }
  std::int64_t size() const { return static_cast<std::int64_t>(bytes.size() / dtype_size(dtype)); }
  template <class E>
  typename E::storage* as() {
    return reinterpret_cast<typename E::storage*>(bytes.data());
  }
  // The engine's routines on the write side, so that inputs are what the CPU backend would store.
  void set(std::int64_t i, float value) {
    if (dtype == DType::f32)
      std::memcpy(bytes.data() + i * 4, &value, 4);
    else {
      const std::uint16_t b = cpu::float_to_bf16(value);
      std::memcpy(bytes.data() + i * 2, &b, 2);
    }
  }
  float get(std::int64_t i) const {
    if (dtype == DType::f32) {
      float v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    std::uint16_t b;
    std::memcpy(&b, bytes.data() + i * 2, 2);
    return cpu::bf16_to_float(b);
  }
  std::vector<float> floats() const {
    std::vector<float> v(static_cast<std::size_t>(size()));
    for (std::int64_t i = 0; i < size(); ++i) v[static_cast<std::size_t>(i)] = get(i);
    return v;
  }
};

// Runs fn with the kmath codec of a compute dtype.
template <class Fn>
void with_codec(DType dtype, Fn&& fn) {
  if (dtype == DType::f32)
    fn(km::F32{});
  else
    fn(km::BF16{});
}

km::Dims dims_of(const ActShape& s, Layout layout) {
  return {s.n, s.c, s.h, s.w, layout == Layout::nhwc};
}

// Units in the last place between two floats of one dtype (bf16 keeps 8 bits of mantissa: its ulp is 2^16
// float ulps). NaN against NaN is 0; NaN against a number, or numbers of different sign far apart, is large.
double ulp_distance(float a, float b, DType dtype) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0.0 : INFINITY;
  if (a == b) return 0.0;
  if (std::isinf(a) || std::isinf(b)) return INFINITY;
  auto ordered = [](float x) {
    const std::int64_t bits = km::bits_of(x);
    return bits & 0x80000000 ? -(bits & 0x7FFFFFFF) : bits;
  };
  const double d = std::fabs(static_cast<double>(ordered(a) - ordered(b)));
  return dtype == DType::bf16 ? d / 65536.0 : d;
}

// Compares element by element; on failure names the first bad index and both values.
bool compare_floats(const std::vector<float>& got, const std::vector<float>& want, double ulps, DType dtype,
                    const char* what) {
  HELPER_COMPARE(got.size(), want.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = ulp_distance(got[i], want[i], dtype);
    worst = std::max(worst, d);
    HELPER_VERIFY2(d <= ulps, qPrintable(QString("%1[%2]: kernel math %3, CPU backend %4 (%5 ulps > %6)")
                                             .arg(what)
                                             .arg(i)
                                             .arg(got[i], 0, 'g', 9)
                                             .arg(want[i], 0, 'g', 9)
                                             .arg(d)
                                             .arg(ulps)));
  }
  return true;
}

// Bit-exact, except that any NaN equals any NaN.
// A bf16 subnormal the kernel math keeps (as CUDA's conversions do) where the CPU backend has a zero of the
// same sign: oneDNN's bf16 kernels on CPUs with AVX512-BF16 convert with VCVTNEPS2BF16, which flushes
// subnormal inputs and results to zero. Nothing else counts as flushed.
bool flushed_subnormal(float kernel, float cpu, DType dtype) {
  if (dtype != DType::bf16 || cpu != 0.0f || std::signbit(kernel) != std::signbit(cpu)) return false;
  return kernel != 0.0f && std::fabs(kernel) < std::numeric_limits<float>::min();
}

// oneDNN's bf16 max pooling on AVX512-BF16 CPUs starts each window from the lowest finite bf16, so a window
// of -inf gives -3.3895e38 where the kernel math (and PyTorch) give -inf.
bool onednn_bf16_pool_floor(float kernel, float cpu, DType dtype) {
  return dtype == DType::bf16 && kernel == -std::numeric_limits<float>::infinity() &&
         km::bits_of(cpu) == 0xff7f0000u;
}

bool compare_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                  DType dtype = DType::f32, bool pooled = false) {
  HELPER_COMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) ||
                      km::bits_of(got[i]) == km::bits_of(want[i]) ||
                      flushed_subnormal(got[i], want[i], dtype) ||
                      (pooled && onednn_bf16_pool_floor(got[i], want[i], dtype));
    HELPER_VERIFY2(same, qPrintable(QString("%1[%2]: kernel math %3 (0x%4), CPU backend %5 (0x%6)")
                                        .arg(what)
                                        .arg(i)
                                        .arg(got[i], 0, 'g', 9)
                                        .arg(km::bits_of(got[i]), 8, 16, QChar('0'))
                                        .arg(want[i], 0, 'g', 9)
                                        .arg(km::bits_of(want[i]), 8, 16, QChar('0'))));
  }
  return true;
}

struct Fixture {
  CpuBackend backend{CpuBackendOptions{.threads = 1}};
  std::unique_ptr<Stream> stream = backend.create_stream();

  Tensor tensor(const HostData& b, const Shape& shape, Layout layout = Layout::nhwc) {
    Tensor t = Tensor::empty(backend.allocator(), shape, b.dtype, MemoryCategory::other, layout);
    backend.copy_from_host(*stream, b.bytes.data(), t);
    return t;
  }
  Tensor empty(const Shape& shape, DType dtype, Layout layout = Layout::nhwc) {
    return Tensor::empty(backend.allocator(), shape, dtype, MemoryCategory::other, layout);
  }
  Tensor u8(const std::vector<std::uint8_t>& v, const Shape& shape) {
    Tensor t = empty(shape, DType::u8);
    backend.copy_from_host(*stream, v.data(), t);
    return t;
  }
  HostData read(const Tensor& t) {
    HostData b(t.dtype(), t.numel());
    backend.copy_to_host(*stream, t, b.bytes.data());
    stream->synchronize();
    return b;
  }
  template <class T>
  std::vector<T> read_as(const Tensor& t) {
    return test::to_host<T>(backend, *stream, t);
  }
};

// The CPU backend's oneDNN primitives refuse bf16 on CPUs without AVX512 (this machine is one): true when
// the CPU backend refused the call that way, so that the row is skipped on the backend's own answer rather
// than on a guess from the CPU's features.
template <class Fn>
bool onednn_refuses(DType dtype, Fn&& call) {
  try {
    call();
    return false;
  } catch (const Error& e) {
    if (dtype == DType::f32 || e.kind() != ErrorKind::backend) throw;
    return true;
  }
}

void add_dtype_layout_rows(const QStringList& value_sets) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Layout layout : {Layout::nhwc, Layout::nchw})
      for (const QString& values : value_sets)
        QTest::newRow(
            qPrintable(QString("%1 %2 %3").arg(to_string(dtype).data(), to_string(layout).data(), values)))
            << dtype << layout << values;
}

}  // namespace

class TestKernelMath : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- dtype conversions -----------------------------------------------------------------------------------

  // All 2^16 bf16 patterns widen exactly as the engine's cpu::bf16_to_float.
  void bf16ToFloatEveryPattern() {
    for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      QCOMPARE(km::bits_of(km::bf16_to_float(h)), km::bits_of(cpu::bf16_to_float(h)));
    }
  }

  // All 2^16 half patterns widen exactly as IEEE (GCC's _Float16), NaN payloads included.
  void f16ToFloatEveryPattern() {
    for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      const auto want = static_cast<float>(half_of(h));
      QVERIFY2(km::bits_of(km::f16_to_float(h)) == km::bits_of(want),
               qPrintable(QString("half 0x%1: 0x%2, IEEE 0x%3")
                              .arg(b, 4, 16, QChar('0'))
                              .arg(km::bits_of(km::f16_to_float(h)), 8, 16, QChar('0'))
                              .arg(km::bits_of(want), 8, 16, QChar('0'))));
      QCOMPARE(km::is_non_finite_f16(h), !std::isfinite(want));
      QCOMPARE(km::is_non_finite_bf16(h), !std::isfinite(cpu::bf16_to_float(h)));
    }
  }

  // Narrowing: every float whose upper 16 bits are any of the 2^16 patterns, with every multiple of 0x1000 as
  // the low half and its two neighbours, plus random low halves. bf16 rounds at bit 16 (tie 0x8000); f16
  // rounds normals at bit 13 (ties at 0x1000 + k * 0x2000, with an even or odd kept bit) and subnormals at
  // bits 14 to 24 (ties at 0x4000, 0x8000, 0xC000 or in the upper half). That passes every tie of both
  // parities, every carry into the exponent, overflow to infinity, the subnormal range and NaNs whose payload
  // is only in the dropped bits.
  void narrowingAtEveryBoundary_data() {
    QTest::addColumn<QString>("format");
    QTest::newRow("bf16 vs cpu::float_to_bf16") << "bf16";
    QTest::newRow("f16 vs IEEE _Float16") << "f16";
  }
  void narrowingAtEveryBoundary() {
    QFETCH(QString, format);
    const bool bf16 = format == "bf16";
    std::vector<std::uint32_t> lows;
    for (std::uint32_t step = 0; step <= 0x10000; step += 0x1000)
      for (std::uint32_t low : {step - 1, step, step + 1})
        if (low <= 0xFFFF) lows.push_back(low);  // step 0 - 1 wraps past 0xFFFF and is left out
    Rng rng(5, 1);
    std::int64_t checked = 0;
    for (std::uint32_t high = 0; high <= 0xFFFF; ++high) {
      for (std::size_t k = 0; k < lows.size() + 2; ++k) {
        const std::uint32_t low = k < lows.size() ? lows[k] : static_cast<std::uint32_t>(rng.below(0x10000));
        const float v = km::float_of(high << 16 | low);
        const std::uint16_t got = bf16 ? km::float_to_bf16(v) : km::float_to_f16(v);
        const std::uint16_t want = bf16 ? cpu::float_to_bf16(v) : half_bits(static_cast<ieee_half>(v));
        if (got != want)
          QFAIL(qPrintable(QString("%1 of 0x%2 (%3): 0x%4, reference 0x%5")
                               .arg(format)
                               .arg(high << 16 | low, 8, 16, QChar('0'))
                               .arg(v, 0, 'g', 9)
                               .arg(got, 4, 16, QChar('0'))
                               .arg(want, 4, 16, QChar('0'))));
        ++checked;
      }
    }
    QCOMPARE(lows.size(), std::size_t{16 * 3});  // 0, 1, then 3 around each of 0x1000..0xF000, then 0xFFFF
    QCOMPARE(checked, std::int64_t{65536} * (16 * 3 + 2));
  }

  // Through the Backend: fill() of a bf16 tensor rounds as the CPU stores activations.
  void bf16FillThroughBackend() {
    Fixture f;
    Tensor t = f.empty(Shape{1}, DType::bf16);
    for (float v : make_values("specials", 400, 3)) {
      f.backend.fill(*f.stream, t, static_cast<double>(v));
      QCOMPARE(f.read_as<std::uint16_t>(t)[0], km::float_to_bf16(v));
    }
  }

  // --- elementwise -----------------------------------------------------------------------------------------

  void inputFromU8_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<float>("scale");
    for (DType dtype : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nhwc, Layout::nchw})
        for (float scale : {1.0f / 255.0f, 1.0f, 0.3f})
          QTest::newRow(qPrintable(
              QString("%1 %2 scale %3").arg(to_string(dtype).data(), to_string(layout).data()).arg(scale)))
              << dtype << layout << scale;
  }
  void inputFromU8() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(float, scale);
    Fixture f;
    const ActShape s{2, 3, 5, 7};
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(s.numel()));
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
    pixels[0] = 0, pixels[1] = 255;
    Tensor x = f.empty(s.shape(), dtype, layout);
    f.backend.input_from_pixels(*f.stream, f.u8(pixels, Shape{s.n, s.h, s.w, s.c}), x, scale);
    const km::Dims d = dims_of(s, layout);
    HostData mine(dtype, s.numel());
    for (std::int64_t i = 0; i < s.numel(); ++i)
      mine.set(i,
               km::input_from_pixels(pixels[static_cast<std::size_t>(km::input_pixel_index(d, i))], scale));
    QVERIFY(compare_bits(mine.floats(), f.read(x).floats(), "x"));
  }

  // The convolution's epilogue, y = [relu](conv + b[c]), against conv_forward with an identity 1x1 filter:
  // every product is x * 1 or x * 0, so the CPU's accumulator holds x exactly before the bias, unless another
  // channel of the pixel is infinite or NaN (0 * inf is NaN), which the expected convolution output accounts
  // for. Several channels check the bias's channel index in both layouts. f32 only: the CPU backend has no
  // bf16 convolutions without AVX512-BF16, and on the GPU the epilogue reads cuDNN's already-rounded output.
  void biasReluEpilogue_data() {
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<bool>("relu");
    QTest::addColumn<int>("channels");
    QTest::addColumn<QString>("values");
    for (Layout layout : {Layout::nhwc, Layout::nchw})
      for (bool relu : {false, true})
        for (int channels : {1, 3})
          for (const char* values : {"normal", "ties", "specials"})
            QTest::newRow(qPrintable(QString("%1 %2 %3 channels %4")
                                         .arg(to_string(layout).data(), relu ? "relu" : "linear")
                                         .arg(channels)
                                         .arg(values)))
                << layout << relu << channels << QString(values);
  }
  void biasReluEpilogue() {
    QFETCH(Layout, layout);
    QFETCH(bool, relu);
    QFETCH(int, channels);
    QFETCH(QString, values);
    Fixture f;
    const ActShape s{2, channels, 4, 5};
    const auto x = make_values(values, s.numel(), 21);
    std::vector<float> identity(static_cast<std::size_t>(channels * channels), 0.0f),
        bias{0.5f, -0.25f, 0.0f};
    for (int c = 0; c < channels; ++c) identity[static_cast<std::size_t>(c * channels + c)] = 1.0f;
    bias.resize(static_cast<std::size_t>(channels));
    const ConvDesc d{
        .n = s.n, .c_in = s.c, .c_out = s.c, .h = s.h, .w = s.w, .kernel = 1, .relu = relu, .layout = layout};
    Tensor y = f.empty(s.shape(), DType::f32, layout);
    std::vector<std::byte> ws(f.backend.conv_workspace_bytes(d, ConvPass::forward));
    Tensor b = f.tensor(HostData(DType::f32, bias), Shape{s.c});
    f.backend.conv_forward(*f.stream, d, f.tensor(HostData(DType::f32, x), s.shape(), layout),
                           f.tensor(HostData(DType::f32, identity), d.weight_shape()), &b, y,
                           {ws.data(), ws.size()});
    const km::Dims dims = dims_of(s, layout);
    std::vector<float> mine(x.size());
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const km::Coord at = km::coord_of(dims, i);
      bool other_non_finite = false;
      for (std::int64_t c = 0; c < s.c; ++c)
        other_non_finite =
            other_non_finite ||
            (c != at.c &&
             !std::isfinite(x[static_cast<std::size_t>(km::offset_of(dims, at.n, c, at.h, at.w))]));
      const float conv = other_non_finite ? NAN : x[static_cast<std::size_t>(i)];
      mine[static_cast<std::size_t>(i)] =
          km::bias_relu(conv, bias[static_cast<std::size_t>(km::channel_of(dims, i))], relu);
    }
    // +0 and -0 are equal here: which one a negative value gives depends on oneDNN's kernel. So does a NaN
    // before the ReLU: the NHWC kernel (the engine's layout) makes it 0, as kmath does, while the NCHW kernel
    // with several channels keeps the NaN (oneDNN's reference rule); only there is a NaN accepted for a 0.
    const bool cpu_keeps_nan = relu && layout == Layout::nchw && channels > 1;
    auto cpu = f.read(y).floats();
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      if (cpu[i] == 0.0f) cpu[i] = 0.0f;
      if (cpu_keeps_nan && std::isnan(cpu[i]) && mine[i] == 0.0f) cpu[i] = 0.0f;
    }
    QVERIFY(compare_bits(mine, cpu, "y"));
  }

  void reluBackward_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<QString>("values");
    for (DType dtype : {DType::f32, DType::bf16})
      for (const char* values : {"normal", "specials", "ties", "nan"})
        QTest::newRow(qPrintable(QString("%1 %2").arg(to_string(dtype).data(), values)))
            << dtype << QString(values);
  }
  void reluBackward() {
    QFETCH(DType, dtype);
    QFETCH(QString, values);
    Fixture f;
    const std::int64_t count = 999;
    const HostData y(dtype, make_values(values, count, 31)), dy(dtype, make_values("specials", count, 32));
    Tensor dz = f.empty(Shape{count}, dtype);
    if (onednn_refuses(dtype, [&] {
          f.backend.relu_backward(*f.stream, f.tensor(y, Shape{count}), f.tensor(dy, Shape{count}), dz);
        }))
      QSKIP("the CPU backend (oneDNN) has no bf16 ReLU backward on this CPU");
    HostData mine(dtype, count);
    for (std::int64_t i = 0; i < count; ++i) mine.set(i, km::relu_backward(y.get(i), dy.get(i)));
    QVERIFY(compare_bits(mine.floats(), f.read(dz).floats(), "dz", dtype));
  }

  // --- losses, metrics, probabilities ----------------------------------------------------------------------

  void binaryCrossEntropy_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<QString>("values");
    QTest::addColumn<float>("grad_scale");
    QTest::addColumn<double>("ulps");
    // log1pf/expf on the GPU: a few ulps; the gradient goes through sigmoid's division too.
    for (DType dtype : {DType::f32, DType::bf16})
      for (const char* values : {"normal", "large", "specials", "nan"})
        for (float scale : {1.0f, 1.0f / 1024})
          QTest::newRow(qPrintable(QString("%1 %2 scale %3").arg(to_string(dtype).data(), values).arg(scale)))
              << dtype << QString(values) << scale << 4.0;
  }
  void binaryCrossEntropy() {
    QFETCH(DType, dtype);
    QFETCH(QString, values);
    QFETCH(float, grad_scale);
    QFETCH(double, ulps);
    Fixture f;
    const ActShape s{2, 1, 9, 11};
    const HostData logits(dtype, make_values(values, s.numel(), 41));
    const auto targets = make_targets(s.n * s.h * s.w, 2, true, false, 42);
    Tensor dz = f.empty(s.shape(), dtype), sum = f.empty(Shape{kLossSums}, DType::f64);
    f.backend.fill(*f.stream, sum, 0.0);
    f.backend.loss(*f.stream, LossDesc{}, f.tensor(logits, s.shape()), f.u8(targets, Shape{s.n, s.h, s.w}),
                   nullptr, &dz, {.cross_entropy = grad_scale}, sum, {});
    double mine_sum = 0.0;
    std::vector<float> mine_losses, cpu_losses;
    HostData mine_dz(dtype, s.numel());
    for (std::int64_t p = 0; p < s.numel(); ++p) {
      const float z = logits.get(p);
      const bool fg = targets[static_cast<std::size_t>(p)] != 0;
      mine_losses.push_back(lm::bce_loss(z, fg));
      mine_sum += static_cast<double>(mine_losses.back());
      float gradient = 0.0f;
      km::pixel_loss<km::F32>(lm::LossParams{}, &z, 1, 1, targets[static_cast<std::size_t>(p)], 1.0f,
                              grad_scale, 0.0f, nullptr, &gradient);
      mine_dz.set(p, gradient);
      // Per pixel: the CPU backend's loss of this one pixel.
      Tensor one = f.empty(Shape{kLossSums}, DType::f64);
      f.backend.fill(*f.stream, one, 0.0);
      f.backend.loss(
          *f.stream, LossDesc{}, f.tensor(HostData(dtype, std::vector<float>{z}), Shape{1, 1, 1, 1}),
          f.u8({targets[static_cast<std::size_t>(p)]}, Shape{1, 1, 1}), nullptr, nullptr, {}, one, {});
      cpu_losses.push_back(static_cast<float>(f.read_as<double>(one)[0]));
    }
    QVERIFY(compare_floats(mine_losses, cpu_losses, ulps, DType::f32, "pixel loss"));
    QVERIFY(compare_floats(mine_dz.floats(), f.read(dz).floats(), ulps, dtype, "dlogits"));
    const double cpu_sum = f.read_as<double>(sum)[0];
    QVERIFY2((std::isnan(cpu_sum) && std::isnan(mine_sum)) ||
                 std::fabs(mine_sum - cpu_sum) <= 1e-6 * std::fabs(cpu_sum),
             qPrintable(QString("sum %1 vs %2").arg(mine_sum, 0, 'g', 17).arg(cpu_sum, 0, 'g', 17)));
  }

  void softmaxCrossEntropy_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<QString>("values");
    QTest::addColumn<int>("classes");
    QTest::addColumn<bool>("bad_target");
    for (DType dtype : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nhwc, Layout::nchw})
        for (const char* values : {"normal", "large", "equal", "ties", "nan", "neg_inf"})
          for (int classes : {2, 5})
            QTest::newRow(qPrintable(QString("%1 %2 %3 %4 classes")
                                         .arg(to_string(dtype).data(), to_string(layout).data(), values)
                                         .arg(classes)))
                << dtype << layout << QString(values) << classes << false;
    QTest::newRow("f32 nhwc target out of range") << DType::f32 << Layout::nhwc << "normal" << 3 << true;
    QTest::newRow("bf16 nchw target out of range") << DType::bf16 << Layout::nchw << "normal" << 4 << true;
  }
  void softmaxCrossEntropy() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(QString, values);
    QFETCH(int, classes);
    QFETCH(bool, bad_target);
    Fixture f;
    const ActShape s{2, classes, 6, 7};
    const float grad_scale = 0.5f;
    HostData logits(dtype, make_values(values, s.numel(), 51));
    const auto targets = make_targets(s.n * s.h * s.w, classes, false, bad_target, 52);
    Tensor dz = f.empty(s.shape(), dtype, layout), sum = f.empty(Shape{kLossSums}, DType::f64);
    f.backend.fill(*f.stream, sum, 0.0);
    bool cpu_refused = false;
    try {
      f.backend.loss(*f.stream, LossDesc{}, f.tensor(logits, s.shape(), layout),
                     f.u8(targets, Shape{s.n, s.h, s.w}), nullptr, &dz, {.cross_entropy = grad_scale}, sum,
                     {});
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
      cpu_refused = true;
    }
    const km::Dims d = dims_of(s, layout);
    HostData mine_dz(dtype, s.numel());
    double mine_sum = 0.0;
    bool all_in_range = true;
    with_codec(dtype, [&]<class E>(E) {
      auto* z = logits.as<E>();
      auto* g = mine_dz.as<E>();
      for (std::int64_t p = 0; p < s.n * s.h * s.w; ++p) {
        const std::int64_t base = km::pixel_base(d, p);
        const lm::PixelLossResult l = km::pixel_loss<E>(lm::LossParams{}, z + base, km::channel_stride(d),
                                                        classes, targets[static_cast<std::size_t>(p)], 1.0f,
                                                        grad_scale, 0.0f, nullptr, g + base);
        all_in_range = all_in_range && l.target_in_range;
        mine_sum += l.loss;
      }
    });
    QCOMPARE(!all_in_range, cpu_refused);
    QCOMPARE(cpu_refused, bad_target);
    if (bad_target) return;
    // Probabilities go through exp in double on both sides, then rounded to float: 2 float ulps.
    QVERIFY(compare_floats(mine_dz.floats(), f.read(dz).floats(), 2.0, dtype, "dlogits"));
    const double cpu_sum = f.read_as<double>(sum)[0];
    QVERIFY2((std::isnan(cpu_sum) && std::isnan(mine_sum)) ||
                 std::fabs(mine_sum - cpu_sum) <= 1e-12 * std::fabs(cpu_sum),
             qPrintable(QString("sum %1 vs %2").arg(mine_sum, 0, 'g', 17).arg(cpu_sum, 0, 'g', 17)));
  }

  void segmentationCounts_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<QString>("values");
    QTest::addColumn<int>("channels");
    QTest::addColumn<bool>("bad_target");
    for (DType dtype : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nhwc, Layout::nchw})
        for (const char* values : {"normal", "ties", "equal", "specials", "nan"})
          for (int channels : {1, 4})
            QTest::newRow(qPrintable(QString("%1 %2 %3 %4 logits")
                                         .arg(to_string(dtype).data(), to_string(layout).data(), values)
                                         .arg(channels)))
                << dtype << layout << QString(values) << channels << false;
    // a mask class >= classes counts a false positive and no false negative (the loss refuses it)
    QTest::newRow("f32 nhwc target out of range") << DType::f32 << Layout::nhwc << "normal" << 3 << true;
  }
  void segmentationCounts() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(QString, values);
    QFETCH(int, channels);
    QFETCH(bool, bad_target);
    Fixture f;
    const ActShape s{3, channels, 5, 6};
    const int classes = std::max(channels, 2);
    HostData logits(dtype, make_values(values, s.numel(), 61));
    const auto targets = make_targets(s.n * s.h * s.w, classes, channels == 1, bad_target, 62);
    Tensor counts = f.empty(Shape{segmentation_counts_size(channels)}, DType::i64);
    f.backend.fill(*f.stream, counts, 0);
    f.backend.segmentation_counts(*f.stream, f.tensor(logits, s.shape(), layout),
                                  f.u8(targets, Shape{s.n, s.h, s.w}), counts, -1);
    const km::Dims d = dims_of(s, layout);
    std::vector<std::int64_t> mine(static_cast<std::size_t>(segmentation_counts_size(channels)), 0);
    with_codec(dtype, [&]<class E>(E) {
      for (std::int64_t p = 0; p < s.n * s.h * s.w; ++p) {
        const km::PixelClasses pc =
            km::classify_pixel<E>(logits.as<E>() + km::pixel_base(d, p), km::channel_stride(d), channels,
                                  targets[static_cast<std::size_t>(p)]);
        const km::CountIncrements inc = km::count_increments(pc, classes);
        for (std::int64_t index : inc.index)
          if (index >= 0)
            mine.at(static_cast<std::size_t>(index)) += 1;  // at: an index past the counts fails
      }
    });
    QCOMPARE(mine, f.read_as<std::int64_t>(counts));
  }

  void probabilities_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<QString>("values");
    QTest::addColumn<int>("channels");
    for (DType dtype : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nhwc, Layout::nchw})
        for (const char* values : {"normal", "large", "equal", "specials", "nan"})
          for (int channels : {1, 3})
            QTest::newRow(qPrintable(QString("%1 %2 %3 %4 logits")
                                         .arg(to_string(dtype).data(), to_string(layout).data(), values)
                                         .arg(channels)))
                << dtype << layout << QString(values) << channels;
  }
  void probabilities() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(QString, values);
    QFETCH(int, channels);
    Fixture f;
    const ActShape s{2, channels, 5, 3};
    HostData logits(dtype, make_values(values, s.numel(), 71));
    Tensor probs = f.empty(Shape{s.numel()}, DType::f32);
    f.backend.probabilities(*f.stream, f.tensor(logits, s.shape(), layout), probs);
    const km::Dims d = dims_of(s, layout);
    std::vector<float> mine(static_cast<std::size_t>(s.numel()));
    with_codec(dtype, [&]<class E>(E) {
      for (std::int64_t p = 0; p < s.n * s.h * s.w; ++p) {
        const auto* z = logits.as<E>() + km::pixel_base(d, p);
        float* out = mine.data() + p * channels;
        if (channels == 1)
          out[0] = lm::sigmoid(E::load(z[0]));
        else
          km::softmax_probabilities<E>(z, km::channel_stride(d), channels, out);
      }
    });
    // expf and a division per value; the sum of exponentials may contract on the GPU
    QVERIFY(compare_floats(mine, f.read_as<float>(probs), 4.0, DType::f32, "probs"));
  }

  void addAndScale_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<QString>("values");
    for (DType dtype : {DType::f32, DType::bf16})
      for (const char* values : {"normal", "specials", "large"})
        QTest::newRow(qPrintable(QString("%1 %2").arg(to_string(dtype).data(), values)))
            << dtype << QString(values);
  }
  // y += x in the element type (the gradient accumulation of add() and split's accumulate), and scale()
  // (f32).
  void addAndScale() {
    QFETCH(DType, dtype);
    QFETCH(QString, values);
    Fixture f;
    const std::int64_t count = 777;
    const HostData x(dtype, make_values(values, count, 121)), y0(dtype, make_values("specials", count, 122));
    Tensor ty = f.tensor(y0, Shape{count});
    f.backend.add(*f.stream, f.tensor(x, Shape{count}), ty);
    HostData mine(dtype, count);
    for (std::int64_t i = 0; i < count; ++i) mine.set(i, km::add_into(y0.get(i), x.get(i)));
    QVERIFY(compare_bits(mine.floats(), f.read(ty).floats(), "y"));
    if (dtype != DType::f32) return;  // scale is f32 only
    const float factor = values == "large" ? 1.0f / 65536 : 3.5f;
    Tensor tx = f.tensor(x, Shape{count});
    f.backend.scale(*f.stream, tx, factor);
    std::vector<float> scaled = x.floats();
    for (float& v : scaled) v = km::scale_value(v, factor);
    QVERIFY(compare_bits(scaled, f.read(tx).floats(), "scaled"));
  }

  // The loss sum in the order kernels_reduce.cu forms it (a double per thread of a fixed kReduceBlocks x
  // kReduceThreads grid over grid-strided pixels, a tree per block, a tree over the blocks) against the CPU
  // backend's (4096-pixel chunks in order). Different orders: equal to rounding, which is what the GPU is
  // held to; and the same value for every run, as the order does not depend on timing.
  void lossSumInFixedGridOrder_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("binary, 3 x 4096 + 1000 pixels") << 1;
    QTest::newRow("softmax 3 classes") << 3;
  }
  void lossSumInFixedGridOrder() {
    QFETCH(int, classes);
    Fixture f;
    const ActShape s{2, classes, 80, 83};
    const HostData logits(DType::f32, make_values("normal", s.numel(), 131));
    const auto targets = make_targets(s.n * s.h * s.w, std::max(classes, 2), classes == 1, false, 132);
    Tensor sum = f.empty(Shape{kLossSums}, DType::f64);
    f.backend.fill(*f.stream, sum, 0.0);
    f.backend.loss(*f.stream, LossDesc{}, f.tensor(logits, s.shape()), f.u8(targets, Shape{s.n, s.h, s.w}),
                   nullptr, nullptr, {}, sum, {});
    const km::Dims d = dims_of(s, Layout::nhwc);
    const std::int64_t pixels = s.n * s.h * s.w;
    constexpr int blocks = 256, threads = 256;  // cuda_kernels::kReduceBlocks, kReduceThreads
    std::vector<double> per_thread(blocks * threads, 0.0);
    const float* z = reinterpret_cast<const float*>(logits.bytes.data());
    for (std::int64_t t = 0; t < blocks * threads; ++t)
      for (std::int64_t p = t; p < pixels; p += blocks * threads) {
        const std::uint8_t target = targets[static_cast<std::size_t>(p)];
        per_thread[static_cast<std::size_t>(t)] +=
            km::pixel_loss<km::F32>(lm::LossParams{}, z + km::pixel_base(d, p), 1, classes, target, 1.0f,
                                    1.0f, 0.0f, nullptr, nullptr)
                .loss;
      }
    auto tree = [](double* v, int n) {
      for (int half = n / 2; half > 0; half /= 2)
        for (int i = 0; i < half; ++i) v[i] += v[i + half];
      return v[0];
    };
    std::vector<double> partials(blocks);
    for (int b = 0; b < blocks; ++b)
      partials[static_cast<std::size_t>(b)] = tree(per_thread.data() + b * threads, threads);
    const double gpu_order = tree(partials.data(), blocks);
    const double cpu = f.read_as<double>(sum)[0];
    QVERIFY2(std::fabs(gpu_order - cpu) <= 1e-12 * std::fabs(cpu),
             qPrintable(QString("fixed grid %1, CPU %2").arg(gpu_order, 0, 'g', 17).arg(cpu, 0, 'g', 17)));
  }

  // The configurable loss as kernels_reduce.cu runs it (per image and Dice class the sums of
  // kmath::dice_pixel_sums, then loss_math::dice_image_loss, then kmath::pixel_loss per pixel with the
  // image's terms), with the parameters both backends pass (loss_params, unet/loss/desc.h), against the CPU
  // backend: every kind of the table (kLossKinds, unet/loss/terms.h), binary and softmax, both layouts and
  // dtypes, with class weights, an ignored label, the background's Dice and per-pixel weights (the kernel's
  // pixel_weights[p], here 0 to 8.5). Here the sums are formed in the CPU's order; lossSumInFixedGridOrder
  // covers the GPU's.
  void configurableLoss_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("channels");
    QTest::addColumn<bool>("options");
    for (DType dtype : {DType::f32, DType::bf16})
      for (Layout layout : {Layout::nhwc, Layout::nchw})
        for (const LossKindInfo& row : kLossKinds)
          for (int channels : {1, 4})
            for (bool options : {false, true})
              QTest::newRow(
                  qPrintable(QString("%1 %2 %3 %4 %5")
                                 .arg(to_string(dtype).data(), to_string(layout).data(), row.name)
                                 .arg(channels == 1 ? "binary" : "softmax")
                                 .arg(options ? "weights, ignore, background, pixel weights" : "plain")))
                  << dtype << layout << static_cast<int>(row.kind) << channels << options;
  }
  void configurableLoss() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(int, kind);
    QFETCH(int, channels);
    QFETCH(bool, options);
    Fixture f;
    LossDesc d;
    d.kind = static_cast<LossKind>(kind);
    if (options) {
      d.class_weights =
          channels == 1 ? std::vector<double>{0.3, 1.7} : std::vector<double>{0.2, 1.0, 2.5, 0.7};
      d.ignore_index = 254;
      d.dice_include_background = true;
      d.focal_gamma = 0.5;  // below 1: (1 - p)^(gamma - 1) is singular where p = 1, the kernels must not be
      d.dice_smooth = 1e-3;
    }
    const ActShape s{3, channels, 5, 6};
    HostData logits(dtype, make_values("normal", s.numel(), 151));
    auto targets = make_targets(s.n * s.h * s.w, std::max(channels, 2), channels == 1, false, 152);
    if (options)
      for (std::size_t i = 0; i < targets.size(); i += 3) targets[i] = 254;
    std::vector<float> pixel_weights;  // empty: none
    if (options)
      for (std::size_t i = 0; i < targets.size(); ++i)
        pixel_weights.push_back(i % 5 == 1 ? 0.0f : 0.5f + static_cast<float>((i * 3) % 9));
    const LossGradScales scales{.cross_entropy = 0.03f, .dice = 0.25f};
    Tensor dz = f.empty(s.shape(), dtype, layout), sums = f.empty(Shape{kLossSums}, DType::f64);
    f.backend.fill(*f.stream, sums, 0.0);
    const Buffer scratch =
        f.backend.allocator().allocate(f.backend.loss_workspace_bytes(d, s), MemoryCategory::workspace);
    std::optional<Tensor> weights_t;
    if (options) weights_t = f.tensor(HostData(DType::f32, pixel_weights), Shape{s.n, s.h, s.w});
    f.backend.loss(*f.stream, d, f.tensor(logits, s.shape(), layout), f.u8(targets, Shape{s.n, s.h, s.w}),
                   weights_t ? &*weights_t : nullptr, &dz, scales, sums, {scratch.data(), scratch.bytes()});

    const lm::LossParams lp = loss_params(d);
    const km::Dims dims = dims_of(s, layout);
    const std::int64_t plane = s.h * s.w, dice_classes = lm::dice_classes(channels);
    HostData mine_dz(dtype, s.numel());
    double mine_ce = 0.0, mine_dice = 0.0;
    bool all_in_range = true;
    with_codec(dtype, [&]<class E>(E) {
      auto* z = logits.as<E>();
      auto* g = mine_dz.as<E>();
      std::vector<double> terms(static_cast<std::size_t>(s.n * dice_classes * 3), 0.0);
      if (lm::has_image_term(lp))
        for (std::int64_t n = 0; n < s.n; ++n) {
          double* image = terms.data() + n * dice_classes * 3;
          for (std::int64_t p = n * plane; p < (n + 1) * plane; ++p) {
            const std::uint8_t t = targets[static_cast<std::size_t>(p)];
            if (lm::loss_ignores(lp, t)) continue;
            for (std::int64_t c = 0; c < dice_classes; ++c) {
              const lm::DiceSums ds = km::dice_pixel_sums<E>(z + km::pixel_base(dims, p),
                                                             km::channel_stride(dims), channels, t, c);
              image[3 * c] += ds.intersection;
              image[3 * c + 1] += ds.probability;
              image[3 * c + 2] += ds.truth;
            }
          }
          mine_dice += lm::dice_image_loss(lp, image, channels);
        }
      for (std::int64_t p = 0; p < s.n * plane; ++p) {
        const std::int64_t base = km::pixel_base(dims, p);
        const lm::PixelLossResult r = km::pixel_loss<E>(
            lp, z + base, km::channel_stride(dims), channels, targets[static_cast<std::size_t>(p)],
            pixel_weights.empty() ? 1.0f : pixel_weights[static_cast<std::size_t>(p)], scales.cross_entropy,
            scales.dice, lm::has_image_term(lp) ? terms.data() + (p / plane) * dice_classes * 3 : nullptr,
            g + base);
        all_in_range = all_in_range && r.target_in_range;
        mine_ce += r.loss;
      }
    });
    QVERIFY(all_in_range);
    QVERIFY(compare_floats(mine_dz.floats(), f.read(dz).floats(), 2.0, dtype, "dlogits"));
    const auto cpu = f.read_as<double>(sums);
    for (const auto& [mine, theirs, what] :
         {std::tuple{mine_ce, cpu[loss_sum_cross_entropy], "cross-entropy"},
          std::tuple{mine_dice, cpu[loss_sum_dice], "Dice"}})
      QVERIFY2(
          std::fabs(mine - theirs) <= 1e-12 * std::fabs(theirs),
          qPrintable(QString("%1 sum %2 vs %3").arg(what).arg(mine, 0, 'g', 17).arg(theirs, 0, 'g', 17)));
  }

  // The Dice pass in kernels_reduce.cu's order: per (image, Dice class) block, thread t sums pixels t,
  // t + 256, ... of the image, then a fixed tree over the 256 threads; the images' losses added in image
  // order. Against the CPU backend (pixels in order): equal to rounding, and the gradient built from those
  // sums within 2 float ulps.
  void diceSumsInBlockTreeOrder_data() {
    QTest::addColumn<int>("channels");
    QTest::newRow("binary") << 1;
    QTest::newRow("softmax 3 classes") << 3;
  }
  void diceSumsInBlockTreeOrder() {
    QFETCH(int, channels);
    Fixture f;
    LossDesc d;
    d.kind = LossKind::dice;
    d.ignore_index = 254;
    d.dice_include_background = true;
    const ActShape s{2, channels, 40, 37};
    HostData logits(DType::f32, make_values("normal", s.numel(), 171));
    auto targets = make_targets(s.n * s.h * s.w, std::max(channels, 2), channels == 1, false, 172);
    for (std::size_t i = 5; i < targets.size(); i += 11) targets[i] = 254;
    const LossGradScales scales{.cross_entropy = 0.0f, .dice = 0.5f};
    Tensor dz = f.empty(s.shape(), DType::f32), sums = f.empty(Shape{kLossSums}, DType::f64);
    f.backend.fill(*f.stream, sums, 0.0);
    const Buffer scratch =
        f.backend.allocator().allocate(f.backend.loss_workspace_bytes(d, s), MemoryCategory::workspace);
    f.backend.loss(*f.stream, d, f.tensor(logits, s.shape()), f.u8(targets, Shape{s.n, s.h, s.w}), nullptr,
                   &dz, scales, sums, {scratch.data(), scratch.bytes()});

    const lm::LossParams lp = loss_params(d);
    const km::Dims dims = dims_of(s, Layout::nhwc);
    constexpr int threads = 256;  // cuda_kernels::kReduceThreads
    const std::int64_t plane = s.h * s.w, dice_classes = lm::dice_classes(channels);
    const float* z = logits.as<km::F32>();
    std::vector<double> terms(static_cast<std::size_t>(s.n * dice_classes * 3));
    double dice_sum = 0.0;
    for (std::int64_t n = 0; n < s.n; ++n) {
      for (std::int64_t c = 0; c < dice_classes; ++c) {
        std::vector<double> part[3];
        for (auto& v : part) v.assign(threads, 0.0);
        for (int t = 0; t < threads; ++t)
          for (std::int64_t p = n * plane + t; p < (n + 1) * plane; p += threads) {
            const std::uint8_t target = targets[static_cast<std::size_t>(p)];
            if (lm::loss_ignores(lp, target)) continue;
            const lm::DiceSums ds =
                km::dice_pixel_sums<km::F32>(z + km::pixel_base(dims, p), 1, channels, target, c);
            part[0][static_cast<std::size_t>(t)] += ds.intersection;
            part[1][static_cast<std::size_t>(t)] += ds.probability;
            part[2][static_cast<std::size_t>(t)] += ds.truth;
          }
        for (int k = 0; k < 3; ++k) {
          for (int half = threads / 2; half > 0; half /= 2)
            for (int i = 0; i < half; ++i)
              part[k][static_cast<std::size_t>(i)] += part[k][static_cast<std::size_t>(i + half)];
          terms[static_cast<std::size_t>((n * dice_classes + c) * 3 + k)] = part[k][0];
        }
      }
      dice_sum += lm::dice_image_loss(lp, terms.data() + n * dice_classes * 3, channels);
    }
    const double cpu = f.read_as<double>(sums)[loss_sum_dice];
    QVERIFY2(
        std::fabs(dice_sum - cpu) <= 1e-12 * std::fabs(cpu),
        qPrintable(QString("block-tree order %1, CPU %2").arg(dice_sum, 0, 'g', 17).arg(cpu, 0, 'g', 17)));
    HostData mine_dz(DType::f32, s.numel());
    float* g = mine_dz.as<km::F32>();
    for (std::int64_t p = 0; p < s.n * plane; ++p) {
      const std::int64_t base = km::pixel_base(dims, p);
      km::pixel_loss<km::F32>(lp, z + base, 1, channels, targets[static_cast<std::size_t>(p)], 1.0f, 0.0f,
                              scales.dice, terms.data() + (p / plane) * dice_classes * 3, g + base);
    }
    QVERIFY(compare_floats(mine_dz.floats(), f.read(dz).floats(), 2.0, DType::f32, "dlogits"));
  }

  // --- optimizer, bookkeeping ------------------------------------------------------------------------------

  void adam_data() {
    QTest::addColumn<float>("weight_decay");
    QTest::addColumn<bool>("decoupled");
    QTest::addColumn<float>("grad_scale");
    QTest::addColumn<QString>("grads");
    for (float wd : {0.0f, 0.05f})
      for (bool decoupled : {false, true})
        for (float scale : {1.0f, 1.0f / 4096})
          for (const char* grads : {"normal", "large", "specials", "ties"})
            QTest::newRow(qPrintable(QString("%1 wd %2 scale %3 %4")
                                         .arg(decoupled ? "adamw" : "adam")
                                         .arg(wd)
                                         .arg(scale)
                                         .arg(grads)))
                << wd << decoupled << scale << QString(grads);
  }
  // Five steps on 1000 parameters; m, v and the parameters after each step. A contracted FMA on the GPU
  // (b2 v + (1-b2) g g, m + (1-b1)(g - m), the decay) moves results by an ulp or two per step.
  void adam() {
    QFETCH(float, weight_decay);
    QFETCH(bool, decoupled);
    QFETCH(float, grad_scale);
    QFETCH(QString, grads);
    Fixture f;
    const std::int64_t count = 1000;
    auto p = make_values("normal", count, 81), m = std::vector<float>(count, 0.0f), v = m;
    Tensor tp = f.tensor(HostData(DType::f32, p), Shape{count}),
           tm = f.tensor(HostData(DType::f32, m), Shape{count}),
           tv = f.tensor(HostData(DType::f32, v), Shape{count});
    for (std::int64_t step = 1; step <= 5; ++step) {
      const auto g = make_values(grads, count, 82 + static_cast<std::uint64_t>(step));
      const AdamStep a{.lr = 3e-3f,
                       .weight_decay = weight_decay,
                       .decoupled_weight_decay = decoupled,
                       .step = step,
                       .grad_scale = grad_scale};
      f.backend.adam_step(*f.stream, a, tp, f.tensor(HostData(DType::f32, g), Shape{count}), tm, tv);
      const km::AdamScalars k = km::adam_scalars(a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                                                 a.decoupled_weight_decay, a.step, a.grad_scale);
      for (std::size_t i = 0; i < p.size(); ++i) km::adam_update(k, p[i], g[i], m[i], v[i]);
      QVERIFY(compare_floats(p, f.read_as<float>(tp), 2.0 * static_cast<double>(step), DType::f32, "params"));
      QVERIFY(compare_floats(m, f.read_as<float>(tm), 2.0 * static_cast<double>(step), DType::f32, "m"));
      QVERIFY(compare_floats(v, f.read_as<float>(tv), 2.0 * static_cast<double>(step), DType::f32, "v"));
    }
  }

  void sgd_data() {
    QTest::addColumn<float>("momentum");
    QTest::addColumn<bool>("nesterov");
    QTest::addColumn<float>("weight_decay");
    QTest::addColumn<QString>("grads");
    for (float mu : {0.0f, 0.9f, 0.99f})
      for (bool nesterov : {false, true})
        for (float wd : {0.0f, 3e-5f})
          for (const char* grads : {"normal", "large"}) {
            if (nesterov && mu == 0.0f) continue;
            QTest::newRow(qPrintable(QString("momentum %1%2 wd %3 %4")
                                         .arg(mu)
                                         .arg(nesterov ? " nesterov" : "")
                                         .arg(wd)
                                         .arg(grads)))
                << mu << nesterov << wd << QString(grads);
          }
  }
  // The CUDA kernel's per-value SGD (kernel_math.h) against the CPU backend over five steps.
  void sgd() {
    QFETCH(float, momentum);
    QFETCH(bool, nesterov);
    QFETCH(float, weight_decay);
    QFETCH(QString, grads);
    Fixture f;
    const std::int64_t count = 1000;
    auto p = make_values("normal", count, 91), buf = std::vector<float>(count, 0.0f);
    Tensor tp = f.tensor(HostData(DType::f32, p), Shape{count}),
           tb = f.tensor(HostData(DType::f32, buf), Shape{count});
    for (std::int64_t step = 1; step <= 5; ++step) {
      const auto g = make_values(grads, count, 92 + static_cast<std::uint64_t>(step));
      const SgdStep a{.lr = 1e-2f,
                      .momentum = momentum,
                      .nesterov = nesterov,
                      .weight_decay = weight_decay,
                      .grad_scale = 0.5f};
      f.backend.sgd_step(*f.stream, a, tp, f.tensor(HostData(DType::f32, g), Shape{count}), tb);
      const km::SgdScalars k{.lr = a.lr,
                             .momentum = a.momentum,
                             .weight_decay = a.weight_decay,
                             .grad_scale = a.grad_scale,
                             .nesterov = a.nesterov};
      for (std::size_t i = 0; i < p.size(); ++i)
        km::sgd_update(k, p[i], g[i], momentum != 0 ? &buf[i] : nullptr);
      QVERIFY(compare_floats(p, f.read_as<float>(tp), 2.0 * static_cast<double>(step), DType::f32, "params"));
      if (momentum != 0)
        QVERIFY(
            compare_floats(buf, f.read_as<float>(tb), 2.0 * static_cast<double>(step), DType::f32, "buffer"));
    }
  }

  // The gradient norm's sum of squares, in double, against a hand-summed value.
  void sumOfSquares() {
    Fixture f;
    const std::vector<float> values{3.0f, -4.0f, 0.5f, 1e20f, 0.0f};
    Tensor t = f.tensor(HostData(DType::f32, values), Shape{5});
    Tensor sum = Tensor::empty(f.backend.allocator(), Shape{1}, DType::f64, MemoryCategory::other);
    f.backend.sum_of_squares(*f.stream, t, sum);
    // 9 + 16 + 0.25 + (1e20)^2: in float the square would overflow; double holds it (and the small terms are
    // below its last place).
    const double big = static_cast<double>(1e20f);
    QCOMPARE(f.read_as<double>(sum)[0], 9.0 + 16.0 + 0.25 + big * big);
    const std::vector<float> with_nan{1.0f, std::nanf("")};
    Tensor bad = f.tensor(HostData(DType::f32, with_nan), Shape{2});
    f.backend.sum_of_squares(*f.stream, bad, sum);
    QVERIFY(std::isnan(f.read_as<double>(sum)[0]));
  }

  void countNonFinite_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<QString>("values");
    for (DType dtype : {DType::f32, DType::bf16})
      for (const char* values : {"normal", "specials", "nan", "neg_inf", "large"})
        QTest::newRow(qPrintable(QString("%1 %2").arg(to_string(dtype).data(), values)))
            << dtype << QString(values);
  }
  void countNonFinite() {
    QFETCH(DType, dtype);
    QFETCH(QString, values);
    Fixture f;
    const std::int64_t count = 5000;
    HostData data(dtype, make_values(values, count, 91));
    // The largest finite value (exponent 254: only the lowest exponent bit tells it from infinity); for f32
    // also payload NaNs.
    data.set(9, km::float_of(dtype == DType::f32 ? 0x7F7FFFFFu : 0x7F7F0000u));
    data.set(10, km::float_of(dtype == DType::f32 ? 0xFF7FFFFFu : 0xFF7F0000u));
    if (dtype == DType::f32) {
      data.set(7, km::float_of(0x7F800001u));
      data.set(8, km::float_of(0xFF80FFFFu));
    }
    Tensor n = f.empty(Shape{1}, DType::i64);
    f.backend.count_non_finite(*f.stream, f.tensor(data, Shape{count}), n);
    std::int64_t mine = 0;
    with_codec(dtype, [&]<class E>(E) {
      for (std::int64_t i = 0; i < count; ++i) {
        if constexpr (std::is_same_v<E, km::F32>)
          mine += km::is_non_finite(data.as<E>()[i]) ? 1 : 0;
        else
          mine += km::is_non_finite_bf16(data.as<E>()[i]) ? 1 : 0;
      }
    });
    QCOMPARE(mine, f.read_as<std::int64_t>(n)[0]);
  }

  // --- pooling, concatenation ------------------------------------------------------------------------------

  void maxPool_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<QString>("values");
    add_dtype_layout_rows({"normal", "ties", "nan", "neg_inf", "specials"});
  }
  // Forward values and the saved window index exactly; backward with and without accumulate exactly. Odd
  // height and width: the last row and column belong to no window.
  void maxPool() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(QString, values);
    Fixture f;
    const PoolDesc pd{.n = 2, .c = 3, .h = 7, .w = 9, .dtype = dtype, .layout = layout};
    const ActShape in = pd.input(), out = pd.output();
    HostData x(dtype, make_values(values, in.numel(), 101));
    if (values == "nan")  // and one window of nothing but NaN
      for (int k = 0; k < 4; ++k) x.set(km::offset_of(dims_of(in, layout), 1, 2, 2 + k / 2, 4 + k % 2), NAN);
    Tensor tx = f.tensor(x, in.shape(), layout), ty = f.empty(out.shape(), dtype, layout);
    std::size_t saved_bytes = 0;
    if (onednn_refuses(dtype, [&] { saved_bytes = f.backend.maxpool_saved_bytes(pd); }))
      QSKIP("the CPU backend (oneDNN) has no bf16 max pooling on this CPU");
    QCOMPARE(saved_bytes, static_cast<std::size_t>(out.numel()));  // one u8 index per output
    std::vector<std::uint8_t> saved(saved_bytes);
    std::vector<std::byte> ws(
        std::max<std::size_t>({f.backend.maxpool_workspace_bytes(pd, ConvPass::forward),
                               f.backend.maxpool_workspace_bytes(pd, ConvPass::backward_data), 64}));
    f.backend.maxpool_forward(*f.stream, pd, tx, ty, saved.data(), {ws.data(), ws.size()});

    const km::Dims xd = dims_of(in, layout), yd = dims_of(out, layout);
    HostData my_y(dtype, out.numel());
    std::vector<std::uint8_t> my_saved(saved_bytes);
    std::vector<std::array<std::int64_t, 4>> window_of(static_cast<std::size_t>(out.numel()));
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const km::Coord o = km::coord_of(yd, i);
      std::int64_t offsets[4];
      km::pool_window_offsets(xd, o.n, o.c, o.h, o.w, offsets);
      const float window[4] = {x.get(offsets[0]), x.get(offsets[1]), x.get(offsets[2]), x.get(offsets[3])};
      const km::PoolResult r = km::max_of_window(window);
      my_y.set(i, r.value);
      my_saved[static_cast<std::size_t>(i)] = r.index;
      std::copy(std::begin(offsets), std::end(offsets), window_of[static_cast<std::size_t>(i)].begin());
    }
    QVERIFY(compare_bits(my_y.floats(), f.read(ty).floats(), "y", dtype, true));
    QCOMPARE(my_saved, saved);

    for (bool accumulate : {false, true}) {
      const HostData dy(dtype, make_values("specials", out.numel(), 102)),
          dx0(dtype, make_values("normal", in.numel(), 103));
      Tensor tdx = f.tensor(dx0, in.shape(), layout);
      f.backend.maxpool_backward(*f.stream, pd, f.tensor(dy, out.shape(), layout), tx, ty, saved.data(), tdx,
                                 accumulate, {ws.data(), ws.size()});
      // What a kernel with one thread per output computes, plus the uncovered last row and column.
      HostData my_dx(dtype, in.numel());
      std::vector<bool> covered(static_cast<std::size_t>(in.numel()), false);
      for (std::int64_t i = 0; i < out.numel(); ++i)
        for (int k = 0; k < 4; ++k) {
          const std::int64_t at = window_of[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
          my_dx.set(at, km::pool_backward(dy.get(i), my_saved[static_cast<std::size_t>(i)] == k, dx0.get(at),
                                          accumulate));
          covered[static_cast<std::size_t>(at)] = true;
        }
      for (std::int64_t j = 0; j < in.numel(); ++j)
        if (!covered[static_cast<std::size_t>(j)])
          my_dx.set(j, km::pool_backward(0.0f, false, dx0.get(j), accumulate));
      QVERIFY(
          compare_bits(my_dx.floats(), f.read(tdx).floats(), accumulate ? "dx (accumulate)" : "dx", dtype));
    }
  }

  // --- tensor-core padding (kernels_weights.cu, kernels_layout.cu) ----------------------------------------

  // The packed filter with padding: every real element has exactly one packed place, the inverse maps agree,
  // and the rest is padding; two places by hand.
  void packedFilterPadding_data() {
    QTest::addColumn<bool>("krsc");
    QTest::addColumn<int>("k_pad");
    QTest::addColumn<int>("c_pad");
    QTest::newRow("krsc padded") << true << 8 << 8;
    QTest::newRow("krsc unpadded") << true << 5 << 3;
    QTest::newRow("kcrs unpadded") << false << 5 << 3;
    QTest::newRow("kcrs padded") << false << 8 << 8;
  }
  void packedFilterPadding() {
    QFETCH(bool, krsc);
    QFETCH(int, k_pad);
    QFETCH(int, c_pad);
    const std::int64_t k = 5, c = 3, rs = 9;
    std::vector<int> seen(static_cast<std::size_t>(k * c * rs), 0);
    std::int64_t padding = 0;
    for (std::int64_t i = 0; i < k_pad * c_pad * rs; ++i) {
      const std::int64_t src = km::packed_filter_source(i, k, c, rs, c_pad, krsc);
      if (src < 0) {
        ++padding;
        continue;
      }
      QVERIFY(src < k * c * rs);
      ++seen[static_cast<std::size_t>(src)];
      const std::int64_t tap = src % rs, ch = src / rs % c, f = src / (rs * c);
      QCOMPARE(km::packed_filter_index(f, ch, tap, c_pad, rs, krsc), i);
    }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    QCOMPARE(padding, k_pad * c_pad * rs - k * c * rs);
    if (krsc && c_pad == 8) {
      // (k 1, c 2, tap 4): KRSC with 8 channels -> (1 * 9 + 4) * 8 + 2; canonical (1 * 3 + 2) * 9 + 4
      QCOMPARE(km::packed_filter_index(1, 2, 4, 8, 9, true), std::int64_t{106});
      QCOMPARE(km::packed_filter_source(106, k, c, rs, 8, true), std::int64_t{49});
      QCOMPARE(km::packed_filter_source(107, k, c, rs, 8, true), std::int64_t{-1});  // channel 3: padding
      QCOMPARE(km::packed_filter_source(5 * 9 * 8, k, c, rs, 8, true), std::int64_t{-1});  // filter 5
    }
  }

  // The padding is invisible: a convolution run the backend's padded way (X to 8 channels with zeros, the
  // filter packed into 8 x 8 with zeros, Y and dY padded to 8, the real channels copied back out; the filter
  // gradient read from the real part of the padded one) gives the CPU backend's unpadded results, forward,
  // backward data and backward weights. The CPU backend runs both, so only the index maps differ.
  void paddedConvolutionMatchesUnpadded_data() {
    QTest::addColumn<int>("c_in");
    QTest::addColumn<int>("c_out");
    QTest::addColumn<int>("kernel");
    QTest::newRow("first conv 3 -> 5, 3x3") << 3 << 5 << 3;
    QTest::newRow("head 8 -> 1, 1x1") << 8 << 1 << 1;
    QTest::newRow("head 6 -> 3, 1x1") << 6 << 3 << 1;
  }
  void paddedConvolutionMatchesUnpadded() {
    QFETCH(int, c_in);
    QFETCH(int, c_out);
    QFETCH(int, kernel);
    Fixture f;
    const ConvDesc d{.n = 2, .c_in = c_in, .c_out = c_out, .h = 5, .w = 6, .kernel = kernel, .bias = false};
    ConvDesc dp = d;
    dp.c_in = (c_in + 7) / 8 * 8;
    dp.c_out = (c_out + 7) / 8 * 8;
    const std::int64_t pixels = d.n * d.h * d.w, rs = std::int64_t{kernel} * kernel;
    const auto x = make_values("normal", pixels * d.c_in, 201);
    const auto dz = make_values("normal", pixels * d.c_out, 202);
    const auto w = make_values("normal", d.c_out * d.c_in * rs, 203);
    const auto pad = [&](const std::vector<float>& v, std::int64_t from, std::int64_t to) {
      std::vector<float> out(static_cast<std::size_t>(pixels * to));
      for (std::int64_t i = 0; i < pixels * to; ++i) {
        const std::int64_t src = km::channel_copy_source(i, from, to);
        out[static_cast<std::size_t>(i)] = src >= 0 ? v[static_cast<std::size_t>(src)] : 0.0f;
      }
      return out;
    };
    // the filter as pack_weights writes it (KRSC, padded), then read back as a canonical [8, 8, r, s] one
    std::vector<float> packed(static_cast<std::size_t>(dp.c_out * dp.c_in * rs));
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(packed.size()); ++i) {
      const std::int64_t src = km::packed_filter_source(i, d.c_out, d.c_in, rs, dp.c_in, true);
      packed[static_cast<std::size_t>(i)] = src >= 0 ? w[static_cast<std::size_t>(src)] : 0.0f;
    }
    std::vector<float> w_padded(packed.size());
    for (std::int64_t k = 0; k < dp.c_out; ++k)
      for (std::int64_t c = 0; c < dp.c_in; ++c)
        for (std::int64_t t = 0; t < rs; ++t)
          w_padded[static_cast<std::size_t>((k * dp.c_in + c) * rs + t)] =
              packed[static_cast<std::size_t>(km::packed_filter_index(k, c, t, dp.c_in, rs, true))];

    const auto act = [&](const std::vector<float>& v, std::int64_t c) {
      return f.tensor(HostData(DType::f32, v), Shape{d.n, c, d.h, d.w});
    };
    const auto param = [&](const std::vector<float>& v, const Shape& shape) {
      return f.tensor(HostData(DType::f32, v), shape);
    };
    const auto workspace = [&](const ConvDesc& desc, ConvPass pass) {
      return f.backend.allocator().allocate(f.backend.conv_workspace_bytes(desc, pass),
                                            MemoryCategory::workspace);
    };
    const auto run = [&](const ConvDesc& desc, const std::vector<float>& xv, const std::vector<float>& dzv,
                         const std::vector<float>& wv, std::vector<float>& y, std::vector<float>& dx,
                         std::vector<float>& dw) {
      const Tensor tx = act(xv, desc.c_in), tdz = act(dzv, desc.c_out), tw = param(wv, desc.weight_shape());
      Tensor ty = f.empty(Shape{desc.n, desc.c_out, desc.h, desc.w}, DType::f32);
      Tensor tdx = f.empty(Shape{desc.n, desc.c_in, desc.h, desc.w}, DType::f32);
      Tensor tdw = f.empty(desc.weight_shape(), DType::f32);
      const Buffer w1 = workspace(desc, ConvPass::forward), w2 = workspace(desc, ConvPass::backward_data),
                   w3 = workspace(desc, ConvPass::backward_weights);
      f.backend.conv_forward(*f.stream, desc, tx, tw, nullptr, ty, {w1.data(), w1.bytes()});
      f.backend.conv_backward_data(*f.stream, desc, tdz, tw, tdx, {w2.data(), w2.bytes()});
      f.backend.conv_backward_weights(*f.stream, desc, tx, tdz, tdw, nullptr, false, {w3.data(), w3.bytes()});
      y = f.read_as<float>(ty);
      dx = f.read_as<float>(tdx);
      dw = f.read_as<float>(tdw);
    };
    std::vector<float> y, dx, dw, yp, dxp, dwp;
    run(d, x, dz, w, y, dx, dw);
    run(dp, pad(x, d.c_in, dp.c_in), pad(dz, d.c_out, dp.c_out), w_padded, yp, dxp, dwp);
    // the padded filter gradient as cuDNN writes it (KRSC), then unpack_weights' read of the real part
    std::vector<float> dw_packed(dwp.size());
    for (std::int64_t k = 0; k < dp.c_out; ++k)
      for (std::int64_t c = 0; c < dp.c_in; ++c)
        for (std::int64_t t = 0; t < rs; ++t)
          dw_packed[static_cast<std::size_t>(km::packed_filter_index(k, c, t, dp.c_in, rs, true))] =
              dwp[static_cast<std::size_t>((k * dp.c_in + c) * rs + t)];
    std::vector<float> dw_real(dw.size());
    for (std::int64_t k = 0; k < d.c_out; ++k)
      for (std::int64_t c = 0; c < d.c_in; ++c)
        for (std::int64_t t = 0; t < rs; ++t)
          dw_real[static_cast<std::size_t>((k * d.c_in + c) * rs + t)] =
              dw_packed[static_cast<std::size_t>(km::packed_filter_index(k, c, t, dp.c_in, rs, true))];
    // the added terms are products with zeros, but oneDNN may block 8 channels differently: compare closely,
    // not bitwise
    const auto close = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
      if (got.size() != want.size()) return false;
      for (std::size_t i = 0; i < got.size(); ++i)
        if (std::abs(got[i] - want[i]) > 1e-4f * (1.0f + std::abs(want[i]))) {
          qWarning("%s[%zu]: padded %.9g, unpadded %.9g", what, i, static_cast<double>(got[i]),
                   static_cast<double>(want[i]));
          return false;
        }
      return true;
    };
    QVERIFY(close(pad(yp, dp.c_out, d.c_out), y, "y"));
    QVERIFY(close(pad(dxp, dp.c_in, d.c_in), dx, "dx"));
    QVERIFY(close(dw_real, dw, "dw"));
    // and the padding channels of the padded output are zero: nothing leaks into them
    for (std::int64_t i = 0; i < pixels * dp.c_out; ++i)
      if (i % dp.c_out >= d.c_out) QCOMPARE(yp[static_cast<std::size_t>(i)], 0.0f);
  }

  void concatSplit_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<QString>("values");
    add_dtype_layout_rows({"normal", "specials"});
  }
  // Copies are bit copies (NaN payloads included); split's accumulate adds in float.
  void concatSplit() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(QString, values);
    Fixture f;
    const ActShape sa{2, 3, 4, 5}, sb{2, 5, 4, 5}, so{2, 8, 4, 5};
    const HostData a(dtype, make_values(values, sa.numel(), 111)),
        b(dtype, make_values(values, sb.numel(), 112));
    Tensor out = f.empty(so.shape(), dtype, layout);
    f.backend.concat_channels(*f.stream, f.tensor(a, sa.shape(), layout), f.tensor(b, sb.shape(), layout),
                              out);
    const km::Dims od = dims_of(so, layout);
    HostData mine(dtype, so.numel());
    const std::size_t es = dtype_size(dtype);
    for (std::int64_t i = 0; i < so.numel(); ++i) {
      const km::ConcatSource src = km::concat_source(od, sa.c, i);
      std::memcpy(mine.bytes.data() + static_cast<std::size_t>(i) * es,
                  (src.from_b ? b : a).bytes.data() + static_cast<std::size_t>(src.index) * es, es);
    }
    const HostData cpu_out = f.read(out);
    QVERIFY(mine.bytes == cpu_out.bytes);

    for (bool accumulate : {false, true}) {
      const HostData db0(dtype, make_values("normal", sb.numel(), 113));
      Tensor da = f.empty(sa.shape(), dtype, layout), db = f.tensor(db0, sb.shape(), layout);
      f.backend.split_channels(*f.stream, out, da, db, accumulate);
      HostData my_da(dtype, sa.numel()), my_db = db0;
      for (std::int64_t i = 0; i < so.numel(); ++i) {
        const km::ConcatSource dst = km::concat_source(od, sa.c, i);
        if (!dst.from_b)
          std::memcpy(my_da.bytes.data() + static_cast<std::size_t>(dst.index) * es,
                      cpu_out.bytes.data() + static_cast<std::size_t>(i) * es, es);
        else if (accumulate)
          my_db.set(dst.index, km::add_into(db0.get(dst.index), cpu_out.get(i)));
        else
          std::memcpy(my_db.bytes.data() + static_cast<std::size_t>(dst.index) * es,
                      cpu_out.bytes.data() + static_cast<std::size_t>(i) * es, es);
      }
      QVERIFY(my_da.bytes == f.read(da).bytes);
      if (accumulate)
        QVERIFY(compare_bits(my_db.floats(), f.read(db).floats(), "db (accumulate)"));
      else
        QVERIFY(my_db.bytes == f.read(db).bytes);
    }
  }
  // The DeviceCommunicator's kernel (kernels_collective.cu: each rank sums its share_range in rank order and
  // writes every buffer) against SharedMemoryCommunicator on CPU replicas: bitwise the same, so that GPU
  // replicas on one device sum as CPU replicas do. Sizes below, at and past the rank count; values whose sum
  // depends on the order of addition.
  void rankOrderSumMatchesSharedMemory_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("count");
    for (int ranks : {1, 2, 3, 5})
      for (int count : {1, 4, 7, 1000})
        QTest::newRow(qPrintable(QString("R=%1 n=%2").arg(ranks).arg(count))) << ranks << count;
  }
  void rankOrderSumMatchesSharedMemory() {
    QFETCH(int, ranks);
    QFETCH(int, count);
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> v = make_values("normal", count, 300 + static_cast<std::uint64_t>(r));
      // Large values of opposite signs on some ranks make the order of the sum visible in its bits.
      for (std::size_t i = 0; i < v.size(); i += 3) v[i] *= (r % 2 ? -1e7f : 3e7f);
      inputs.push_back(std::move(v));
    }

    std::vector<std::vector<float>> mine = inputs;
    std::vector<const float*> views;
    for (const auto& v : inputs) views.push_back(v.data());
    for (int rank = 0; rank < ranks; ++rank) {
      const km::ShareRange share = km::share_range(count, ranks, rank);
      for (std::int64_t i = share.begin; i < share.end; ++i) {
        const float sum = km::rank_order_sum(views.data(), ranks, i);
        for (auto& v : mine) v[static_cast<std::size_t>(i)] = sum;
      }
    }

    SharedMemoryCommunicator communicator(ranks);
    std::vector<std::unique_ptr<CpuBackend>> backends;
    std::vector<Tensor> tensors;
    for (int r = 0; r < ranks; ++r) {
      backends.push_back(std::make_unique<CpuBackend>(CpuBackendOptions{.index = r, .threads = 1}));
      tensors.push_back(
          Tensor::empty(backends.back()->allocator(), Shape{count}, DType::f32, MemoryCategory::gradients));
      std::memcpy(tensors.back().data(), inputs[static_cast<std::size_t>(r)].data(),
                  static_cast<std::size_t>(count) * sizeof(float));
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        const auto stream = backends[static_cast<std::size_t>(r)]->create_stream();
        communicator.all_reduce_sum(r, *backends[static_cast<std::size_t>(r)], *stream,
                                    tensors[static_cast<std::size_t>(r)]);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) {
      const float* got = tensors[static_cast<std::size_t>(r)].data_as<float>();
      QVERIFY(compare_bits(mine[static_cast<std::size_t>(r)], std::vector<float>(got, got + count),
                           "rank order sum"));
    }
  }
};

QTEST_GUILESS_MAIN(TestKernelMath)
#include "test_kernel_math.moc"
