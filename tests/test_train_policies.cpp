// The small policies carved out of the trainer, each against hand-computed values: early stopping (patience,
// min_delta, max and min monitors, absent metrics, its saved state), the checkpoint policy (which files a
// validation asks for), the throughput window with its ETA, and the step's update (skip, clip, diverge).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"
#include "unet/io/checkpoint.h"
#include "unet/model/unet.h"
#include "unet/train/checkpoint_policy.h"
#include "unet/train/early_stopping.h"
#include "unet/train/monitor.h"
#include "unet/train/step_update.h"
#include "unet/train/throughput.h"

using namespace unet;

namespace {

EpochReport validated(std::int64_t epoch, double val_loss, double val_iou = NAN) {
  EpochReport r;
  r.epoch = epoch;
  r.step = epoch * 10;
  r.loss = 1.0;
  r.val_loss = val_loss;
  r.val_iou = val_iou;
  r.val_dice = r.val_acc = NAN;
  return r;
}

std::vector<std::string> reasons(const std::vector<CheckpointWriter::Target>& targets) {
  std::vector<std::string> out;
  for (const auto& t : targets) out.push_back(t.reason + ":" + t.path.filename().string());
  return out;
}

// One CPU replica of a tiny U-Net, for the step's update to apply the optimizer on.
std::unique_ptr<DataParallel> tiny_replica() {
  DataParallelOptions o;
  o.spec.in_channels = 3;
  o.spec.classes = 1;
  o.spec.width = 4;
  o.spec.depth = 2;
  o.devices = {{DeviceKind::cpu, 0}};
  auto dp = std::make_unique<DataParallel>(o);
  dp->set_parameters(UNet::initial_slab(o.spec, 11));
  return dp;
}

StepOutcome outcome_with(double loss, std::int64_t non_finite_gradients, double gradient_norm) {
  StepOutcome o;
  o.loss_value = loss;
  o.non_finite_gradients = non_finite_gradients;
  o.gradient_norm = gradient_norm;
  return o;
}

}  // namespace

class TestTrainPolicies : public QObject {
  Q_OBJECT

 private slots:
  // patience 2 on val_loss: 1.0 (best), 0.9 (best), 0.95 (wait 1), 0.9 (wait 2: not better than 0.9) stops
  // at epoch 4, with the best at epoch 2.
  void earlyStoppingStopsAfterPatienceWithoutImprovement() {
    EarlyStopping es({.patience = 2, .monitor = "val_loss", .min_delta = 0, .restore_best = false});
    using V = EarlyStopping::Verdict;
    QCOMPARE(es.update(1.0, 1, 10), V::improved);
    QCOMPARE(es.update(0.9, 2, 20), V::improved);
    QCOMPARE(es.update(0.95, 3, 30), V::waiting);
    QCOMPARE(es.wait(), 1);
    QCOMPARE(es.update(0.9, 4, 40), V::stop);
    QCOMPARE(*es.best(), 0.9);
    QCOMPARE(es.best_epoch(), 2);
    QCOMPARE(es.best_step(), 20);
    QCOMPARE(es.stop_reason(4),
             std::string("val_loss has not improved by more than 0 for 2 validations (best "
                         "0.9 at epoch 2); stopped after epoch 4"));
  }

  // min_delta: an improvement must beat the best by more than it; a later real improvement resets the wait.
  void earlyStoppingNeedsMoreThanMinDelta() {
    EarlyStopping es({.patience = 3, .monitor = "val_loss", .min_delta = 0.1, .restore_best = false});
    using V = EarlyStopping::Verdict;
    QCOMPARE(es.update(1.0, 1, 1), V::improved);
    QCOMPARE(es.update(0.95, 2, 2), V::waiting);  // 0.05 better: not enough
    QCOMPARE(es.update(0.9, 3, 3), V::waiting);   // exactly 0.1 better: not more than it
    QCOMPARE(es.update(0.85, 4, 4), V::improved);
    QCOMPARE(es.wait(), 0);
    QCOMPARE(*es.best(), 0.85);
  }

  // A metric that rises (val_iou) improves upwards: falling values count as waits.
  void earlyStoppingMaxModeImprovesUpwards() {
    EarlyStopping es({.patience = 1, .monitor = "val_iou", .min_delta = 0, .restore_best = false});
    using V = EarlyStopping::Verdict;
    QCOMPARE(es.update(0.5, 1, 1), V::improved);
    QCOMPARE(es.update(0.6, 2, 2), V::improved);
    QCOMPARE(es.update(0.55, 3, 3), V::stop);
    QCOMPARE(*es.best(), 0.6);
  }

