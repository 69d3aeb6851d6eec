// Checkpoints in use (issue: "Checkpoints of the base model"):
// - an interrupted run resumed in a new process continues exactly as the uninterrupted one (bitwise, same
//   replicas), and a run saved on three replicas resumes on one (to 1e-5);
// - a process killed at random moments while saving always leaves a whole, loadable checkpoint;
// - a failed save is reported and training goes on, and the run then fails naming it; keep_last,
// save_best_only, best.safetensors and the
//   template; temp files of an interrupted save are removed at start-up.
#include <QProcess>
#include <QTemporaryDir>

#include <csignal>
#include <fstream>
#include <random>
#include <thread>

#include "test_support.h"
#include "unet/io/atomic_file.h"
#include "unet/io/checkpoint.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

// 32 training images of 32x32, batch 8: 4 steps per epoch.
const QStringList tiny = {"--set", "model.width=4",           "--set", "model.depth=2",
                          "--set", "data.image_size=[32,32]", "--set", "data.synthetic_samples=40",
                          "--set", "data.val_fraction=0.2"};

std::vector<nlohmann::json> steps_of(const QString& metrics) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics.toStdString());
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.at("kind") == "step") out.push_back(j);
  }
  return out;
}

Config small_config(const QString& dir, std::int64_t epochs) {
  return config_from_json(
      {{"model", {{"width", 4}, {"depth", 2}}},
       {"data", {{"image_size", {32, 32}}, {"synthetic_samples", 40}, {"val_fraction", 0.2}}},
       {"train", {{"epochs", epochs}, {"batch_size", 8}}},
       {"checkpoint", {{"dir", dir.toStdString()}}}});
}

struct Errors final : test::WatchedObserver {
  std::vector<ErrorReport> errors;
  std::vector<CheckpointReport> saved;
  void on_error(const ErrorReport& e) override { errors.push_back(e); }
  void on_checkpoint(const CheckpointReport& r) override { saved.push_back(r); }
};

}  // namespace

