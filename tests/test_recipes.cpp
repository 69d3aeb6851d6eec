// Training recipes: learning-rate schedules step by step against torch.optim.lr_scheduler's formulas (its
// recursive, "chainable" forms, written here independently of the engine's closed forms, and values worked
// by hand); SGD and Adam/AdamW steps against torch.optim's update rules in double; and the trainer's use of
// them: the logged rate, gradient clipping, plateau reductions, early stopping and what a checkpoint carries.
#include <QTemporaryDir>

#include <cmath>
#include <fstream>
#include <numbers>

#include "test_support.h"
#include "unet/core/number_text.h"
#include "unet/io/checkpoint.h"
#include "unet/train/lr_schedule.h"
#include "unet/train/metrics_log.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

ScheduleConfig schedule_of(const std::string& kind) {
  ScheduleConfig s;
  s.kind = *parse_schedule_kind(kind);
  return s;
}

// torch's chainable get_lr() for each scheduler, stepped once per optimizer step: the rate of step k from the
// rate of step k - 1. `base` is train.lr.
struct TorchRecursive {
  ScheduleConfig c;
  double base;
  std::int64_t total, spe;

  std::vector<double> rates() const {
    std::vector<double> out;
    const std::int64_t warmup = c.warmup_steps, span = total - warmup;
    double lr = warmup > 0 ? base * c.warmup_start_factor : base;
    for (std::int64_t k = 0; k < total; ++k) {
      if (k > 0) {
        if (k < warmup || (k == warmup && warmup > 0)) {
          // LinearLR: lr *= 1 + (end - start) / (total_iters * start + (k - 1) * (end - start)); at the
          // milestone SequentialLR hands over to the main scheduler at its base rate.
          if (k < warmup) {
            const double s = c.warmup_start_factor;
            lr *=
                1.0 + (1.0 - s) / (static_cast<double>(warmup) * s + static_cast<double>(k - 1) * (1.0 - s));
          } else {
            lr = base;
          }
        } else {
          const std::int64_t t = k - warmup;  // the main scheduler's last_epoch
          if (c.kind == ScheduleKind::step) {
            if (t % (c.step_epochs * spe) == 0) lr *= c.gamma;
          } else if (c.kind == ScheduleKind::cosine) {
            const double tm = static_cast<double>(span);
            // CosineAnnealingLR's recursive form (t - 1 - T_max) % (2 T_max) != 0 branch.
            lr = (1.0 + std::cos(std::numbers::pi * static_cast<double>(t) / tm)) /
                     (1.0 + std::cos(std::numbers::pi * static_cast<double>(t - 1) / tm)) * (lr - c.min_lr) +
                 c.min_lr;
          } else if (c.kind == ScheduleKind::poly) {
            const double tm = static_cast<double>(span);
            // PolynomialLR: ((1 - t / T) / (1 - (t - 1) / T))^power.
            lr *= std::pow((1.0 - static_cast<double>(t) / tm) / (1.0 - static_cast<double>(t - 1) / tm),
                           c.power);
          }
        }
      }
      out.push_back(lr);
    }
    return out;
  }
};

void compare_rates(const LearningRateSchedule& s, const std::vector<double>& expected, double tolerance) {
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const double got = s.at(static_cast<std::int64_t>(k)).lr;
    if (std::fabs(got - expected[k]) > tolerance * std::max(1e-12, std::fabs(expected[k])))
      QFAIL(qPrintable(
          QString("step %1: rate %2, torch's %3").arg(k).arg(got, 0, 'g', 17).arg(expected[k], 0, 'g', 17)));
  }
}

// A small, fast run: 40 synthetic 32x32 images, a width-4 depth-2 U-Net.
nlohmann::json small_run(const QString& dir) {
  return {{"model", {{"width", 4}, {"depth", 2}}},
          {"data", {{"image_size", {32, 32}}, {"synthetic_samples", 40}, {"val_fraction", 0.2}}},
          {"train", {{"epochs", 2}, {"batch_size", 8}}},
          {"checkpoint", {{"dir", dir.toStdString()}}}};
}

std::vector<nlohmann::json> records(const std::filesystem::path& file, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("kind", "") == kind) out.push_back(std::move(j));
  }
  return out;
}

class LogCollector : public TrainerObserver {
 public:
  void on_log(LogLevel, const std::string& text) override { lines.push_back(text); }
  bool any(const std::string& part) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.find(part) != std::string::npos; });
  }
  std::vector<std::string> lines;
};

}  // namespace