  // An absent metric (NaN) never improves, not even as the first value.
  void earlyStoppingAbsentMetricNeverImproves() {
    EarlyStopping es({.patience = 2, .monitor = "val_dice", .min_delta = 0, .restore_best = false});
    using V = EarlyStopping::Verdict;
    QCOMPARE(es.update(NAN, 1, 1), V::waiting);
    QCOMPARE(es.update(NAN, 2, 2), V::stop);
    QVERIFY(!es.best());
    QCOMPARE(es.stop_reason(2),
             std::string("val_dice has not improved by more than 0 for 2 validations (best "
                         "none: it was never finite); stopped after epoch 2"));
  }

  void earlyStoppingOffNeverStops() {
    EarlyStopping es(EarlyStoppingConfig{});
    QCOMPARE(es.update(1.0, 1, 1), EarlyStopping::Verdict::off);
    QVERIFY(es.state().is_null());
  }

  // The state a checkpoint keeps continues the count; one kept for another monitor starts it over.
  void earlyStoppingStateRoundTrips() {
    const EarlyStoppingConfig config{
        .patience = 2, .monitor = "val_loss", .min_delta = 0, .restore_best = false};
    EarlyStopping es(config);
    es.update(0.5, 1, 4);
    es.update(0.7, 2, 8);
    const nlohmann::json saved = es.state();
    QCOMPARE(saved,
             nlohmann::json(
                 {{"monitor", "val_loss"}, {"best", 0.5}, {"best_epoch", 1}, {"best_step", 4}, {"wait", 1}}));
    EarlyStopping resumed(config);
    resumed.restore(saved);
    QCOMPARE(resumed.update(0.6, 3, 12), EarlyStopping::Verdict::stop);
    EarlyStopping other({.patience = 2, .monitor = "val_iou", .min_delta = 0, .restore_best = false});
    other.restore(saved);
    QVERIFY(!other.best());
    QCOMPARE(other.wait(), 0);
  }

  // every_epochs 2 with save_best_only on val_loss over 1.0, 0.8, 0.9, 0.7: epoch 1 best + last; epoch 2
  // periodic + best + last; epoch 3 last only; epoch 4 periodic + best + last. Within an epoch only best.
  void checkpointPolicyChoosesTheFiles() {
    test::WatchedObserver out;
    const std::filesystem::path dir = QDir(tmp_.path()).filePath("policy").toStdString();
    std::filesystem::create_directories(dir);
    CheckpointConfig config;
    config.every_epochs = 2;
    config.save_best_only = true;
    config.filename_template = "p-{epoch:02d}.safetensors";
    CheckpointPolicy policy(config, dir, false, 0, out);
    using L = std::vector<std::string>;
    QCOMPARE(reasons(policy.targets_after(validated(1, 1.0), true)),
             (L{"best:best.safetensors", "last:last.safetensors"}));
    QVERIFY(policy.last_written_at(10));
    QCOMPARE(reasons(policy.targets_after(validated(2, 0.8), true)),
             (L{"periodic:p-02.safetensors", "best:best.safetensors", "last:last.safetensors"}));
    QCOMPARE(reasons(policy.targets_after(validated(3, 0.9), true)), (L{"last:last.safetensors"}));
    QCOMPARE(reasons(policy.targets_after(validated(4, 0.85), false)), L{});
    QVERIFY(!policy.last_written_at(40));
    QCOMPARE(reasons(policy.targets_after(validated(4, 0.7), false)), (L{"best:best.safetensors"}));
    QCOMPARE(*policy.best(), 0.7);
    // An absent monitor never improves: no best, and with save_best_only no periodic file either.
    QCOMPARE(reasons(policy.targets_after(validated(6, NAN), true)), (L{"last:last.safetensors"}));
  }

  // A monitor that rises: val_iou 0.4 then 0.3 (worse) then 0.5 (best).
  void checkpointPolicyMaxMode() {
    test::WatchedObserver out;
    const std::filesystem::path dir = QDir(tmp_.path()).filePath("max").toStdString();
    std::filesystem::create_directories(dir);
    CheckpointConfig config;
    config.every_epochs = 0;
    config.monitor = "val_iou";
    CheckpointPolicy policy(config, dir, false, 0, out);
    using L = std::vector<std::string>;
    QCOMPARE(reasons(policy.targets_after(validated(1, 1.0, 0.4), true)),
             (L{"best:best.safetensors", "last:last.safetensors"}));
    QCOMPARE(reasons(policy.targets_after(validated(2, 0.5, 0.3), true)), (L{"last:last.safetensors"}));
    QCOMPARE(reasons(policy.targets_after(validated(3, 0.5, 0.5), true)),
             (L{"best:best.safetensors", "last:last.safetensors"}));
  }

