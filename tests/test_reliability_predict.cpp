// Issue 23, section 3: `predict` planned for memory like training. Each case runs as a user would (unet-train
// predict, its peak resident memory read from the kernel's accounting of the child, wait4's ru_maxrss) or
// through the Predictor, and asserts bounds on bytes, never on time:
//   - a tile larger than the image is the image padded to 2^depth (an 8x8 image with --tile 16384 runs one
//     16x16 tile, as --mode whole runs it, in the memory of a small image);
//   - a model of many classes on a large image streams its probabilities a row at a time: the peak grows by
//     far less than the classes x height x width floats the whole map would take;
//   - an image whose planned memory exceeds what there is (memory.cap_mib, or the host's figure) is refused,
//     naming the image, the bytes needed, the bytes available and what would fit.
// Resized outputs come a row at a time too: ProbabilityRowResizer is checked against resize_probabilities,
// bit for bit.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <cmath>
#include <cstring>
#include <fstream>

#include "predict_support.h"
#include "test_support.h"
#include "unet/infer/predictor.h"
#include "unet/infer/probability_rows.h"
#include "unet/io/image.h"
#include "unet/model/unet.h"

extern char** environ;

using namespace unet;

namespace {

using test::structured_image;

struct Measured {
  int code = -1;              // the exit code; -1 when it was killed
  std::int64_t peak_kib = 0;  // its peak resident memory, KiB (wait4's ru_maxrss)
  QString out, err;
};

// Runs unet-train with `args`, its output in files under `dir`, and reads its peak resident memory from
// wait4: that child's alone, however large the others were. `memory_mib` limits its address space, so that
// a regression fails the row instead of exhausting the machine.
Measured run_measured(const QTemporaryDir& dir, const QStringList& args, long memory_mib = 6144) {
  const std::string out_path = dir.filePath("stdout.txt").toStdString();
  const std::string err_path = dir.filePath("stderr.txt").toStdString();
  std::vector<std::string> strings{UNET_TRAIN_BINARY};
  for (const QString& a : args) strings.push_back(a.toStdString());
  std::vector<char*> argv;
  // The address-space limit through the shell, which then becomes unet-train (exec: the same process, whose
  // rusage wait4 returns); the arguments pass as positional parameters, unquoted by nothing.
  std::vector<std::string> shell{"/bin/sh", "-c", "ulimit -v \"$0\" && exec \"$@\"",
                                 std::to_string(memory_mib * 1024)};
  shell.insert(shell.end(), strings.begin(), strings.end());
  argv.clear();
  for (std::string& s : shell) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  Measured m;
  if (spawned != 0) return m;
  int status = 0;
  rusage usage{};
  if (::wait4(pid, &status, 0, &usage) != pid) return m;
  m.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.peak_kib = usage.ru_maxrss;
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return QString::fromStdString(std::string(std::istreambuf_iterator<char>(in), {}));
  };
  m.out = read(out_path);
  m.err = read(err_path);
  return m;
}

QString describe(const Measured& m) {
  return QString("exit %1, peak %2 MiB\nstdout:\n%3\nstderr:\n%4")
      .arg(m.code)
      .arg(m.peak_kib / 1024.0, 0, 'f', 1)
      .arg(m.out.right(2000), m.err.right(3000));
}

// A model initialised into `checkpoint` (width 4, 32x32 training size, `depth` and `classes`).
bool init_model(const QString& checkpoint, int depth, int classes) {
  const test::ProcessResult r = test::unet_train(
      {"init", "--set", "model.width=4", "--set", QString("model.depth=%1").arg(depth), "--set",
       QString("model.classes=%1").arg(classes), "--set", "data.image_size=[32,32]", "--out", checkpoint});
  HELPER_VERIFY2(r.code == 0, qPrintable(r.err));
  return true;
}

Config model_config(int depth, int classes, std::int64_t cap_mib = 0) {
  return config_from_json({{"model", {{"width", 4}, {"depth", depth}, {"classes", classes}}},
                           {"data", {{"image_size", {32, 32}}}},
                           {"memory", {{"cap_mib", cap_mib}}}});
}

}  // namespace

