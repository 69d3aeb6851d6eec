// The training loop: metrics from counts, metrics.jsonl, the observer's events, pause/resume/stop and
// checkpoint requests from another thread, step limits, and that the whole loop gives the same model on one
// or three replicas.
#include <QDir>
#include <QTemporaryDir>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include "fault_injecting_backend.h"
#include "test_support.h"
#include "unet/data/synthetic.h"
#include "unet/infer/predictor.h"
#include "unet/io/checkpoint.h"
#include "unet/objects/threshold_search.h"
#include "unet/step/data_parallel.h"
#include "unet/step/data_plan.h"
#include "unet/step/step_options.h"
#include "unet/train/metrics_log.h"
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

// The validation samples of `c`, as the trainer splits them, with the Predictor's probabilities for each.
struct PredictedValidation {
  std::vector<std::vector<std::uint8_t>> masks;
  std::vector<Prediction> predicted;
};
PredictedValidation predict_validation(const Config& c, const std::vector<float>& parameters) {
  const auto dataset = make_dataset(c);
  const DataSplit split = split_dataset(dataset->size(), c.data.val_fraction, c.data.seed);
  std::vector<Image> images;
  std::vector<std::string> names;
  std::vector<std::vector<std::uint8_t>> masks;
  for (const std::size_t i : split.val) {
    Sample s = dataset->get(i);
    images.push_back(eight_bit_image(s));
    names.push_back(s.source);
    masks.push_back(std::move(s.mask));
  }
  PredictedValidation v;
  v.predicted = Predictor(c, parameters, DeviceId{}).predict(images, names);
  v.masks = std::move(masks);
  return v;
}

// The loss, IoU, Dice and accuracy of a binary model on the validation set of `c`, computed here from what
// the Predictor says of each validation image: it shares the model's forward pass with the trainer, but none
// of its batching, loss, counting or averaging.
struct Evaluation {
  double loss = 0, iou = 0, dice = 0, acc = 0;
};
Evaluation evaluate_on_validation(const Config& c, const std::vector<float>& parameters) {
  const auto [masks, predicted] = predict_validation(c, parameters);
  double loss = 0;
  std::int64_t tp = 0, fp = 0, fn = 0, correct = 0, pixels = 0;
  for (std::size_t k = 0; k < predicted.size(); ++k) {
    for (std::size_t p = 0; p < masks[k].size(); ++p) {
      const double probability = predicted[k].probabilities[p];
      const bool truth = masks[k][p] != 0, said = probability > 0.5;  // a logit > 0
      loss -= truth ? std::log(probability) : std::log1p(-probability);
      tp += said && truth;
      fp += said && !truth;
      fn += !said && truth;
      correct += said == truth;
      ++pixels;
    }
  }
  const auto ratio = [](std::int64_t a, std::int64_t b) {
    return b == 0 ? 1.0 : static_cast<double>(a) / static_cast<double>(b);
  };
  return {loss / static_cast<double>(pixels), ratio(tp, tp + fp + fn), ratio(2 * tp, 2 * tp + fp + fn),
          ratio(correct, pixels)};
}

// loss.kind cross_entropy_dice of a binary model on the validation set, from the Predictor's probabilities
// (docs/MODEL.md, "Losses"): cross-entropy's mean over the pixels plus the mean over the images of 1 - soft
// Dice of the foreground (smoothing 1).
double cross_entropy_dice_on_validation(const Config& c, const std::vector<float>& parameters) {
  const auto [masks, predicted] = predict_validation(c, parameters);
  double cross_entropy = 0, dice_loss = 0;
  std::int64_t pixels = 0;
  for (std::size_t k = 0; k < predicted.size(); ++k) {
    double intersection = 0, probability = 0, truth = 0;
    for (std::size_t p = 0; p < masks[k].size(); ++p) {
      const double q = predicted[k].probabilities[p];
      const bool t = masks[k][p] != 0;
      cross_entropy -= t ? std::log(q) : std::log1p(-q);
      intersection += t ? q : 0;
      probability += q;
      truth += t ? 1 : 0;
      ++pixels;
    }
    dice_loss += 1 - (2 * intersection + 1) / (probability + truth + 1);
  }
  return cross_entropy / static_cast<double>(pixels) + dice_loss / static_cast<double>(predicted.size());
}

