// Issue 23 section 4, results that mean nothing reported as results: each case runs unet-train as a user
// would (or the engine's own metric function) and asserts what the user is told. A run that cannot learn, or
// a setting it would never read, is refused before work starts (exit 2, a message naming the keys, no run
// folder written); metrics over no labelled pixels are absent (null in metrics.jsonl, "—" in the progress
// lines), never perfect, and never an improvement that saves best.safetensors.
#include <QDir>
#include <QProcess>
#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "unet/io/image.h"
#include "unet/train/metrics_log.h"
#include "unet/train/trainer.h"

using namespace unet;
namespace fs = std::filesystem;

namespace {

struct Outcome {
  int code = -1;  // the exit code; -1 when it crashed or did not finish
  QString out, err;
};

Outcome unet_train(const QStringList& args) {
  QProcess p;
  p.start(UNET_TRAIN_BINARY, args);
  if (!p.waitForFinished(300000)) {
    p.kill();
    p.waitForFinished(5000);
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

QString describe(const Outcome& o) {
  return QString("exit %1\nstdout:\n%2\nstderr:\n%3").arg(o.code).arg(o.out.right(3000), o.err.right(3000));
}

// A small, fast run: a width-4 depth-2 U-Net on 32x32 images, one epoch.
QStringList tiny(const QString& run_dir) {
  return {"train",
          "--set",
          "model.width=4",
          "--set",
          "model.depth=2",
          "--set",
          "data.image_size=[32,32]",
          "--set",
          "train.epochs=1",
          "--set",
          "checkpoint.dir=" + run_dir};
}

QStringList synthetic(const QString& run_dir) {
  return tiny(run_dir) << "--set"
                       << "data.synthetic_samples=20";
}

// Adds `--set assignment` for each assignment.
QStringList with(QStringList args, const QStringList& assignments) {
  for (const QString& a : assignments) args << "--set" << a;
  return args;
}

// A folder dataset of 32x32 RGB images: `masks[i]` gives image i's mask value at (y, x).
void write_folder(const fs::path& root, int count, const std::function<std::uint8_t(int, int, int)>& mask) {
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  for (int i = 0; i < count; ++i) {
    Image image{32, 32, 3, std::vector<std::uint8_t>(32 * 32 * 3)};
    Image m{32, 32, 1, std::vector<std::uint8_t>(32 * 32)};
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const std::uint8_t v = mask(i, y, x);
        m.pixels[static_cast<std::size_t>(y * 32 + x)] = v;
        for (int ch = 0; ch < 3; ++ch)
          image.pixels[static_cast<std::size_t>((y * 32 + x) * 3 + ch)] =
              static_cast<std::uint8_t>((v == 1 ? 180 : 40) + (x * 7 + y * 3 + i * 11 + ch * 5) % 30);
      }
    char name[32];
    std::snprintf(name, sizeof name, "s%02d.png", i);
    write_png(root / "images" / name, image);
    write_png(root / "masks" / name, m);
  }
}

// A square of foreground (1) on background (0).
std::uint8_t square(int, int y, int x) {
  return y >= 8 && y < 20 && x >= 10 && x < 24 ? 1 : 0;
}

std::vector<nlohmann::json> records(const fs::path& metrics, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("kind", "") == kind) out.push_back(j);
  }
  return out;
}

void write_validation_split(const fs::path& file, const std::vector<std::string>& samples) {
  std::ofstream(file) << nlohmann::json{
      {"format", "unet-workbench-validation/1"},
      {"samples", samples}}.dump();
}

}  // namespace