  // Issue 25, item 2: best.safetensors follows the class checkpoint.monitor_class names. By hand, (val_iou,
  // class 0's IoU) over three epochs: (0.77, 0.10), (0.80, 0.05), (0.76, 0.50). The mean's best would be
  // epoch 2; class 0's is epoch 1, then epoch 3, and best.safetensors ends holding epoch 3 with 0.50. A
  // resumed policy beats that value, and says what the file holds; early stopping counts on the same class.
  void bestFollowsTheMonitoredClass() {
    test::WatchedObserver out;
    const std::filesystem::path dir = QDir(tmp_.path()).filePath("class").toStdString();
    std::filesystem::create_directories(dir);
    Config config;
    config.model.width = 4;
    config.model.depth = 2;
    config.checkpoint.every_epochs = 0;
    config.checkpoint.monitor = "val_iou";
    config.checkpoint.monitor_class = "0";
    const auto epoch_with = [](std::int64_t epoch, double mean, double class0) {
      EpochReport r = validated(epoch, 1.0, mean);
      r.val_class_iou = {class0, mean};
      r.val_class_dice = {NAN, NAN};
      return r;
    };
    const std::vector<EpochReport> epochs{epoch_with(1, 0.77, 0.10), epoch_with(2, 0.80, 0.05),
                                          epoch_with(3, 0.76, 0.50)};
    const Monitor monitor(config.checkpoint.monitor, config.checkpoint.monitor_class);
    QCOMPARE(monitor.key(), std::string("val_iou_class0"));
    QCOMPARE(monitor.describe(), std::string("val_iou of class 0"));
    QCOMPARE(monitor.value(epochs[1]), 0.05);
    QCOMPARE(Monitor("val_iou", "mean").value(epochs[1]), 0.80);
    QCOMPARE(Monitor("val_loss", "0").key(), std::string("val_loss"));  // a loss has no class
    using L = std::vector<std::string>;
    const L best_and_last{"best:best.safetensors", "last:last.safetensors"},
        last_only{"last:last.safetensors"};
    {
      CheckpointPolicy policy(config.checkpoint, dir, false, 0, out);
      for (const EpochReport& r : epochs) {
        const std::vector<CheckpointWriter::Target> targets = policy.targets_after(r, true);
        QCOMPARE(reasons(targets), r.epoch == 2 ? last_only : best_and_last);
        Checkpoint cp;
        static_cast<RunState&>(cp) = initial_run_state(config);
        cp.config = config;
        cp.position.step = r.step;
        cp.position.epoch = r.epoch;
        cp.position.metrics = monitored_metrics(r);
        policy.submit(std::move(cp), targets);
      }
      policy.finish_saves();
      QCOMPARE(*policy.best(), 0.50);
    }
    const CheckpointInfo best = inspect_checkpoint(dir / "best.safetensors");
    QCOMPARE(best.position.epoch, std::int64_t{3});
    QCOMPARE(best.position.metrics.at("val_iou_class0").get<double>(), 0.50);

    CheckpointPolicy resumed(config.checkpoint, dir, true, 30, out);
    QCOMPARE(*resumed.best(), 0.50);
    QCOMPARE(resumed.found_at_start().size(), std::size_t{2});
    for (const CheckpointReport& found : resumed.found_at_start()) {
      QCOMPARE(found.epoch, std::int64_t{3});
      if (found.reason != "best") continue;
      QCOMPARE(found.monitor, std::string("val_iou of class 0"));
      QCOMPARE(found.monitor_value, 0.50);
    }
    QCOMPARE(reasons(resumed.targets_after(epoch_with(4, 0.90, 0.45), true)), last_only);

    // Early stopping with patience 1 on the same class: epoch 2 (class 0 worse, mean better) stops it.
    EarlyStopping es({.patience = 1, .monitor = "val_iou", .min_delta = 0, .restore_best = false}, "0");
    QCOMPARE(es.update(Monitor("val_iou", "0").value(epochs[0]), 1, 10), EarlyStopping::Verdict::improved);
    QCOMPARE(es.update(Monitor("val_iou", "0").value(epochs[1]), 2, 20), EarlyStopping::Verdict::stop);
    QVERIFY(es.stop_reason(2).starts_with("val_iou of class 0 has not improved"));
    QCOMPARE(es.state().at("monitor").get<std::string>(), std::string("val_iou_class0"));
  }