class TestRecipes : public QObject {
  Q_OBJECT

 private slots:
  // --- schedules against torch's recursive forms -----------------------------------------------------------

  void schedulesFollowTorch_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("warmup");
    for (const char* kind : {"constant", "step", "cosine", "poly"})
      for (int warmup : {0, 7})
        QTest::newRow(qPrintable(QString("%1 warm-up %2").arg(kind).arg(warmup))) << QString(kind) << warmup;
  }
  void schedulesFollowTorch() {
    QFETCH(QString, kind);
    QFETCH(int, warmup);
    ScheduleConfig c = schedule_of(kind.toStdString());
    c.warmup_steps = warmup;
    c.warmup_start_factor = 0.1;
    c.step_epochs = 2;
    c.gamma = 0.5;
    c.min_lr = 1e-4;
    c.power = 0.9;
    const std::int64_t total = 60, spe = 5;
    const LearningRateSchedule s(c, 0.01, total, spe);
    compare_rates(s, TorchRecursive{c, 0.01, total, spe}.rates(), 1e-12);
  }

  // Values worked by hand from the documented closed forms.
  void schedulesByHand() {
    ScheduleConfig cosine = schedule_of("cosine");
    // eta_min + (base - eta_min)(1 + cos(pi t / T)) / 2 with T = 10: t = 5 is the midpoint, t = 10 the floor.
    cosine.min_lr = 0.02;
    const LearningRateSchedule c(cosine, 0.1, 10, 5);
    QCOMPARE(c.at(0).lr, 0.1);
    QVERIFY(std::fabs(c.at(5).lr - 0.06) < 1e-15);
    QVERIFY(std::fabs(c.at(10).lr - 0.02) < 1e-15);  // past the end it holds the floor
    QVERIFY(std::fabs(c.at(50).lr - 0.02) < 1e-15);

    ScheduleConfig poly = schedule_of("poly");
    poly.power = 2;
    const LearningRateSchedule p(poly, 0.1, 10, 5);
    QVERIFY(std::fabs(p.at(5).lr - 0.025) < 1e-15);  // 0.1 (1 - 1/2)^2

    ScheduleConfig step = schedule_of("step");
    step.step_epochs = 3;
    step.gamma = 0.1;
    const LearningRateSchedule st(step, 1.0, 100, 4);  // every 12 steps
    QCOMPARE(st.at(11).lr, 1.0);
    QCOMPARE(st.at(12).lr, 0.1);
    QVERIFY(std::fabs(st.at(24).lr - 0.01) < 1e-15);

    ScheduleConfig warm = schedule_of("constant");
    warm.warmup_steps = 4;
    warm.warmup_start_factor = 0.2;
    const LearningRateSchedule w(warm, 1.0, 100, 4);
    // 0.2, 0.4, 0.6, 0.8, then 1.
    for (int k = 0; k < 4; ++k) QVERIFY(std::fabs(w.at(k).lr - (0.2 + 0.2 * k)) < 1e-15);
    QCOMPARE(w.at(4).lr, 1.0);
  }

  // OneCycleLR(max_lr 0.1, total_steps 100, pct_start 0.3, div_factor 25, final_div_factor 1e4): the rise
  // ends at step 0.3 * 100 - 1 = 29, where the rate is max_lr and the momentum base_momentum.
  void oneCycleByHand() {
    ScheduleConfig c = schedule_of("one_cycle");
    const LearningRateSchedule s(c, 0.1, 100, 10);
    QVERIFY(std::fabs(s.at(0).lr - 0.004) < 1e-15);
    QVERIFY(std::fabs(*s.at(0).momentum - 0.95) < 1e-15);
    QVERIFY(std::fabs(s.at(29).lr - 0.1) < 1e-15);
    QVERIFY(std::fabs(*s.at(29).momentum - 0.85) < 1e-15);
    QVERIFY(std::fabs(s.at(99).lr - 0.004 / 1e4) < 1e-18);
    QVERIFY(std::fabs(*s.at(99).momentum - 0.95) < 1e-15);
    // Halfway up (step 14.5 is not a step; step 29/2 rounds): the cosine midpoint at pct = 0.5 is the mean.
    ScheduleConfig odd = c;
    odd.pct_start = 0.21;  // rise ends at step 20
    const LearningRateSchedule o(odd, 0.1, 100, 10);
    QVERIFY(std::fabs(o.at(10).lr - (0.004 + 0.1) / 2) < 1e-15);
    QVERIFY(std::fabs(*o.at(10).momentum - 0.9) < 1e-15);
    // Without cycling there is no momentum to set.
    c.cycle_momentum = false;
    QVERIFY(!LearningRateSchedule(c, 0.1, 100, 10).at(5).momentum);
  }

  // ReduceLROnPlateau(mode min, factor 0.5, patience 2, threshold 0.1 rel, cooldown 1, min_lr 0.02).
  void plateauByHand() {
    ScheduleConfig c = schedule_of("plateau");
    c.gamma = 0.5;
    c.patience = 2;
    c.threshold = 0.1;
    c.cooldown = 1;
    c.min_lr = 0.02;
    LearningRateSchedule s(c, 0.1, 1000, 10);
    QCOMPARE(s.at(0).lr, 0.1);
    QVERIFY(!s.on_validation(1.0));   // best 1.0
    QVERIFY(!s.on_validation(0.95));  // not below 0.9: bad 1
    QVERIFY(!s.on_validation(0.91));  // bad 2
    QVERIFY(s.on_validation(0.92));   // bad 3 > patience: 0.05, cooldown 1
    QCOMPARE(s.at(5).lr, 0.05);
    QVERIFY(!s.on_validation(2.0));   // in cooldown: bad reset to 0
    QVERIFY(!s.on_validation(0.89));  // 0.89 < 0.9: best 0.89
    QVERIFY(!s.on_validation(0.89));  // bad 1
    QVERIFY(!s.on_validation(0.89));  // bad 2
    QVERIFY(s.on_validation(NAN));    // NaN never improves: bad 3, 0.025
    QCOMPARE(s.at(5).lr, 0.025);
    for (int i = 0; i < 4; ++i) s.on_validation(5.0);
    QCOMPARE(s.at(5).lr, 0.02);                                  // the floor
    for (int i = 0; i < 8; ++i) QVERIFY(!s.on_validation(5.0));  // at the floor nothing more is said
    // The state goes through a checkpoint and back.
    LearningRateSchedule t(c, 0.1, 1000, 10);
    t.set_state(s.state());
    QCOMPARE(t.at(0).lr, 0.02);
    QCOMPARE(t.state(), s.state());
  }

  // Log lines show measured values to 6 significant digits.
  void metricTextIsShort() {
    QCOMPARE(metric_text(0.14119790480528355), std::string("0.141198"));
    QCOMPARE(metric_text(1e-4), std::string("0.0001"));
    QCOMPARE(metric_text(2.0), std::string("2"));
  }

  void warmupLongerThanTheRunIsRefused() {
    ScheduleConfig c = schedule_of("cosine");
    c.warmup_steps = 50;
    try {
      LearningRateSchedule(c, 0.1, 50, 5);
      QFAIL("a warm-up as long as the run was accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(std::string(e.key()), std::string("schedule.warmup_steps"));
    }
  }

  // --- config ----------------------------------------------------------------------------------------------

  void recipeKeysAreChecked_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("key");
    QTest::newRow("nesterov without momentum")
        << "{\"optimizer\":{\"kind\":\"sgd\",\"momentum\":0,\"nesterov\":true}}"
        << "optimizer.nesterov";
    QTest::newRow("one-cycle with a warm-up") << "{\"schedule\":{\"kind\":\"one_cycle\",\"warmup_steps\":10}}"
                                              << "schedule.warmup_steps";
    QTest::newRow("cycled momentum of plain SGD")
        << "{\"optimizer\":{\"kind\":\"sgd\",\"momentum\":0},\"schedule\":{\"kind\":\"one_cycle\"}}"
        << "schedule.cycle_momentum";
    QTest::newRow("cosine floor above the rate") << "{\"schedule\":{\"kind\":\"cosine\",\"min_lr\":0.01}}"
                                                 << "schedule.min_lr";
    QTest::newRow("plateau on validation without one")
        << "{\"data\":{\"val_fraction\":0},\"schedule\":{\"kind\":\"plateau\"}}"
        << "schedule.monitor";
    QTest::newRow("early stopping on validation without one")
        << "{\"data\":{\"val_fraction\":0},\"early_stopping\":{\"patience\":3}}"
        << "early_stopping.monitor";
    QTest::newRow("unknown optimizer") << "{\"optimizer\":{\"kind\":\"lamb\"}}"
                                       << "optimizer.kind";
    QTest::newRow("momentum of 1") << "{\"optimizer\":{\"momentum\":1}}"
                                   << "optimizer.momentum";
    QTest::newRow("gamma of 1") << "{\"schedule\":{\"gamma\":1}}"
                                << "schedule.gamma";
  }
  void recipeKeysAreChecked() {
    QFETCH(QString, assignment);
    QFETCH(QString, key);
    try {
      config_from_json(nlohmann::json::parse(assignment.toStdString()));
      QFAIL("accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(QString::fromStdString(e.key()), key);
    }
  }

  // --- the trainer -----------------------------------------------------------------------------------------

  // Each step's logged rate is the schedule's, and the gradient norm is logged with whether it was clipped.
  void theTrainerFollowsTheSchedule() {
    QTemporaryDir dir;
    nlohmann::json j = small_run(dir.path());
    j["train"]["lr"] = 0.05;
    j["schedule"] = {{"kind", "cosine"}, {"warmup_steps", 2}, {"min_lr", 0.001}};
    const Config config = config_from_json(j);
    Trainer trainer(config);
    trainer.run();
    const auto steps = records(std::filesystem::path(dir.path().toStdString()) / "metrics.jsonl", "step");
    QCOMPARE(steps.size(), std::size_t{8});  // 32 training images / 8, two epochs
    const LearningRateSchedule s(config.schedule, 0.05, 8, 4);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      QCOMPARE(steps[k]["lr"].get<double>(), s.at(static_cast<std::int64_t>(k)).lr);
      QVERIFY(steps[k]["grad_norm"].get<double>() > 0);
      QVERIFY(!steps[k]["clipped"].get<bool>());
    }
  }

  // Clipping by the global norm, checked by hand: the first step of plain SGD moves the weights by
  // p1 - p0 = -lr * g * clip / (|g| + 1e-6), a vector of length lr * clip * |g| / (|g| + 1e-6).
  void clippingBoundsTheStep() {
    QTemporaryDir dir;
    nlohmann::json j = small_run(dir.path());
    j["train"]["steps"] = 1;
    j["train"]["lr"] = 0.25;
    j["optimizer"] = {{"kind", "sgd"}, {"momentum", 0.0}, {"clip_grad_norm", 0.01}};
    const Config config = config_from_json(j);
    Trainer trainer(config);
    trainer.run();
    const auto steps = records(std::filesystem::path(dir.path().toStdString()) / "metrics.jsonl", "step");
    QCOMPARE(steps.size(), std::size_t{1});
    const double norm = steps[0]["grad_norm"].get<double>();
    QVERIFY2(norm > 0.01 && steps[0]["clipped"].get<bool>(), qPrintable(QString("norm %1").arg(norm)));
    const std::vector<float> before = UNet::initial_slab(config.model, config.train.seed),
                             after = trainer.snapshot().parameters;
    double moved = 0;
    for (std::size_t i = 0; i < after.size(); ++i)
      moved += std::pow(static_cast<double>(after[i]) - static_cast<double>(before[i]), 2);
    const double expected = 0.25 * 0.01 * norm / (norm + 1e-6);
    QVERIFY2(std::fabs(std::sqrt(moved) - expected) <= 1e-3 * expected,
             qPrintable(QString("moved %1, expected %2").arg(std::sqrt(moved)).arg(expected)));
  }

  // Early stopping on a metric that cannot improve (min_delta larger than any change) ends the run after
  // `patience` validations past the first, says why in the log and in metrics.jsonl, and with restore_best
  // the model and last.safetensors go back to the first epoch.
  void earlyStoppingEndsTheRunAndRestoresTheBest() {
    QTemporaryDir dir;
    nlohmann::json j = small_run(dir.path());
    j["train"]["epochs"] = 10;
    j["early_stopping"] = {
        {"patience", 2}, {"monitor", "val_loss"}, {"min_delta", 1e6}, {"restore_best", true}};
    const Config config = config_from_json(j);
    LogCollector log;
    Trainer trainer(config, &log);
    trainer.run();
    QCOMPARE(trainer.state(), TrainerState::finished);
    const std::filesystem::path folder = dir.path().toStdString();
    const auto epochs = records(folder / "metrics.jsonl", "epoch");
    QCOMPARE(epochs.size(), std::size_t{3});
    QVERIFY(!epochs[0].contains("early_stop") && !epochs[1].contains("early_stop"));
    const std::string why = epochs[2].value("early_stop", "");
    QVERIFY2(why.find("val_loss has not improved") != std::string::npos &&
                 why.find("at epoch 1") != std::string::npos,
             why.c_str());
    QVERIFY(log.any("early stopping: val_loss has not improved"));
    QVERIFY(log.any("restored the weights of epoch 1"));
    const TrainingSnapshot snap = trainer.snapshot();
    QCOMPARE(snap.position.epoch, std::int64_t{1});
    QCOMPARE(snap.position.step, std::int64_t{4});
    const Checkpoint last = load_checkpoint(folder / "last.safetensors");
    QCOMPARE(last.position.step, std::int64_t{4});
    QCOMPARE(last.parameters, snap.parameters);
    // The first epoch's weights: what a 4-step run of the same config ends with.
    QTemporaryDir other;
    nlohmann::json four = small_run(other.path());
    four["train"]["steps"] = 4;
    Trainer reference(config_from_json(four));
    reference.run();
    QCOMPARE(reference.snapshot().parameters, snap.parameters);
  }

  // The plateau state, early stopping's counts and SGD's momentum buffer travel in checkpoints, so that a run
  // split by a resume equals one that was not.
  void aResumedRecipeEqualsAnUnbrokenOne() {
    QTemporaryDir a, b;
    const auto recipe = [](const QString& dir, int epochs) {
      nlohmann::json j = small_run(dir);
      j["train"]["epochs"] = epochs;
      j["train"]["lr"] = 0.01;
      j["optimizer"] = {{"kind", "sgd"}, {"momentum", 0.99}, {"nesterov", true}};
      j["schedule"] = {{"kind", "plateau"}, {"patience", 0}, {"gamma", 0.5}, {"monitor", "val_iou"}};
      j["early_stopping"] = {{"patience", 5}};
      return config_from_json(j);
    };
    Trainer unbroken(recipe(a.path(), 4));
    unbroken.run();
    Trainer first(recipe(b.path(), 2));
    first.run();
    const Checkpoint half =
        load_checkpoint(std::filesystem::path(b.path().toStdString()) / "last.safetensors");
    QCOMPARE(half.sgd_momentum.size(), half.parameters.size());
    QVERIFY(half.adam_m.empty());
    QVERIFY(half.position.training_state.contains("schedule"));
    QVERIFY(half.position.training_state.contains("early_stopping"));
    Trainer second(recipe(b.path(), 4));
    second.resume_from(half, std::filesystem::path(b.path().toStdString()) / "last.safetensors");
    second.run();
    QCOMPARE(second.snapshot().parameters, unbroken.snapshot().parameters);
    QCOMPARE(second.snapshot().sgd_momentum, unbroken.snapshot().sgd_momentum);
    QCOMPARE(second.snapshot().position.training_state, unbroken.snapshot().position.training_state);
    const auto steps_a = records(std::filesystem::path(a.path().toStdString()) / "metrics.jsonl", "step");
    const auto steps_b = records(std::filesystem::path(b.path().toStdString()) / "metrics.jsonl", "step");
    QCOMPARE(steps_b.size(), steps_a.size());
    for (std::size_t k = 0; k < steps_a.size(); ++k) QCOMPARE(steps_b[k]["lr"], steps_a[k]["lr"]);
  }

  // A checkpoint of another optimizer resumes with a fresh state, said in the log.
  void anotherOptimizersStateStartsAfresh() {
    QTemporaryDir dir;
    nlohmann::json j = small_run(dir.path());
    j["train"]["steps"] = 2;
    Trainer adam(config_from_json(j));
    adam.run();
    const std::filesystem::path last = std::filesystem::path(dir.path().toStdString()) / "last.safetensors";
    const Checkpoint saved = load_checkpoint(last);
    QCOMPARE(saved.adam_m.size(), saved.parameters.size());
    j["train"]["steps"] = 3;
    j["optimizer"] = {{"kind", "sgd"}};
    LogCollector log;
    Trainer sgd(config_from_json(j), &log);
    sgd.resume_from(saved, last);
    sgd.run();
    QVERIFY(log.any("optimizer state (adamw) does not apply to optimizer.kind sgd"));
    QCOMPARE(sgd.snapshot().sgd_momentum.size(), saved.parameters.size());
  }

  // A run writes its validation samples to validation.json; a resumed run keeps them whatever val_fraction
  // and seed say now, and another run can validate on the same images (data.validation_split).
  void theValidationSplitIsKeptWithTheRun() {
    QTemporaryDir a, b, c;
    nlohmann::json j = small_run(a.path());
    j["train"]["steps"] = 2;
    Trainer first(config_from_json(j));
    first.run();
    const std::filesystem::path folder_a = a.path().toStdString();
    const auto read = [](const std::filesystem::path& file) {
      std::ifstream in(file);
      return nlohmann::json::parse(in);
    };
    const nlohmann::json split_a = read(folder_a / "validation.json");
    QCOMPARE(split_a["samples"].size(), std::size_t{8});  // 0.2 of 40
    QCOMPARE(split_a["format"].get<std::string>(), std::string("unet-workbench-validation/1"));

    // Resumed with another val_fraction and seed: the same 8 images, and the file is untouched.
    nlohmann::json resumed = j;
    resumed["train"]["steps"] = 4;
    resumed["data"]["val_fraction"] = 0.5;
    resumed["data"]["seed"] = 7;
    LogCollector log;
    Trainer second(config_from_json(resumed), &log);
    second.resume_from(load_checkpoint(folder_a / "last.safetensors"), folder_a / "last.safetensors");
    second.run();
    QVERIFY(log.any("validating on the 8 samples"));
    QCOMPARE(read(folder_a / "validation.json"), split_a);

    // Another run, another seed, validating on run A's images.
    nlohmann::json other = small_run(b.path());
    other["train"]["steps"] = 1;
    other["data"]["seed"] = 3;
    other["data"]["validation_split"] = a.path().toStdString();
    Trainer third(config_from_json(other));
    third.run();
    QCOMPARE(read(std::filesystem::path(b.path().toStdString()) / "validation.json")["samples"],
             split_a["samples"]);
    // Without it, seed 3 picks other images.
    other["data"]["validation_split"] = "";
    other["checkpoint"]["dir"] = c.path().toStdString();
    Trainer fourth(config_from_json(other));
    fourth.run();
    QVERIFY(read(std::filesystem::path(c.path().toStdString()) / "validation.json")["samples"] !=
            split_a["samples"]);

    // A file that is not a split is refused by the key's name.
    const std::filesystem::path bogus = std::filesystem::path(c.path().toStdString()) / "bogus.json";
    std::ofstream(bogus) << "{\"samples\": 3}";
    other["data"]["validation_split"] = bogus.string();
    other["checkpoint"]["dir"] = (c.path() + "/d").toStdString();
    try {
      Trainer(config_from_json(other)).run();
      QFAIL("a bogus split was accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(std::string(e.key()), std::string("data.validation_split"));
    }
  }

  // train.val_every_steps validates within epochs too; early stopping counts those validations and restores
  // a position within an epoch.
  void validationWithinEpochs() {
    QTemporaryDir dir;
    nlohmann::json j = small_run(dir.path());
    j["train"]["val_every_steps"] = 3;
    Trainer trainer(config_from_json(j));
    trainer.run();
    const std::filesystem::path folder = dir.path().toStdString();
    std::vector<std::pair<std::int64_t, bool>> seen;
    for (const auto& r : records(folder / "metrics.jsonl", "epoch"))
      seen.emplace_back(r["step"].get<std::int64_t>(), r.value("within_epoch", false));
    // 4 steps an epoch: within at 3 and 6, the epochs' ends at 4 and 8.
    QCOMPARE(seen,
             (std::vector<std::pair<std::int64_t, bool>>{{3, true}, {4, false}, {6, true}, {8, false}}));

    QTemporaryDir stopped_dir;
    nlohmann::json e = small_run(stopped_dir.path());
    e["train"]["epochs"] = 10;
    e["train"]["val_every_steps"] = 1;
    e["early_stopping"] = {{"patience", 2}, {"min_delta", 1e6}, {"restore_best", true}};
    Trainer stopped(config_from_json(e));
    stopped.run();
    const Checkpoint last =
        load_checkpoint(std::filesystem::path(stopped_dir.path().toStdString()) / "last.safetensors");
    QCOMPARE(last.position.step, std::int64_t{1});
    QCOMPARE(last.position.epoch_step, std::int64_t{1});
    QTemporaryDir one_dir;
    nlohmann::json one = small_run(one_dir.path());
    one["train"]["steps"] = 1;
    Trainer reference(config_from_json(one));
    reference.run();
    QCOMPARE(last.parameters, reference.snapshot().parameters);
  }
};

QTEST_GUILESS_MAIN(TestRecipes)
#include "test_recipes.moc"
