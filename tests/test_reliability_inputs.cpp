// Issue 11, the inputs a hostile run found: every case runs unet-train (or unet-bench) as a user would, under
// a deadline and, where a bug would grow without end, a memory limit, and asserts what the user sees: the
// exit code, a message that names the key, value or file, and that no good checkpoint is lost. A hang, a
// crash or an out-of-memory kill fails the row; so does an exit 0 that hides a failure.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "unet/core/json_limits.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/train/metrics_log.h"

using namespace unet;

namespace {

struct Outcome {
  int code = -1;  // the exit code; -1 when it crashed or was killed, -2 when the deadline passed
  QString out, err;
  qint64 milliseconds = 0;
};

// Runs `program` with a deadline (then kills it) and, when `memory_mib` > 0, an address-space limit, so that
// a hang or unbounded growth fails the test instead of the machine. `cpu_seconds` > 0 bounds the processor
// time it may use (the kernel ends it with SIGXCPU past it): how a test says "this costs little work" without
// a wall-clock bound that a loaded machine breaks.
Outcome run(const QString& program, const QStringList& args, int deadline_ms = 60000, long memory_mib = 0,
            int cpu_seconds = 0) {
  QProcess p;
  p.setChildProcessModifier([memory_mib, cpu_seconds] {
    if (memory_mib > 0) {
      const rlimit limit{static_cast<rlim_t>(memory_mib) << 20, static_cast<rlim_t>(memory_mib) << 20};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    if (cpu_seconds > 0) {
      const rlimit limit{static_cast<rlim_t>(cpu_seconds), static_cast<rlim_t>(cpu_seconds)};
      ::setrlimit(RLIMIT_CPU, &limit);
    }
  });
  QElapsedTimer clock;
  clock.start();
  p.start(program, args);
  const bool finished = p.waitForFinished(deadline_ms);
  Outcome o;
  o.milliseconds = clock.elapsed();
  if (!finished) {
    p.kill();
    p.waitForFinished(5000);
    o.code = -2;
  } else {
    o.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  }
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err = QString::fromUtf8(p.readAllStandardError());
  return o;
}

Outcome unet_train(const QStringList& args, int deadline_ms = 60000, long memory_mib = 0,
                   int cpu_seconds = 0) {
  return run(UNET_TRAIN_BINARY, args, deadline_ms, memory_mib, cpu_seconds);
}

QString describe(const Outcome& o) {
  return QString("exit %1 after %2 ms\nstdout:\n%3\nstderr:\n%4")
      .arg(o.code)
      .arg(o.milliseconds)
      .arg(o.out.right(3000), o.err.right(3000));
}

// A small, fast run: 20 synthetic images of 32x32 (18 train, 2 validation), a tiny model.
QStringList tiny(const QString& run_dir) {
  return {"--set", "model.width=4",
          "--set", "model.depth=2",
          "--set", "data.image_size=[32,32]",
          "--set", "data.synthetic_samples=20",
          "--set", "checkpoint.dir=" + run_dir};
}

void write_file(const QString& path, const std::string& text) {
  std::ofstream(path.toStdString(), std::ios::binary) << text;
}

// Extends `path` by `bytes` zero bytes without writing them (a sparse file): a large file that costs no disk.
void append_hole(const QString& path, std::int64_t bytes) {
  struct stat st {};
  QVERIFY(::stat(path.toLocal8Bit().constData(), &st) == 0);
  QVERIFY(::truncate(path.toLocal8Bit().constData(), st.st_size + bytes) == 0);
}

std::uint32_t crc32_of(const std::string& bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (const char ch : bytes) {
    crc ^= static_cast<std::uint8_t>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string png_chunk(const std::string& type, const std::string& data) {
  return be32(static_cast<std::uint32_t>(data.size())) + type + data + be32(crc32_of(type + data));
}

// A PNG of a thousand-odd bytes whose valid header declares side x side RGB pixels: what a decoder must not
// believe before it has seen the data.
std::string forged_png(std::uint32_t side) {
  const std::string ihdr = be32(side) + be32(side) + std::string{8, 2, 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
         png_chunk("IDAT", std::string(1024, 'x')) + png_chunk("IEND", "");
}

std::string repeat(std::string_view piece, int times) {
  std::string out;
  out.reserve(piece.size() * static_cast<std::size_t>(times));
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

// Replaces the config stored in a checkpoint's header; the checksum covers the data section alone.
void replace_stored_config(const QString& path, const std::string& config) {
  std::ifstream in(path.toStdString(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  header["__metadata__"]["config"] = config;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[static_cast<std::size_t>(i)] = static_cast<char>(text.size() >> (8 * i));
  write_file(path, prefix + text + bytes.substr(8 + length));
}

// Removes a folder's contents with std::filesystem when it goes: QTemporaryDir cannot remove names that are
// not UTF-8 (Qt decodes them), so the tests that make such names clean them up first.
struct RemovedWithBytes {
  std::filesystem::path folder;
  ~RemovedWithBytes() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
      std::filesystem::remove_all(entry.path(), ec);
  }
};

}  // namespace

class TestReliabilityInputs : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  // Class 1: a checkpoint taken mid-epoch (step 5 of 9 at batch 2) resumed where its position no longer maps
  // onto the data: a larger batch or accumulation, or a training set that shrank. The run must continue by
  // the documented rule (same sample of the epoch, else the next epoch) and say so, never spin.
  void resumeAtAPositionThatNoLongerFitsContinuesByTheRule_data() {
    QTest::addColumn<QStringList>("changes");
    QTest::addColumn<std::int64_t>("final_step");
    QTest::addColumn<std::int64_t>("final_epoch");
    // 18 training samples, 8 per step: 3 steps per epoch; sample 10 maps to step 3 of epoch 1.
    QTest::newRow("larger batch, train.steps")
        << QStringList{"--set", "train.batch_size=8", "--set", "train.steps=20"} << std::int64_t{20}
        << std::int64_t{-1};
    // The same by epochs: one step left of epoch 1, then epochs 2 and 3 of 3 steps each.
    QTest::newRow("larger batch, train.epochs")
        << QStringList{"--set", "train.batch_size=8", "--set", "train.epochs=3", "--set", "train.steps=0"}
        << std::int64_t{5 + 1 + 3 + 3} << std::int64_t{3};
    // 2 x 8 = 16 samples a step: sample 10 maps to step 1, the last of an epoch of 18.
    QTest::newRow("larger accumulation")
        << QStringList{"--set", "train.accumulation=8", "--set", "train.steps=12"} << std::int64_t{12}
        << std::int64_t{-1};
    // 8 images: 7 train, 4 steps of 2 per epoch; sample 10 is past the end of the epoch.
    QTest::newRow("training set shrank")
        << QStringList{"--set", "data.synthetic_samples=8", "--set", "train.steps=12"} << std::int64_t{12}
        << std::int64_t{-1};
  }
  void resumeAtAPositionThatNoLongerFitsContinuesByTheRule() {
    QFETCH(QStringList, changes);
    QFETCH(std::int64_t, final_step);
    QFETCH(std::int64_t, final_epoch);
    QTemporaryDir dir;
    const Outcome first = unet_train(QStringList{"train"} + tiny(dir.path()) +
                                     QStringList{"--set", "train.batch_size=2", "--set", "train.steps=5"});
    QVERIFY2(first.code == 0, qPrintable(describe(first)));
    const QString last = dir.filePath("last.safetensors");
    const Checkpoint mid = load_checkpoint(last.toStdString());
    QCOMPARE(mid.position.step, 5);
    QCOMPARE(mid.position.epoch_step, 5);  // mid-epoch: 9 steps of 2 in an epoch of 18

    const Outcome resumed = unet_train(QStringList{"train", "--resume", last} + changes, 60000);
    QVERIFY2(resumed.code == 0, qPrintable(describe(resumed)));
    // The mapping is announced with the checkpoint's position and the new sizes.
    QVERIFY2(resumed.err.contains("the checkpoint's position, step 5 of epoch 1 at 2 samples per step"),
             qPrintable(describe(resumed)));
    const Checkpoint end = load_checkpoint(last.toStdString());
    QCOMPARE(end.position.step, final_step);
    if (final_epoch >= 0) {
      QCOMPARE(end.position.epoch, final_epoch);
      QCOMPARE(end.position.epoch_step, 0);
    }
  }

  // Class 1's neighbour: a checkpoint already past the end the config sets trains nothing, says so, and keeps
  // the checkpoint as it was.
  void resumePastTheEndTrainsNothingAndSaysSo() {
    QTemporaryDir dir;
    const Outcome first = unet_train(QStringList{"train"} + tiny(dir.path()) +
                                     QStringList{"--set", "train.batch_size=2", "--set", "train.steps=5"});
    QVERIFY2(first.code == 0, qPrintable(describe(first)));
    const QString last = dir.filePath("last.safetensors");
    const Checkpoint before = load_checkpoint(last.toStdString());
    const Outcome resumed = unet_train({"train", "--resume", last, "--set", "train.steps=3"}, 60000);
    QVERIFY2(resumed.code == 0, qPrintable(describe(resumed)));
    QVERIFY2(
        resumed.err.contains("the checkpoint is at step 5") && resumed.err.contains("nothing is trained"),
        qPrintable(describe(resumed)));
    const Checkpoint after = load_checkpoint(last.toStdString());
    QCOMPARE(after.position.step, before.position.step);
    QCOMPARE(after.parameters, before.parameters);
  }

  // Class 2: a learning rate far too high. The run must stop with exit 1 naming the step and the likely
  // cause, keep only finite checkpoints (never overwrite a good last.safetensors), and say honestly whether
  // there is one to resume.
  void divergenceStopsTheRunAndKeepsTheLastFiniteCheckpoint_data() {
    QTest::addColumn<QString>("lr");
    QTest::addColumn<QString>("batch");
    QTest::addColumn<bool>("checkpoint_expected");
    // Finite gradients at step 1; inf/NaN ones at step 2: last.safetensors of step 1 stays.
    QTest::newRow("lr 1e3") << "1e3"
                            << "8" << true;
    // The first update overflows the weights (a float learning rate of inf) although its gradients were
    // finite; an epoch of one step ends right after it, and its save must not be attempted with NaN weights.
    QTest::newRow("lr 1e39, weights overflow at step 1") << "1e39"
                                                         << "18" << false;
  }
  void divergenceStopsTheRunAndKeepsTheLastFiniteCheckpoint() {
    QFETCH(QString, lr);
    QFETCH(QString, batch);
    QFETCH(bool, checkpoint_expected);
    QTemporaryDir dir;
    const Outcome o = unet_train(QStringList{"train"} + tiny(dir.path()) +
                                 QStringList{"--set", "train.lr=" + lr, "--set", "train.batch_size=" + batch,
                                             "--set", "train.steps=6"});
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("training diverged at step") && o.err.contains("train.lr"),
             qPrintable(describe(o)));
    QVERIFY2(o.err.contains("learning rate too high"), qPrintable(describe(o)));
    QVERIFY2(!o.err.contains("training goes on"), qPrintable(describe(o)));
    const QString last = dir.filePath("last.safetensors");
    QCOMPARE(QFile::exists(last), checkpoint_expected);
    if (checkpoint_expected) {
      // load_checkpoint refuses non-finite weights and moments: loading is the check.
      const Checkpoint c = load_checkpoint(last.toStdString());
      QVERIFY2(o.err.contains(last + " (step " + QString::number(c.position.step) + ")"),
               qPrintable(describe(o)));
    } else {
      QVERIFY2(o.err.contains("no checkpoint of this run was saved"), qPrintable(describe(o)));
    }
  }

  // Class 4: out-of-memory found while preparing (a reservation, parameters over the cap) ends with the typed
  // report and its remedies, never an internal error, and promises no checkpoint a fresh run does not have.
  void outOfMemoryWhilePreparingGivesTheReport_data() {
    QTest::addColumn<QStringList>("settings");
    QTest::newRow("memory.growth false, cap below the planned peak")
        << QStringList{"--set", "memory.growth=false", "--set", "memory.cap_mib=1"};
    QTest::newRow("parameters alone over the cap")
        << QStringList{"--set", "model.width=256", "--set", "memory.cap_mib=1"};
  }
  void outOfMemoryWhilePreparingGivesTheReport() {
    QFETCH(QStringList, settings);
    QTemporaryDir dir;
    const Outcome o = unet_train(QStringList{"train"} + tiny(dir.path()) + settings);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(!o.err.contains("internal error") && !o.err.contains("json.exception"), qPrintable(describe(o)));
    QVERIFY2(o.err.contains("out of memory") && o.err.contains("cpu:0"), qPrintable(describe(o)));
    // The remedies, each with its --set flags, and no promise of a checkpoint that does not exist.
    QVERIFY2(o.out.contains("--set "), qPrintable(describe(o)));
    QVERIFY2(!o.out.contains("the checkpoint of the last good step can be resumed"), qPrintable(describe(o)));
    QVERIFY2(o.out.contains("no checkpoint of this run was saved"), qPrintable(describe(o)));
    QVERIFY(!QFile::exists(dir.filePath("last.safetensors")));
  }

  // Class 6: a run the planner says cannot fit is refused before anything is allocated or generated: at once,
  // within a memory limit far below what it would take, with the planned peak and the remedies.
  void aRunThatCannotFitIsRefusedBeforeItStarts() {
    QTemporaryDir dir;
    const Outcome o = unet_train({"train", "--set", "data.image_size=[8192,8192]", "--set", "model.width=64",
                                  "--set", "memory.cap_mib=4096", "--set", "checkpoint.dir=" + dir.path()},
                                 120000, 2048, 15);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("memory plan") && o.err.contains("GiB") && o.err.contains("memory.cap_mib"),
             qPrintable(describe(o)));
    QVERIFY2(o.out.contains("--set "), qPrintable(describe(o)));
  }

  // Class 5: counts out of any sensible range are refused by the schema with the key, the range and the
  // value, before anything grows or wraps around; exit 2.
  void countsOutOfRangeAreRefusedByTheSchema_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("message");
    QTest::newRow("accumulation 1e9") << "estimate"
                                      << "train.accumulation=1000000000"
                                      << "train.accumulation: must be in 1..65536, got 1000000000";
    QTest::newRow("batch 2^31-63") << "estimate"
                                   << "train.batch_size=2147483585"
                                   << "train.batch_size: must be in 1..65536, got 2147483585";
    QTest::newRow("batch 2^63-1") << "train"
                                  << "train.batch_size=9223372036854775807"
                                  << "train.batch_size: must be in 1..65536, got 9223372036854775807";
    QTest::newRow("steps 2^63-1") << "train"
                                  << "train.steps=9223372036854775807"
                                  << "train.steps: must be in 0..1000000000000, got 9223372036854775807";
    QTest::newRow("epochs 2^62") << "train"
                                 << "train.epochs=4611686018427387904"
                                 << "train.epochs: must be in 1..1000000, got 4611686018427387904";
    QTest::newRow("image side 2^40") << "estimate"
                                     << "data.image_size=[1099511627776,64]"
                                     << "data.image_size: height must be in 1..65536, got 1099511627776";
    // Each key in range, their product not: one activation of 2^43 elements (it died of SIGFPE in oneDNN).
    QTest::newRow("activation of 2^43 elements")
        << "estimate"
        << "data.image_size=[65536,65536]"
        << "makes activations of 8796093022208 elements; at most 2^40";
    QTest::newRow("synthetic samples 2^40") << "train"
                                            << "data.synthetic_samples=1099511627776"
                                            << "data.synthetic_samples: must be in 2..16777216";
  }
  void countsOutOfRangeAreRefusedByTheSchema() {
    QFETCH(QString, command);
    QFETCH(QString, assignment);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QStringList wide = QByteArray(QTest::currentDataTag()) == "activation of 2^43 elements"
                                 ? QStringList{"--set", "model.width=1024", "--set", "train.batch_size=1"}
                                 : QStringList{};
    const Outcome o =
        unet_train(QStringList{command, "--set", assignment, "--set", "checkpoint.dir=" + dir.path()} + wide,
                   20000, 2048);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(message), qPrintable(describe(o)));
  }

  // Class 5: the planner's cost does not grow with accumulation (it plans two micro-batches; the rest repeat
  // the second), so the largest accumulation the schema allows plans in moments and little memory.
  void planningTimeDoesNotGrowWithAccumulation() {
    const auto plan = [](const QString& accumulation) {
      // 30 s of processor time: the plan takes about one; 65536 micro-batches planned in full take far more.
      const Outcome o =
          unet_train({"estimate", "--json", "--set", "train.accumulation=" + accumulation}, 180000, 2048, 30);
      [&] { QVERIFY2(o.code == 0, qPrintable(describe(o))); }();
      return o;
    };
    const Outcome one = plan("1");
    const Outcome most = plan("65536");
    if (QTest::currentTestFailed()) return;
    // The same peak (the micro-batches repeat), within the processor time above: not 65536 times the work.
    QCOMPARE(nlohmann::json::parse(most.out.toStdString()).at("devices").at(0).at("peak_bytes"),
             nlohmann::json::parse(one.out.toStdString()).at("devices").at(0).at("peak_bytes"));
  }

  // Class 5 (unet-bench): --steps and --warmup are counts with a range; 0, negatives and text are refused
  // with the option and the value instead of dividing by zero.
  void benchCountsAreValidated_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("steps 0") << QStringList{"--steps", "0"};
    QTest::newRow("steps -1") << QStringList{"--steps", "-1"};
    QTest::newRow("steps text") << QStringList{"--steps", "many"};
    QTest::newRow("warmup -1") << QStringList{"--warmup", "-1"};
  }
  void benchCountsAreValidated() {
    QFETCH(QStringList, args);
#ifdef UNET_BENCH_BINARY
    const Outcome o = run(UNET_BENCH_BINARY, args, 30000);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(args[0]) && o.err.contains("'" + args[1] + "'"), qPrintable(describe(o)));
#else
    QSKIP("unet-bench is not built (UNET_BUILD_BENCH=OFF)");
#endif
  }

  // Class 6: files that are not regular files are refused at once with their path, never read or waited on;
  // a config has a size bound.
  void filesThatAreNotRegularAreRefusedAtOnce_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("message");
    QTest::newRow("config FIFO") << "config fifo" << 2 << "not a regular file";
    QTest::newRow("config /dev/zero") << "config dev-zero" << 2 << "not a regular file";
    QTest::newRow("config of 2 MiB") << "config big" << 2 << "at most 1048576 bytes";
    QTest::newRow("checkpoint FIFO (--resume)") << "resume fifo" << 1 << "not a regular file";
    QTest::newRow("checkpoint FIFO (export)") << "export fifo" << 1 << "not a regular file";
  }
  void filesThatAreNotRegularAreRefusedAtOnce() {
    QFETCH(QString, kind);
    QFETCH(int, code);
    QFETCH(QString, message);
    QTemporaryDir dir;
    QString file = dir.filePath("input");
    if (kind.endsWith("fifo")) {
      QVERIFY(::mkfifo(file.toLocal8Bit().constData(), 0600) == 0);
    } else if (kind.endsWith("dev-zero")) {
      file = "/dev/zero";
    } else {
      write_file(file, "{" + std::string(2 << 20, ' ') + "}");
    }
    QStringList args;
    if (kind.startsWith("config")) args = {"summary", "--config", file};
    if (kind.startsWith("resume")) args = {"train", "--resume", file};
    if (kind.startsWith("export")) args = {"export", "--checkpoint", file, "--out", dir.filePath("w.st")};
    const Outcome o = unet_train(args, 10000, 2048);
    QVERIFY2(o.code == code, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(file) && o.err.contains(message), qPrintable(describe(o)));
  }

  // Class 6: predict names an input that is not a regular file and skips it (exit 1), instead of blocking on
  // a FIFO or dropping it silently.
  void predictNamesInputsThatAreNotRegularFiles() {
    QTemporaryDir dir;
    const QString model = dir.filePath("m.safetensors");
    const Outcome init = unet_train(QStringList{"init", "--out", model} + tiny(dir.path()));
    QVERIFY2(init.code == 0, qPrintable(describe(init)));
    QVERIFY(QDir(dir.path()).mkpath("in"));
    const QString fifo = dir.filePath("in/a.png");
    QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
    const Outcome o = unet_train(
        {"predict", "--checkpoint", model, "--input", dir.filePath("in"), "--output", dir.filePath("out")},
        20000);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(fifo) && o.err.contains("not a regular file"), qPrintable(describe(o)));
  }

  // Class 6: a checkpoint's header is checked against the file's size before its data is read: gigabytes of
  // trailing bytes, or a large foreign safetensors file, are refused at once under a memory limit far below
  // their size.
  void checkpointHeadersAreCheckedBeforeTheirData_data() {
    QTest::addColumn<bool>("foreign");
    QTest::addColumn<QString>("message");
    QTest::newRow("6 GiB of trailing bytes") << false << "trailing bytes";
    QTest::newRow("3 GiB foreign safetensors") << true << "not a UNet Workbench checkpoint";
  }
  void checkpointHeadersAreCheckedBeforeTheirData() {
    QFETCH(bool, foreign);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString file = dir.filePath("big.safetensors");
    if (foreign) {
      // One u8 tensor of 3 GiB, its data a hole.
      const std::int64_t bytes = std::int64_t{3} << 30;
      std::string header = R"({"x":{"dtype":"U8","shape":[)" + std::to_string(bytes) +
                           R"(],"data_offsets":[0,)" + std::to_string(bytes) + "]}}";
      header.append((8 - header.size() % 8) % 8, ' ');
      std::string length(8, '\0');
      for (int i = 0; i < 8; ++i)
        length[static_cast<std::size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
      write_file(file, length + header);
      append_hole(file, bytes);
    } else {
      const Outcome init = unet_train(QStringList{"init", "--out", file} + tiny(dir.path()));
      QVERIFY2(init.code == 0, qPrintable(describe(init)));
      append_hole(file, std::int64_t{6} << 30);
    }
    const Outcome o = unet_train({"train", "--resume", file}, 20000, 2048);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(file) && o.err.contains(message, Qt::CaseInsensitive), qPrintable(describe(o)));
    QVERIFY2(!o.err.contains("cannot hold the file in memory"), qPrintable(describe(o)));
  }

  // Class 6: image headers that claim far more pixels than their files can hold are refused before the
  // decoder allocates for them: 16 files of 1 KiB claiming 16384x16384 must not make the preflight reserve
  // gigabytes.
  void imagesThatCannotHoldTheirDeclaredPixelsAreRefusedBeforeDecoding() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("data/images") && QDir(dir.path()).mkpath("data/masks"));
    for (int i = 0; i < 16; ++i) {
      write_file(dir.filePath(QString("data/images/%1.png").arg(i)), forged_png(16384));
      write_file(dir.filePath(QString("data/masks/%1.png").arg(i)), forged_png(16384));
    }
    const Outcome o =
        unet_train({"train", "--set", "data.source=folder", "--set", "data.path=" + dir.filePath("data"),
                    "--set", "data.image_size=[32,32]", "--set", "model.depth=2", "--set", "model.width=4",
                    "--set", "checkpoint.dir=" + dir.filePath("run")},
                   30000, 1024);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("0.png") && o.err.contains("truncated or forged"), qPrintable(describe(o)));
  }

  // Weak cases of the config file: a key twice, --config twice, a number beyond double.
  void configMistakesNameTheFileAndKey_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("config_twice");
    QTest::addColumn<QString>("message");
    QTest::newRow("duplicate key") << R"({"train": {"lr": 0.1, "lr": 0.2}})" << false
                                   << "train.lr: appears twice in the config file";
    QTest::newRow("duplicate section") << R"({"train": {}, "model": {}, "train": {"lr": 0.2}})" << false
                                       << "train: appears twice in the config file";
    QTest::newRow("1e400") << R"({"train": {"lr": 1e400}})" << false << "at key train.lr";
    QTest::newRow("1e22 for an integer")
        << R"({"train": {"batch_size": 1e22}})" << false << "train.batch_size: must be an integer, got 1e22";
    QTest::newRow("-1.5e-7 for lr") << R"({"train": {"lr": -1.5E-07}})" << false
                                    << "train.lr: must be > 0, got -1.5e-7";
    QTest::newRow("--config twice") << "{}" << true << "--config given twice";
  }
  void configMistakesNameTheFileAndKey() {
    QFETCH(QString, text);
    QFETCH(bool, config_twice);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString file = dir.filePath("run.json");
    write_file(file, text.toStdString());
    QStringList args{"summary", "--config", file};
    if (config_twice) args += QStringList{"--config", file};
    const Outcome o = unet_train(args, 20000);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(message) && o.err.contains(file), qPrintable(describe(o)));
    QVERIFY2(!o.err.contains("internal error"), qPrintable(describe(o)));
  }

  // Weak case: a --set number is quoted as the user wrote it, and one beyond double is named as such.
  void setValuesAreQuotedAsWritten_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("message");
    QTest::newRow("1e22 for an integer") << "train.batch_size=1e22"
                                         << "train.batch_size: must be an integer, got 1e22";
    QTest::newRow("-1e22 for lr") << "train.lr=-1e22"
                                  << "train.lr: must be > 0, got -1e22";
    QTest::newRow("1e400") << "train.lr=1e400"
                           << "train.lr: must fit a 64-bit float (up to about 1.8e308), got 1e400";
  }
  void setValuesAreQuotedAsWritten() {
    QFETCH(QString, assignment);
    QFETCH(QString, message);
    const Outcome o = unet_train({"summary", "--set", assignment}, 20000);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(message), qPrintable(describe(o)));
  }

  // Weak case: a batch larger than the training set is not printed as if it were used.
  void aBatchLargerThanTheTrainingSetSaysWhatIsUsed() {
    QTemporaryDir dir;
    const Outcome o = unet_train(QStringList{"train"} + tiny(dir.path()) +
                                 QStringList{"--set", "train.batch_size=100", "--set", "train.steps=1"});
    QVERIFY2(o.code == 0, qPrintable(describe(o)));
    QVERIFY2(
        o.err.contains("train.batch_size 100 is more than the 18 training samples: each step takes all 18"),
        qPrintable(describe(o)));
    QVERIFY2(o.out.contains("batch 100 (each step takes all 18 training samples)"), qPrintable(describe(o)));
  }

  // Class 4's neighbour: a resumed run reads its metrics.jsonl; a line edited by hand with a key of another
  // type is skipped, never an internal error from json::value().
  void aHandEditedMetricsLogIsNoInternalError() {
    QTemporaryDir dir;
    const Outcome first =
        unet_train(QStringList{"train"} + tiny(dir.path()) + QStringList{"--set", "train.steps=2"});
    QVERIFY2(first.code == 0, qPrintable(describe(first)));
    std::ofstream(dir.filePath("metrics.jsonl").toStdString(), std::ios::app)
        << R"({"kind": "checkpoint", "reason": "periodic", "path": 42})"
        << "\n"
        << R"({"kind": null, "reason": ["periodic"]})"
        << "\n"
        << "[1, 2, 3]\n";
    const Outcome resumed =
        unet_train({"train", "--resume", dir.filePath("last.safetensors"), "--set", "train.steps=3"});
    QVERIFY2(resumed.code == 0, qPrintable(describe(resumed)));
    QVERIFY2(!resumed.err.contains("internal error"), qPrintable(describe(resumed)));
  }

  // Weak case: `fit` when not even a batch of 1 fits is a failure, not an answer of 0.
  void fitWhenNothingFitsFails() {
    QTemporaryDir dir;
    const Outcome o = unet_train({"fit", "--set", "model.width=256", "--set", "memory.cap_mib=1"}, 60000);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("not even a batch of 1 fits"), qPrintable(describe(o)));
  }

  // Issue 23, section 3: configs nested 100000 deep crashed (SIGSEGV printing the message) or took quadratic
  // memory; nesting is refused past kMaxJsonDepth while parsing, naming the file.
  void deeplyNestedConfigsAreRefusedAtTheLimit_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("message");
    const QString deep = "nested more than 64 levels deep";
    QTest::newRow("100000 arrays") << QString::fromStdString(repeat("[", 100000) + repeat("]", 100000))
                                   << deep;
    QTest::newRow("100000 objects") << QString::fromStdString(repeat("{\"a\":", 100000) + "1" +
                                                              repeat("}", 100000))
                                    << deep;
    QTest::newRow("100000 arrays in a section")
        << QString::fromStdString("{\"model\": {\"width\": " + repeat("[", 100000) + repeat("]", 100000) +
                                  "}}")
        << deep;
    QTest::newRow("65 levels") << QString::fromStdString(repeat("{\"a\":", 65) + "1" + repeat("}", 65))
                               << deep;
    QTest::newRow("64 levels: judged by its keys")
        << QString::fromStdString(repeat("{\"a\":", 64) + "1" + repeat("}", 64)) << "a: unknown key";
  }
  void deeplyNestedConfigsAreRefusedAtTheLimit() {
    QFETCH(QString, text);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString file = dir.filePath("deep.json");
    write_file(file, text.toStdString());
    const Outcome o = unet_train({"summary", "--config", file}, 20000, 1024);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(file) && o.err.contains(message), qPrintable(describe(o)));
  }

  void deeplyNestedSetValuesAreRefused() {
    // 60000 levels: a command-line argument holds at most 128 KiB.
    const std::string value = repeat("[", 60000) + repeat("]", 60000);
    const Outcome o =
        unet_train({"summary", "--set", QString::fromStdString("model.width=" + value)}, 20000, 1024);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("model.width: the value has objects and arrays nested more than 64 levels deep"),
             qPrintable(describe(o)));
  }

  // A checkpoint whose stored config is nested 100000 deep crashed export, predict and --resume.
  void aCheckpointWithADeeplyNestedConfigIsRefused_data() {
    QTest::addColumn<QString>("command");
    QTest::newRow("export") << "export";
    QTest::newRow("predict") << "predict";
    QTest::newRow("resume") << "resume";
  }
  void aCheckpointWithADeeplyNestedConfigIsRefused() {
    QFETCH(QString, command);
    QTemporaryDir dir;
    const QString model = dir.filePath("m.safetensors");
    const Outcome init = unet_train(QStringList{"init", "--out", model} + tiny(dir.path()));
    QVERIFY2(init.code == 0, qPrintable(describe(init)));
    replace_stored_config(model,
                          "{\"model\": {\"width\": " + repeat("[", 100000) + repeat("]", 100000) + "}}");
    QVERIFY(QDir(dir.path()).mkpath("in"));
    QStringList args;
    if (command == "export") args = {"export", "--checkpoint", model, "--out", dir.filePath("e.safetensors")};
    if (command == "predict")
      args = {"predict",  "--checkpoint",     model, "--input", dir.filePath("in"),
              "--output", dir.filePath("out")};
    if (command == "resume") args = {"train", "--resume", model};
    const Outcome o = unet_train(args, 20000, 1024);
    QVERIFY2(o.code == 1, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(model) &&
                 o.err.contains("metadata config: objects and arrays nested more than 64 levels deep"),
             qPrintable(describe(o)));
  }

  // 100000 distinct unknown keys took 23-42 s: the suggestion for each measured every known key in full.
  void manyUnknownKeysCostTimeInProportion() {
    std::string text = "{\"train\": {";
    // Short names (base 36), so that the file stays under the 1 MiB a config file may have.
    for (int i = 0; i < 100000; ++i) {
      std::string name;
      for (int n = i; name.empty() || n > 0; n /= 36)
        name.insert(name.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[n % 36]);
      text += (i ? ",\"" : "\"") + name + "\":1";
    }
    text += "}}";
    QTemporaryDir dir;
    const QString file = dir.filePath("keys.json");
    write_file(file, text);
    // 3 s of processor time: it takes under half a second now, and took 7.5 s (23-42 s on a loaded machine).
    const Outcome o = unet_train({"summary", "--config", file}, 120000, 1024, 3);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("unknown key") && o.err.contains(file), qPrintable(describe(o)));
  }

  // A 2 GB line in metrics.jsonl cost 3-4 GB when a run's history was read; a line past
  // kMaxMetricsRecordBytes is skipped in blocks, never held, and named with its number. 64 MiB stands for 2
  // GB.
  void aLongMetricsLineIsSkippedWithoutHoldingIt() {
    QTemporaryDir dir;
    const QString file = dir.filePath("metrics.jsonl");
    {
      std::ofstream out(file.toStdString(), std::ios::binary);
      out << R"({"kind":"step","step":1,"epoch":0,"loss":0.5})"
          << "\n";
      out << "{\"kind\":\"step\",\"step\":2,\"epoch\":0,\"loss\":0.4,\"pad\":\"";
      const std::string block(std::size_t{1} << 20, 'x');
      for (int i = 0; i < 64; ++i) out << block;
      out << "\"}\n"
          << R"({"kind":"step","step":3,"epoch":0,"loss":0.3})"
          << "\n";
    }
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    const RunHistory history = read_run_history(file.toStdString());
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    QCOMPARE(history.steps.size(), std::size_t{2});
    QCOMPARE(history.steps[0].step, std::int64_t{1});
    QCOMPARE(history.steps[1].step, std::int64_t{3});
    QCOMPARE(history.warnings.size(), std::size_t{1});
    const QString warning = QString::fromStdString(history.warnings[0]);
    QVERIFY2(warning.contains(file + " line 2: a record of ") && warning.contains("1 MiB"),
             qPrintable(warning));
    const long grown_kib = after.ru_maxrss - before.ru_maxrss;  // the peak: a held line would add 64 MiB
    QVERIFY2(grown_kib < 16 * 1024, qPrintable(QString("peak grew by %1 KiB").arg(grown_kib)));
  }

  // data.validation_split files had no size limit: one past kMaxValidationSplitBytes is refused unread.
  void aValidationSplitFileHasASizeLimit() {
    QTemporaryDir dir;
    const QString split = dir.filePath("split.json");
    write_file(split, R"({"format": "unet-workbench-validation/1", "samples": []})");
    append_hole(split, kMaxValidationSplitBytes);
    const Outcome o =
        unet_train(QStringList{"train"} + tiny(dir.filePath("run")) +
                       QStringList{"--set", "train.steps=1", "--set", "data.validation_split=" + split},
                   60000, 2048);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("data.validation_split: " + split + ": is ") &&
                 o.err.contains("bytes; it may be at most 67108864 bytes (64 MiB)"),
             qPrintable(describe(o)));
  }
  // Issue 23 §5: paths are bytes on Linux, but configs, checkpoints and metrics.jsonl are UTF-8 JSON. A
  // config path that is not UTF-8 trained the whole run and then failed every save (checkpoint.dir), or ended
  // in an internal JSON error (data.path); it is refused before any work, naming the key and showing the
  // byte. QProcess passes arguments as UTF-8, so a shell passes the raw byte.
  void aConfigPathThatIsNotUtf8IsRefusedBeforeTraining_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QStringList>("more");
    QTest::newRow("checkpoint.dir") << "checkpoint.dir" << QStringList{};
    QTest::newRow("data.path") << "data.path" << QStringList{"--set", "data.source=folder"};
  }
  void aConfigPathThatIsNotUtf8IsRefusedBeforeTraining() {
    QFETCH(QString, key);
    QFETCH(QStringList, more);
    QTemporaryDir dir;
    const RemovedWithBytes cleanup{dir.path().toStdString()};
    const Outcome o = run(
        "/bin/sh", QStringList{"-c", R"(k=$1; v=$(printf "$2"); shift 2; exec "$0" train "$@" --set "$k=$v")",
                               UNET_TRAIN_BINARY, key, dir.path() + "/run\\377"} +
                       tiny(dir.filePath("ok")) + QStringList{"--set", "train.steps=1"} + more);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(
        o.err.contains(key + ": is not valid UTF-8 (byte 0xff at offset ") && o.err.contains("/run\\xff\""),
        qPrintable(describe(o)));
    // Nothing was made: neither the folder of that name nor the run folder.
    QVERIFY(!std::filesystem::exists(dir.path().toStdString() + "/run\xff"));
    QVERIFY(!QDir(dir.filePath("ok")).exists());
  }

  // The config's own values are UTF-8, but a relative one resolves against the config file's folder, which
  // may not be: checkpoints record the resolved path, so that run is refused too, and an absolute UTF-8
  // checkpoint.dir trains from the same config.
  void aRunFolderResolvedUnderAFolderThatIsNotUtf8IsRefused() {
    QTemporaryDir dir;
    const RemovedWithBytes cleanup{dir.path().toStdString()};
    const std::string folder = dir.path().toStdString() + "/conf\xe9";
    std::filesystem::create_directories(folder);
    std::ofstream(folder + "/c.json") << R"({"model": {"width": 4, "depth": 2},
        "data": {"image_size": [32, 32], "synthetic_samples": 20},
        "train": {"steps": 1}, "checkpoint": {"dir": "run"}})";
    const QString script = R"(c=$(printf "$1"); shift; exec "$0" train --config "$c" "$@")";
    const QString config = dir.path() + "/conf\\351/c.json";
    const Outcome refused = run("/bin/sh", {"-c", script, UNET_TRAIN_BINARY, config});
    QVERIFY2(refused.code == 2, qPrintable(describe(refused)));
    QVERIFY2(refused.err.contains("checkpoint.dir: resolves to a path that is not valid UTF-8 (byte 0xe9") &&
                 refused.err.contains("/conf\\xe9/run\""),
             qPrintable(describe(refused)));
    QVERIFY(!std::filesystem::exists(folder + "/run"));
    const Outcome trained = run("/bin/sh", {"-c", script, UNET_TRAIN_BINARY, config, "--set",
                                            "checkpoint.dir=" + dir.filePath("run")});
    QVERIFY2(trained.code == 0, qPrintable(describe(trained)));
    QVERIFY(QFile::exists(dir.filePath("run/last.safetensors")));
  }

  // A data file whose name is not UTF-8 ended the run in an internal JSON error when validation.json was
  // written. It is a bad file like any other, named by path with its byte shown: the run is refused, or with
  // data.skip_bad trains on the rest. The folder's report prints as lines, not one line with literal "\n"s.
  void aSampleNameThatIsNotUtf8IsABadFile() {
    QTemporaryDir dir;
    const RemovedWithBytes cleanup{dir.path().toStdString()};
    const std::filesystem::path data = dir.path().toStdString() + "/data";
    std::filesystem::create_directories(data / "images");
    std::filesystem::create_directories(data / "masks");
    Image image{32, 32, 1, std::vector<std::uint8_t>(32 * 32, 90)};
    Image mask{32, 32, 1, std::vector<std::uint8_t>(32 * 32, 0)};
    std::fill(mask.pixels.begin(), mask.pixels.begin() + 300, std::uint8_t{255});
    for (const std::string name : {"a", "b", "c", "d", "caf\xe9"}) {
      write_png(data / "images" / (name + ".png"), image);
      write_png(data / "masks" / (name + ".png"), mask);
    }
    const QStringList args = QStringList{"train"} + tiny(dir.filePath("run")) +
                             QStringList{"--set", "data.source=folder",
                                         "--set", "data.path=" + QString::fromStdString(data.string()),
                                         "--set", "train.steps=1",
                                         "--set", "data.val_fraction=0.25"};
    const Outcome refused = unet_train(args);
    QVERIFY2(refused.code == 1, qPrintable(describe(refused)));
    QVERIFY2(refused.err.contains("/data/images/caf\\xe9.png: its name is not valid UTF-8 (byte 0xe9") &&
                 refused.err.contains("/data/masks/caf\\xe9.png: its name is not valid UTF-8"),
             qPrintable(describe(refused)));

    const Outcome skipped = unet_train(args + QStringList{"--set", "data.skip_bad=true"});
    QVERIFY2(skipped.code == 0, qPrintable(describe(skipped)));
    std::ifstream in(dir.filePath("run/validation.json").toStdString());
    const nlohmann::json split = nlohmann::json::parse(in);
    QCOMPARE(split.at("samples").size(), std::size_t{1});
    QVERIFY2(!skipped.err.contains("\\n"), qPrintable(describe(skipped)));
    QVERIFY2(skipped.err.contains("\nunet-train:   image sizes (width x height): 32x32 (4)\n"),
             qPrintable(describe(skipped)));
  }
  // Issue 23 §5: under an address-space limit (ulimit -v) a run died of SIGSEGV inside oneDNN's primitive
  // creation, or ended in "internal error: Resource temporarily unavailable" when a thread could not start.
  // At every limit it now trains or is refused before training with the limit's figures, and where the plan
  // is what does not fit, with the plan's figures. The demo's model, 2 steps; limits from below what the
  // libraries map to above what the run needs.
  void underAnAddressSpaceLimitARunTrainsOrIsRefusedWithFigures_data() {
    QTest::addColumn<long>("limit_mib");
    for (const long mib : {100L, 200L, 300L, 400L, 500L, 800L})
      QTest::newRow(qPrintable(QString("ulimit -v %1 MiB").arg(mib))) << mib;
  }
  void underAnAddressSpaceLimitARunTrainsOrIsRefusedWithFigures() {
    QFETCH(long, limit_mib);
    QTemporaryDir dir;
    const Outcome o =
        unet_train({"train", "--set", "train.steps=2", "--set", "checkpoint.dir=" + dir.filePath("run")},
                   120000, limit_mib);
    QVERIFY2(o.code == 0 || o.code == 1, qPrintable(describe(o)));
    QVERIFY2(!o.err.contains("internal error"), qPrintable(describe(o)));
    if (o.code == 0) {
      QVERIFY(QFile::exists(dir.filePath("run/last.safetensors")));
      return;
    }
    QVERIFY2(
        o.err.contains(QString("the address-space limit (ulimit -v) of %1.0 MiB, of which the process maps ")
                           .arg(limit_mib)),
        qPrintable(describe(o)));
    // Refused before training: nothing was saved.
    QVERIFY(!QFile::exists(dir.filePath("run/last.safetensors")));
    // Where the libraries leave room to plan, the refusal gives the plan's peak against what is left; where
    // the samples themselves do not fit (the demo's cache holds normalised floats: 100 MiB), an
    // out-of-host-memory refusal that names the settings holding them.
    const bool data_did_not_fit =
        o.err.contains("out of host memory (an allocation failed; under the address-space limit") &&
        o.err.contains("data.cache_mib");
    if (!o.err.contains("the engine's generated code alone needs") && !data_did_not_fit)
      QVERIFY2(o.err.contains("the memory plan for this run peaks at ") &&
                   o.err.contains(" reserved on cpu:0, over the "),
               qPrintable(describe(o)));
  }
};

QTEST_GUILESS_MAIN(TestReliabilityInputs)
#include "test_reliability_inputs.moc"