class TestReliabilityResults : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  // --- metrics over nothing --------------------------------------------------------------------------------

  // Counts as the engine sums them: per class tp, fp, fn, then correct and labelled pixels.
  void metricsOverNoLabelledPixelAreAbsent() {
    // Every pixel ignored: nothing labelled, nothing predicted on a labelled pixel.
    const SegmentationMetrics none = segmentation_metrics(std::vector<std::int64_t>(8, 0), 1);
    QVERIFY2(std::isnan(none.iou), qPrintable(QString::number(none.iou)));
    QVERIFY2(std::isnan(none.dice), qPrintable(QString::number(none.dice)));
    QVERIFY2(std::isnan(none.accuracy), qPrintable(QString::number(none.accuracy)));
    QCOMPARE(none.class_iou.size(), std::size_t{2});
    QVERIFY(std::isnan(none.class_iou[0]) && std::isnan(none.class_iou[1]));
    QVERIFY(std::isnan(none.class_dice[0]) && std::isnan(none.class_dice[1]));
    // Labelled background only, predicted background: the foreground is absent, the accuracy is 1.
    const SegmentationMetrics background = segmentation_metrics({50, 0, 0, 0, 0, 0, 50, 50}, 1);
    QVERIFY(std::isnan(background.iou) && std::isnan(background.dice));
    QCOMPARE(background.accuracy, 1.0);
    QCOMPARE(background.class_iou[0], 1.0);
    // 4 classes, class 3 neither labelled nor predicted: the means are over classes 1 and 2 alone.
    // class 1: tp 3 fp 1 fn 0 -> IoU 3/4, Dice 6/7; class 2: tp 1 fp 0 fn 1 -> IoU 1/2, Dice 2/3.
    const SegmentationMetrics m = segmentation_metrics({4, 0, 0, 3, 1, 0, 1, 0, 1, 0, 0, 0, 8, 10}, 4);
    QCOMPARE(m.iou, (0.75 + 0.5) / 2);
    QCOMPARE(m.dice, (6.0 / 7.0 + 2.0 / 3.0) / 2);
    QVERIFY(std::isnan(m.class_iou[3]) && std::isnan(m.class_dice[3]));
  }

  // Training images are labelled, the validation images are all ignore label: the run trains, and its
  // validation metrics are absent, written null, shown "—", and never make best.safetensors, a
  // save_best_only file or an early-stopping best.
  void validationWithoutLabelledPixelsIsAbsentNotPerfect() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    write_folder(root / "data", 10,
                 [](int i, int y, int x) -> std::uint8_t { return i < 8 ? square(i, y, x) : 255; });
    write_validation_split(root / "split.json", {"s08.png", "s09.png"});
    const QString run = dir.filePath("run");
    const Outcome o =
        unet_train(with(tiny(run), {"data.source=folder", "data.path=" + dir.filePath("data"),
                                    "data.validation_split=" + dir.filePath("split.json"),
                                    "loss.ignore_index=255", "train.epochs=2", "checkpoint.monitor=val_iou",
                                    "checkpoint.save_best_only=true", "early_stopping.patience=1"}));
    QVERIFY2(o.code == 0, qPrintable(describe(o)));
    const std::vector<nlohmann::json> epochs = records(root / "run" / "metrics.jsonl", "epoch");
    QVERIFY2(!epochs.empty(), qPrintable(describe(o)));
    for (const nlohmann::json& e : epochs) {
      for (const char* key : {"val_loss", "val_iou", "val_dice", "val_acc"})
        QVERIFY2(e.at(key).is_null(),
                 qPrintable(QString("%1 in %2").arg(key, QString::fromStdString(e.dump()))));
      QCOMPARE(e.at("val_iou_per_class"), (nlohmann::json{nullptr, nullptr}));
      QCOMPARE(e.at("val_dice_per_class"), (nlohmann::json{nullptr, nullptr}));
      QVERIFY(e.at("loss").is_number());  // the training loss is over labelled pixels
    }
    // Early stopping never saw an improvement: it stops after its one validation of patience.
    QCOMPARE(epochs.size(), std::size_t{1});
    QVERIFY2(epochs[0].value("early_stop", "").find("never finite") != std::string::npos,
             epochs[0].dump().c_str());
    QVERIFY2(!fs::exists(root / "run" / "best.safetensors"), qPrintable(describe(o)));
    for (const auto& f : fs::directory_iterator(root / "run"))
      QVERIFY2(!f.path().filename().string().starts_with("unet-"), f.path().c_str());
    QVERIFY(fs::exists(root / "run" / "last.safetensors"));
    // The reader gives absent as absent, and the progress line says so.
    const RunHistory history = read_run_history(root / "run" / "metrics.jsonl");
    QCOMPARE(history.epochs.size(), std::size_t{1});
    QVERIFY(std::isnan(history.epochs[0].val_iou) && std::isnan(history.epochs[0].val_loss));
    QVERIFY(std::isnan(history.epochs[0].val_class_iou.at(1)));
    QVERIFY2(o.out.contains(QString::fromUtf8("val_iou \u2014")) && !o.out.contains("val_iou nan"),
             qPrintable(o.out));
  }

  // The plateau schedule counts an absent val_loss as a validation without improvement: with patience 0 the
  // rate is lowered after the first one (were it 0, as it was, it would have been a best to keep).
  void anAbsentMetricNeverImprovesThePlateau() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    write_folder(root / "data", 10,
                 [](int i, int y, int x) -> std::uint8_t { return i < 8 ? square(i, y, x) : 255; });
    write_validation_split(root / "split.json", {"s08.png", "s09.png"});
    const Outcome o = unet_train(with(
        tiny(dir.filePath("run")),
        {"data.source=folder", "data.path=" + dir.filePath("data"),
         "data.validation_split=" + dir.filePath("split.json"), "loss.ignore_index=255", "train.epochs=2",
         "train.lr=0.001", "schedule.kind=plateau", "schedule.patience=0", "schedule.gamma=0.5"}));
    QVERIFY2(o.code == 0, qPrintable(describe(o)));
    // 8 training images, batch 8: one step per epoch.
    const std::vector<nlohmann::json> steps = records(root / "run" / "metrics.jsonl", "step");
    QCOMPARE(steps.size(), std::size_t{2});
    QCOMPARE(steps[0].at("lr").get<double>(), 0.001);
    QCOMPARE(steps[1].at("lr").get<double>(), 0.0005);
  }

  // --- runs that cannot learn ------------------------------------------------------------------------------

  void anIgnoreLabelOnEveryPixelIsRefused_data() {
    QTest::addColumn<QString>("cache");
    // Masks held in memory are read before the run; masks decoded on demand are counted by the first epoch.
    QTest::newRow("masks in memory") << "data.cache_mib=2048";
    QTest::newRow("masks decoded on demand") << "data.cache_mib=0";
  }
  void anIgnoreLabelOnEveryPixelIsRefused() {
    QFETCH(QString, cache);
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    write_folder(root / "data", 10, [](int, int, int) -> std::uint8_t { return 0; });
    const Outcome o =
        unet_train(with(tiny(dir.filePath("run")), {"data.source=folder", "data.path=" + dir.filePath("data"),
                                                    "loss.ignore_index=0", cache}));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("loss.ignore_index: is 0") && o.err.contains("training masks"),
             qPrintable(o.err));
    // Nothing was validated or saved as if it had been learned.
    QVERIFY(!fs::exists(root / "run" / "best.safetensors"));
    QVERIFY(!fs::exists(root / "run" / "last.safetensors"));
    QVERIFY(records(root / "run" / "metrics.jsonl", "epoch").empty());
    if (cache.endsWith("2048"))
      QVERIFY2(!fs::exists(root / "run" / "metrics.jsonl"), "refused after it began");
  }

  void aLossWithoutWeightIsRefused_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("expected");
    QTest::newRow("cross_entropy_dice, both weights 0")
        << QStringList{"loss.kind=cross_entropy_dice", "loss.cross_entropy_weight=0", "loss.dice_weight=0"}
        << "loss.cross_entropy_weight: is 0, and so is loss.dice_weight";
    QTest::newRow("focal_dice, both weights 0")
        << QStringList{"loss.kind=focal_dice", "loss.cross_entropy_weight=0", "loss.dice_weight=0"}
        << "loss.cross_entropy_weight: is 0, and so is loss.dice_weight";
    QTest::newRow("cross_entropy weighed 0")
        << QStringList{"loss.cross_entropy_weight=0"} << "loss.cross_entropy_weight: is 0";
    QTest::newRow("dice weighed 0") << QStringList{"loss.kind=dice", "loss.dice_weight=0"}
                                    << "loss.dice_weight: is 0";
  }
  void aLossWithoutWeightIsRefused() {
    QFETCH(QStringList, sets);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const Outcome o = unet_train(with(synthetic(dir.filePath("run")), sets));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(expected) && o.err.contains("cannot learn"), qPrintable(o.err));
    QVERIFY2(!QDir(dir.filePath("run")).exists(), "refused after it began");
  }

  void classWeightsOfZeroOnEveryPresentClassAreRefused() {
    QTemporaryDir dir;
    const fs::path root = dir.path().toStdString();
    // Three classes; the masks hold 0 and 1 only, and both weigh 0.
    write_folder(root / "data", 10, square);
    const Outcome o =
        unet_train(with(tiny(dir.filePath("run")), {"data.source=folder", "data.path=" + dir.filePath("data"),
                                                    "model.classes=3", "loss.class_weights=[0,0,5]"}));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(
        o.err.contains("loss.class_weights: [0.0,0.0,5.0] weighs 0 every class the 9 training masks label "
                       "(classes 0 and 1)"),
        qPrintable(o.err));
    QVERIFY(!fs::exists(root / "run" / "metrics.jsonl"));
  }

  void classWeightsOfZeroOnEveryDiceClassAreRefused() {
    QTemporaryDir dir;
    const Outcome o = unet_train(with(synthetic(dir.filePath("run")),
                                      {"model.classes=3", "loss.kind=dice", "loss.class_weights=[1,0,0]"}));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains("loss.class_weights: [1.0,0.0,0.0] weighs 0 every class the Dice term averages"),
             qPrintable(o.err));
  }

  void aWarmUpAsLongAsTheRunIsRefused_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("expected");
    // 20 samples, 18 training, batch 8: 3 steps per epoch.
    QTest::newRow("constant, by epochs") << QStringList{"schedule.warmup_steps=100", "train.epochs=2"}
                                         << "schedule.warmup_steps: is 100 but the run has 6 optimizer steps "
                                            "(train.epochs 2 x 3 steps per epoch";
    QTest::newRow("constant, by steps") << QStringList{"schedule.warmup_steps=5", "train.steps=5"}
                                        << "schedule.warmup_steps: is 5 but the run has 5 optimizer steps "
                                           "(train.steps 5)";
    QTest::newRow("plateau, by epochs") << QStringList{"schedule.kind=plateau", "schedule.warmup_steps=3"}
                                        << "schedule.warmup_steps: is 3 but the run has 3 optimizer steps "
                                           "(train.epochs 1 x 3 steps per epoch";
  }
  void aWarmUpAsLongAsTheRunIsRefused() {
    QFETCH(QStringList, sets);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const Outcome o = unet_train(with(synthetic(dir.filePath("run")), sets));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(expected) && o.err.contains("whole run would be warm-up"), qPrintable(o.err));
    // Refused before the run wrote anything it keeps: the corrected config may use the same folder.
    const fs::path run = dir.filePath("run").toStdString();
    QVERIFY(!fs::exists(run / "metrics.jsonl"));
    QVERIFY(!fs::exists(run / "validation.json"));
    const Outcome again = unet_train(with(synthetic(dir.filePath("run")), {"train.steps=1"}));
    QVERIFY2(again.code == 0, qPrintable(describe(again)));
  }

  // --- settings a run would never read ---------------------------------------------------------------------

  void validationSettingsWithoutValidationSamplesAreRefused_data() {
    QTest::addColumn<QString>(
        "validation");  // "fraction": data.val_fraction 0; "split": a split listing none
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("expected");
    const QStringList by_loss{"checkpoint.monitor=loss",
                              "checkpoint.template=unet-{epoch:02d}-{loss:.4f}.safetensors"};
    // The default config with val_fraction 0 names the two keys to change and the template to use.
    QTest::newRow("defaults, val_fraction 0")
        << "fraction" << QStringList{}
        << "checkpoint.monitor: \"val_loss\" chooses best.safetensors by a validation metric, and "
           "data.val_fraction is 0";
    QTest::newRow("template, val_fraction 0")
        << "fraction" << QStringList{"checkpoint.monitor=loss"}
        << "checkpoint.template: \"unet-{epoch:02d}-{val_loss:.4f}.safetensors\" "
           "names {val_loss:.4f}, a validation metric, and data.val_fraction "
           "is 0: the periodic checkpoints could not be named; use "
           "\"unet-{epoch:02d}-{loss:.4f}.safetensors\"";
    QTest::newRow("save_best_only, val_fraction 0")
        << "fraction"
        << QStringList{"checkpoint.monitor=val_dice", "checkpoint.save_best_only=true",
                       "checkpoint.template=unet-{epoch:02d}-{loss:.4f}.safetensors"}
        << "checkpoint.monitor: \"val_dice\" chooses best.safetensors and the periodic files "
           "checkpoint.save_best_only keeps by a validation metric";
    QTest::newRow("plateau, empty split")
        << "split" << (QStringList(by_loss) << "schedule.kind=plateau")
        << "schedule.monitor: \"val_loss\" (the plateau schedule's metric) needs "
           "validation samples, and the run has no validation sample";
    QTest::newRow("early stopping, empty split")
        << "split" << (QStringList(by_loss) << "early_stopping.patience=2")
        << "early_stopping.monitor: \"val_loss\" (early stopping, early_stopping.patience 2) needs "
           "validation "
           "samples, and the run has no validation sample";
    QTest::newRow("monitor, empty split")
        << "split" << QStringList{"checkpoint.template=unet-{epoch:02d}.safetensors"}
        << "checkpoint.monitor: \"val_loss\" chooses best.safetensors by a "
           "validation metric, and the run has no validation sample "
           "(data.validation_split lists none";
    QTest::newRow("template, empty split")
        << "split" << QStringList{"checkpoint.monitor=loss"}
        << "checkpoint.template: \"unet-{epoch:02d}-{val_loss:.4f}.safetensors\" names {val_loss:.4f}";
  }
  void validationSettingsWithoutValidationSamplesAreRefused() {
    QFETCH(QString, validation);
    QFETCH(QStringList, sets);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    QStringList args = with(synthetic(dir.filePath("run")), sets);
    if (validation == "fraction") {
      args << "--set"
           << "data.val_fraction=0";
    } else {
      write_validation_split(fs::path(dir.path().toStdString()) / "split.json", {});
      args << "--set"
           << "data.validation_split=" + dir.filePath("split.json");
    }
    const Outcome o = unet_train(args);
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(expected), qPrintable(o.err));
    const fs::path run = dir.filePath("run").toStdString();
    QVERIFY(!fs::exists(run / "metrics.jsonl"));
    QVERIFY(!fs::exists(run / "last.safetensors"));
  }

  // What a user with 20 images and no validation set is told to write trains, names its files by the training
  // loss and keeps the best of it.
  void withoutValidationTheTrainingLossIsWatched() {
    QTemporaryDir dir;
    const Outcome o = unet_train(with(synthetic(dir.filePath("run")),
                                      {"data.val_fraction=0", "checkpoint.monitor=loss", "train.epochs=2",
                                       "checkpoint.template=unet-{epoch:02d}-{loss:.4f}.safetensors"}));
    QVERIFY2(o.code == 0, qPrintable(describe(o)));
    const fs::path run = dir.filePath("run").toStdString();
    QVERIFY(fs::exists(run / "best.safetensors"));
    const std::vector<nlohmann::json> epochs = records(run / "metrics.jsonl", "epoch");
    QCOMPARE(epochs.size(), std::size_t{2});
    char name[64];
    std::snprintf(name, sizeof name, "unet-02-%.4f.safetensors", epochs[1].at("loss").get<double>());
    QVERIFY2(fs::exists(run / name), name);
    QVERIFY(epochs[1].at("val_loss").is_null());
  }

  void optimizerKeysTheOptimizerDoesNotReadAreRefused_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("expected");
    QTest::newRow("momentum under adamw")
        << QStringList{"optimizer.momentum=0.95"}
        << "optimizer.momentum: is 0.95, but optimizer.kind \"adamw\" does not "
           "use it (sgd does)";
    QTest::newRow("nesterov under adamw") << QStringList{"optimizer.nesterov=true"}
                                          << "optimizer.nesterov: is true, but optimizer.kind \"adamw\"";
    QTest::newRow("momentum under adam") << QStringList{"optimizer.kind=adam", "optimizer.momentum=0.99"}
                                         << "optimizer.momentum: is 0.99, but optimizer.kind \"adam\"";
    QTest::newRow("beta1 under sgd") << QStringList{"optimizer.kind=sgd", "optimizer.beta1=0.8"}
                                     << "optimizer.beta1: is 0.8, but optimizer.kind \"sgd\" does not use it "
                                        "(adam or adamw does)";
    QTest::newRow("beta2 under sgd") << QStringList{"optimizer.kind=sgd", "optimizer.beta2=0.99"}
                                     << "optimizer.beta2: is 0.99, but optimizer.kind \"sgd\"";
    QTest::newRow("eps under sgd") << QStringList{"optimizer.kind=sgd", "optimizer.eps=1e-6"}
                                   << "optimizer.eps: is 1e-06, but optimizer.kind \"sgd\"";
  }
  void optimizerKeysTheOptimizerDoesNotReadAreRefused() {
    QFETCH(QStringList, sets);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const Outcome o = unet_train(with(synthetic(dir.filePath("run")), sets));
    QVERIFY2(o.code == 2, qPrintable(describe(o)));
    QVERIFY2(o.err.contains(expected), qPrintable(o.err));
    QVERIFY(!QDir(dir.filePath("run")).exists());
  }

  // Configs are written out whole: the other optimizer's keys at their defaults are no setting of the user's.
  void aWholeConfigWithTheOtherOptimizersDefaultsTrains() {
    QTemporaryDir dir;
    Config c;
    c.model.width = 4;
    c.model.depth = 2;
    c.data.image_height = c.data.image_width = 32;
    c.data.synthetic_samples = 20;
    c.train.steps = 1;
    c.optimizer.kind = OptimizerKind::sgd;
    c.optimizer.momentum = 0.99;
    c.optimizer.nesterov = true;
    c.checkpoint.dir = dir.filePath("run").toStdString();
    const std::string file = dir.filePath("sgd.json").toStdString();
    std::ofstream(file) << config_to_string(c);
    const Outcome o = unet_train({"train", "--config", QString::fromStdString(file)});
    QVERIFY2(o.code == 0, qPrintable(describe(o)));
  }
};

QTEST_GUILESS_MAIN(TestReliabilityResults)
#include "test_reliability_results.moc"
