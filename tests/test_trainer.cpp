// The training loop: metrics from counts, metrics.jsonl, the observer's events, pause/resume/stop and
// checkpoint requests from another thread, step limits, and that the whole loop gives the same model on one
// or three replicas.
#include <QTemporaryDir>

#include <atomic>
#include <fstream>
#include <thread>

#include "test_support.h"
#include "unet/io/checkpoint.h"
#include "unet/train/data_plan.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

// A small, fast run: 40 synthetic 32x32 images, a width-4 depth-2 U-Net.
Config small_config(const QString& dir) {
  nlohmann::json j = {{"model", {{"width", 4}, {"depth", 2}}},
                      {"data", {{"image_size", {32, 32}}, {"synthetic_samples", 40}, {"val_fraction", 0.2}}},
                      {"train", {{"epochs", 2}, {"batch_size", 8}}},
                      {"checkpoint", {{"dir", dir.toStdString()}}}};
  return config_from_json(j);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

struct Recorder final : TrainerObserver {
  std::vector<TrainerState> states;
  std::vector<StepReport> steps;
  std::vector<EpochReport> epochs;
  std::vector<RunInfo> starts;
  std::atomic<int> step_count{0};  // read by other threads
  std::function<void(const StepReport&)> after_step;
  void on_start(const RunInfo& i) override { starts.push_back(i); }
  void on_state(TrainerState s) override { states.push_back(s); }
  void on_step(const StepReport& r) override {
    steps.push_back(r);
    ++step_count;
    if (after_step) after_step(r);
  }
  void on_epoch(const EpochReport& r) override { epochs.push_back(r); }
};

}  // namespace

