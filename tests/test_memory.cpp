// Memory (issue "Memory: exact planning, live accounting, caps, activation checkpointing, and surviving
// out-of-memory"), on CPU replicas:
// - the planner's peak against the peak a real run measures, for configs across width, depth, separable,
//   checkpointing, precision and batch (within 3 %; in practice exact);
// - a cap below what a run needs: the run stops with a report naming device, bytes and remedies, keeps the
// last
//   good checkpoint, and resumes with a remedy; with auto-recovery it finishes with the same samples per step
//   and the weights of the run that never ran out of memory. Two replicas with an uneven split, so that only
//   one of them fails and the other must agree to skip;
// - fit gives a batch that trains under the cap, and one more does not;
// - preallocation holds the planned peak from start to end; memory is sampled on its schedule (10 Hz by
//   default), which the samples' own timestamps show without timing the run.
#include <QTemporaryDir>

#include <fstream>

#include "fault_injecting_backend.h"
#include "test_support.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/memory_attribution.h"
#include "unet/backend/planning_backend.h"
#include "unet/data/synthetic.h"
#include "unet/io/checkpoint.h"
#include "unet/plan/batch_fit.h"
#include "unet/plan/device_overhead.h"
#include "unet/plan/memory_planner.h"
#include "unet/step/data_parallel.h"
#include "unet/step/step_options.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

Config config_of(const nlohmann::json& j) {
  return config_from_json(j);
}

// A run of the demo model on 64x64 images (quick), two CPU replicas, batch 7 (split 4 + 3).
nlohmann::json uneven_run(const QString& dir) {
  return {{"model", {{"width", 8}, {"depth", 3}}},
          {"data", {{"image_size", {64, 64}}, {"synthetic_samples", 80}, {"val_fraction", 0.1}}},
          {"train", {{"batch_size", 7}, {"epochs", 1}}},
          {"devices", {"cpu:0", "cpu:1"}},
          {"checkpoint", {{"dir", dir.toStdString()}, {"every_epochs", 0}}}};
}

// A cap in MiB between what the replica with 4 samples needs and what the one with 3 needs: only the first
// fails. The smallest whole MiB above the second, which must still be below the first.
std::int64_t cap_mib_between_replicas(const Config& c) {
  const MemoryPlan plan = plan_memory(c);
  const std::int64_t mib = (plan.devices[1].peak_reserved >> 20) + 1;
  if (mib << 20 >= plan.devices[0].peak)
    qFatal("no whole MiB lies between the replicas' peaks (%lld and %lld bytes)",
           static_cast<long long>(plan.devices[1].peak_reserved),
           static_cast<long long>(plan.devices[0].peak));
  return mib;
}

struct Observer final : test::WatchedObserver {
  std::vector<ErrorReport> errors;
  std::vector<MemoryReport> memory;
  std::int64_t steps = 0;
  void on_error(const ErrorReport& e) override { errors.push_back(e); }
  void on_memory(const MemoryReport& m) override { memory.push_back(m); }
  void on_step(const StepReport&) override { ++steps; }
};

}  // namespace