  // Steps of (4 images, 2 s), (4, 1 s), (8, 3 s): 16 images in 6 s; the mean step takes 2 s. At step 4 of
  // 12 in epochs of 4: 8 steps left (16 s) and the validations at the ends of epochs 2 and 3 (2 x 10 s, the
  // average of 12 s and 8 s).
  void throughputWindowAndEta() {
    Throughput t(3);
    t.add_step(100, 100.0);  // leaves the window of 3
    t.add_step(4, 2.0);
    t.add_step(4, 1.0);
    t.add_step(8, 3.0);
    QCOMPARE(t.images_per_second(), 16.0 / 6.0);
    QCOMPARE(t.eta_seconds(4, 0, 4, 12), 16.0);
    t.add_validation(12.0);
    t.add_validation(8.0);
    QCOMPARE(t.validation_seconds(), 10.0);
    QCOMPARE(t.eta_seconds(4, 0, 4, 12), 16.0 + 2 * 10.0);
    QCOMPARE(t.eta_seconds(12, 0, 4, 12), 0.0);
    QCOMPARE(Throughput().images_per_second(), 0.0);
  }

  // mixed-fp16 scales dynamically: 3 inf gradients at 65536 skip step 10 (0-based 9), halve the scale to
  // 32768 and count the skip (2 before it, from a resume); no weight changes.
  void stepUpdateSkipsInfGradientsWithDynamicScaling() {
    auto dp = tiny_replica();
    const std::vector<float> before = dp->parameters(0);
    StepUpdate update(LossScaler(loss_scaling_for(Precision::mixed_fp16)), 2, 1.0);
    const StepUpdate::Result r =
        update.update(outcome_with(0.5, 3, INFINITY), *dp, {.lr = 0.1, .momentum = std::nullopt}, 9);
    QVERIFY(r.skipped);
    QVERIFY(r.diverged.empty());
    QCOMPARE(r.loss_scale, 65536.0);
    QCOMPARE(r.clip_factor, 1.0);
    QCOMPARE(update.scale(), 32768.0);
    QCOMPARE(update.skipped_steps(), 3);
    QCOMPARE(
        r.skip_log,
        std::string("step 10 skipped: 3 gradients were inf/NaN at loss scale 65536; the scale is now 32768"));
    QVERIFY(dp->parameters(0) == before);
  }

  // clip_grad_norm 1 and a gradient norm of 4: torch's factor 1 / (4 + 1e-6); a norm under the limit is not
  // clipped. Both apply, and the scale stays where it was.
  void stepUpdateClipsToTheGradientNorm() {
    auto dp = tiny_replica();
    StepUpdate update(LossScaler(loss_scaling_for(Precision::fp32)), 0, 1.0);
    const StepUpdate::Result clipped =
        update.update(outcome_with(0.5, 0, 4.0), *dp, {.lr = 0.01, .momentum = std::nullopt}, 0);
    QVERIFY(!clipped.skipped);
    QVERIFY(clipped.diverged.empty());
    QCOMPARE(clipped.clip_factor, 1.0 / (4.0 + 1e-6));
    QCOMPARE(clipped.loss_scale, 1.0);
    const StepUpdate::Result kept =
        update.update(outcome_with(0.5, 0, 0.25), *dp, {.lr = 0.01, .momentum = std::nullopt}, 1);
    QCOMPARE(kept.clip_factor, 1.0);
    QCOMPARE(update.scale(), 1.0);
    QCOMPARE(update.skipped_steps(), 0);
  }

  // fp32 scales no loss: inf gradients, or a NaN loss with finite gradients, mean the run diverged; nothing
  // was applied (the state is still finite) and nothing counts as skipped.
  void stepUpdateDivergesUnderFp32() {
    auto dp = tiny_replica();
    const std::vector<float> before = dp->parameters(0);
    StepUpdate update(LossScaler(loss_scaling_for(Precision::fp32)), 0, 0);
    const StepUpdate::Result inf =
        update.update(outcome_with(0.5, 2, INFINITY), *dp, {.lr = 0.1, .momentum = std::nullopt}, 4);
    QCOMPARE(inf.diverged, std::string("2 gradients are inf or NaN"));
    QVERIFY(inf.state_is_finite);
    QVERIFY(!inf.skipped);
    const StepUpdate::Result nan =
        update.update(outcome_with(NAN, 0, 1.0), *dp, {.lr = 0.1, .momentum = std::nullopt}, 4);
    QCOMPARE(nan.diverged, std::string("the loss is nan"));
    QVERIFY(nan.state_is_finite);
    QCOMPARE(update.skipped_steps(), 0);
    QCOMPARE(update.scale(), 1.0);
    QVERIFY(dp->parameters(0) == before);
  }

 private:
  QTemporaryDir tmp_;
};

QTEST_GUILESS_MAIN(TestTrainPolicies)
#include "test_train_policies.moc"
