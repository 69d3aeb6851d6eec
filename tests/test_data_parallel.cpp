// Data parallelism on CPU replicas (docs/MODEL.md, "Data parallelism"):
// - one replica and three replicas with the same global batch of 7 (split 3 + 2 + 2) compute the same
//   gradient and, after three steps, the same weights; every replica holds bitwise the same values;
// - gradient accumulation: batch 8 x 1 equals batch 4 x 2 on the same samples;
// - a failure on one replica skips the step on all of them, changes nothing, and the next step works;
// - inf/NaN gradients on one replica are counted in the sum every replica holds;
// - which communicator joins which replicas (the table on every machine; real GPUs where there is one);
// - on a GPU (rows skipped without): two replicas on cuda:0 train as two CPU replicas, sum in buckets as in
//   one sum, and NCCL with one rank trains as one replica.
// Registered again as test_data_parallel_async (tests/CMakeLists.txt): the same rows on the asynchronous CPU
// backend, whose streams order work as a GPU's do.
#include <cmath>

#include "fault_injecting_backend.h"
#include "test_support.h"
#include "unet/backend/communicator_choice.h"
#include "unet/backend/task_stream.h"
#include "unet/config/config.h"
#include "unet/data/synthetic.h"
#include "unet/step/data_parallel.h"

using namespace unet;

namespace {

UNetSpec small_spec() {
  UNetSpec s;
  s.in_channels = 3;
  s.classes = 1;
  s.width = 4;
  s.depth = 2;
  return s;
}

std::vector<DeviceId> cpus(int n) {
  std::vector<DeviceId> d;
  for (int i = 0; i < n; ++i) d.push_back({DeviceKind::cpu, i});
  return d;
}

struct Data {
  SyntheticCells cells{
      SyntheticOptions{.count = 32, .height = 32, .width = 32, .channels = 3, .classes = 1, .seed = 3}};
  // > 0: in every sample, each pixel whose index is a multiple of this (and, in every third sample, its first
  // 700 pixels) is labelled 255, an unlabelled pixel.
  std::size_t unlabelled_every = 0;

  Data() = default;
  Data(int classes, std::size_t unlabelled)
      : cells(SyntheticOptions{
            .count = 32, .height = 32, .width = 32, .channels = 3, .classes = classes, .seed = 3}),
        unlabelled_every(unlabelled) {}

  // One step over samples [first, first + batch * accumulation): micro-batches of `batch`, each split over
  // `replicas` as the spec says.
  StepBatches step(std::size_t first, std::int64_t batch, std::int64_t accumulation, int replicas) const {
    StepBatches s;
    std::size_t next = first;
    for (std::int64_t j = 0; j < accumulation; ++j) {
      std::vector<HostBatch> shares(static_cast<std::size_t>(replicas));
      const auto sizes = replica_split(batch, replicas);
      for (int r = 0; r < replicas; ++r) {
        std::vector<std::size_t> samples;
        std::vector<std::int64_t> positions;
        for (std::int64_t k = 0; k < sizes[static_cast<std::size_t>(r)]; ++k) {
          samples.push_back(next++);
          positions.push_back(0);
        }
        HostBatch& b = shares[static_cast<std::size_t>(r)];
        assemble_batch(cells, samples, positions, 0, false, 0, b);
        if (unlabelled_every > 0) {
          const auto plane = static_cast<std::size_t>(b.height * b.width);
          for (std::size_t k = 0; k < samples.size(); ++k)
            for (std::size_t i = 0; i < plane; i += unlabelled_every) b.masks[k * plane + i] = 255;
          // Samples differ in how much is labelled (every third mostly unlabelled), so shares do too: a share
          // normalised on its own would be wrong.
          for (std::size_t k = 0; k < samples.size(); ++k)
            if (samples[k] % 3 == 0)
              std::fill_n(b.masks.begin() + static_cast<std::ptrdiff_t>(k * plane), 700, 255);
        }
      }
      s.micro.push_back(std::move(shares));
    }
    return s;
  }
};

std::unique_ptr<DataParallel> make(int replicas, const UNetSpec& spec = small_spec(),
                                   DataParallelOptions o = {}) {
  o.spec = spec;
  o.devices = cpus(replicas);
  o.optimizer.lr = 1e-2f;
  auto dp = std::make_unique<DataParallel>(o);
  dp->set_parameters(UNet::initial_slab(spec, 11));
  return dp;
}

// A cap for each GPU replica: replicas that share a device each see all of it.
constexpr std::int64_t kGpuCap = std::int64_t{2} << 30;

std::unique_ptr<DataParallel> make_on(std::vector<DeviceId> devices, DataParallelOptions o) {
  o.spec = small_spec();
  o.devices = std::move(devices);
  o.optimizer.lr = 1e-2f;
  auto dp = std::make_unique<DataParallel>(o);
  dp->set_parameters(UNet::initial_slab(o.spec, 11));
  return dp;
}

// Three steps of batch 6 over `replicas` on each: the first step's gradients and the final weights agree
// within `tolerance` (relative to their norm).
bool same_training(DataParallel& a, DataParallel& b, int replicas, double tolerance) {
  Data data;
  for (int s = 0; s < 3; ++s) {
    const StepBatches step = data.step(6 * static_cast<std::size_t>(s), 6, 1, replicas);
    HELPER_VERIFY(a.compute_gradients(step).ok);
    HELPER_VERIFY(b.compute_gradients(step).ok);
    if (s == 0) {
      const double error = test::norm_relative_error(a.gradients(0), b.gradients(0));
      qInfo("first gradients' relative error %.3g", error);
      HELPER_VERIFY2(error <= tolerance, qPrintable(QString("gradient relative error %1").arg(error)));
    }
    a.apply_optimizer(1e-2f);
    b.apply_optimizer(1e-2f);
  }
  const double error = test::norm_relative_error(a.parameters(0), b.parameters(0));
  qInfo("weights' relative error after 3 steps %.3g", error);
  HELPER_VERIFY2(error <= tolerance, qPrintable(QString("weights relative error %1").arg(error)));
  HELPER_VERIFY(a.parameters(0) != UNet::initial_slab(small_spec(), 11));  // they did move
  return true;
}

}  // namespace

