// Shared by the test suites: turns logged warnings (Qt's, and the engine's through its observer) into
// failures, waits with a deadline, and gives small helpers to build tensors on a backend and compare results
// with references.
#pragma once

#include <QProcess>
#include <QtTest/QtTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/backend/devices.h"
#include "unet/backend/planning_backend.h"
#include "unet/core/rng.h"
#include "unet/train/observer.h"

// In a test function with a "device" column: `backend` is that device's backend, or the row is skipped.
#define UNET_FETCH_BACKEND(backend)                                                   \
  QFETCH(QString, device);                                                            \
  const std::unique_ptr<::unet::Backend> backend = ::unet::test::backend_for(device); \
  if (!(backend)) QSKIP(qPrintable(device + " is not on this machine"))

// QVERIFY2 and QCOMPARE for helpers: functions and lambdas that a test function calls. QVERIFY in a helper
// returns from the helper only, and the test goes on as if nothing had failed; these record the failure as
// those do and make the helper return false, so that the test function stops with QVERIFY(helper(...)) (which
// reports the call site too). The helper returns true at its end.
#define HELPER_VERIFY2(statement, description)                                                      \
  do {                                                                                              \
    if (!QTest::qVerify(static_cast<bool>(statement), #statement, description, __FILE__, __LINE__)) \
      return false;                                                                                 \
  } while (false)
#define HELPER_VERIFY(statement) HELPER_VERIFY2(statement, "")
#define HELPER_COMPARE(actual, expected)                                                          \
  do {                                                                                            \
    if (!QTest::qCompare(actual, expected, #actual, #expected, __FILE__, __LINE__)) return false; \
  } while (false)

namespace unet::test {

// What a run of unet-train gave.
struct ProcessResult {
  int code = -1;  // -1: it crashed or did not finish
  QString out, err;
};

// Runs the unet-train binary of this build, in `cwd` when given, for at most `timeout_ms`.
inline ProcessResult unet_train(const QStringList& args, const QString& cwd = {}, int timeout_ms = 600000) {
  QProcess p;
  if (!cwd.isEmpty()) p.setWorkingDirectory(cwd);
  p.start(UNET_TRAIN_BINARY, args);
  p.waitForFinished(timeout_ms);
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

// Whether the engine's own device probe lists `id` ("cuda:0") as a device it can train on. Tests of what
// happens without a GPU ask it, so that they assert that behaviour only where it is true.
inline bool device_listed(const std::string& id) {
  return list_devices().find(id) != nullptr;
}

// The devices a backend test body runs on: $UNET_TEST_DEVICES (comma-separated: CTest's `cuda` label runs the
// backend suites with cuda:0 alone), else cpu:0 and cuda:0. A row whose device this machine lacks is skipped.
inline QStringList test_devices() {
  const QString chosen = qEnvironmentVariable("UNET_TEST_DEVICES");
  return chosen.isEmpty() ? QStringList{"cpu:0", "cuda:0"} : chosen.split(',', Qt::SkipEmptyParts);
}

// Declares the "device" column, first, and one row per test device: for a test body with no other rows.
inline void device_rows() {
  QTest::addColumn<QString>("device");
  for (const QString& d : test_devices()) QTest::newRow(qPrintable(d)) << d;
}

// A row device that runs fp32 convolutions with TF32 (cuda.tf32 true): "cuda:0 tf32".
inline bool tf32_row(const QString& device) {
  return device.endsWith(QStringLiteral(" tf32"));
}

// The GPU rows of test_devices() again with TF32 on, for the tests whose tolerance allows for it.
inline QStringList tf32_devices() {
  QStringList rows;
  for (const QString& d : test_devices())
    if (d.startsWith(QStringLiteral("cuda"))) rows << d + QStringLiteral(" tf32");
  return rows;
}

// The row's device, or nullptr when this machine does not offer it. GPU backends compute fp32 in fp32
// (cuda.tf32 false, unlike the config's default): the fp32 tolerances of the backend suites are fp32's; a
// "<device> tf32" row turns TF32 on, and its test allows for TF32's 10-bit mantissa.
inline std::unique_ptr<Backend> backend_for(const QString& device) {
  const std::string id = device.section(' ', 0, 0).toStdString();
  if (!device_listed(id)) return nullptr;
  BackendOptions options;
  options.cuda.tf32 = tf32_row(device);
  return create_backend(parse_device_id(id), options);
}

// A whole file's bytes; empty when it cannot be read.
// A stand-in for GPU `index` where there is none: a planning backend (a CPU's, holding no memory) that says
// it is cuda:<index>, for tests of what is chosen by device kind.
inline std::unique_ptr<Backend> gpu_stand_in(int index) {
  DeviceInfo info;
  info.id = "cuda:" + std::to_string(index);
  info.kind = DeviceKind::cuda;
  info.index = index;
  return std::make_unique<PlanningBackend>(create_backend({DeviceKind::cpu, 0}, {}), info, 0);
}

inline std::vector<std::byte> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(chars));
  return {bytes.begin(), bytes.end()};
}

// A logged Qt warning or critical message fails the running test.
inline void fail_on_warnings() {
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
    // The offscreen platform plugin says these of every window it shows or raises (a tooltip, a dialog);
    // they are the plugin's limitations, not the program's.
    const bool offscreen_noise = msg.contains("This plugin does not support propagateSizeHints()") ||
                                 msg.contains("This plugin does not support raise()");
    if (!offscreen_noise && (type == QtWarningMsg || type == QtCriticalMsg || type == QtFatalMsg)) {
      QTest::qFail(qPrintable(QStringLiteral("logged: ") + msg), __FILE__, __LINE__);
    }
    std::fprintf(stderr, "%s\n", qPrintable(msg));
  });
}

// Waits until `done` holds; false when `timeout_ms` passed first. For a thread the test starts, where QTRY_*
// cannot be used (they belong to the test function's thread): the thread gives up at the deadline and the
// test function fails on its answer, instead of a failing run hanging until CTest kills it.
[[nodiscard]] inline bool wait_on_thread_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Warnings and errors the engine logs (TrainerObserver::on_log, or the "unet-train: warning: " lines of a run
// of the CLI) fail the running test unless the test declared them, as tiny-cuda-nn's tests fail on logged
// warnings: a warning no test expects is a problem nobody looks at. The trainer logs from whichever thread
// runs it, so messages are recorded under a lock and judged on the test's thread: by check(), and at the
// latest when the watch goes out of scope at the end of the test function.
class LogWatch {
 public:
  LogWatch() = default;
  LogWatch(const LogWatch&) = delete;
  LogWatch& operator=(const LogWatch&) = delete;
  ~LogWatch() { check(); }

  // A warning (an error) that contains `substring` may come, any number of times, without failing the test.
  void expect_warning(std::string substring) { expect(LogLevel::warning, std::move(substring)); }
  void expect_error(std::string substring) { expect(LogLevel::error, std::move(substring)); }

  void record(LogLevel level, const std::string& message) {
    if (level == LogLevel::info) return;
    std::lock_guard lock(mutex_);
    seen_.push_back({level, message});
  }
  void record(LogLevel level, const QString& message) { record(level, message.toStdString()); }

  // The warnings a run of unet-train printed on its standard error.
  void record_output(const QString& err) {
    const QString prefix = QStringLiteral("unet-train: warning: ");
    for (const QString& line : err.split('\n'))
      if (line.startsWith(prefix)) record(LogLevel::warning, line.mid(prefix.size()));
  }

  // Fails the running test once for each unexpected message recorded since the last check; true if none.
  bool check() {
    std::vector<Message> unexpected;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = checked_; i < seen_.size(); ++i)
        if (!is_expected(seen_[i])) unexpected.push_back(seen_[i]);
      checked_ = seen_.size();
    }
    for (const Message& m : unexpected) {
      const std::string text = std::string(m.level == LogLevel::error ? "unexpected error logged: "
                                                                      : "unexpected warning logged: ") +
                               m.text;
      QTest::qFail(text.c_str(), __FILE__, __LINE__);
    }
    return unexpected.empty();
  }

  // How many recorded messages of `level` contain `substring`.
  std::size_t count(LogLevel level, const std::string& substring) const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(std::count_if(seen_.begin(), seen_.end(), [&](const Message& m) {
      return m.level == level && m.text.find(substring) != std::string::npos;
    }));
  }

  // Every warning and error recorded, expected or not.
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const Message& m : seen_) out.push_back(m.text);
    return out;
  }

 private:
  struct Message {
    LogLevel level;
    std::string text;
  };
  void expect(LogLevel level, std::string substring) {
    std::lock_guard lock(mutex_);
    expected_.push_back({level, std::move(substring)});
  }
  bool is_expected(const Message& m) const {
    return std::any_of(expected_.begin(), expected_.end(), [&](const Message& e) {
      return e.level == m.level && m.text.find(e.text) != std::string::npos;
    });
  }

  mutable std::mutex mutex_;
  std::vector<Message> seen_, expected_;
  std::size_t checked_ = 0;
};

