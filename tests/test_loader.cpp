// The training loader (train/prefetcher.h): the same batches bit for bit with one worker or four (patch mode,
// every augmentation on) and so the same trained model, steps popped in the run's order, the steps held
// bounded in bytes (data.prefetch_mib) as well as in number, a worker's exception reaching the trainer after
// the steps before it, and a loader stopped mid-epoch returning.
#include <QTemporaryDir>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "test_support.h"
#include "unet/config/config.h"
#include "unet/data/open_dataset.h"
#include "unet/step/data_plan.h"
#include "unet/train/epoch_plan.h"
#include "unet/train/prefetcher.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

// Patch mode over synthetic 96x96 images, 32x32 patches, batch 4, every augmentation at p = 1.
Config patch_config() {
  nlohmann::json j = {{"model", {{"in_channels", 1}, {"width", 4}, {"depth", 2}}},
                      {"data",
                       {{"image_size", {96, 96}},
                        {"synthetic_samples", 12},
                        {"mode", "patch"},
                        {"patch_size", {32, 32}},
                        {"patches_per_epoch", 20},
                        {"seed", 7}}},
                      {"train", {{"batch_size", 4}}}};
  Config c = config_from_json(j);
  AugmentConfig& a = c.augment;
  a.rotation_p = a.scale_p = a.elastic_p = a.brightness_p = 1;
  a.contrast_p = a.gamma_p = a.noise_p = a.blur_p = 1;
  return c;
}

// Every step of `steps` (from the start of epoch 0, across epochs) as a loader of `workers` threads hands
// them out.
std::vector<PreparedStep> load_steps(const Config& c, int workers, std::int64_t steps) {
  const auto dataset = open_dataset(c);
  const BatchRecipe recipe = training_recipe(c);
  std::vector<std::size_t> train(dataset->size());
  for (std::size_t i = 0; i < train.size(); ++i) train[i] = i;
  const std::int64_t epoch_samples = samples_per_epoch(c, *dataset, train);
  const std::int64_t batch = c.train.batch_size;
  const std::int64_t spe = (epoch_samples + batch - 1) / batch;
  const TrainingSteps source(c, *dataset, recipe, train, epoch_samples, batch, {});
  BatchPrefetcher loader(
      [&](std::int64_t e, std::int64_t s, std::int64_t m) { return source.build(e, s, m); },
      {.steps = 4, .bytes = 0, .workers = workers}, 0, 0, spe, steps, 1);
  UNET_CHECK(loader.workers() == workers, usage, "the loader's worker count");
  std::vector<PreparedStep> out;
  double waited = 0;
  for (std::int64_t i = 0; i < steps; ++i) out.push_back(loader.pop(waited));
  return out;
}

// A step of one micro-batch, one replica, `values` floats.
StepBatches sized_step(std::int64_t values, float fill) {
  HostBatch b;
  b.count = 1;
  b.height = 1;
  b.width = values;
  b.channels = 1;
  b.pixels.assign(static_cast<std::size_t>(values), fill);
  StepBatches s;
  s.micro.push_back({std::move(b)});
  return s;
}

}  // namespace

class TestLoader : public QObject {
  Q_OBJECT
 private slots:
  void fourWorkersGiveOneWorkersBatches() {
    const Config c = patch_config();
    const std::int64_t steps = 12;  // 5 steps an epoch: across two epoch boundaries
    const auto one = load_steps(c, 1, steps), four = load_steps(c, 4, steps);
    QCOMPARE(static_cast<std::int64_t>(one.size()), steps);
    QCOMPARE(four.size(), one.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      QCOMPARE(one[i].epoch, static_cast<std::int64_t>(i) / 5);
      QCOMPARE(one[i].epoch_step, static_cast<std::int64_t>(i) % 5);
      QCOMPARE(four[i].epoch, one[i].epoch);
      QCOMPARE(four[i].epoch_step, one[i].epoch_step);
      QCOMPARE(four[i].batches.micro.size(), one[i].batches.micro.size());
      const HostBatch &a = one[i].batches.micro[0][0], &b = four[i].batches.micro[0][0];
      QCOMPARE(b.count, a.count);
      QCOMPARE(b.height, 32);
      QVERIFY(a.pixels.size() == b.pixels.size());
      QVERIFY(std::memcmp(a.pixels.data(), b.pixels.data(), a.pixels.size() * sizeof(float)) == 0);
      QVERIFY(a.masks == b.masks);
    }
    // The augmentation drew something: steps differ from each other.
    QVERIFY(one[0].batches.micro[0][0].pixels != one[5].batches.micro[0][0].pixels);
  }