class TestDataParallel : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void splitFollowsTheSpec() {
    QCOMPARE(replica_split(7, 3), (std::vector<std::int64_t>{3, 2, 2}));
    QCOMPARE(replica_split(8, 3), (std::vector<std::int64_t>{3, 3, 2}));
    QCOMPARE(replica_split(2, 3), (std::vector<std::int64_t>{1, 1, 0}));
    QCOMPARE(replica_split(16, 1), (std::vector<std::int64_t>{16}));
  }

  void oneAndThreeReplicasAgree() {
    Data data;
    auto one = make(1), three = make(3);
    // First step's gradients, before any update.
    StepOutcome a = one->compute_gradients(data.step(0, 7, 1, 1));
    StepOutcome b = three->compute_gradients(data.step(0, 7, 1, 3));
    QVERIFY(a.ok && b.ok);
    QCOMPARE(a.pixels, 7 * 32 * 32);
    QCOMPARE(b.pixels, a.pixels);
    QVERIFY(std::fabs(a.mean_loss() - b.mean_loss()) <= 1e-6 * a.mean_loss());
    const auto g1 = one->gradients(0), g3 = three->gradients(0);
    const double grad_error = test::norm_relative_error(g1, g3);
    qInfo("R=1 vs R=3 gradient relative error %.3g", grad_error);
    QVERIFY2(grad_error <= 1e-5, qPrintable(QString("gradient relative error %1").arg(grad_error)));
    for (int r = 1; r < 3; ++r) QCOMPARE(three->gradients(r), g3);

    one->apply_optimizer(1e-2f);
    three->apply_optimizer(1e-2f);
    for (int s = 1; s < 3; ++s) {
      QVERIFY(one->compute_gradients(data.step(7 * s, 7, 1, 1)).ok);
      QVERIFY(three->compute_gradients(data.step(7 * s, 7, 1, 3)).ok);
      one->apply_optimizer(1e-2f);
      three->apply_optimizer(1e-2f);
    }
    const auto w1 = one->parameters(0), w3 = three->parameters(0);
    const double weight_error = test::norm_relative_error(w1, w3);
    qInfo("R=1 vs R=3 weights relative error after 3 steps %.3g", weight_error);
    QVERIFY2(weight_error <= 1e-5, qPrintable(QString("weights relative error %1").arg(weight_error)));
    QVERIFY(w1 != UNet::initial_slab(small_spec(), 11));  // they did move
    for (int r = 1; r < 3; ++r) {
      QCOMPARE(three->parameters(r), w3);
      QCOMPARE(three->optimizer_state(r), three->optimizer_state(0));
    }
  }

  void accumulationEqualsTheLargerBatch_data() {
    QTest::addColumn<int>("replicas");
    QTest::newRow("1 replica") << 1;
    QTest::newRow("2 replicas") << 2;
  }
  // Each step starts both runs from the same weights and Adam state: after a few free-running steps the two
  // drift apart by more than rounding (a weight 1e-8 away flips a ReLU or a max-pool choice, which moves a
  // gradient by 1e-4), so comparing free runs would test the hardware's rounding, not accumulation.
  void accumulationEqualsTheLargerBatch() {
    QFETCH(int, replicas);
    Data data;
    auto whole = make(replicas), halves = make(replicas);
    for (int s = 0; s < 3; ++s) {
      const StepOutcome a = whole->compute_gradients(data.step(8 * s, 8, 1, replicas));
      const StepOutcome b = halves->compute_gradients(data.step(8 * s, 4, 2, replicas));
      QVERIFY(a.ok && b.ok);
      QCOMPARE(a.pixels, b.pixels);
      QVERIFY2(
          std::fabs(a.mean_loss() - b.mean_loss()) <= 1e-6 * a.mean_loss(),
          qPrintable(QString("step %1: mean loss %2 vs %3").arg(s).arg(a.mean_loss()).arg(b.mean_loss())));
      const double gradient_error = test::norm_relative_error(whole->gradients(0), halves->gradients(0));
      QVERIFY2(gradient_error <= 1e-5,
               qPrintable(QString("step %1: gradient relative error %2").arg(s).arg(gradient_error)));
      whole->apply_optimizer(1e-2f);
      halves->apply_optimizer(1e-2f);
      const auto weights = whole->parameters(0);
      const double weight_error = test::norm_relative_error(weights, halves->parameters(0));
      QVERIFY2(weight_error <= 1e-5,
               qPrintable(QString("step %1: weights relative error %2").arg(s).arg(weight_error)));
      halves->set_parameters(weights);
      halves->set_optimizer_state(whole->optimizer_state(0), s + 1);
    }
  }

  // Every loss kind, with class weights and unlabelled pixels too: one replica with batch 8 and three
  // replicas with batch 4 x accumulation 2 (shares of 2, 1, 1 samples) take the same step. A cross-entropy
  // normalised by each share's own labelled pixels, or a Dice averaged per share, would differ.
  void splitDoesNotChangeAnyLoss_data() {
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("classes");
    QTest::addColumn<bool>("options");
    for (const LossKindInfo& info : kLossKinds)
      for (int classes : {1, 3})
        for (bool options : {false, true})
          QTest::newRow(qPrintable(QString("%1 %2%3")
                                       .arg(info.name, classes == 1 ? "binary" : "softmax")
                                       .arg(options ? ", weights and ignored pixels" : "")))
              << static_cast<int>(info.kind) << classes << options;
  }
  void splitDoesNotChangeAnyLoss() {
    QFETCH(int, kind);
    QFETCH(int, classes);
    QFETCH(bool, options);
    Data data(classes, options ? 7 : 0);
    UNetSpec spec = small_spec();
    spec.classes = classes;
    DataParallelOptions o;
    o.loss.kind = static_cast<LossKind>(kind);
    o.loss.cross_entropy_weight = 0.6;
    o.loss.dice_weight = 1.4;
    if (options) {
      o.loss.class_weights =
          classes == 1 ? std::vector<double>{0.3, 2.0} : std::vector<double>{0.5, 1.5, 3.0};
      o.loss.ignore_index = 255;
      o.loss.dice_include_background = true;
    }
    auto whole = make(1, spec, o), split = make(3, spec, o);
    const StepOutcome a = whole->compute_gradients(data.step(0, 8, 1, 1));
    const StepOutcome b = split->compute_gradients(data.step(0, 4, 2, 3));
    QVERIFY(a.ok && b.ok);
    QCOMPARE(a.loss.images, 8);
    QCOMPARE(b.loss.images, 8);
    QCOMPARE(b.loss.labelled_pixels, a.loss.labelled_pixels);
    if (options) QVERIFY(a.loss.labelled_pixels < a.pixels);
    QVERIFY(a.mean_loss() > 0);
    QVERIFY2(
        std::fabs(a.mean_loss() - b.mean_loss()) <= 1e-6 * a.mean_loss(),
        qPrintable(QString("loss %1 vs %2").arg(a.mean_loss(), 0, 'g', 12).arg(b.mean_loss(), 0, 'g', 12)));
    const double gradient_error = test::norm_relative_error(whole->gradients(0), split->gradients(0));
    QVERIFY2(gradient_error <= 1e-5, qPrintable(QString("gradient relative error %1").arg(gradient_error)));
    // Validation takes the same loss, whatever the replicas.
    const auto per_replica = [&](int replicas) {
      std::vector<std::vector<HostBatch>> batches(static_cast<std::size_t>(replicas));
      StepBatches shares = data.step(8, 6, 1, replicas);
      for (std::size_t r = 0; r < batches.size(); ++r) batches[r].push_back(std::move(shares.micro[0][r]));
      return batches;
    };
    const EvalOutcome e1 = whole->evaluate(per_replica(1)), e3 = split->evaluate(per_replica(3));
    QVERIFY(std::fabs(e1.loss_value - e3.loss_value) <= 1e-6 * e1.loss_value);
  }

  // The denominators come from the host masks: per mask value its class's weight, ignored values left out.
  void lossDenominatorsFromTheMasks() {
    HostBatch b;
    b.count = 2;
    b.height = 1;
    b.width = 4;
    b.masks = {0, 1, 2, 255, 2, 2, 0, 255};
    LossDesc d;
    d.class_weights = {0.5, 2.0, 4.0};
    d.ignore_index = 255;
    LossTotals t = loss_denominators(d, 3, b);
    QCOMPARE(t.images, std::int64_t{2});
    QCOMPARE(t.labelled_pixels, std::int64_t{6});
    QCOMPARE(t.class_weight_sum, 0.5 * 2 + 2.0 + 4.0 * 3);
    // Binary: any non-zero value is foreground, 255 too when nothing is ignored.
    d.class_weights = {0.5, 2.0};
    d.ignore_index = -1;
    t = loss_denominators(d, 1, b);
    QCOMPARE(t.labelled_pixels, std::int64_t{8});
    QCOMPARE(t.class_weight_sum, 0.5 * 2 + 2.0 * 6);
    // The mean: cross_entropy_weight x (sum / weights) + dice_weight x (Dice sum / images).
    t.cross_entropy_sum = 6.5;
    t.dice_sum = 0.8;
    d.kind = LossKind::cross_entropy_dice;
    d.cross_entropy_weight = 2;
    d.dice_weight = 0.5;
    QCOMPARE(t.mean(d), 2 * 6.5 / 13.0 + 0.5 * 0.8 / 2);
    d.kind = LossKind::dice;
    QCOMPARE(t.mean(d), 0.5 * 0.8 / 2);
    t.class_weight_sum = 0;  // every pixel ignored: no cross-entropy term, not NaN
    d.kind = LossKind::cross_entropy;
    QCOMPARE(t.mean(d), 0.0);
  }

  void aReplicaWithoutSamplesStillTakesPart() {
    Data data;
    auto one = make(1), three = make(3);
    // A batch of 2 over 3 replicas: the third gets nothing and contributes zeros.
    QVERIFY(one->compute_gradients(data.step(0, 2, 1, 1)).ok);
    QVERIFY(three->compute_gradients(data.step(0, 2, 1, 3)).ok);
    const double e = test::norm_relative_error(one->gradients(0), three->gradients(2));
    QVERIFY2(e <= 1e-5, qPrintable(QString("gradient relative error %1").arg(e)));
  }

  void aFailingReplicaSkipsTheStepEverywhere_data() {
    QTest::addColumn<std::int64_t>("bucket_bytes");
    QTest::newRow("one sum after backward") << std::int64_t{0};
    QTest::newRow("buckets during backward") << std::int64_t{1024};
  }
  void aFailingReplicaSkipsTheStepEverywhere() {
    QFETCH(std::int64_t, bucket_bytes);
    UNetSpec spec = small_spec();
    spec.classes = 3;
    Data data;
    DataParallelOptions o;
    o.bucket_bytes = bucket_bytes;
    auto dp = make(3, spec, o);
    const auto before = dp->parameters(0);
    StepBatches bad = data.step(0, 6, 1, 3);
    for (auto& m : bad.micro[0][1].masks) m = 0;
    bad.micro[0][1].masks[5] = 7;  // class 7 of 3: replica 1's loss refuses it
    const StepOutcome outcome = dp->compute_gradients(bad);
    QVERIFY(!outcome.ok);
    QCOMPARE(outcome.failed_rank, 1);
    try {
      std::rethrow_exception(outcome.error);
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
    }
    for (int r = 0; r < 3; ++r) QCOMPARE(dp->parameters(r), before);
    // The replicas are still in step: a good step goes through.
    StepBatches good = data.step(0, 6, 1, 3);
    for (auto& share : good.micro[0])
      for (auto& m : share.masks) m = m % 3;
    QVERIFY(dp->compute_gradients(good).ok);
    dp->apply_optimizer(1e-2f);
    QVERIFY(dp->parameters(0) != before);
    QCOMPARE(dp->parameters(1), dp->parameters(0));
  }

  // Gradients summed in buckets while backward runs (on the last micro-batch only) are bitwise the sums made
  // after backward, step after step, with and without accumulation; the buckets partition the slab, summed
  // last layers first.
  void bucketsSumAsOneSum_data() {
    QTest::addColumn<std::int64_t>("bucket_bytes");
    QTest::addColumn<std::int64_t>("accumulation");
    QTest::newRow("1 KiB buckets") << std::int64_t{1024} << std::int64_t{1};
    QTest::newRow("1 KiB buckets, accumulation 3") << std::int64_t{1024} << std::int64_t{3};
    QTest::newRow("8 KiB buckets") << std::int64_t{8192} << std::int64_t{1};
    QTest::newRow("one bucket") << (std::int64_t{1} << 30) << std::int64_t{2};
  }
  void bucketsSumAsOneSum() {
    QFETCH(std::int64_t, bucket_bytes);
    QFETCH(std::int64_t, accumulation);
    // Counts each sum the replicas make and the range it covers (replica 0's calls).
    struct Sums {
      std::mutex mutex;
      std::vector<std::pair<const float*, std::int64_t>> calls;
    } sums;
    struct Counting final : Communicator {
      SharedMemoryCommunicator inner;
      Sums& sums;
      Counting(int ranks, Sums& s) : inner(ranks), sums(s) {}
      int size() const override { return inner.size(); }
      void all_reduce_sum(int rank, Backend& b, Stream& s, Tensor& data) override {
        if (rank == 0) {
          std::lock_guard lock(sums.mutex);
          sums.calls.emplace_back(data.data_as<float>(), data.numel());
        }
        // On asynchronous streams (UNET_CPU_STREAMS=async), an interconnect slow to take each sum and slow to
        // run it, as a GPU's can be: a step that reads the gradients before their last sum is ordered (by an
        // event recorded too early, say) then reads them unsummed, every time, instead of when threads happen
        // to interleave that way.
        if (TaskStream* queued = as_task_stream(s)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          queued->enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
        }
        inner.all_reduce_sum(rank, b, s, data);
      }
      void all_reduce_host(int rank, std::span<double> values) override {
        inner.all_reduce_host(rank, values);
      }
      void abort(const std::string& why) override { inner.abort(why); }
    };
    DataParallelOptions o;
    o.bucket_bytes = bucket_bytes;
    o.make_communicator = [&sums](std::span<Backend* const> ranks) {
      return std::make_unique<Counting>(static_cast<int>(ranks.size()), sums);
    };
    auto bucketed = make(3, small_spec(), o);
    auto whole = make(3);
    Data data;
    const std::int64_t batch = 6;
    for (int s = 0; s < 3; ++s) {
      const StepBatches step =
          data.step(static_cast<std::size_t>(s * batch * accumulation) % 12, batch, accumulation, 3);
      sums.calls.clear();
      // Replica 0's thread records its sums; compute_gradients returns after it is done.
      const StepOutcome a = bucketed->compute_gradients(step), b = whole->compute_gradients(step);
      QVERIFY(a.ok && b.ok);
      QCOMPARE(a.loss_value, b.loss_value);
      QCOMPARE(a.gradient_norm, b.gradient_norm);
      for (int r = 0; r < 3; ++r) QVERIFY(bucketed->gradients(r) == whole->gradients(0));
      // The sums cover the slab once, from its end backwards, in ranges that adjoin.
      UNet& model = bucketed->model(0);
      std::int64_t end = model.slab_elements();
      for (const auto& [data_ptr, count] : sums.calls) {
        const std::int64_t begin = data_ptr - model.gradient_slab().data_as<float>();
        QCOMPARE(begin + count, end);
        end = begin;
      }
      QCOMPARE(end, std::int64_t{0});
      if (bucket_bytes < 4096)
        QVERIFY2(sums.calls.size() > 3, qPrintable(QString::number(sums.calls.size())));
      if (bucket_bytes > (std::int64_t{1} << 20)) QCOMPARE(sums.calls.size(), std::size_t{1});
      bucketed->apply_optimizer(1e-2f);
      whole->apply_optimizer(1e-2f);
    }
    QVERIFY(bucketed->parameters(0) == whole->parameters(0));
  }

  // Replica 1's loss gradient turns NaN on its first micro-batch (as after an fp16 overflow): the summed
  // gradients every replica holds are non-finite, and the step's outcome counts them, as a host count of
  // each replica's gradients does. A clean step counts none.
  void nonFiniteGradientsOnOneReplicaAreCountedForAll() {
    Data data;
    DataParallelOptions o;
    o.make_backend = [](const DeviceId& id, const BackendOptions& bo) -> std::unique_ptr<Backend> {
      auto real = create_backend(id, bo);
      if (id.index != 1) return real;
      return std::make_unique<test::FaultInjectingBackend>(std::move(real), std::set<std::int64_t>{1});
    };
    auto dp = make(3, small_spec(), o);
    const auto host_count = [](const std::vector<float>& v) {
      return std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    };
    const StepOutcome poisoned = dp->compute_gradients(data.step(0, 6, 1, 3));
    QVERIFY(poisoned.ok);
    QVERIFY(poisoned.non_finite_gradients > 0);
    for (int r = 0; r < 3; ++r) QCOMPARE(host_count(dp->gradients(r)), poisoned.non_finite_gradients);
    const StepOutcome clean = dp->compute_gradients(data.step(6, 6, 1, 3));
    QVERIFY(clean.ok);
    QCOMPARE(clean.non_finite_gradients, std::int64_t{0});
    QCOMPARE(host_count(dp->gradients(0)), std::int64_t{0});
  }

  // The table every run's communicator comes from (communicator_choice.h), row by row: devices (rank order),
  // cuda.communicator, why NCCL cannot be used ("" = it loads), and the kind chosen or a piece of the error.
  void communicatorTable_data() {
    QTest::addColumn<QString>("devices");
    QTest::addColumn<QString>("choice");
    QTest::addColumn<QString>("nccl_problem");
    QTest::addColumn<QString>("expected");
    const QString missing = "libnccl.so.2 could not be loaded";
    QTest::newRow("CPU replicas") << "cpu:0,cpu:1"
                                  << "auto"
                                  << ""
                                  << "shared memory";
    QTest::newRow("CPU replicas ignore nccl") << "cpu:0,cpu:1"
                                              << "nccl" << missing << "shared memory";
    QTest::newRow("one GPU") << "cuda:0"
                             << "auto"
                             << ""
                             << "none (one replica)";
    QTest::newRow("one GPU, nccl asked") << "cuda:0"
                                         << "nccl"
                                         << ""
                                         << "NCCL";
    QTest::newRow("one GPU, device asked") << "cuda:0"
                                           << "device"
                                           << ""
                                           << "device";
    QTest::newRow("distinct GPUs") << "cuda:0,cuda:1"
                                   << "auto"
                                   << ""
                                   << "NCCL";
    QTest::newRow("distinct GPUs, no NCCL") << "cuda:0,cuda:1"
                                            << "auto" << missing << "device";
    QTest::newRow("distinct GPUs, device asked") << "cuda:1,cuda:0"
                                                 << "device"
                                                 << ""
                                                 << "device";
    QTest::newRow("one GPU twice") << "cuda:0,cuda:0"
                                   << "auto"
                                   << ""
                                   << "device";
    QTest::newRow("one GPU twice of three") << "cuda:0,cuda:1,cuda:0"
                                            << "auto"
                                            << ""
                                            << "device";
    QTest::newRow("one GPU twice, nccl asked")
        << "cuda:0,cuda:0"
        << "nccl"
        << ""
        << "error: replicas share cuda:0: NCCL cannot put two ranks on one GPU";
    QTest::newRow("nccl asked, none found") << "cuda:0,cuda:1"
                                            << "nccl" << missing << "error: NCCL cannot be used: " + missing;
    QTest::newRow("CPU and GPU") << "cpu:0,cuda:0"
                                 << "auto"
                                 << ""
                                 << "error: replicas on cpu:0 and cuda:0: no communicator sums gradients";
    QTest::newRow("GPU and CPU") << "cuda:1,cpu:0"
                                 << "device"
                                 << ""
                                 << "error: replicas on cpu:0 and cuda:1: no communicator sums gradients";
  }
  void communicatorTable() {
    QFETCH(QString, devices);
    QFETCH(QString, choice);
    QFETCH(QString, nccl_problem);
    QFETCH(QString, expected);
    std::vector<DeviceId> ids;
    for (const QString& d : devices.split(',')) ids.push_back(parse_device_id(d.toStdString()));
    const auto parsed = parse_communicator_choice(choice.toStdString());
    QVERIFY(parsed.has_value());
    QCOMPARE(QString(to_string(*parsed)), choice);
    try {
      const CommunicatorKind kind = choose_communicator(ids, *parsed, nccl_problem.toStdString());
      QCOMPARE(QString(to_string(kind)), expected);
    } catch (const Error& e) {
      QVERIFY2(expected.startsWith("error: "), e.what());
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QVERIFY2(std::string(e.what()).find(expected.mid(7).toStdString()) != std::string::npos, e.what());
    }
  }

  // What `unet-train devices` and the workbench say several GPUs get, from the module's NCCL version.
  void gpuCommunicatorTextSaysWhatGpusGet() {
    const auto nccl = [](std::string version) {
      CudaVersions v;
      v.nccl = std::move(version);
      return gpu_communicator_text(v);
    };
    QCOMPARE(gpu_communicator_text(CudaVersions{}), std::string());  // no CUDA module: nothing to say
    QCOMPARE(nccl("2.28.9"), std::string("NCCL 2.28.9"));
    QCOMPARE(nccl("not found"), std::string("NCCL not found: GPUs sum through the device communicator"));
    QCOMPARE(
        nccl("2.12.3 (unusable: NCCL 2.12.3 is older than 2.14, which this build needs)"),
        std::string("NCCL 2.12.3 (unusable: NCCL 2.12.3 is older than 2.14, which this build needs): GPUs "
                    "sum through the device communicator"));
  }

  // The registry (create_communicator) on every machine: CPU replicas share memory; a lone GPU replica needs
  // no sum (a planning backend stands in for the GPU); CPU and GPU replicas together are refused, saying why.
  // Several real GPUs: registryJoinsGpuReplicas.
  void registryChoosesTheCommunicatorByDevices() {
    auto cpu0 = create_backend({DeviceKind::cpu, 0}, {}), cpu1 = create_backend({DeviceKind::cpu, 1}, {});
    std::vector<Backend*> cpus{cpu0.get(), cpu1.get()};
    QCOMPARE(create_communicator(cpus)->size(), 2);
    auto g0 = test::gpu_stand_in(0);
    std::vector<Backend*> one_gpu{g0.get()};
    const auto alone = create_communicator(one_gpu);
    QCOMPARE(alone->size(), 1);
    double values[2] = {3.0, -1.0};
    alone->all_reduce_host(0, values);  // one rank: the sum is its own values
    QCOMPARE(values[0], 3.0);
    QCOMPARE(values[1], -1.0);
    std::vector<Backend*> mixed{cpu0.get(), g0.get()};
    try {
      create_communicator(mixed);
      QFAIL("CPU and GPU replicas were joined");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QVERIFY2(std::string(e.what()).find("cpu:0 and cuda:0") != std::string::npos, e.what());
      QVERIFY2(!e.hint().empty(), e.what());
    }
  }

  // Real GPU backends (the row skips without a GPU): two replicas on cuda:0 are joined by the device
  // communicator (NCCL refuses them), also when asked for by name; asking for NCCL is refused, saying why.
  void registryJoinsGpuReplicas() {
    if (!test::device_listed("cuda:0")) QSKIP("needs a GPU: cuda:0 is not on this machine");
    BackendOptions capped;
    capped.cap_bytes = kGpuCap;
    auto a = create_backend({DeviceKind::cuda, 0}, capped), b = create_backend({DeviceKind::cuda, 0}, capped);
    std::vector<Backend*> twice{a.get(), b.get()};
    QCOMPARE(create_communicator(twice)->size(), 2);
    BackendOptions nccl = capped;
    nccl.cuda.communicator = CommunicatorChoice::nccl;
    auto c = create_backend({DeviceKind::cuda, 0}, nccl), d = create_backend({DeviceKind::cuda, 0}, nccl);
    std::vector<Backend*> twice_nccl{c.get(), d.get()};
    try {
      create_communicator(twice_nccl);
      QFAIL("NCCL was given two ranks on one GPU");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QVERIFY2(std::string(e.what()).find("two ranks on one GPU") != std::string::npos, e.what());
    }
  }

  // Two replicas on cuda:0 (the device communicator's kernel sums them, in rank order) train as two CPU
  // replicas do, and hold the same bits as each other. SGD, so that the weights follow the gradients
  // linearly (Adam's normalisation turns a rounding-level difference in a near-zero gradient into a full
  // step); TF32 off, so that the GPU's convolutions round as the CPU's.
  void twoReplicasOnOneGpuTrainAsCpuReplicas() {
    if (!test::device_listed("cuda:0")) QSKIP("needs a GPU: cuda:0 is not on this machine");
    DataParallelOptions o;
    o.optimizer.kind = OptimizerKind::sgd;
    o.cap_bytes = kGpuCap;  // both replicas see the whole device
    o.cuda.tf32 = false;
    auto gpus = make_on({{DeviceKind::cuda, 0}, {DeviceKind::cuda, 0}}, o);
    auto cpu_replicas = make_on(cpus(2), o);
    QVERIFY(same_training(*gpus, *cpu_replicas, 2, 1e-5));
    QCOMPARE(gpus->parameters(1), gpus->parameters(0));
    QCOMPARE(gpus->optimizer_state(1), gpus->optimizer_state(0));
  }

  // Gradients summed in buckets while backward runs, by two replicas on cuda:0 (each bucket's sum on the
  // replica's communication stream), are bitwise those summed once after backward, step after step: the step
  // reads the gradients only after every bucket's sum, whichever stream ran it. Deterministic convolutions
  // (the default), so that two models compute the same bits.
  void bucketsSumAsOneSumOnAGpu() {
    if (!test::device_listed("cuda:0")) QSKIP("needs a GPU: cuda:0 is not on this machine");
    const std::vector<DeviceId> gpu_twice = {{DeviceKind::cuda, 0}, {DeviceKind::cuda, 0}};
    DataParallelOptions o;
    o.cap_bytes = kGpuCap;
    o.cuda.tf32 = false;
    auto whole = make_on(gpu_twice, o);
    o.bucket_bytes = 1024;
    auto bucketed = make_on(gpu_twice, o);
    Data data;
    for (int s = 0; s < 3; ++s) {
      const StepBatches step = data.step(6 * static_cast<std::size_t>(s), 6, 1, 2);
      const StepOutcome a = bucketed->compute_gradients(step), b = whole->compute_gradients(step);
      QVERIFY(a.ok && b.ok);
      QCOMPARE(a.gradient_norm, b.gradient_norm);
      for (int r = 0; r < 2; ++r) QVERIFY(bucketed->gradients(r) == whole->gradients(0));
      bucketed->apply_optimizer(1e-2f);
      whole->apply_optimizer(1e-2f);
    }
    QVERIFY(bucketed->parameters(0) == whole->parameters(0));
  }

  // NCCL with one rank (asked for by name; the only NCCL a one-GPU machine can run): an all-reduce over one
  // rank leaves the gradients as they are, so it trains as the lone replica with no communicator does.
  void ncclWithOneRankTrainsAsOneReplica() {
    if (!test::device_listed("cuda:0")) QSKIP("needs a GPU: cuda:0 is not on this machine");
    const std::string nccl = gpu_communicator_text(list_devices().versions);
    if (nccl.find("device communicator") != std::string::npos)
      QSKIP(qPrintable(QString::fromStdString(nccl)));
    DataParallelOptions o;
    o.cap_bytes = kGpuCap;
    auto alone = make_on({{DeviceKind::cuda, 0}}, o);
    o.cuda.communicator = CommunicatorChoice::nccl;
    auto with_nccl = make_on({{DeviceKind::cuda, 0}}, o);
    QVERIFY(same_training(*with_nccl, *alone, 1, 0.0));
    // cuda.comm_dtype bf16: the one rank's sum is its gradients rounded to bf16 (8 significant bits), so the
    // first step's gradients agree to bf16's rounding (2^-9 relative, each) and the weights after three steps
    // closely.
    o.cuda.bf16_sums = true;
    auto with_bf16 = make_on({{DeviceKind::cuda, 0}}, o);
    DataParallelOptions plain;
    plain.cap_bytes = kGpuCap;
    auto alone_again = make_on({{DeviceKind::cuda, 0}}, plain);
    QVERIFY(same_training(*with_bf16, *alone_again, 1, 4e-3));
  }
};

QTEST_GUILESS_MAIN(TestDataParallel)
#include "test_data_parallel.moc"