// The base of the tests' trainer observers: what the trainer logs goes to a LogWatch, so that an unexpected
// warning fails the test. A test that runs a trainer without observing anything passes a plain one.
struct WatchedObserver : TrainerObserver {
  LogWatch log;
  void expect_warning(std::string substring) { log.expect_warning(std::move(substring)); }
  void on_log(LogLevel level, const std::string& message) override { log.record(level, message); }
};

inline std::vector<float> random_values(std::int64_t count, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed, 7);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

// Relative error of two vectors: |a - b| / max(|a|, |b|, floor), the largest over all elements.
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b,
                                 double floor = 1e-6) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double m =
        std::max({std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i])), floor});
    worst = std::max(worst, d / m);
  }
  return a.size() == b.size() ? worst : INFINITY;
}

// ||a - b|| / max(||a||, ||b||): a robust whole-vector comparison for gradients.
inline double norm_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, na = 0.0, nb = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  const double m = std::sqrt(std::max(na, nb));
  return a.size() != b.size() ? INFINITY : (m > 0 ? std::sqrt(diff) / m : std::sqrt(diff));
}

inline Tensor to_device(Backend& backend, Stream& stream, const std::vector<float>& values,
                        const Shape& shape, MemoryCategory category = MemoryCategory::other,
                        Layout layout = Layout::nhwc) {
  Tensor t = Tensor::empty(backend.allocator(), shape, DType::f32, category, layout);
  backend.copy_from_host(stream, values.data(), t);
  return t;
}

template <class T = float>
std::vector<T> to_host(Backend& backend, Stream& stream, const Tensor& t) {
  std::vector<T> out(t.bytes() / sizeof(T));
  backend.copy_to_host(stream, t, out.data());
  stream.synchronize();
  return out;
}

}  // namespace unet::test

Q_DECLARE_METATYPE(unet::Layout)
Q_DECLARE_METATYPE(unet::DType)