class TestTrainer : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void metricsFromCountsByHand() {
    // binary: class 1 tp 6, fp 2, fn 4 -> IoU 6/12, Dice 12/18; correct 90 of 100
    const std::vector<std::int64_t> binary{88, 4, 2, 6, 2, 4, 90, 100};
    const SegmentationMetrics b = segmentation_metrics(binary, 1);
    QCOMPARE(b.iou, 0.5);
    QCOMPARE(b.dice, 12.0 / 18.0);
    QCOMPARE(b.accuracy, 0.9);
    // 3 classes: IoU of class 1 = 2/4, class 2 absent everywhere = 1 -> mean 0.75; Dice 4/6 and 1
    const std::vector<std::int64_t> multi{5, 1, 1, 2, 1, 1, 0, 0, 0, 7, 9};
    const SegmentationMetrics m = segmentation_metrics(multi, 3);
    QCOMPARE(m.iou, 0.75);
    QCOMPARE(m.dice, (4.0 / 6.0 + 1.0) / 2);
  }

  void writesMetricsAndReportsEvents() {
    QTemporaryDir dir;
    Recorder rec;
    Trainer trainer(small_config(dir.path()), &rec);
    trainer.run();
    // 32 training images, batch 8: 4 steps per epoch, 2 epochs.
    QCOMPARE(rec.starts.size(), std::size_t{1});
    QCOMPARE(rec.starts[0].train_samples, 32);
    QCOMPARE(rec.starts[0].val_samples, 8);
    QCOMPARE(rec.starts[0].steps_per_epoch, 4);
    QCOMPARE(rec.steps.size(), std::size_t{8});
    QCOMPARE(rec.steps.back().step, 8);
    // At the last step only the final validation is left.
    QVERIFY(rec.steps.back().eta_seconds >= 0 &&
            rec.steps.back().eta_seconds < rec.steps.front().eta_seconds);
    QCOMPARE(rec.epochs.size(), std::size_t{2});
    QCOMPARE(rec.epochs[1].epoch, 2);
    QCOMPARE(rec.epochs[1].step, 8);
    QCOMPARE(rec.states.front(), TrainerState::preparing);
    QCOMPARE(rec.states.back(), TrainerState::finished);
    QCOMPARE(trainer.state(), TrainerState::finished);

    const auto lines = read_jsonl((dir.path() + "/metrics.jsonl").toStdString());
    int steps = 0, epochs = 0, memory = 0;
    for (const auto& l : lines) {
      const std::string kind = l.at("kind");
      if (kind == "step") {
        ++steps;
        for (const char* k : {"step", "epoch", "loss", "lr", "img_per_s", "loss_scale"})
          QVERIFY2(l.contains(k), k);
        QCOMPARE(l.at("step").get<int>(), steps);
        QCOMPARE(l.at("lr").get<double>(), 1e-3);
      } else if (kind == "epoch") {
        ++epochs;
        for (const char* k :
             {"epoch", "step", "loss", "val_loss", "val_iou", "val_dice", "val_acc", "seconds"})
          QVERIFY2(l.contains(k), k);
        QVERIFY(l.at("val_iou").get<double>() >= 0 && l.at("val_iou").get<double>() <= 1);
      } else if (kind == "memory") {
        ++memory;
        for (const char* k :
             {"t", "device", "in_use", "reserved", "peak", "device_used", "device_total", "by_category"})
          QVERIFY2(l.contains(k), k);
        QCOMPARE(l.at("device").get<std::string>(), std::string("cpu:0"));
        QVERIFY(l.at("by_category").at("parameters").get<std::int64_t>() >=
                4 * rec.starts[0].parameter_count);
      }
    }
    QCOMPARE(steps, 8);
    QCOMPARE(epochs, 2);
    QVERIFY(memory >= 2);
    // The epoch's validation numbers are those reported to the observer.
    QCOMPARE(lines.back().is_object(), true);
  }

  void stepLimitOverridesEpochs() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.train.steps = 6;  // one and a half epochs
    Recorder rec;
    Trainer trainer(c, &rec);
    trainer.run();
    QCOMPARE(rec.steps.size(), std::size_t{6});
    // Validation after the full epoch, and after the last (partial) one.
    QCOMPARE(rec.epochs.size(), std::size_t{2});
    QCOMPARE(rec.epochs[0].step, 4);
    QCOMPARE(rec.epochs[1].step, 6);
    QCOMPARE(trainer.snapshot().step, 6);
    QCOMPARE(trainer.snapshot().epoch_step, 2);
  }

  void oneAndThreeReplicasTrainTheSameModel() {
    QTemporaryDir a, b;
    Config one = small_config(a.path()), three = small_config(b.path());
    one.train.batch_size = three.train.batch_size = 7;  // uneven: 3 + 2 + 2
    three.devices = {"cpu:0", "cpu:1", "cpu:2"};
    Trainer t1(one), t3(three);
    t1.run();
    t3.run();
    const double e = test::norm_relative_error(t1.snapshot().parameters, t3.snapshot().parameters);
    qInfo("trainer R=1 vs R=3 weights relative error %.3g", e);
    QVERIFY2(e <= 1e-5, qPrintable(QString("relative error %1").arg(e)));
  }

  void commandsFromAnotherThread() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.train.epochs = 50;  // long enough to be stopped
    Recorder rec;
    Trainer trainer(c, &rec);
    std::atomic<bool> paused_seen{false};
    rec.after_step = [&](const StepReport& r) {
      if (r.step == 2) trainer.pause();  // takes effect before step 3
    };
    std::thread controller([&] {
      while (trainer.state() != TrainerState::paused)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      paused_seen = true;
      trainer.request_checkpoint();  // served while paused
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      trainer.resume();
      while (rec.step_count < 5) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      trainer.stop();
    });
    trainer.run();
    controller.join();
    QVERIFY(paused_seen);
    QCOMPARE(trainer.state(), TrainerState::stopped);
    QVERIFY(rec.steps.size() >= 5 && rec.steps.size() < 50 * 4);
    // The save requested while paused holds the model of step 2; the run's end wrote last.safetensors.
    const Checkpoint requested =
        load_checkpoint((dir.path() + "/manual-step-000002.safetensors").toStdString());
    QCOMPARE(requested.position.step, 2);
    QCOMPARE(requested.position.epoch_step, 2);
    const Checkpoint last = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(last.position.step, trainer.snapshot().step);
    QCOMPARE(last.parameters, trainer.snapshot().parameters);
    QCOMPARE(last.adam_v, trainer.snapshot().adam_v);
    const auto paused_at = std::find(rec.states.begin(), rec.states.end(), TrainerState::paused);
    QVERIFY(paused_at != rec.states.end());
    QCOMPARE(*(paused_at + 1), TrainerState::running);
  }

  void predictsValidationSamplesEachEpoch() {
    QTemporaryDir dir;
    struct Predictions final : TrainerObserver {
      std::vector<PredictionsReport> reports;
      void on_predictions(const PredictionsReport& r) override { reports.push_back(r); }
    } observed;
    TrainerOptions options;
    options.prediction_samples = 3;
    Trainer trainer(small_config(dir.path()), &observed, options);
    trainer.run();
    QCOMPARE(observed.reports.size(), std::size_t{2});  // one per epoch
    QCOMPARE(observed.reports[1].epoch, 2);
    const auto dataset = make_dataset(small_config(dir.path()));
    const DataSplit split = split_dataset(dataset->size(), 0.2, 0);
    for (const PredictionsReport& r : observed.reports) {
      QCOMPARE(r.samples.size(), std::size_t{3});
      for (std::size_t i = 0; i < 3; ++i) {
        const PredictionSample& p = r.samples[i];
        QCOMPARE(p.height, 32);
        QCOMPARE(p.classes, 1);
        QCOMPARE(p.probabilities.size(), std::size_t{32 * 32});
        QVERIFY(std::all_of(p.probabilities.begin(), p.probabilities.end(),
                            [](float v) { return v >= 0 && v <= 1; }));
        // The first validation samples, unaugmented.
        const Sample truth = dataset->get(split.val[i]);
        QCOMPARE(p.image, truth.image);
        QCOMPARE(p.mask, truth.mask);
      }
    }
  }

  void refusesWhatItCannotDo() {
    QTemporaryDir dir;
    Config cuda = small_config(dir.path());
    cuda.devices = {"cuda:0"};
    Recorder rec;
    Trainer t(cuda, &rec);
    try {
      t.run();
      QFAIL("trained on cuda:0 without CUDA");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QCOMPARE(e.device(), std::string("cuda:0"));
    }
    QCOMPARE(t.state(), TrainerState::failed);
  }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "test_trainer.moc"
