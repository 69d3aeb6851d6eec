// unet-train as a user runs it: exit codes, messages that name the key or file, --set, the devices and
// summary outputs, and a short training run that writes metrics.jsonl.
#include <QProcess>
#include <QTemporaryDir>

#include <fstream>

#include "test_support.h"
#include "unet/distributed/mpi_group.h"
#include "unet/io/checkpoint.h"
#include "unet/model/unet.h"

using namespace unet;

namespace {

const QStringList tiny = {"--set", "model.width=4",           "--set", "model.depth=2",
                          "--set", "data.image_size=[32,32]", "--set", "data.synthetic_samples=24",
                          "--set", "train.epochs=1"};

}  // namespace

class TestCli : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  void badUsageExitsWithTwo_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("no command") << QStringList{} << "usage: unet-train";
    QTest::newRow("unknown command") << QStringList{"frobnicate"} << "unknown command 'frobnicate'";
    QTest::newRow("unknown option") << QStringList{"summary", "--fast"} << "unknown option '--fast'";
    QTest::newRow("missing value") << QStringList{"summary", "--set"} << "--set needs a value";
    QTest::newRow("bad value") << QStringList{"summary", "--set", "train.batch_size=0"}
                               << "train.batch_size: must be in 1..65536, got 0";
    QTest::newRow("unknown key") << QStringList{"summary", "--set", "train.batchsize=4"}
                                 << "train.batchsize: unknown key (did you mean train.batch_size?)";
    QTest::newRow("no equals") << QStringList{"summary", "--set", "train.batch_size"} << "expected key=value";
    QTest::newRow("missing config") << QStringList{"summary", "--config", "/nonexistent/x.json"}
                                    << "/nonexistent/x.json: the config file does not exist";
    QTest::newRow("bad device") << QStringList{"summary", "--set", "devices=[\"gpu:0\"]"} << "devices:";
    // An option the command does not take is refused, not ignored, and the commands that take it are named.
    QTest::newRow("option of other commands")
        << QStringList{"train", "--json"}
        << "--json: train does not take --json (devices, estimate, fit, "
           "summary do)";
    QTest::newRow("predict's option to export")
        << QStringList{"export", "--checkpoint", "a", "--out", "b", "--tta", "flips"}
        << "--tta: export does not take --tta (predict does)";
    QTest::newRow("format to predict") << QStringList{"predict", "--format", "onnx"}
                                       << "--format: predict does not take --format (export does)";
    QTest::newRow("a config to devices")
        << QStringList{"devices", "--config", "x.json"} << "--config: devices does not take --config";
  }
  void badUsageExitsWithTwo() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const test::ProcessResult r = test::unet_train(args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
  }

  void configFileErrorsNameTheFileAndKey() {
    QTemporaryDir dir;
    const QString file = dir.filePath("run.json");
    std::ofstream(file.toStdString()) << "{\"train\": {\"lr\": -1}}";
    test::ProcessResult r = test::unet_train({"summary", "--config", file});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("train.lr: must be > 0, got -1") && r.err.contains(file), qPrintable(r.err));
    std::ofstream(file.toStdString()) << "{\"train\": {\n \"lr\": }";
    r = test::unet_train({"summary", "--config", file});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(file) && r.err.contains("line 2"), qPrintable(r.err));
    // --set wins over the file.
    std::ofstream(file.toStdString()) << "{\"train\": {\"batch_size\": 4}}";
    r = test::unet_train({"summary", "--config", file, "--json", "--set", "train.batch_size=2"});
    QCOMPARE(r.code, 0);
    QCOMPARE(nlohmann::json::parse(r.out.toStdString()).at("batch_per_device").get<int>(), 2);
  }

  void devicesAsJson() {
    const test::ProcessResult r = test::unet_train({"devices", "--json"});
    QCOMPARE(r.code, 0);
    const auto j = nlohmann::json::parse(r.out.toStdString());
    QCOMPARE(j.at("devices").at(0).at("id").get<std::string>(), std::string("cpu:0"));
    QCOMPARE(j.at("devices").at(0).at("kind").get<std::string>(), std::string("cpu"));
    QVERIFY(j.at("devices").at(0).at("total_bytes").get<std::int64_t>() > 0);
    QVERIFY(j.at("devices").at(0).at("free_bytes").get<std::int64_t>() <=
            j.at("devices").at(0).at("total_bytes").get<std::int64_t>());
    // NVML's attribution concerns GPUs only: the CPU's is never "not attributable".
    QCOMPARE(j.at("devices").at(0).at("used_by_others_not_attributable").get<bool>(), false);
    // The devices, and the reason CUDA is unavailable (null when it is), that the engine's own probe gives.
    const DeviceListing probe = list_devices();
    QCOMPARE(j.at("devices").size(), probe.devices.size());
    for (std::size_t i = 0; i < probe.devices.size(); ++i)
      QCOMPARE(j.at("devices").at(i).at("id").get<std::string>(), probe.devices[i].id);
    if (probe.cuda_unavailable_reason.empty())
      QVERIFY(j.at("cuda_unavailable_reason").is_null());
    else
      QCOMPARE(j.at("cuda_unavailable_reason").get<std::string>(), probe.cuda_unavailable_reason);
    // mpirun launches where the MPI module loads, and the listing says what the engine's own loader says.
    const std::string mpi = mpi_problem();
    QCOMPARE(j.at("launchers").at("mpirun").get<bool>(), mpi.empty());
    if (mpi.empty())
      QVERIFY(j.at("launchers").at("mpirun_problem").is_null());
    else
      QCOMPARE(j.at("launchers").at("mpirun_problem").get<std::string>(), mpi);
    QVERIFY(j.at("launchers").at("torchrun_style").get<bool>());
  }

  // A machine without the MPI module (here: pointed elsewhere) says that mpirun cannot launch runs, and why.
  void devicesSayWhyMpirunCannotLaunch() {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("UNET_MPI_MODULE", "/nonexistent/libunet_mpi.so");
    p.setProcessEnvironment(env);
    p.start(UNET_TRAIN_BINARY, {"devices"});
    QVERIFY(p.waitForFinished(60000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(out.contains(
                 "Several processes: launched by srun or with torchrun-style variables; not by mpirun: ") &&
                 out.contains("/nonexistent/libunet_mpi.so"),
             qPrintable(out));
  }

  // Issue 25, item 5: `fit` stops at the training set and says so: 30 images, a fifth for validation, leave
  // 24 to train on, which a model this small holds many times over; --json names the limit.
  void fitSaysWhichLimitApplied() {
    const QStringList small = {"--set", "model.width=4",           "--set", "model.depth=2",
                               "--set", "data.image_size=[32,32]", "--set", "data.synthetic_samples=30",
                               "--set", "data.val_fraction=0.2"};
    const test::ProcessResult r = test::unet_train(QStringList{"fit"} + small);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("largest global batch that fits: 24 "), qPrintable(r.out));
    QVERIFY2(r.out.contains("\nbatch 24: the training set has 24 images\n"), qPrintable(r.out));
    QVERIFY2(r.out.contains("cpu:0    alone: 24"), qPrintable(r.out));
    const test::ProcessResult j = test::unet_train(QStringList{"fit", "--json"} + small);
    QVERIFY2(j.code == 0, qPrintable(j.err));
    const auto fit = nlohmann::json::parse(j.out.toStdString());
    QCOMPARE(fit["global_batch"].get<int>(), 24);
    QCOMPARE(fit["limit"].get<std::string>(), std::string("training_set"));
    QCOMPARE(fit["training_samples"].get<int>(), 24);
    QCOMPARE(fit["reason"].get<std::string>(), std::string("batch 24: the training set has 24 images"));
  }

  // Issue 26, item 6: in patch mode `fit` fits the patch and the batch: with memory to spare the largest
  // image (32 x 32) bounds the patch and the batch is kept, with the flags that take them; `estimate` says
  // it planned the patch.
  void fitAndEstimateInPatchMode() {
    const QStringList patches = {"--set", "model.width=4",           "--set", "model.depth=2",
                                 "--set", "data.image_size=[32,32]", "--set", "data.mode=patch",
                                 "--set", "data.patch_size=[16,16]", "--set", "train.batch_size=4"};
    const test::ProcessResult r = test::unet_train(QStringList{"fit"} + patches);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(
        r.out.startsWith("largest patch that fits: 32x32 with batch 4 (data.patch_size, train.batch_size)\n"
                         "patch 32x32, batch 4 (yours): the patch covers the largest training image "
                         "(32x32)\n  --set 'data.patch_size=[32,32]' --set train.batch_size=4\n"
                         "searched in 1 plan\n"),
        qPrintable(r.out));
    const test::ProcessResult j = test::unet_train(QStringList{"fit", "--json"} + patches);
    QVERIFY2(j.code == 0, qPrintable(j.err));
    const auto fit = nlohmann::json::parse(j.out.toStdString());
    QCOMPARE(fit["patch_size"], nlohmann::json({32, 32}));
    QCOMPARE(fit["batch_size"].get<int>(), 4);
    QCOMPARE(fit["batch_kept"].get<bool>(), true);
    QCOMPARE(fit["limit"].get<std::string>(), std::string("largest_image"));
    QCOMPARE(fit["plans"].get<int>(), 1);
    const test::ProcessResult e = test::unet_train(QStringList{"estimate"} + patches);
    QVERIFY2(e.code == 0, qPrintable(e.err));
    QVERIFY2(e.out.startsWith("patch 16x16 (data.mode patch: each step trains on data.patch_size crops)\n"),
             qPrintable(e.out));
  }

  void summaryCountsParametersAndActivations() {
    const test::ProcessResult r = test::unet_train({"summary", "--json"});
    QCOMPARE(r.code, 0);
    const auto j = nlohmann::json::parse(r.out.toStdString());
    // The demo model: width 16, depth 4, RGB in, one class.
    QCOMPARE(j.at("parameters").get<std::int64_t>(), 1941105);
    std::int64_t params = 0, activations = 0;
    for (const auto& l : j.at("layers")) {
      params += l.at("parameters").get<std::int64_t>();
      activations += l.at("activation_bytes").get<std::int64_t>();
    }
    QCOMPARE(params, j.at("parameters").get<std::int64_t>());
    QCOMPARE(activations, j.at("activation_bytes").get<std::int64_t>());
    const auto& head = j.at("layers").back();
    QCOMPARE(head.at("name").get<std::string>(), std::string("head"));
    QCOMPARE(head.at("output_shape"), nlohmann::json({8, 1, 128, 128}));
    // Text form.
    const test::ProcessResult text = test::unet_train({"summary", "--set", "model.separable=true"});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("separable3x3+relu") && text.out.contains("total:"));
  }

  void trainsAndWritesMetrics() {
    QTemporaryDir dir;
    test::LogWatch log;
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--set", "checkpoint.dir=run"} + tiny, dir.path());
    log.record_output(r.err);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("epoch 1/1: loss"), qPrintable(r.out));
    std::ifstream in((dir.path() + "/run/metrics.jsonl").toStdString());
    std::string line;
    int epochs = 0;
    while (std::getline(in, line)) epochs += nlohmann::json::parse(line).at("kind") == "epoch";
    QCOMPARE(epochs, 1);
  }

  void initWritesTheInitialModel() {
    QTemporaryDir dir;
    const QString out = dir.filePath("init.safetensors");
    const test::ProcessResult r =
        test::unet_train({"init", "--set", "model.width=4", "--set", "train.seed=7", "--out", out});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const unet::Checkpoint c = unet::load_checkpoint(out.toStdString());
    QCOMPARE(c.position.step, 0);
    QCOMPARE(c.config.model.width, 4);
    unet::UNetSpec spec;
    spec.width = 4;
    QCOMPARE(c.parameters, unet::UNet::initial_slab(spec, 7));
    QCOMPARE(c.adam_m, std::vector<float>(c.parameters.size(), 0.0f));
    // --out is required; an unwritable place is a runtime failure that names it.
    QCOMPARE(test::unet_train({"init"}).code, 2);
    const test::ProcessResult bad = test::unet_train({"init", "--out", "/nonexistent-folder/x.safetensors"});
    QCOMPARE(bad.code, 1);
    QVERIFY2(bad.err.contains("/nonexistent-folder/x.safetensors"), qPrintable(bad.err));
  }

  void exportWritesWeightsOnly() {
    QTemporaryDir dir;
    const QString full = dir.filePath("full.safetensors"), weights = dir.filePath("weights.safetensors");
    QCOMPARE(test::unet_train({"init", "--set", "model.width=4", "--out", full}).code, 0);
    const test::ProcessResult r = test::unet_train({"export", "--checkpoint", full, "--out", weights});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const unet::Checkpoint a = unet::load_checkpoint(full.toStdString()),
                           b = unet::load_checkpoint(weights.toStdString());
    QCOMPARE(b.parameters, a.parameters);
    QVERIFY(b.adam_m.empty() && b.adam_v.empty());
    QVERIFY(!unet::inspect_checkpoint(weights.toStdString()).has_optimizer);
    QVERIFY(QFileInfo(weights).size() < QFileInfo(full).size() / 2);
    QCOMPARE(test::unet_train({"export", "--out", weights}).code, 2);
  }

  // Training on cuda:0 where the engine's device probe does not list it is a runtime failure (exit code 1)
  // that names the device and the probe's reason; where the probe lists it, the same run trains.
  void cudaTrainsOrExitsWithOneSayingWhy() {
    QTemporaryDir dir;
    test::LogWatch log;
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--set", "devices=[\"cuda:0\"]"} + tiny, dir.path());
    log.record_output(r.err);
    if (test::device_listed("cuda:0")) {
      QVERIFY2(r.code == 0, qPrintable(r.err));
      return;
    }
    const QString reason = QString::fromStdString(list_devices().cuda_unavailable_reason);
    QVERIFY(!reason.isEmpty());
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("cuda:0") && r.err.contains(reason), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