  void trainingGivesTheSameModelWithOneWorkerOrFour() {
    QTemporaryDir one_dir, four_dir;
    std::vector<float> parameters[2];
    for (const int workers : {1, 4}) {
      Config c = patch_config();
      c.train.steps = 7;  // across an epoch's end
      c.data.workers = workers;
      c.checkpoint.dir = (workers == 1 ? one_dir : four_dir).path().toStdString();
      Trainer trainer(c);
      trainer.run();
      parameters[workers == 1 ? 0 : 1] = trainer.snapshot().parameters;
    }
    QVERIFY(!parameters[0].empty());
    QVERIFY(parameters[0] == parameters[1]);
  }

  void stepsComeOutInOrderWhateverFinishesFirst() {
    // Even steps take longer to build than odd ones, so workers finish out of order.
    BatchPrefetcher loader(
        [](std::int64_t e, std::int64_t s, std::int64_t) {
          if (s % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return sized_step(4, static_cast<float>(e * 100 + s));
        },
        {.steps = 6, .bytes = 0, .workers = 4}, 1, 2, 7, 20, 1);
    std::int64_t epoch = 1, step = 2;
    double waited = 0;
    for (int i = 0; i < 20; ++i) {
      const PreparedStep p = loader.pop(waited);
      QCOMPARE(p.epoch, epoch);
      QCOMPARE(p.epoch_step, step);
      QCOMPARE(p.batches.micro[0][0].pixels[0], static_cast<float>(epoch * 100 + step));
      if (++step == 7) step = 0, ++epoch;
    }
  }

  void theByteBoundHoldsFewerSteps() {
    // Steps of 1 MiB, 2.5 MiB allowed: two steps held, though data.prefetch would allow eight.
    constexpr std::int64_t kStepValues = (1 << 20) / sizeof(float);
    BatchPrefetcher loader(
        [](std::int64_t, std::int64_t, std::int64_t) { return sized_step(kStepValues, 1); },
        {.steps = 8, .bytes = 5 << 19, .workers = 4}, 0, 0, 100, 30, 1);
    double waited = 0;
    for (int i = 0; i < 30; ++i) {
      // Let the workers fill what they may before each pop.
      while (loader.held_steps() < std::min(2, 30 - i)) std::this_thread::yield();
      (void)loader.pop(waited);
    }
    QCOMPARE(loader.most_held_steps(), 2);
    QCOMPARE(loader.most_held_bytes(), 2 * kStepValues * static_cast<std::int64_t>(sizeof(float)));
  }

  void aStepLargerThanTheBoundGoesAlone() {
    BatchPrefetcher loader([](std::int64_t, std::int64_t, std::int64_t) { return sized_step(1000, 1); },
                           {.steps = 8, .bytes = 100, .workers = 4}, 0, 0, 10, 6, 1);
    double waited = 0;
    for (int i = 0; i < 6; ++i) QCOMPARE(loader.pop(waited).batches.micro[0][0].pixels.size(), 1000u);
    QCOMPARE(loader.most_held_steps(), 1);
  }

  void prefetchMibAndWorkersReachTheLimits() {
    Config c;
    c.data.prefetch = 6;
    c.data.prefetch_mib = 3;
    c.data.workers = 5;
    const PrefetchLimits l = prefetch_limits(c.data);
    QCOMPARE(l.steps, 6);
    QCOMPARE(l.bytes, 3 << 20);
    QCOMPARE(l.workers, 5);
    c.data.workers = 0;
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    QCOMPARE(prefetch_limits(c.data).workers, std::min(hardware, 8));
  }

  void aWorkersExceptionReachesTheTrainerAfterTheStepsBeforeIt() {
    BatchPrefetcher loader(
        [](std::int64_t, std::int64_t s, std::int64_t) {
          if (s == 3) throw std::runtime_error("bad sample in step 3");
          return sized_step(4, static_cast<float>(s));
        },
        {.steps = 4, .bytes = 0, .workers = 4}, 0, 0, 10, 10, 1);
    double waited = 0;
    for (int s = 0; s < 3; ++s) QCOMPARE(loader.pop(waited).epoch_step, s);
    try {
      (void)loader.pop(waited);
      QFAIL("step 3's exception did not reach pop()");
    } catch (const std::runtime_error& e) {
      QCOMPARE(QString(e.what()), QString("bad sample in step 3"));
    }
  }

  void stoppingMidEpochReturns() {
    // Workers blocked on a full queue, and workers in the middle of building, when the loader goes.
    std::atomic<int> built{0};
    {
      BatchPrefetcher loader(
          [&](std::int64_t, std::int64_t, std::int64_t) {
            ++built;
            return sized_step(16, 0);
          },
          {.steps = 3, .bytes = 0, .workers = 3}, 0, 0, 1000, 1000, 1);
      double waited = 0;
      (void)loader.pop(waited);
      (void)loader.pop(waited);
    }
    QVERIFY(built.load() < 1000);  // it stopped long before the end, and returned
  }
};

QTEST_GUILESS_MAIN(TestLoader)
#include "test_loader.moc"