class TestMemory : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void plannerPredictsTheMeasuredPeak_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("depth");
    QTest::addColumn<bool>("separable");
    QTest::addColumn<bool>("checkpointing");
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("replicas");
    QTest::addColumn<QString>("precision");
    QTest::addColumn<int>("accumulation");
    QTest::addColumn<QString>("loss");
    QTest::newRow("w8 d3 b1") << 8 << 3 << false << false << 1 << 1 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w16 d4 b8") << 16 << 4 << false << false << 8 << 1 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w16 d4 b8 checkpointing")
        << 16 << 4 << false << true << 8 << 1 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w32 d5 b4 separable")
        << 32 << 5 << true << false << 4 << 1 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w8 d5 b16 separable checkpointing")
        << 8 << 5 << true << true << 16 << 1 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w32 d3 b6 two replicas")
        << 32 << 3 << false << false << 6 << 2 << "fp32" << 1 << "cross_entropy";
    QTest::newRow("w16 d4 b5 three replicas checkpointing")
        << 16 << 4 << false << true << 5 << 3 << "fp32" << 1 << "cross_entropy";
    // The planner runs two micro-batches whatever the accumulation; the run it predicts takes all of them.
    QTest::newRow("w16 d4 b4 accumulation 2")
        << 16 << 4 << false << false << 4 << 1 << "fp32" << 2 << "cross_entropy";
    QTest::newRow("w16 d4 b4 accumulation 5")
        << 16 << 4 << false << false << 4 << 1 << "fp32" << 5 << "cross_entropy";
    QTest::newRow("w16 d3 b3 two replicas accumulation 4 checkpointing")
        << 16 << 3 << false << true << 3 << 2 << "fp32" << 4 << "cross_entropy";
    // The Dice term's per-image scratch is workspace of the loss call, planned as it is allocated.
    QTest::newRow("w16 d4 b8 cross_entropy_dice")
        << 16 << 4 << false << false << 8 << 1 << "fp32" << 1 << "cross_entropy_dice";
    QTest::newRow("w8 d3 b5 focal_dice two replicas accumulation 2")
        << 8 << 3 << false << false << 5 << 2 << "fp32" << 2 << "focal_dice";
    if (cpu_has_native_bf16())
      QTest::newRow("w16 d4 b8 mixed-bf16")
          << 16 << 4 << false << false << 8 << 1 << "mixed-bf16" << 1 << "cross_entropy";
  }
  void plannerPredictsTheMeasuredPeak() {
    QFETCH(int, width);
    QFETCH(int, depth);
    QFETCH(bool, separable);
    QFETCH(bool, checkpointing);
    QFETCH(int, batch);
    QFETCH(int, replicas);
    QFETCH(QString, precision);
    QFETCH(int, accumulation);
    QFETCH(QString, loss);
    nlohmann::json devices = nlohmann::json::array();
    for (int r = 0; r < replicas; ++r) devices.push_back("cpu:" + std::to_string(r));
    const Config c = config_of({{"model", {{"width", width}, {"depth", depth}, {"separable", separable}}},
                                {"data", {{"image_size", {64, 64}}}},
                                {"train", {{"batch_size", batch}, {"accumulation", accumulation}}},
                                {"precision", precision.toStdString()},
                                {"memory", {{"checkpointing", checkpointing}}},
                                {"loss", {{"kind", loss.toStdString()}}},
                                {"devices", devices}});
    const MemoryPlan plan = plan_memory(c);
    const std::vector<MemoryStats> measured = measure_memory(c);
    QCOMPARE(plan.devices.size(), measured.size());
    for (std::size_t r = 0; r < measured.size(); ++r) {
      const double error = std::fabs(static_cast<double>(plan.devices[r].peak - measured[r].peak_in_use)) /
                           static_cast<double>(measured[r].peak_in_use);
      qInfo("%s %s: predicted %s, measured %s (%.3f %%), planned in %.0f ms", QTest::currentDataTag(),
            plan.devices[r].device.c_str(), format_bytes(plan.devices[r].peak).c_str(),
            format_bytes(measured[r].peak_in_use).c_str(), 100 * error, plan.seconds * 1e3);
      QVERIFY2(error <= 0.03, qPrintable(QString("off by %1 %").arg(100 * error)));
      // And by category, at the peak.
      for (int k = 0; k < memory_category_count; ++k)
        QCOMPARE(plan.devices[r].at_peak[static_cast<std::size_t>(k)],
                 measured[r].at_peak_by[static_cast<std::size_t>(k)]);
    }
  }

  // The planner plans the step the trainer runs (step_options), gradient buckets included: with them the
  // replicas meet bucket by bucket during backward, and a GPU run with cuda.comm_dtype bf16 allocates each
  // bucket's bf16 copy through the allocator. On CPU replicas the shared-memory sum works in place and a
  // bucket allocates nothing, so the buckets show in the options the planner runs, and in a bucketed plan
  // that still matches the bucketed run it predicts, category by category.
  void plannerRunsTheTrainersStep() {
    const Config c = config_of({{"model", {{"width", 32}, {"depth", 4}}},
                                {"data", {{"image_size", {64, 64}}}},
                                {"train", {{"batch_size", 5}}},
                                {"memory", {{"cap_mib", 4096}, {"checkpointing", true}}},
                                {"comm", {{"bucket_mib", 1}}},
                                {"devices", {"cpu:0", "cpu:1"}}});
    const DataParallelOptions trained = step_options(c, c.devices);
    QCOMPARE(trained.bucket_bytes, std::int64_t{1} << 20);
    for (const bool capped : {false, true}) {
      const DataParallelOptions planned = planned_step_options(c, capped);
      QCOMPARE(planned.bucket_bytes, trained.bucket_bytes);
      QCOMPARE(planned.cap_bytes, capped ? trained.cap_bytes : 0);
      QCOMPARE(planned.compute, trained.compute);
      QCOMPARE(planned.checkpointing, trained.checkpointing);
      QCOMPARE(planned.optimizer.kind, trained.optimizer.kind);
      QCOMPARE(planned.devices.size(), trained.devices.size());
      QVERIFY(planned.make_backend && planned.make_communicator);  // the planner's own seams
    }
    const MemoryPlan plan = plan_memory(c);
    const std::vector<MemoryStats> measured = measure_memory(c);
    QCOMPARE(plan.devices.size(), measured.size());
    for (std::size_t r = 0; r < measured.size(); ++r)
      for (int k = 0; k < memory_category_count; ++k)
        QCOMPARE(plan.devices[r].at_peak[static_cast<std::size_t>(k)],
                 measured[r].at_peak_by[static_cast<std::size_t>(k)]);
  }

  // A weight_map run's batches carry the border weights to the loss: the planner counts their tensor (f32
  // [n, h, w] beside the masks, input_batch) although its batches hold shapes only, category by category as
  // the run measured on weighted samples allocates it, and a run without weights plans that much less.
  void plannerCountsThePixelWeights() {
    const nlohmann::json base = {{"model", {{"width", 8}, {"depth", 3}, {"classes", 1}}},
                                 {"data", {{"image_size", {64, 64}}}},
                                 {"train", {{"batch_size", 4}}}};
    nlohmann::json weighted = base;
    weighted["task"] = "instances";
    weighted["instances"] = {{"target", "weight_map"}};
    const Config c = config_of(weighted);
    QVERIFY(step_options(c, c.devices).pixel_weights);
    const MemoryPlan plan = plan_memory(c);
    const std::vector<MemoryStats> measured = measure_memory(c);
    QCOMPARE(plan.devices.size(), measured.size());
    for (int k = 0; k < memory_category_count; ++k)
      QCOMPARE(plan.devices[0].at_peak[static_cast<std::size_t>(k)],
               measured[0].at_peak_by[static_cast<std::size_t>(k)]);
    const Config plain = config_of(base);
    QVERIFY(!step_options(plain, plain.devices).pixel_weights);
    const auto input = static_cast<std::size_t>(MemoryCategory::input_batch);
    const std::int64_t weights_bytes = 4 * 64 * 64 * static_cast<std::int64_t>(sizeof(float));
    QVERIFY2(plan.devices[0].peak_by[input] - plan_memory(plain).devices[0].peak_by[input] >= weights_bytes,
             qPrintable(QString("input batch %1 with weights, %2 without")
                            .arg(plan.devices[0].peak_by[input])
                            .arg(plan_memory(plain).devices[0].peak_by[input])));
  }

  // A device's capacity, one rule for the planner (and the window): a CPU replica's share of the host, the
  // cap where it is smaller, and the cap also where the device's bytes are unknown; without a cap, unknown
  // stays unknown (the window charted min(cap, 0) = 0 there).
  void deviceCapacityIsOneRule() {
    constexpr std::int64_t kGiB = std::int64_t{1} << 30;
    DeviceInfo cpu;
    cpu.kind = DeviceKind::cpu;
    cpu.total_bytes = 8 * kGiB;
    QCOMPARE(device_capacity(cpu, 2, 0), 4 * kGiB);
    QCOMPARE(device_capacity(cpu, 2, kGiB), kGiB);
    QCOMPARE(device_capacity(cpu, 2, 6 * kGiB), 4 * kGiB);
    DeviceInfo gpu;
    gpu.kind = DeviceKind::cuda;
    gpu.total_bytes = 80 * kGiB;
    QCOMPARE(device_capacity(gpu, 2, 0), 80 * kGiB);  // CPU replicas share the host, not the GPU
    QCOMPARE(device_capacity(gpu, 2, kGiB), kGiB);
    for (DeviceInfo unknown : {cpu, gpu}) {
      unknown.total_bytes = 0;
      QCOMPARE(device_capacity(unknown, 1, kGiB), kGiB);
      QCOMPARE(device_capacity(unknown, 1, 0), std::int64_t{0});
    }
  }

  void capStopsWithAReportAndTheRunResumes() {
    QTemporaryDir dir;
    // Three good steps first.
    Config first = config_of(uneven_run(dir.path()));
    first.train.steps = 3;
    test::WatchedObserver first_watch;
    Trainer(first, &first_watch).run();
    const Checkpoint good = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(good.position.step, 3);

    Config capped = first;
    capped.train.steps = 6;
    capped.memory.cap_mib = cap_mib_between_replicas(capped);
    Observer observed;
    Trainer stopped(capped, &observed);
    stopped.resume_from(good);
    try {
      stopped.run();
      QFAIL("the run did not stop at the cap");
    } catch (const OutOfMemoryError& e) {
      QCOMPARE(e.device(), std::string("cpu:0"));  // the replica with 4 samples; cpu:1 agreed to skip
    }
    QCOMPARE(stopped.state(), TrainerState::failed);
    QCOMPARE(observed.steps, 0);
    QCOMPARE(observed.errors.size(), std::size_t{1});
    const ErrorReport& report = observed.errors.front();
    QCOMPARE(report.type, std::string("out_of_memory"));
    QVERIFY(report.fatal);
    QVERIFY(report.out_of_memory.has_value());
    const OutOfMemoryReport& oom = *report.out_of_memory;
    QCOMPARE(oom.capacity_bytes, capped.memory.cap_mib << 20);
    QVERIFY(oom.requested_bytes > 0);
    QVERIFY(oom.in_use_by[static_cast<std::size_t>(MemoryCategory::parameters)] > 0);
    QCOMPARE(oom.step, std::int64_t{4});
    // Where the allocator refused, for a bug report.
    QVERIFY2(report.where.starts_with("memory.cpp:"), report.where.c_str());
    const auto& remedies = oom.remedies;
    QVERIFY(!remedies.empty() && remedies.front().fits);
    // The checkpoint is the last good step's, whole.
    const Checkpoint after = load_checkpoint((dir.path() + "/last.safetensors").toStdString());
    QCOMPARE(after.position.step, 3);
    QCOMPARE(after.parameters, good.parameters);
    // metrics.jsonl has the report.
    bool logged = false;
    std::ifstream in((dir.path() + "/metrics.jsonl").toStdString());
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      logged = logged || (j.at("kind") == "error" && j.at("type") == "out_of_memory" &&
                          j.at("remedies").size() == remedies.size() && j.at("where") == report.where &&
                          j.at("step") == 4);
    }
    QVERIFY(logged);
    // Resume with the best remedy the report gives (one that leaves the model as it is).
    nlohmann::json changes;
    for (const RemedyReport& r : remedies)
      if (r.fits && !r.changes_model) {
        changes = r.changes;
        break;
      }
    QVERIFY(!changes.is_null());
    test::WatchedObserver resumed_watch;
    Trainer resumed(apply_changes(capped, changes), &resumed_watch);
    resumed.resume_from(after);
    resumed.run();
    QCOMPARE(resumed.snapshot().position.step, 6);
  }

  void autoRecoveryKeepsTheEffectiveBatch() {
    QTemporaryDir a, b;
    Config plain = config_of(uneven_run(a.path()));
    plain.train.steps = 4;
    test::WatchedObserver reference_watch;
    Trainer reference(plain, &reference_watch);
    reference.run();

    Config recovering = config_of(uneven_run(b.path()));
    recovering.train.steps = 4;
    recovering.memory.cap_mib = cap_mib_between_replicas(recovering);
    recovering.memory.auto_recover_oom = true;
    Observer observed;
    observed.expect_warning("recovering: micro-batch 7 -> 4");  // the out-of-memory it recovers from
    Trainer t(recovering, &observed);
    t.run();
    QCOMPARE(t.state(), TrainerState::finished);
    QCOMPARE(observed.steps, 4);
    QCOMPARE(observed.errors.size(), std::size_t{1});
    QVERIFY(!observed.errors[0].fatal);
    QVERIFY(observed.errors[0].out_of_memory->recovered);
    QCOMPARE(observed.errors[0].out_of_memory->accumulation, std::int64_t{2});
    QCOMPARE(t.snapshot().position.effective_batch, 7);
    QCOMPARE(t.snapshot().accumulation, 2);
    // The same 7 samples per step as the run that never ran out: the same weights, up to summation order.
    // That order's rounding (about 1e-8 after one step) now and then jumps to 1e-5 at a later step, as if it
    // had tipped a decision (a ReLU, a max-pool's choice) that AdamW's first steps (update ~ lr g / |g|) then
    // carry to every weight: measured over data seeds 0..5 and two synthetic layouts, 1e-8 most of the time,
    // up to 2e-4. A step of 6 or 8 samples instead of 7 gives 7e-3..1e-2 (seeds 0..2).
    const double e = test::norm_relative_error(reference.snapshot().parameters, t.snapshot().parameters);
    qInfo("recovered run vs uncapped run: weights relative error %.3g", e);
    QVERIFY2(e <= 1e-3, qPrintable(QString("relative error %1").arg(e)));
  }

  // A GPU's overhead is its used memory less other processes' and the allocator's reserved bytes.
  void overheadIsWhatTheDeviceHoldsBeyondTheAllocator() {
    const DeviceSample now{.total_bytes = 1000, .free_bytes = 300, .used_by_others_bytes = 200};
    QCOMPARE(overhead_of(now, 350), std::optional<std::int64_t>(150));
    QCOMPARE(overhead_of({.total_bytes = 1000, .free_bytes = 300, .used_by_others_bytes = -1}, 350),
             std::optional<std::int64_t>());  // without NVML others cannot be told apart
    // Pre-flight M4: a reading NVML could not attribute is no measurement, even with a number for others
    // (here one that would give overhead 0).
    QCOMPARE(overhead_of({.total_bytes = 1000,
                          .free_bytes = 300,
                          .used_by_others_bytes = 700,
                          .others_not_attributable = true},
                         350),
             std::optional<std::int64_t>());
    QCOMPARE(overhead_of({.total_bytes = 1000, .free_bytes = -1, .used_by_others_bytes = 200}, 350),
             std::optional<std::int64_t>());  // no free figure: no used figure
  }

  // Other processes' memory from NVML's process list (memory_attribution.h), this process being PID 100 on a
  // device with 1000 bytes in use. Lists are "pid:bytes,..." (bytes -1: not available), "none" when NVML
  // could not list; others -1 is unknown.
  void othersShareFromNvmlsProcessList_data() {
    QTest::addColumn<QString>("listed");
    QTest::addColumn<bool>("holds_context");
    QTest::addColumn<qint64>("device_used");
    QTest::addColumn<qint64>("others");
    QTest::addColumn<bool>("not_attributable");
    QTest::newRow("our entry among others") << "100:600,7:250,8:100" << true << 1000LL << 350LL << false;
    QTest::newRow("our entry alone") << "100:900" << true << 1000LL << 0LL << false;
    QTest::newRow("our value not available") << "100:-1,7:250" << true << 1000LL << 250LL << false;
    QTest::newRow("host PIDs (a container)") << "4711:900,7:50" << true << 1000LL << -1LL << true;
    QTest::newRow("no process listed") << "" << true << 1000LL << -1LL << true;
    QTest::newRow("NVML cannot list") << "none" << true << 1000LL << -1LL << true;
    QTest::newRow("another's value not available") << "100:600,7:-1" << true << 1000LL << -1LL << true;
    QTest::newRow("no NVML at all") << "none" << true << -1LL << -1LL << false;
    QTest::newRow("no context: every entry is another's")
        << "4711:300,7:50" << false << 1000LL << 350LL << false;
    QTest::newRow("no context, none listed: the used bytes") << "" << false << 1000LL << 1000LL << false;
    QTest::newRow("no context, a value not available") << "7:-1" << false << 1000LL << 1000LL << false;
    QTest::newRow("no context, NVML cannot list") << "none" << false << 1000LL << 1000LL << false;
    QTest::newRow("no context, no reading") << "none" << false << -1LL << -1LL << false;
  }
  void othersShareFromNvmlsProcessList() {
    QFETCH(QString, listed);
    QFETCH(bool, holds_context);
    QFETCH(qint64, device_used);
    QFETCH(qint64, others);
    QFETCH(bool, not_attributable);
    std::optional<std::vector<ProcessMemory>> processes;
    if (listed != "none") {
      processes.emplace();
      for (const QString& entry : listed.split(',', Qt::SkipEmptyParts))
        processes->push_back(
            {.pid = entry.section(':', 0, 0).toUInt(), .bytes = entry.section(':', 1).toLongLong()});
    }
    const OthersShare share = others_share(processes, 100, holds_context, device_used);
    QCOMPARE(share.bytes, std::int64_t{others});
    QCOMPARE(share.not_attributable, not_attributable);
  }

  void overheadCacheKeepsMeasurementsAndSurvivesABadFile() {
    QTemporaryDir dir;
    const std::filesystem::path file =
        std::filesystem::path(dir.path().toStdString()) / "sub" / "overhead.json";
    {
      OverheadCache cache(file);
      QVERIFY(!cache.find("gpu a").has_value());
      QVERIFY2(cache.record("gpu a", 123 << 20), cache.problem().c_str());
      QVERIFY(cache.record("gpu b", 7));
    }
    const OverheadCache again(file);
    QCOMPARE(again.find("gpu a")->bytes, std::int64_t{123} << 20);
    QCOMPARE(again.find("gpu b")->bytes, std::int64_t{7});
    QCOMPARE(again.find("gpu a")->measured.size(), std::size_t{20});  // 2026-11-30T21:00:00Z
    std::ofstream(file) << "{ not json";
    OverheadCache broken(file);
    QVERIFY(!broken.find("gpu a").has_value());
    QVERIFY2(broken.problem().find(file.string()) != std::string::npos, broken.problem().c_str());
    QVERIFY(broken.record("gpu c", 9));  // the next measurement replaces what could not be read
    QCOMPARE(OverheadCache(file).find("gpu c")->bytes, std::int64_t{9});
  }

  // A run on a GPU measures what the device holds beyond the allocator and keeps it for estimate. A CPU
  // replica poses as a GPU whose readings are the allocator's reserved bytes + 300 MiB of runtime + 100 MiB
  // of another process: exactly 300 MiB must be kept, under the key estimate looks up.
  void aGpuRunKeepsItsMeasuredOverhead() {
    QTemporaryDir runs, cache_dir;
    qputenv("UNET_CACHE_DIR", cache_dir.path().toUtf8());
    Config c = config_of(uneven_run(runs.path()));
    c.devices = {{DeviceKind::cpu, 0}};
    c.train.steps = 2;
    constexpr std::int64_t runtime = std::int64_t{300} << 20, others = std::int64_t{100} << 20,
                           total = std::int64_t{8} << 30;
    DeviceInfo gpu;
    gpu.id = "cuda:0";
    gpu.name = "Test GPU";
    gpu.kind = DeviceKind::cuda;
    gpu.total_bytes = total;
    TrainerOptions options;
    options.write_checkpoints = false;
    options.make_backend = [&](const DeviceId& id, const BackendOptions& bo) -> std::unique_ptr<Backend> {
      auto posing =
          std::make_unique<test::FaultInjectingBackend>(create_backend(id, bo), std::set<std::int64_t>{});
      Allocator& allocator = posing->allocator();
      posing->pose_as(gpu, [&allocator] {
        return DeviceSample{.total_bytes = total,
                            .free_bytes = total - allocator.stats().reserved - runtime - others,
                            .used_by_others_bytes = others};
      });
      return posing;
    };
    test::WatchedObserver watch;
    Trainer t(c, &watch, options);
    t.run();
    qunsetenv("UNET_CACHE_DIR");
    QCOMPARE(t.state(), TrainerState::finished);
    const std::string key = overhead_key(gpu, list_devices().versions, c.precision, 1);
    const auto kept =
        OverheadCache(std::filesystem::path(cache_dir.path().toStdString()) / "overhead.json").find(key);
    QVERIFY2(kept.has_value(), key.c_str());
    QCOMPARE(kept->bytes, runtime);
  }

  // Issue 12, defect 5: remedies that change nothing are not offered. A model whose parameters, gradients
  // and Adam's moments dwarf its activations: checkpointing and a second CPU replica (which holds all of
  // those again) would each leave the peak where it is, and "all of these together" would repeat one of
  // them. Every remedy offered fits or lowers the peak by at least 1 %, and no two make the same changes.
  void remediesThatChangeNothingAreNotOffered() {
    const Config c = config_of({{"model", {{"width", 64}, {"depth", 4}}},
                                {"data", {{"image_size", {16, 16}}}},
                                {"train", {{"batch_size", 1}}},
                                {"memory", {{"cap_mib", 10}}}});
    const auto worst = [](const MemoryPlan& p) {
      std::int64_t w = 0;
      for (const DevicePlan& d : p.devices) w = std::max(w, d.peak);
      return w;
    };
    const std::int64_t now = worst(plan_memory(c));
    // The premise: checkpointing, tried here by hand, changes the peak by less than 1 %.
    Config checkpointed = c;
    checkpointed.memory.checkpointing = true;
    QVERIFY(worst(plan_memory(checkpointed)) > now - now / 100);

    const std::vector<Remedy> remedies = rank_remedies(c);
    QVERIFY(!remedies.empty());
    for (std::size_t i = 0; i < remedies.size(); ++i) {
      const Remedy& r = remedies[i];
      QVERIFY2(r.plan.fits || worst(r.plan) <= now - now / 100, r.name.c_str());
      for (std::size_t j = 0; j < i; ++j) QVERIFY2(remedies[j].changes != r.changes, r.name.c_str());
    }
    QVERIFY(std::none_of(remedies.begin(), remedies.end(),
                         [](const Remedy& r) { return r.changes.contains("memory.checkpointing"); }));
  }

  // Issue 12, defect 5: CPU replicas share one host, so each is planned against its share of the host's
  // memory, not the whole of it (which would let two replicas "fit" in twice the host).
  void cpuReplicasShareTheHost() {
    const Config one =
        config_of({{"model", {{"width", 4}, {"depth", 2}}}, {"data", {{"image_size", {32, 32}}}}});
    Config three = one;
    three.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}};
    const MemoryPlan alone = plan_memory(one);
    const MemoryPlan shared = plan_memory(three);
    QCOMPARE(shared.devices.size(), std::size_t{3});
    for (const DevicePlan& d : shared.devices) QCOMPARE(d.capacity, alone.devices[0].capacity / 3);
    // Under a cap smaller than a share, each replica has the cap.
    three.memory.cap_mib = 64;
    for (const DevicePlan& d : plan_memory(three).devices) QCOMPARE(d.capacity, std::int64_t{64} << 20);
  }

  // Issue 25, item 5: Fit batch filled 99 % of the host and ignored the dataset. With the free memory and the
  // training set given, it stops at the smaller of them and names it.
  void fitStopsAtTheTrainingSetOrTheFreeMemory() {
    const Config c =
        config_of({{"model", {{"width", 8}, {"depth", 3}}}, {"data", {{"image_size", {64, 64}}}}});
    constexpr std::int64_t GiB = std::int64_t{1} << 30;
    // One CPU of `total` bytes with `free` of them free, and `samples` to train on.
    const auto bounds = [](std::int64_t total, std::int64_t free, std::int64_t samples) {
      FitBounds b;
      b.memory = {{total, free}};
      b.training_samples = samples;
      return b;
    };
    // The margin: a tenth of the device, at least 1 GiB.
    QCOMPARE(free_memory_margin(8 * GiB), GiB);
    QCOMPARE(free_memory_margin(40 * GiB), 4 * GiB);
    // Plenty free: the 24 training images set the batch.
    BatchFit fit = fit_batch(c, bounds(8 * GiB, 8 * GiB, 24));
    QCOMPARE(fit.global_batch, std::int64_t{24});
    QCOMPARE(fit.limit, FitLimit::training_set);
    QCOMPARE(fit.reason, std::string("batch 24: the training set has 24 images"));
    QCOMPARE(fit.devices[0].max_batch, std::int64_t{24});
    // Free: the margin and what a batch of 5 reserves, to the byte (the planner's own figure; a CPU shows
    // what its allocator reserves): batch 5, and the free memory is the limit.
    Config five = c;
    five.train.batch_size = 5;
    const std::int64_t need = plan_memory(five).devices[0].peak_reserved;
    fit = fit_batch(c, bounds(8 * GiB, GiB + need, 24));
    QCOMPARE(fit.global_batch, std::int64_t{5});
    QCOMPARE(fit.limit, FitLimit::free_memory);
    QVERIFY2(
        fit.reason.starts_with("batch 5: the free memory less a margin: cpu:0 has " +
                               format_bytes(GiB + need) + " free; less 1.00 GiB kept for other programs"),
        fit.reason.c_str());
    QCOMPARE(fit.devices[0].max_batch, std::int64_t{5});
    // A cap below that: the cap is the limit.
    Config capped = c;
    capped.memory.cap_mib = 40;
    fit = fit_batch(capped, bounds(8 * GiB, 8 * GiB, 10000));
    QCOMPARE(fit.limit, FitLimit::memory_cap);
    QVERIFY2(fit.reason.find(": the memory cap you set (" + format_bytes(40 << 20) + "); a batch of ") !=
                 std::string::npos,
             fit.reason.c_str());
  }

  void fitGivesABatchThatTrainsAndNoMore() {
    Config c = config_of({{"model", {{"width", 8}, {"depth", 3}}}, {"data", {{"image_size", {64, 64}}}}});
    c.memory.cap_mib = 40;
    const BatchFit fit = fit_batch(c);
    QVERIFY(fit.global_batch > 1);
    QCOMPARE(fit.devices.size(), std::size_t{1});
    QCOMPARE(fit.devices[0].max_batch, fit.global_batch);
    auto trains = [&](std::int64_t batch) {
      Config t = c;
      t.train.batch_size = batch;
      DataParallelOptions o;
      o.spec = t.model;
      o.devices = {{DeviceKind::cpu, 0}};
      o.cap_bytes = t.memory.cap_mib << 20;
      try {
        DataParallel dp(o);
        dp.set_parameters(UNet::initial_slab(t.model, 0));
        SyntheticCells cells({.count = 64, .height = 64, .width = 64, .channels = 3, .seed = 1});
        std::vector<std::size_t> samples;
        for (std::int64_t k = 0; k < batch; ++k) samples.push_back(static_cast<std::size_t>(k));
        StepBatches step;
        step.micro.emplace_back(1);
        assemble_batch(cells, samples, std::vector<std::int64_t>(samples.size(), 0), 0, false, 0,
                       step.micro[0][0]);
        for (int round = 0; round < 2; ++round) {
          const StepOutcome out = dp.compute_gradients(step);
          if (!out.ok) return false;
          dp.apply_optimizer(1e-3f);
        }
        std::vector<std::vector<HostBatch>> validation{{step.micro[0][0]}};
        dp.evaluate(validation);
        return true;
      } catch (const OutOfMemoryError&) {
        return false;
      }
    };
    QVERIFY2(trains(fit.global_batch), "the batch fit gave does not train under the cap");
    QVERIFY2(!trains(fit.global_batch + 1), "one more than the batch fit gave trains too");
    Config more = c;
    more.train.batch_size = fit.global_batch + 1;
    QVERIFY(!plan_memory(more).fits);
  }

  void preallocationHoldsThePlannedPeak() {
    QTemporaryDir dir;
    Config c = config_of(uneven_run(dir.path()));
    c.devices = {{DeviceKind::cpu, 0}};
    c.train.steps = 5;
    c.memory.growth = false;
    const MemoryPlan plan = plan_memory(c);
    Observer observed;
    Trainer t(c, &observed);
    t.run();
    QVERIFY(!observed.memory.empty());
    for (const MemoryReport& m : observed.memory) {
      QCOMPARE(m.stats.reserved, plan.devices[0].peak_reserved);  // held from the first sample to the last
      QVERIFY(m.stats.in_use <= m.stats.reserved);
    }
  }

  // A sample when the run starts, then one every period, never sooner (the sampler waits a whole period
  // before each), and one when the run ends. The run takes as long as it takes: its samples' timestamps say
  // how long, and the schedule is checked against them.
  void memoryIsSampledOnItsSchedule() {
    QCOMPARE(TrainerOptions{}.memory_report_seconds, 0.1);  // 10 Hz unless told otherwise
    QTemporaryDir dir;
    Config c = config_of(uneven_run(dir.path()));
    c.train.epochs = 2;
    Observer observed;
    TrainerOptions options;
    options.memory_report_seconds = 0.05;  // not the default: the sampler follows the option
    const double period = options.memory_report_seconds;
    Trainer(c, &observed, options).run();
    for (const std::string device : {"cpu:0", "cpu:1"}) {
      std::vector<double> t;
      for (const MemoryReport& m : observed.memory)
        if (m.device == device) t.push_back(m.t);
      QVERIFY2(t.size() >= 2, device.c_str());  // the start's and the end's
      QVERIFY(std::is_sorted(t.begin(), t.end()));
      std::vector<double> gaps;  // between the samples before the end's
      for (std::size_t i = 1; i + 1 < t.size(); ++i) {
        gaps.push_back(t[i] - t[i - 1]);
        QVERIFY2(gaps.back() >= period - 1e-9,
                 qPrintable(QString("%1: sample %2 came %3 s after the one before")
                                .arg(device.c_str())
                                .arg(i)
                                .arg(gaps.back())));
      }
      // So no more samples than the run's length allows.
      QVERIFY2(static_cast<double>(t.size()) <= t.back() / period + 2,
               qPrintable(QString("%1 samples in %2 s").arg(t.size()).arg(t.back())));
      if (gaps.empty()) QSKIP("the run was over within one sampling period: no schedule to see");
      // And it does not skip periods: the typical gap is one period, plus the time a sleeping thread takes to
      // be woken (a whole period of slack for it; this does not depend on how fast the machine trains).
      std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
      const double median = gaps[gaps.size() / 2];
      qInfo("%s: %zu samples in %.2f s, median gap %.3f s", device.c_str(), t.size(), t.back(), median);
      QVERIFY2(median < 2 * period,
               qPrintable(QString("median gap %1 s for a period of %2 s").arg(median).arg(period)));
    }
    // Samples after steps have run see the activations those steps held (the peak: on a device that runs
    // behind the host, a GPU or asynchronous CPU streams, the host has often let go of a step's activations
    // by the time the sampler looks); the sample at the start sees none.
    constexpr auto activations = static_cast<std::size_t>(MemoryCategory::activations);
    bool saw_activations = false;
    for (const MemoryReport& m : observed.memory)
      saw_activations = saw_activations || m.stats.peak_by[activations] > 0;
    QVERIFY(saw_activations);
    for (const std::string device : {"cpu:0", "cpu:1"}) {
      const auto first = std::find_if(observed.memory.begin(), observed.memory.end(),
                                      [&](const MemoryReport& m) { return m.device == device; });
      QVERIFY(first != observed.memory.end());
      QCOMPARE(first->stats.peak_by[activations], std::int64_t{0});
    }
  }

  // Memory a backend holds for its whole life (a GPU backend's reduction scratch) is held by its planning
  // stand-in too, from construction, so the plan's peak includes it as the real run's does.
  void planningHoldsTheBackendsResidentMemory() {
    auto oracle = std::make_unique<test::FaultInjectingBackend>(create_backend({DeviceKind::cpu, 0}, {}),
                                                                std::set<std::int64_t>{});
    oracle->set_resident_bytes(4352);
    const DeviceInfo info = oracle->info();
    PlanningBackend planned(std::move(oracle), info, 0);
    QCOMPARE(planned.resident_bytes(), std::size_t{4352});
    const MemoryStats s = planned.allocator().stats();
    const auto other = s.in_use_by[static_cast<std::size_t>(MemoryCategory::other)];
    QVERIFY2(other >= 4352 && other < 4352 + 512, qPrintable(QString("other: %1 bytes").arg(other)));
    QCOMPARE(s.in_use, other);
  }

  // A device whose cache misses come from an expandable arena (a GPU) is planned over the same arena: same
  // page, same address range, so that the plan's reserved bytes are its mapped pages.
  void planningRunsTheBackendsArenaLayout() {
    std::unique_ptr<Backend> oracle = create_backend({DeviceKind::cpu, 0}, {});
    oracle->allocator().use_expandable_arena(std::size_t{1} << 32, std::size_t{2} << 20);
    const AllocatorLayout layout = oracle->allocator().layout();
    const DeviceInfo info = oracle->info();
    PlanningBackend planned(std::move(oracle), info, 0);
    QCOMPARE(planned.allocator().layout(), layout);
    Buffer block = planned.allocator().allocate(3 << 20, MemoryCategory::activations);
    QCOMPARE(planned.allocator().stats().reserved, std::int64_t{4} << 20);  // two whole pages
  }
};

QTEST_GUILESS_MAIN(TestMemory)
#include "test_memory.moc"