struct Recorder final : test::WatchedObserver {
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

struct Errors final : test::WatchedObserver {
  std::vector<ErrorReport> errors;
  void on_error(const ErrorReport& e) override { errors.push_back(e); }
};

// Options for a run whose cpu:0 backend turns the loss gradient NaN on the given training steps (one replica,
// no accumulation: loss call k is step k of this Trainer), with `scaling` as its loss-scaling policy.
TrainerOptions poisoned_run(std::set<std::int64_t> poisoned_steps, std::optional<LossScaling> scaling) {
  TrainerOptions o;
  o.loss_scaling = scaling;
  o.make_backend = [poisoned_steps](const DeviceId& id,
                                    const BackendOptions& bo) -> std::unique_ptr<Backend> {
    return std::make_unique<test::FaultInjectingBackend>(create_backend(id, bo), poisoned_steps);
  };
  return o;
}

LossScaling small_dynamic_scaling() {
  return {.dynamic = true,
          .initial_scale = 1024,
          .growth_factor = 2,
          .backoff_factor = 0.5,
          .growth_interval = 3,
          .min_scale = 1};
}

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
    // 3 classes: IoU of class 1 = 2/4; class 2, neither labelled nor predicted, is absent (not 1) and left
    // out of the means: IoU 0.5, Dice 4/6.
    const std::vector<std::int64_t> multi{5, 1, 1, 2, 1, 1, 0, 0, 0, 7, 9};
    const SegmentationMetrics m = segmentation_metrics(multi, 3);
    QCOMPARE(m.iou, 0.5);
    QCOMPARE(m.dice, 4.0 / 6.0);
    // Per class, background first: binary class 0 tp 88, fp 4, fn 2 -> 88/94; multi class 0 tp 5, fp 1, fn 1.
    QCOMPARE(b.class_iou, (std::vector<double>{88.0 / 94.0, 0.5}));
    QCOMPARE(b.class_dice, (std::vector<double>{176.0 / 182.0, 12.0 / 18.0}));
    QCOMPARE(m.class_iou.size(), std::size_t{3});
    QCOMPARE(m.class_iou[0], 5.0 / 7.0);
    QCOMPARE(m.class_iou[1], 0.5);
    QVERIFY(std::isnan(m.class_iou[2]));
    QCOMPARE(m.class_dice[0], 10.0 / 12.0);
    QCOMPARE(m.class_dice[1], 4.0 / 6.0);
    QVERIFY(std::isnan(m.class_dice[2]));
  }

  // Counts of another size than segmentation_counts_size(classes) are refused, not read past their end.
  void metricsRefuseCountsOfTheWrongSize() {
    QVERIFY_THROWS_EXCEPTION(Error, segmentation_metrics(std::vector<std::int64_t>(5), 1));
    QVERIFY_THROWS_EXCEPTION(Error, segmentation_metrics(std::vector<std::int64_t>(8), 3));
    QVERIFY_THROWS_EXCEPTION(Error, segmentation_metrics({}, 0));
    QCOMPARE(segmentation_metrics(std::vector<std::int64_t>(8), 1).class_iou.size(), std::size_t{2});
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
        QCOMPARE(l.at("others_not_attributable").get<bool>(), false);  // a question for GPUs only
        QVERIFY(l.at("by_category").at("parameters").get<std::int64_t>() >=
                4 * rec.starts[0].parameter_count);
      }
    }
    QCOMPARE(steps, 8);
    QCOMPARE(epochs, 2);
    QVERIFY(memory >= 2);
    // Each epoch's numbers in metrics.jsonl are those reported to the observer.
    std::size_t e = 0;
    for (const auto& l : lines) {
      if (l.at("kind") != "epoch") continue;
      const EpochReport& r = rec.epochs.at(e++);
      QCOMPARE(l.at("epoch").get<std::int64_t>(), r.epoch);
      QCOMPARE(l.at("step").get<std::int64_t>(), r.step);
      QCOMPARE(l.at("loss").get<double>(), r.loss);
      QCOMPARE(l.at("val_loss").get<double>(), r.val_loss);
      QCOMPARE(l.at("val_iou").get<double>(), r.val_iou);
      QCOMPARE(l.at("val_dice").get<double>(), r.val_dice);
      QCOMPARE(l.at("val_acc").get<double>(), r.val_acc);
      QCOMPARE(l.at("val_iou_per_class").get<std::vector<double>>(), r.val_class_iou);
      QCOMPARE(l.at("val_dice_per_class").get<std::vector<double>>(), r.val_class_dice);
      // A binary model's foreground is its mean.
      QCOMPARE(r.val_class_iou.size(), std::size_t{2});
      QCOMPARE(r.val_class_iou[1], r.val_iou);
    }
    // And the last epoch's validation numbers are the final model's on the validation set, evaluated here.
    const Evaluation final_model =
        evaluate_on_validation(small_config(dir.path()), trainer.snapshot().parameters);
    const EpochReport& last = rec.epochs.back();
    qInfo("validation: trainer loss %.6f IoU %.6f Dice %.6f acc %.6f; evaluated %.6f %.6f %.6f %.6f",
          last.val_loss, last.val_iou, last.val_dice, last.val_acc, final_model.loss, final_model.iou,
          final_model.dice, final_model.acc);
    QVERIFY2(std::fabs(last.val_loss - final_model.loss) <= 1e-5 * final_model.loss,
             qPrintable(QString("val_loss %1, evaluated %2").arg(last.val_loss).arg(final_model.loss)));
    QCOMPARE(last.val_iou, final_model.iou);
    QCOMPARE(last.val_dice, final_model.dice);
    QCOMPARE(last.val_acc, final_model.acc);
  }

  // nnU-Net's default loss trains: the epoch loss falls, and val_loss is the same loss on the validation set,
  // as computed here from the predictions.
  void crossEntropyDiceTrainingLowersTheLoss() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.loss.kind = LossKind::cross_entropy_dice;
    c.train.epochs = 12;
    c.train.lr = 1e-2;
    Recorder rec;
    Trainer trainer(c, &rec);
    trainer.run();
    QCOMPARE(rec.epochs.size(), std::size_t{12});
    qInfo("cross_entropy_dice: epoch loss %.4f -> %.4f, val_loss %.4f -> %.4f", rec.epochs.front().loss,
          rec.epochs.back().loss, rec.epochs.front().val_loss, rec.epochs.back().val_loss);
    QVERIFY(rec.epochs.back().loss < 0.8 * rec.epochs.front().loss);
    QVERIFY(rec.epochs.back().val_loss < rec.epochs.front().val_loss);
    const double evaluated = cross_entropy_dice_on_validation(c, trainer.snapshot().parameters);
    QVERIFY2(std::fabs(rec.epochs.back().val_loss - evaluated) <= 1e-5 * evaluated,
             qPrintable(QString("val_loss %1, evaluated %2").arg(rec.epochs.back().val_loss).arg(evaluated)));
  }

  // task instances: each validation reports the object metrics of the thresholds pair that scores best on
  // the validation images, worked out here pair by pair from the Predictor's probabilities and the samples'
  // instance labels; the checkpoint after it holds that pair, and metrics.jsonl the values.
  void instanceTrainingReportsObjectMetrics() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.task = ModelTask::instances;
    c.model.classes = 3;
    c.instances.min_size = 4;
    Recorder rec;
    Trainer trainer(c, &rec);
    trainer.run();
    QCOMPARE(rec.epochs.size(), std::size_t{2});
    const EpochReport& last = rec.epochs.back();
    QVERIFY(last.objects);

    const auto dataset = make_dataset(c);
    const DataSplit split = split_dataset(dataset->size(), c.data.val_fraction, c.data.seed);
    std::vector<Image> images;
    std::vector<std::string> names;
    std::vector<LabelImage> truths;
    for (const std::size_t i : split.val) {
      Sample sample = dataset->get(i);
      images.push_back(eight_bit_image(sample));
      names.push_back(sample.source);
      truths.push_back(std::move(sample.instances));
    }
    const std::vector<Prediction> predicted =
        Predictor(c, trainer.snapshot().parameters, DeviceId{}).predict(images, names);
    std::vector<ObjectMaps> maps;
    for (std::size_t k = 0; k < predicted.size(); ++k)
      maps.push_back(
          object_maps(predicted[k].probabilities, truths[k].height, truths[k].width, 3, truths[k]));
    double best = -1;
    ExtractionThresholds chosen;
    const ThresholdGrid grid;
    for (const double seed : grid.seed) {
      for (const double foreground : grid.foreground) {
        const double score = score_thresholds(maps, {seed, foreground, 4}).dsb_score;
        if (score > best) {
          best = score;
          chosen = {seed, foreground, 4};
        }
      }
    }
    QCOMPARE(last.val_seed_threshold, chosen.seed);
    QCOMPARE(last.val_foreground_threshold, chosen.foreground);
    const ObjectMetricsSummary expected = score_thresholds(maps, chosen);
    QCOMPARE(last.val_dsb, expected.dsb_score);
    QCOMPARE(last.val_merges, expected.merges);
    QCOMPARE(last.val_splits, expected.splits);
    qInfo("instances: val_dsb %.4f, val_f1 %.4f at seed %.1f, foreground %.1f", last.val_dsb, last.val_f1,
          last.val_seed_threshold, last.val_foreground_threshold);

    const Checkpoint checkpoint = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(checkpoint.config.instances.seed_threshold, chosen.seed);
    QCOMPARE(checkpoint.config.instances.foreground_threshold, chosen.foreground);
    const std::vector<nlohmann::json> lines = read_jsonl((dir.path() + "/metrics.jsonl").toStdString());
    const auto epoch = std::find_if(lines.rbegin(), lines.rend(),
                                    [](const nlohmann::json& j) { return j.value("kind", "") == "epoch"; });
    QVERIFY(epoch != lines.rend());
    QCOMPARE((*epoch)["val_seed_threshold"].get<double>(), chosen.seed);
    QCOMPARE((*epoch)["val_merges"].get<std::int64_t>(), expected.merges);
  }

  // task instances with instances.target weight_map: the U-Net paper's border weights reach the loss. The
  // first step's logged loss is its batch's loss at the initial weights, worked out here from the model's
  // probabilities and the samples' border weights (the weighted mean of the binary cross-entropy,
  // sum v l / sum v); the unweighted mean of the same batch differs by far more than the tolerance, so a run
  // that dropped the weights fails. The run then trains on.
  void weightMapTrainingWeighsTheLoss() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.task = ModelTask::instances;
    c.model.classes = 1;
    c.instances.target = InstanceTarget::weight_map;
    c.data.augment = false;
    c.train.epochs = 1;
    QVERIFY(training_problems(c).empty());
    Recorder rec;
    Trainer(c, &rec).run();
    QCOMPARE(rec.steps.size(), std::size_t{4});

    // The first step's batch: the first batch_size samples of epoch 0's order, as the trainer assembles them.
    const auto dataset = make_dataset(c);
    const DataSplit split = split_dataset(dataset->size(), c.data.val_fraction, c.data.seed);
    const std::vector<std::size_t> order = epoch_order(split.train, c.data.seed, 0, c.data.shuffle);
    const std::vector<std::size_t> first(order.begin(), order.begin() + c.train.batch_size);
    std::vector<std::int64_t> positions(first.size());
    std::iota(positions.begin(), positions.end(), 0);
    HostBatch batch;
    assemble_batch(*dataset, first, positions, 0, training_recipe(c), batch);
    QCOMPARE(batch.weights.size(), batch.masks.size());
    const auto [lightest, heaviest] = std::minmax_element(batch.weights.begin(), batch.weights.end());
    QVERIFY2(*heaviest > 2 * *lightest, "the border weights are all alike: nothing to tell them apart");

    DataParallelOptions options = step_options(c, c.devices);
    DataParallel dp(options);
    dp.set_parameters(UNet::initial_slab(c.model, c.train.seed));
    const std::vector<float> p = dp.probabilities(batch);
    double weighted = 0, weight_sum = 0, plain = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double q = std::clamp(static_cast<double>(p[i]), 1e-12, 1 - 1e-12);
      const double l = batch.masks[i] ? -std::log(q) : -std::log(1 - q);
      weighted += batch.weights[i] * l;
      weight_sum += batch.weights[i];
      plain += l;
    }
    weighted /= weight_sum;
    plain /= static_cast<double>(p.size());
    const double logged = rec.steps.front().loss;
    QVERIFY2(std::fabs(logged - weighted) <= 1e-5 * weighted,
             qPrintable(QString("first step's loss %1, by hand with the border weights %2 (without %3)")
                            .arg(logged, 0, 'g', 10)
                            .arg(weighted, 0, 'g', 10)
                            .arg(plain, 0, 'g', 10)));
    QVERIFY2(std::fabs(plain - weighted) > 1e-3 * weighted,
             qPrintable(QString("weighted %1, unweighted %2: too close to tell").arg(weighted).arg(plain)));
    for (const StepReport& r : rec.steps) QVERIFY(std::isfinite(r.loss));
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
    QCOMPARE(trainer.snapshot().position.step, 6);
    QCOMPARE(trainer.snapshot().position.epoch_step, 2);
  }

  void oneAndThreeReplicasTrainTheSameModel() {
    QTemporaryDir a, b;
    Config one = small_config(a.path()), three = small_config(b.path());
    one.train.batch_size = three.train.batch_size = 7;  // uneven: 3 + 2 + 2
    three.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}};
    test::WatchedObserver o1, o3;
    Trainer t1(one, &o1), t3(three, &o3);
    t1.run();
    t3.run();
    const double e = test::norm_relative_error(t1.snapshot().parameters, t3.snapshot().parameters);
    qInfo("trainer R=1 vs R=3 weights relative error %.3g", e);
    QVERIFY2(e <= 1e-5, qPrintable(QString("relative error %1").arg(e)));
  }

  // A stop during the preparation (the data scan, the synthetic samples' generation) ends the run at once:
  // stopped, never started, nothing written into its folder but the lock.
  void stopWhilePreparingEndsWithoutTraining() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    Recorder rec;
    Trainer trainer(c, &rec);
    trainer.stop();
    trainer.run();
    QCOMPARE(trainer.state(), TrainerState::stopped);
    QVERIFY(rec.starts.empty());
    QVERIFY(rec.steps.empty());
    QCOMPARE(rec.states, (std::vector<TrainerState>{TrainerState::preparing, TrainerState::stopped}));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"run.lock"});
  }

  // The history a metrics.jsonl holds: steps a resume took again replace those logged before it, records
  // past `up_to_step` are left out, and memory samples, partial and hand-edited lines are skipped.
  void runHistoryFollowsTheResumes() {
    QTemporaryDir dir;
    const std::string file = (dir.path() + "/metrics.jsonl").toStdString();
    std::ofstream(file) << R"({"kind":"start","step":0,"epoch":0})"
                        << "\n"
                        << R"({"kind":"step","step":1,"epoch":0,"loss":0.9,"img_per_s":10})"
                        << "\n"
                        << R"({"kind":"memory","device":"cpu:0","in_use":1})"
                        << "\n"
                        << R"({"kind":"step","step":2,"epoch":0,"loss":0.8,"img_per_s":20})"
                        << "\n"
                        << R"({"kind":"step","step":3,"epoch":1,"loss":0.7,"img_per_s":30})"
                        << "\n"
                        << R"({"kind":"epoch","step":3,"epoch":1,"loss":0.75,"val_loss":0.6,"val_iou":0.5})"
                        << "\n"
                        << R"({"kind":"resume","step":2,"epoch":0})"
                        << "\n"
                        << R"({"kind":"step","step":"three","loss":[]})"
                        << "\n"
                        << R"({"kind":"step","step":3,"epoch":1,"loss":0.65,"img_per_s":60,"skipped":"no"})"
                        << "\n"
                        << R"({"kind":"epoch","step":3,"epoch":1,"loss":0.7,"val_loss":null,"val_iou":0.55})"
                        << "\n"
                        << R"({"kind":"step","step":4,"epoch":1,"loss":0.6,"img_per_s":70})"
                        << "\n"
                        << "{\"kind\":\"step\",\"step\":5,\"epoch\":1,\"lo";  // cut short
    const RunHistory all = read_run_history(file);
    std::vector<double> losses, averages;
    for (const StepReport& r : all.steps) {
      losses.push_back(r.loss);
      averages.push_back(r.img_per_s_avg);
    }
    QCOMPARE(losses, (std::vector<double>{0.9, 0.8, 0.65, 0.6}));
    QCOMPARE(averages, (std::vector<double>{10, 15, 30, 40}));
    QCOMPARE(all.epochs.size(), std::size_t{1});
    QCOMPARE(all.epochs[0].val_iou, 0.55);
    QVERIFY(std::isnan(all.epochs[0].val_loss));
    const RunHistory early = read_run_history(file, 2);
    QCOMPARE(early.steps.size(), std::size_t{2});
    QVERIFY(early.epochs.empty());
    QVERIFY(read_run_history(dir.path().toStdString() + "/absent.jsonl").steps.empty());
  }

  void commandsFromAnotherThread() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.train.epochs = 50;  // long enough to be stopped
    Recorder rec;
    Trainer trainer(c, &rec);
    std::atomic<bool> paused_seen{false}, five_steps_seen{false};
    rec.after_step = [&](const StepReport& r) {
      if (r.step == 2) trainer.pause();  // takes effect before step 3
    };
    // Each wait gives up after a minute: the run is then stopped and the test fails, instead of hanging.
    std::thread controller([&] {
      paused_seen =
          test::wait_on_thread_until([&] { return trainer.state() == TrainerState::paused; }, 60000);
      if (paused_seen) {
        trainer.request_checkpoint();  // served while paused
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        trainer.resume();
        five_steps_seen = test::wait_on_thread_until([&] { return rec.step_count >= 5; }, 60000);
      }
      trainer.stop();
    });
    trainer.run();
    controller.join();
    QVERIFY2(paused_seen, "the trainer did not pause within a minute of being asked");
    QVERIFY2(five_steps_seen, "the resumed trainer did not reach step 5 within a minute");
    QCOMPARE(trainer.state(), TrainerState::stopped);
    QVERIFY(rec.steps.size() >= 5 && rec.steps.size() < 50 * 4);
    // The save requested while paused holds the model of step 2; the run's end wrote last.safetensors.
    const Checkpoint requested =
        load_checkpoint((dir.path() + "/manual-step-000002.safetensors").toStdString());
    QCOMPARE(requested.position.step, 2);
    QCOMPARE(requested.position.epoch_step, 2);
    const Checkpoint last = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(last.position.step, trainer.snapshot().position.step);
    QCOMPARE(last.parameters, trainer.snapshot().parameters);
    QCOMPARE(last.adam_v, trainer.snapshot().adam_v);
    const auto paused_at = std::find(rec.states.begin(), rec.states.end(), TrainerState::paused);
    QVERIFY(paused_at != rec.states.end());
    QCOMPARE(*(paused_at + 1), TrainerState::running);
  }

  void predictsValidationSamplesEachEpoch() {
    QTemporaryDir dir;
    struct Predictions final : test::WatchedObserver {
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
        QCOMPARE(p.image, eight_bit_image(truth).pixels);
        QCOMPARE(p.mask, truth.mask);
      }
    }
  }

  // Dynamic loss scaling with an injected overflow on steps 2, 3 and 8 (the CPU has no fp16, so the policy is
  // forced on fp32 with a growth interval of 3): those steps change no weight and no Adam state, the scale
  // halves on each and doubles after 3 clean steps, and every step line says so. The expected sequence is
  // worked out by hand from the contract in docs/MODEL.md.
  void dynamicLossScalingSkipsAndRescales() {
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.train.steps = 10;
    Recorder rec;
    std::vector<TrainingSnapshot> after;  // the model after each step
    Trainer trainer(c, &rec, poisoned_run({2, 3, 8}, small_dynamic_scaling()));
    rec.after_step = [&](const StepReport&) { after.push_back(trainer.snapshot()); };
    trainer.run();
    const std::vector<double> scales{1024, 1024, 512, 256, 256, 256, 512, 512, 256, 256};
    const std::vector<bool> skipped{false, true, true, false, false, false, false, true, false, false};
    const std::vector<std::int64_t> skipped_so_far{0, 1, 2, 2, 2, 2, 2, 3, 3, 3};
    QCOMPARE(rec.steps.size(), std::size_t{10});
    for (std::size_t k = 0; k < 10; ++k) {
      QCOMPARE(rec.steps[k].loss_scale, scales[k]);
      QCOMPARE(rec.steps[k].skipped, skipped[k]);
      QCOMPARE(rec.steps[k].skipped_steps, skipped_so_far[k]);
      if (k == 0) continue;
      const bool unchanged = after[k].parameters == after[k - 1].parameters &&
                             after[k].adam_m == after[k - 1].adam_m && after[k].adam_v == after[k - 1].adam_v;
      QVERIFY2(unchanged == skipped[k], qPrintable(QString("step %1").arg(k + 1)));
    }
    const TrainingSnapshot end = trainer.snapshot();
    QCOMPARE(end.position.loss_scale, 256.0);
    QCOMPARE(end.position.clean_steps, std::int64_t{2});
    QCOMPARE(end.position.skipped_steps, std::int64_t{3});
    // metrics.jsonl and the checkpoint carry them.
    std::vector<nlohmann::json> lines;
    for (const auto& j : read_jsonl((dir.path() + "/metrics.jsonl").toStdString()))
      if (j.at("kind") == "step") lines.push_back(j);
    QCOMPARE(lines.size(), std::size_t{10});
    for (std::size_t k = 0; k < 10; ++k) {
      QCOMPARE(lines[k].at("loss_scale").get<double>(), scales[k]);
      QCOMPARE(lines[k].at("skipped").get<bool>(), static_cast<bool>(skipped[k]));
      QCOMPARE(lines[k].at("skipped_steps").get<std::int64_t>(), skipped_so_far[k]);
    }
    const Checkpoint last = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(last.position.loss_scale, 256.0);
    QCOMPARE(last.position.clean_steps, std::int64_t{2});
    QCOMPARE(last.position.skipped_steps, std::int64_t{3});
  }

  // Interrupted after step 5 and resumed, the scaled run ends bitwise where the uninterrupted one does: the
  // scale, its clean-step count and the skipped steps (hence Adam's own step count) come back from the
  // checkpoint.
  void resumeRestoresTheLossScaleAndSkippedSteps() {
    QTemporaryDir straight_dir, resumed_dir;
    Config straight = small_config(straight_dir.path());
    straight.train.steps = 10;
    test::WatchedObserver watch_straight, watch_first, watch_resumed;
    Trainer(straight, &watch_straight, poisoned_run({2, 3, 8}, small_dynamic_scaling())).run();

    Config first = small_config(resumed_dir.path());
    first.train.steps = 5;
    Trainer(first, &watch_first, poisoned_run({2, 3}, small_dynamic_scaling())).run();
    const Checkpoint half = load_checkpoint((resumed_dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(half.position.step, std::int64_t{5});
    QCOMPARE(half.position.loss_scale, 256.0);
    QCOMPARE(half.position.clean_steps, std::int64_t{2});
    QCOMPARE(half.position.skipped_steps, std::int64_t{2});
    Config second = first;
    second.train.steps = 10;
    Trainer resumed(second, &watch_resumed, poisoned_run({3}, small_dynamic_scaling()));  // step 8: its 3rd
    resumed.resume_from(half);
    resumed.run();

    const Checkpoint a = load_checkpoint((straight_dir.path() + "/last.safetensors").toStdString());
    const Checkpoint b = load_checkpoint((resumed_dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(b.position, a.position);
    QCOMPARE(b.parameters, a.parameters);
    QCOMPARE(b.adam_m, a.adam_m);
    QCOMPARE(b.adam_v, a.adam_v);
  }

  // Inf/NaN gradients that no scaling absorbs stop the run as diverged, before the step is applied, with a
  // resumable checkpoint of the step before: in fp32 (which scales nothing) at once; with dynamic scaling
  // once the scale is at its floor.
  void nonFiniteGradientsThatScalingCannotAbsorbStopTheRun_data() {
    QTest::addColumn<bool>("dynamic");
    QTest::addColumn<std::int64_t>("last_good_step");
    QTest::newRow("fp32, no scaling") << false << std::int64_t{2};
    // Scale 2: step 3 skips (scale 1), step 4 hits the floor.
    QTest::newRow("dynamic, at the floor") << true << std::int64_t{3};
  }
  void nonFiniteGradientsThatScalingCannotAbsorbStopTheRun() {
    QFETCH(bool, dynamic);
    QFETCH(std::int64_t, last_good_step);
    QTemporaryDir dir;
    Config c = small_config(dir.path());
    c.train.steps = 10;
    std::optional<LossScaling> scaling;
    if (dynamic) scaling = LossScaling{.dynamic = true, .initial_scale = 2, .min_scale = 1};
    Errors rec;
    Trainer trainer(c, &rec, poisoned_run({3, 4}, scaling));
    try {
      trainer.run();
      QFAIL("a run with NaN gradients finished");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::diverged);
      QVERIFY2(std::string(e.what()).find("step " + std::to_string(last_good_step + 1)) != std::string::npos,
               e.what());
    }
    QCOMPARE(trainer.state(), TrainerState::failed);
    QCOMPARE(rec.errors.size(), std::size_t{1});
    QCOMPARE(rec.errors[0].type, std::string("diverged"));
    QVERIFY(rec.errors[0].fatal);
    QVERIFY(!rec.errors[0].where.empty());
    const Checkpoint last = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(last.position.step, last_good_step);
    QVERIFY(std::all_of(last.parameters.begin(), last.parameters.end(),
                        [](float v) { return std::isfinite(v); }));
  }

  // A device the engine's probe does not list is refused, naming the device and the probe's reason; where it
  // lists cuda:0, the same run trains there.
  void trainsOnCudaOnlyWhereTheProbeListsIt() {
    QTemporaryDir dir;
    Config cuda = small_config(dir.path());
    cuda.devices = {{DeviceKind::cuda, 0}};
    Recorder rec;
    Trainer t(cuda, &rec);
    if (test::device_listed("cuda:0")) {
      t.run();
      QCOMPARE(t.state(), TrainerState::finished);
      return;
    }
    const std::string reason = list_devices().cuda_unavailable_reason;
    QVERIFY(!reason.empty());
    try {
      t.run();
      QFAIL("trained on cuda:0, which the device probe does not list");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QCOMPARE(e.device(), std::string("cuda:0"));
      QVERIFY2(std::string(e.what()).find(reason) != std::string::npos, e.what());
    }
    QCOMPARE(t.state(), TrainerState::failed);
  }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "test_trainer.moc"
