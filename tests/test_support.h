// Shared by the test suites: turns logged warnings into failures, and gives small helpers to build tensors on
// a backend and compare results with references.
#pragma once

#include <QProcess>
#include <QtTest/QtTest>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/core/rng.h"

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

// A logged Qt warning or critical message fails the running test.
// A whole file's bytes; empty when it cannot be read.
inline std::vector<std::byte> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(chars));
  return {bytes.begin(), bytes.end()};
}

inline void fail_on_warnings() {
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
    // The offscreen platform plugin says this of every window it shows; it is the plugin's limitation.
    const bool offscreen_noise = msg.contains("This plugin does not support propagateSizeHints()");
    if (!offscreen_noise && (type == QtWarningMsg || type == QtCriticalMsg || type == QtFatalMsg)) {
      QTest::qFail(qPrintable(QStringLiteral("logged: ") + msg), __FILE__, __LINE__);
    }
    std::fprintf(stderr, "%s\n", qPrintable(msg));
  });
}

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