class TestResume : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // With the default loss, and with a loss section the resumed run must take from the checkpoint's config
  // (the resume names no config): a run that fell back to the default loss would log other losses.
  void resumedRunIsBitwiseTheUninterruptedOne_data() {
    QTest::addColumn<QStringList>("loss");
    QTest::newRow("default loss") << QStringList{};
    QTest::newRow("focal_dice, class weights, background")
        << QStringList{"--set", "loss.kind=focal_dice", "--set", "loss.class_weights=[0.5, 2]",
                       "--set", "loss.dice_weight=0.7", "--set", "loss.dice_include_background=true",
                       "--set", "loss.focal_gamma=1.5", "--set", "loss.ignore_index=255"};
  }
  void resumedRunIsBitwiseTheUninterruptedOne() {
    QFETCH(QStringList, loss);
    QTemporaryDir dir;
    test::LogWatch log;
    // 10 steps straight, against 5 steps, a new process, and 5 more (across an epoch boundary mid-way).
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=10", "--set", "checkpoint.dir=straight"} + tiny + loss,
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train(
        QStringList{"train", "--set", "train.steps=5", "--set", "checkpoint.dir=resumed"} + tiny + loss,
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const Checkpoint half = load_checkpoint((dir.path() + "/resumed/last.safetensors").toStdString());
    QCOMPARE(half.position.step, 5);
    QCOMPARE(half.position.epoch, 1);
    QCOMPARE(half.position.epoch_step, 1);
    if (!loss.isEmpty()) {
      QVERIFY(half.config.loss.kind == LossKind::focal_dice);
      QCOMPARE(half.config.loss.class_weights, (std::vector<double>{0.5, 2}));
      QCOMPARE(half.config.loss.dice_weight, 0.7);
    }
    r = test::unet_train({"train", "--resume", "resumed/last.safetensors", "--set", "train.steps=10"},
                         dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("resuming at step 5"), qPrintable(r.out));

    const Checkpoint a = load_checkpoint((dir.path() + "/straight/last.safetensors").toStdString());
    const Checkpoint b = load_checkpoint((dir.path() + "/resumed/last.safetensors").toStdString());
    QCOMPARE(b.position.step, 10);
    QCOMPARE(b.parameters, a.parameters);
    QCOMPARE(b.adam_m, a.adam_m);
    QCOMPARE(b.adam_v, a.adam_v);
    QCOMPARE(b.position, a.position);
    QVERIFY(b.config.loss == a.config.loss);
    // The same losses step by step: the same samples, augmentations and arithmetic.
    const auto sa = steps_of(dir.path() + "/straight/metrics.jsonl");
    const auto sb = steps_of(dir.path() + "/resumed/metrics.jsonl");
    QCOMPARE(sa.size(), std::size_t{10});
    QCOMPARE(sb.size(), std::size_t{10});
    for (std::size_t i = 0; i < 10; ++i)
      QCOMPARE(sb[i].at("loss").get<double>(), sa[i].at("loss").get<double>());
  }

  // A checkpoint whose run trained on a GPU (its config says cuda:0) resumes on the CPU and continues as the
  // uninterrupted run: the file holds no device state. Without a device choice, a machine without that GPU
  // says how to resume elsewhere (exit code 2) rather than failing on the device.
  void checkpointFromAGpuRunResumesOnTheCpu() {
    QTemporaryDir dir;
    test::LogWatch log;
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=8", "--set", "checkpoint.dir=straight"} + tiny,
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train(QStringList{"train", "--set", "train.steps=4", "--set", "checkpoint.dir=gpu"} + tiny,
                         dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    // As a cuda:0 run would have saved it.
    const std::string half = (dir.path() + "/gpu/last.safetensors").toStdString();
    Checkpoint from_gpu = load_checkpoint(half);
    from_gpu.config.devices = {{DeviceKind::cuda, 0}};
    save_checkpoint(half, from_gpu);

    if (!test::device_listed("cuda:0")) {
      r = test::unet_train({"train", "--resume", "gpu/last.safetensors", "--set", "train.steps=8"},
                           dir.path());
      QCOMPARE(r.code, 2);
      QVERIFY2(r.err.contains("was trained on cuda:0, which this machine does not offer") &&
                   r.err.contains("--set 'devices=[\"cpu\"]'"),
               qPrintable(r.err));
    }
    r = test::unet_train(
        {"train", "--resume", "gpu/last.safetensors", "--set", "train.steps=8", "--set", "devices=[\"cpu\"]"},
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const Checkpoint a = load_checkpoint((dir.path() + "/straight/last.safetensors").toStdString());
    const Checkpoint b = load_checkpoint(half);
    QCOMPARE(b.position, a.position);
    QCOMPARE(b.parameters, a.parameters);
    QCOMPARE(b.adam_m, a.adam_m);
    QCOMPARE(b.adam_v, a.adam_v);
  }

  void savedOnThreeReplicasResumesOnOne() {
    QTemporaryDir dir;
    test::LogWatch log;
    const QStringList three = {"--set", "devices=[\"cpu:0\",\"cpu:1\",\"cpu:2\"]", "--set",
                               "train.batch_size=7"};
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=10", "--set", "checkpoint.dir=three"} + tiny + three,
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train(
        QStringList{"train", "--set", "train.steps=5", "--set", "checkpoint.dir=mixed"} + tiny + three,
        dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train({"train", "--resume", "mixed/last.safetensors", "--set", "train.steps=10", "--set",
                          "devices=[\"cpu:0\"]"},
                         dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("cpu:0") && !r.out.contains("cpu:1"), qPrintable(r.out));
    const Checkpoint a = load_checkpoint((dir.path() + "/three/last.safetensors").toStdString());
    const Checkpoint b = load_checkpoint((dir.path() + "/mixed/last.safetensors").toStdString());
    const double e = test::norm_relative_error(a.parameters, b.parameters);
    qInfo("R=3 continued vs R=3 -> R=1 resumed: weights relative error %.3g", e);
    QVERIFY2(e <= 1e-5, qPrintable(QString("relative error %1").arg(e)));
    QVERIFY(test::norm_relative_error(a.adam_v, b.adam_v) <= 1e-4);
  }

  void resumeRefusesAnotherModel() {
    QTemporaryDir dir;
    test::LogWatch log;
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=run"} + tiny, dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train({"train", "--resume", "run/last.safetensors", "--set", "model.width=8"}, dir.path());
    log.record_output(r.err);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("model.width: the checkpoint's model has 4, the config 8"), qPrintable(r.err));
    r = test::unet_train({"train", "--resume", "run/missing.safetensors"}, dir.path());
    log.record_output(r.err);
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("missing.safetensors"), qPrintable(r.err));
  }

  void killedWhileSavingLeavesAWholeCheckpoint() {
    QTemporaryDir dir;
    const QString path = dir.filePath("model.safetensors");
    std::mt19937 rng(5);
    int interrupted_saves = 0;
    // The file write is about a fifth of a save, at its end: kills at random moments of a whole save land
    // inside a write many times in 60 rounds. How long a save takes depends on the machine and its load
    // (~110 ms on an idle two-core one, more while other tests run), so each round measures it.
    for (int round = 0; round < 60; ++round) {
      QProcess child;
      child.start(UNET_CRASH_CHILD_BINARY, {path});
      QVERIFY(child.waitForStarted());
      // Let it commit twice (within a minute): the time between the two is a save. Then kill it at a random
      // moment of the next one.
      QByteArray out;
      QDeadlineTimer deadline(60000);
      QElapsedTimer since_first_save;
      while (out.count("saved") < 2 && !deadline.hasExpired() &&
             child.waitForReadyRead(deadline.remainingTime())) {
        out += child.readAllStandardOutput();
        if (out.contains("saved") && !since_first_save.isValid()) since_first_save.start();
      }
      QVERIFY2(out.count("saved") >= 2, "the child did not save twice within a minute");
      const auto save_us = static_cast<int>(std::max<qint64>(since_first_save.nsecsElapsed() / 1000, 110000));
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, save_us)(rng)));
      ::kill(static_cast<pid_t>(child.processId()), SIGKILL);
      QVERIFY(child.waitForFinished(60000));
      const Checkpoint c = load_checkpoint(path.toStdString());  // throws if the file is not whole
      const float v = c.parameters.front();
      QVERIFY(v == 1.0f || v == 2.0f);
      QVERIFY(
          std::all_of(c.parameters.begin(), c.parameters.begin() + 1000, [&](float x) { return x == v; }));
      QCOMPARE(c.parameters.front() == 1.0f, c.position.step % 2 == 0);
      interrupted_saves += static_cast<int>(remove_stale_temp_files(dir.path().toStdString()).size());
    }
    qInfo("%d of 60 kills landed inside a save", interrupted_saves);
    QVERIFY2(interrupted_saves > 0, "no kill interrupted a save: the test did not test anything");
  }

  void failedSaveIsReportedAndTrainingGoesOn() {
    QTemporaryDir dir;
    // last.safetensors cannot replace a folder of that name: every save of it fails.
    QVERIFY(QDir(dir.path()).mkpath("last.safetensors/occupied"));
    Errors observed;
    observed.expect_warning("checkpoint not saved (training goes on)");
    Trainer trainer(small_config(dir.path(), 2), &observed);
    // Training goes on to its end; then the run fails, naming the checkpoint it could not save.
    try {
      trainer.run();
      QFAIL("a run that could not save last.safetensors ended as if it had");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::io);
      QVERIFY2(QString(e.what()).contains("last.safetensors") && QString(e.what()).contains("not saved"),
               e.what());
    }
    QCOMPARE(trainer.state(), TrainerState::failed);
    QCOMPARE(trainer.snapshot().position.step, 8);  // both epochs trained
    QVERIFY(!observed.errors.empty());
    for (const auto& e : observed.errors) {
      QVERIFY2(QString::fromStdString(e.message).contains("last.safetensors"), e.message.c_str());
      QCOMPARE(e.fatal, &e == &observed.errors.back());
    }
    // The other checkpoints were written and reported.
    QVERIFY(QFile::exists(dir.filePath("best.safetensors")));
    QCOMPARE(QDir(dir.path()).entryList({"unet-*.safetensors"}, QDir::Files).size(), 2);  // epochs 1 and 2
    QVERIFY(!observed.saved.empty());
    for (const auto& s : observed.saved) QVERIFY(QFile::exists(QString::fromStdString(s.path)));
  }

  void periodicBestAndKeepLast() {
    QTemporaryDir dir;
    Config c = small_config(dir.path(), 5);
    c.checkpoint.filename_template = "e{epoch:02d}-s{step}-{val_loss:.3f}.safetensors";
    c.checkpoint.keep_last = 2;
    Errors observed;
    Trainer trainer(c, &observed);
    trainer.run();
    QVERIFY(observed.errors.empty());
    QStringList periodic = QDir(dir.path()).entryList({"e*.safetensors"}, QDir::Files, QDir::Name);
    QCOMPARE(periodic.size(), 2);  // epochs 4 and 5 of 5
    QVERIFY2(periodic[0].startsWith("e04-s16-") && periodic[1].startsWith("e05-s20-"),
             qPrintable(periodic.join(",")));
    // best.safetensors holds the epoch with the lowest val_loss.
    double lowest = INFINITY;
    std::int64_t lowest_step = -1;
    std::ifstream in((dir.path() + "/metrics.jsonl").toStdString());
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("kind") == "epoch" && j.at("val_loss").get<double>() < lowest)
        lowest = j.at("val_loss").get<double>(), lowest_step = j.at("step").get<std::int64_t>();
    }
    const Checkpoint best = load_checkpoint((dir.path() + "/best.safetensors").toStdString());
    QCOMPARE(best.position.step, lowest_step);
    QCOMPARE(best.position.metrics.at("val_loss").get<double>(), lowest);
    QCOMPARE(load_checkpoint((dir.path() + "/last.safetensors").toStdString()).position.step, 20);
    // The name carries the metric as the template says.
    const Checkpoint fifth = load_checkpoint((dir.path() + "/" + periodic[1]).toStdString());
    char expected[64];
    std::snprintf(expected, sizeof expected, "e05-s20-%.3f.safetensors",
                  fifth.position.metrics.at("val_loss").get<double>());
    QCOMPARE(periodic[1].toStdString(), std::string(expected));
  }

  void saveBestOnlyWritesImprovementsOnly() {
    QTemporaryDir dir;
    Config c = small_config(dir.path(), 6);
    c.checkpoint.save_best_only = true;
    c.checkpoint.monitor = "val_iou";
    c.checkpoint.keep_last = 0;
    c.checkpoint.filename_template = "iou-{epoch:02d}-{val_iou:.4f}.safetensors";
    test::WatchedObserver watch;
    Trainer trainer(c, &watch);
    trainer.run();
    // Expected: the epochs whose val_iou beat every earlier one.
    QStringList expected;
    double best = -INFINITY;
    std::ifstream in((dir.path() + "/metrics.jsonl").toStdString());
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("kind") != "epoch" || !(j.at("val_iou").get<double>() > best)) continue;
      best = j.at("val_iou").get<double>();
      char name[64];
      std::snprintf(name, sizeof name, "iou-%02d-%.4f.safetensors", j.at("epoch").get<int>(), best);
      expected << name;
    }
    QCOMPARE(QDir(dir.path()).entryList({"iou-*.safetensors"}, QDir::Files, QDir::Name), expected);
  }

  void removesTempFilesOfAnInterruptedSave() {
    QTemporaryDir dir;
    const QString stale = dir.filePath(".last.safetensors.tmp-0123456789ab");
    std::ofstream(stale.toStdString()) << "half a checkpoint";
    Config c = small_config(dir.path(), 1);
    c.train.steps = 1;
    test::WatchedObserver watch;
    Trainer trainer(c, &watch);
    trainer.run();
    QVERIFY(!QFile::exists(stale));
    QVERIFY(QFile::exists(dir.filePath("last.safetensors")));
  }
};

QTEST_GUILESS_MAIN(TestResume)
#include "test_resume.moc"