class TestReliabilityPredict : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // `predict --mode tiled --tile 16384` on an 8x8 image padded it to one 16384x16384 tile (the canvas alone
  // 768 MiB of pixels, the sums 1 GiB each, the forward pass tens of GiB). The tile is clamped to the image
  // padded to 2^depth (16 for depth 4): one 16x16 tile, the very computation of --mode whole, whose output
  // it must equal byte for byte, in the memory of any small image.
  void aTileLargerThanTheImageRunsTheImage() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("model.safetensors");
    QVERIFY(init_model(checkpoint, 4, 1));
    QVERIFY(QDir(dir.path()).mkpath("in"));
    write_png(dir.filePath("in/small.png").toStdString(), structured_image(8, 8, 3));
    const QStringList common{"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in")};

    const Measured whole =
        run_measured(dir, common + QStringList{"--output", dir.filePath("whole"), "--mode", "whole"});
    QVERIFY2(whole.code == 0, qPrintable(describe(whole)));
    const Measured tiled = run_measured(
        dir, common + QStringList{"--output", dir.filePath("tiled"), "--mode", "tiled", "--tile", "16384"});
    qInfo("8x8 image: peak %.1f MiB whole, %.1f MiB with --tile 16384", whole.peak_kib / 1024.0,
          tiled.peak_kib / 1024.0);
    QVERIFY2(tiled.code == 0, qPrintable(describe(tiled)));
    QVERIFY2(tiled.err.contains("[1/1] small.png 8x8 in 1 tile"), qPrintable(tiled.err));
    QCOMPARE(test::read_all(dir.filePath("tiled/small.png").toStdString()),
             test::read_all(dir.filePath("whole/small.png").toStdString()));
    // The same work as the whole image: the peak within 32 MiB of it (the planning backend the tiled run
    // also builds is all that differs), where one 16384^2 tile's canvas alone is 768 MiB.
    QVERIFY2(tiled.peak_kib < whole.peak_kib + 32 * 1024,
             qPrintable(QString("peak %1 KiB against %2 KiB whole").arg(tiled.peak_kib).arg(whole.peak_kib)));

    // The engine's plan says so, and its probabilities equal the whole image's exactly.
    const Config c = model_config(4, 1);
    Predictor predictor(c, UNet::initial_slab(c.model, 3), DeviceId{});
    PredictOptions o;
    o.mode = PredictMode::tiled;
    o.tile_height = o.tile_width = 16384;
    const PredictMemory plan = predictor.memory_for(8, 8, o, 1);
    QCOMPARE(plan.input_height, 16);
    QCOMPARE(plan.input_width, 16);
    QCOMPARE(plan.tiles, 1);
    QCOMPARE(plan.batch, 1);
    // An 8x4 image under a tile of 16384x64: 16 rows (the padded image), 16 columns (likewise).
    o.tile_width = 64;
    const PredictMemory narrow = predictor.memory_for(8, 4, o, 1);
    QCOMPARE(narrow.input_height, 16);
    QCOMPARE(narrow.input_width, 16);
    const Image image = structured_image(8, 8, 3);
    PredictOptions whole_options;
    whole_options.mode = PredictMode::whole;
    o.tile_width = 16384;
    QCOMPARE(predictor.predict({image}, {"small"}, o).front().probabilities,
             predictor.predict({image}, {"small"}, whole_options).front().probabilities);
  }

  // A 255-class model on a 2048x2048 image took 8.4 GB: the blended probabilities ([H, W, classes] floats)
  // and a copy of them, cropped. Scaled to a test: 64 classes on 1024x1024, whose map is 256 MiB of floats.
  // Streamed, an image holds the open rows' sums (a band of tile rows, whatever its height) and its 8-bit
  // outputs (a mask: one byte a pixel; probability images: one a class but the background). So from an image
  // of 64 rows to one of 1024 rows, of the same width, tiles and batch, the peak grows by the outputs' bytes
  // and the image's own (its pixels, a few bytes each), under an eighth of the float map besides; before, by
  // twice the float map.
  void manyClassesOnALargeImageAreStreamed_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<QString>("kind");
    QTest::newRow("tiled, probabilities") << "tiled"
                                          << "probability";
    QTest::newRow("tiled, masks") << "tiled"
                                  << "mask";
    QTest::newRow("resized, masks") << "resize"
                                    << "mask";
  }
  void manyClassesOnALargeImageAreStreamed() {
    QFETCH(QString, mode);
    QFETCH(QString, kind);
    const std::int64_t classes = 64, side = 1024, short_side = 64;
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("model.safetensors");
    QVERIFY(init_model(checkpoint, 2, static_cast<int>(classes)));
    QVERIFY(QDir(dir.path()).mkpath("short") && QDir(dir.path()).mkpath("large"));
    write_png(dir.filePath("short/a.png").toStdString(), structured_image(short_side, side, 3));
    write_png(dir.filePath("large/a.png").toStdString(), structured_image(side, side, 3));
    QStringList flags{"--mode", mode, "--output-kind", kind};
    if (mode == "tiled")
      flags << "--tile"
            << "64";
    const Measured low = run_measured(dir, QStringList{"predict", "--checkpoint", checkpoint, "--input",
                                                       dir.filePath("short"), "--output", dir.filePath("s")} +
                                               flags);
    QVERIFY2(low.code == 0, qPrintable(describe(low)));
    const Measured large =
        run_measured(dir, QStringList{"predict", "--checkpoint", checkpoint, "--input", dir.filePath("large"),
                                      "--output", dir.filePath("l")} +
                              flags);
    QVERIFY2(large.code == 0, qPrintable(describe(large)));
    const std::int64_t float_map = classes * side * side * 4;
    const std::int64_t output_images = kind == "mask" ? 1 : classes - 1;
    const std::int64_t more_outputs = output_images * (side - short_side) * side;
    const std::int64_t growth = (large.peak_kib - low.peak_kib) * 1024;
    qInfo(
        "%s, %s: peak %.1f MiB for %lldx%lld, %.1f MiB for %lldx%lld (outputs %.1f MiB more; the float map "
        "%.0f MiB)",
        qPrintable(mode), qPrintable(kind), large.peak_kib / 1024.0, static_cast<long long>(side),
        static_cast<long long>(side), low.peak_kib / 1024.0, static_cast<long long>(side),
        static_cast<long long>(short_side), static_cast<double>(more_outputs) / (1 << 20),
        static_cast<double>(float_map) / (1 << 20));
    QVERIFY2(growth < more_outputs + float_map / 8, qPrintable(QString("grew by %1 bytes, bound %2\n%3")
                                                                   .arg(growth)
                                                                   .arg(more_outputs + float_map / 8)
                                                                   .arg(describe(large))));
    // Every output written, at the image's size.
    const QStringList written = QDir(dir.filePath("l")).entryList(QDir::Files);
    QCOMPARE(written.size(), static_cast<int>(output_images));
    const Image first = read_image(dir.filePath("l/" + written.front()).toStdString());
    QCOMPARE(first.height, side);
    QCOMPARE(first.width, side);
  }

  // An image whose plan exceeds the device's cap (memory.cap_mib, which predict now reads and applies) is
  // refused before it runs, with exit code 1, naming the image, the bytes needed, the bytes available and
  // what would fit; the other images are written.
  void anImageThatWouldNotFitIsRefusedByName() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("model.safetensors");
    QVERIFY(init_model(checkpoint, 2, 1));
    QVERIFY(QDir(dir.path()).mkpath("in"));
    write_png(dir.filePath("in/big.png").toStdString(), structured_image(512, 512, 3));
    write_png(dir.filePath("in/small.png").toStdString(), structured_image(32, 32, 3));
    const Measured r =
        run_measured(dir, {"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
                           dir.filePath("out"), "--mode", "whole", "--set", "memory.cap_mib=8"});
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    const QString path = dir.filePath("in/big.png");
    QVERIFY2(r.err.contains("unet-train: skipped " + path + ": predicting it (whole) needs "),
             qPrintable(r.err));
    QVERIFY2(r.err.contains("but 8.0 MiB is available there (memory.cap_mib)"), qPrintable(r.err));
    QVERIFY2(r.err.contains("it fits with --mode tiled --tile "), qPrintable(r.err));
    QVERIFY2(r.out.contains("wrote 1 probability image") && r.out.contains("1 file skipped"),
             qPrintable(r.out));
    QVERIFY(QFile::exists(dir.filePath("out/small.png")));
    QVERIFY(!QFile::exists(dir.filePath("out/big.png")));

    // The tile it names fits: the same image under the same cap, predicted with it.
    const qsizetype at = r.err.indexOf("--tile ") + 7;
    const QString tile = r.err.mid(at).section(QRegularExpression("[^0-9x]"), 0, 0);
    QVERIFY2(!tile.isEmpty(), qPrintable(r.err));
    const Measured fitted = run_measured(
        dir, {"predict", "--checkpoint", checkpoint, "--input", dir.filePath("in"), "--output",
              dir.filePath("fitted"), "--mode", "tiled", "--tile", tile, "--set", "memory.cap_mib=8"});
    QVERIFY2(fitted.code == 0, qPrintable(describe(fitted)));
    QVERIFY(QFile::exists(dir.filePath("fitted/big.png")));
  }

  // The engine's refusal: the device's cap, and an injected figure for the host's memory (the way a caller
  // keeps memory aside, and how a test says "the host has 1 MiB" without exhausting the machine). Nothing
  // runs: the error names the image and both figures.
  void theEngineRefusesAnImageBeforeItRuns() {
    const Image image = structured_image(512, 512, 3);
    PredictOptions o;
    o.mode = PredictMode::whole;
    {
      const Config c = model_config(2, 3, 8);
      Predictor predictor(c, UNet::initial_slab(c.model, 1), DeviceId{});
      const PredictMemory plan = predictor.memory_for(512, 512, o, 12);
      QVERIFY(!plan.fits());
      QCOMPARE(plan.cap, std::int64_t{8} << 20);
      QVERIFY(plan.forward_bytes > plan.cap);
      try {
        predictor.predict({image}, {"scan.png"}, o);
        QFAIL("an image over the cap was run");
      } catch (const Error& e) {
        QCOMPARE(e.kind(), ErrorKind::out_of_memory);
        QVERIFY2(QString(e.what()).contains("scan.png: predicting it (whole) needs " +
                                            QString::fromStdString(format_bytes(plan.forward_bytes)) +
                                            " on cpu:0"),
                 e.what());
        QVERIFY2(QString(e.what()).contains("but 8.0 MiB is available there (memory.cap_mib)"), e.what());
      }
    }
    const Config c = model_config(2, 3);
    Predictor predictor(c, UNet::initial_slab(c.model, 1), DeviceId{});
    o.host_memory_available = 1 << 20;
    const PredictMemory plan = predictor.memory_for(512, 512, o, 12);
    QVERIFY(!plan.fits());
    // The whole map of floats the caller keeps (12 bytes a pixel) alone is 3 MiB.
    QCOMPARE(plan.output_bytes, std::int64_t{512 * 512 * 12});
    QVERIFY(plan.host_needed() >= plan.output_bytes + plan.host_bytes);
    try {
      predictor.predict({image}, {"scan.png"}, o);
      QFAIL("an image over the host's memory was run");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::out_of_memory);
      QVERIFY2(QString(e.what()).contains("scan.png: predicting it (whole) needs " +
                                          QString::fromStdString(format_bytes(plan.host_needed())) +
                                          " of the host's memory"),
               e.what());
      QVERIFY2(QString(e.what()).contains("but 1.0 MiB is available"), e.what());
    }
    // With room, the same image runs.
    o.host_memory_available = -1;
    QCOMPARE(predictor.predict({image}, {"scan.png"}, o).size(), std::size_t(1));
  }

  // Resized outputs come a row at a time: the rows equal resize_probabilities' map bit for bit, enlarging,
  // shrinking, keeping a side, and from one pixel.
  void rowResizingEqualsTheWholeResize_data() {
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("new_height");
    QTest::addColumn<int>("new_width");
    QTest::newRow("enlarge") << 32 << 32 << 45 << 70;
    QTest::newRow("shrink") << 32 << 48 << 20 << 24;
    QTest::newRow("one side kept") << 16 << 16 << 16 << 61;
    QTest::newRow("one pixel") << 1 << 1 << 5 << 3;
  }
  void rowResizingEqualsTheWholeResize() {
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(int, new_height);
    QFETCH(int, new_width);
    const std::int64_t channels = 3;
    std::vector<float> map(static_cast<std::size_t>(height * width * channels));
    for (std::size_t i = 0; i < map.size(); ++i) map[i] = static_cast<float>(std::fmod(0.37 * i, 1.0));
    const std::vector<float> whole =
        resize_probabilities(map, height, width, channels, new_height, new_width);
    ProbabilityRowResizer rows([&](std::int64_t y) { return map.data() + y * width * channels; }, height,
                               width, channels, new_height, new_width);
    std::vector<float> streamed;
    for (std::int64_t y = 0; y < new_height; ++y) {
      const std::span<const float> row = rows.row(y);
      streamed.insert(streamed.end(), row.begin(), row.end());
    }
    QCOMPARE(streamed.size(), whole.size());
    QVERIFY(std::memcmp(streamed.data(), whole.data(), whole.size() * sizeof(float)) == 0);
  }
};

QTEST_GUILESS_MAIN(TestReliabilityPredict)
#include "test_reliability_predict.moc"
