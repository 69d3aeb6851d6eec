// Issue 25, item 7: the planner's remedies as advice a user can take. A remedy offered as fitting fits once
// applied; the obvious ones are offered: the memory cap the user set raised to what the run needs (and no
// less), the largest smaller image size that fits (a multiple of 2^depth, the next one up does not fit); a
// plan says by how much it misses; and ranking reports what it plans and stops when asked.
#include <stop_token>

#include "test_support.h"
#include "unet/plan/memory_planner.h"
#include "unet/plan/remedy_search.h"

using namespace unet;

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// The demo's small model on 64x128 images under a cap it does not fit.
Config capped_config(std::int64_t cap_mib) {
  Config c = config_from_json({{"model", {{"width", 8}, {"depth", 3}}},
                               {"data", {{"image_size", {64, 128}}}},
                               {"train", {{"batch_size", 4}}}});
  c.memory.cap_mib = cap_mib;
  return c;
}

const Remedy* named(const std::vector<Remedy>& remedies, const std::string& prefix) {
  for (const Remedy& r : remedies)
    if (r.name.starts_with(prefix)) return &r;
  return nullptr;
}

}  // namespace

class TestMemoryRemedies : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // Hand-computed: 64x128 at depth 3 (multiples of 8); the longer side 5 multiples = 40, the shorter
  // 64 * 40 / 128 = 20, down to a multiple: 16. One multiple: 8, and the shorter side at least 8.
  void scaledSizesKeepTheAspectInMultiples() {
    const Config c = capped_config(0);
    QCOMPARE(scaled_image_size(c, 5), (std::pair<std::int64_t, std::int64_t>{16, 40}));
    QCOMPARE(scaled_image_size(c, 1), (std::pair<std::int64_t, std::int64_t>{8, 8}));
    QCOMPARE(scaled_image_size(c, 16), (std::pair<std::int64_t, std::int64_t>{64, 128}));
  }

  // Hand-built: the first device misses by 100 - 80 = 20; the third, under an address-space limit (a
  // capacity note), by its reserved peak 90 - 75 = 15; the second fits. The worst is 20.
  void shortfallIsTheWorstDevicesExcess() {
    const auto device = [](std::int64_t capacity, std::int64_t peak, std::int64_t reserved, bool fits) {
      DevicePlan d;
      d.capacity = capacity;
      d.peak = peak;
      d.peak_reserved = reserved;
      d.fits = fits;
      return d;
    };
    MemoryPlan plan;
    plan.fits = false;
    plan.devices = {device(80, 100, 110, false), device(60, 50, 55, true), device(75, 70, 90, false)};
    plan.devices[2].capacity_note = "left under ulimit -v";
    QCOMPARE(shortfall(plan), std::int64_t{20});
    plan.devices[0].fits = false;
    plan.devices[0].peak = 70;
    QCOMPARE(shortfall(plan), std::int64_t{15});
  }

  // The cap raised to the run's peak (planned without a cap) rounded up to a whole MiB: it fits, and a MiB
  // less does not.
  void theCapIsRaisedToWhatTheRunNeeds() {
    const Config c = capped_config(8);
    QVERIFY(!plan_memory(c).fits);
    Config uncapped = c;
    uncapped.memory.cap_mib = 0;
    std::int64_t peak = 0;
    for (const DevicePlan& d : plan_memory(uncapped).devices) peak = std::max(peak, d.peak);
    const std::int64_t needed_mib = (peak + kMiB - 1) / kMiB;

    const std::optional<Remedy> cap = raise_cap_remedy(c, {});
    QVERIFY(cap.has_value());
    QCOMPARE(cap->changes, nlohmann::json({{"memory.cap_mib", needed_mib}}));
    QVERIFY(cap->plan.fits);
    QVERIFY(!plan_memory(apply_changes(c, {{"memory.cap_mib", needed_mib - 1}})).fits);
    // Without a cap there is none to raise.
    QVERIFY(!raise_cap_remedy(uncapped, {}).has_value());
  }

  // The largest smaller image that fits: it fits, and the next multiple up does not.
  void theLargestSmallerImageThatFits() {
    const Config c = capped_config(8);
    const std::optional<Remedy> image = smaller_image_remedy(c, {});
    QVERIFY(image.has_value());
    QVERIFY(image->plan.fits);
    const auto size = image->changes.at("data.image_size").get<std::vector<std::int64_t>>();
    QCOMPARE(size.size(), std::size_t{2});
    QCOMPARE(size[0] % 8, std::int64_t{0});
    QCOMPARE(size[1] % 8, std::int64_t{0});
    QVERIFY(size[1] < 128);
    const std::int64_t multiples = size[1] / 8;
    QCOMPARE(scaled_image_size(c, multiples), (std::pair<std::int64_t, std::int64_t>{size[0], size[1]}));
    const auto [h, w] = scaled_image_size(c, multiples + 1);
    QVERIFY(!plan_memory(apply_changes(c, {{"data.image_size", {h, w}}})).fits);
  }

  // Everything ranked as fitting fits once applied, the fitting ones come first, and both searched remedies
  // are among them, the raised cap (which changes nothing of the run) first of all.
  void everyRemedyRankedAsFittingFits() {
    const Config c = capped_config(8);
    const std::vector<Remedy> remedies = rank_remedies(c);
    QVERIFY(!remedies.empty());
    QVERIFY(remedies.front().name.starts_with("memory cap"));
    QVERIFY(named(remedies, "image size") != nullptr);
    bool fitting = true;
    for (const Remedy& r : remedies) {
      QVERIFY2(fitting || !r.plan.fits, r.name.c_str());  // no fitting one after one that does not fit
      fitting = r.plan.fits;
      QCOMPARE(plan_memory(apply_changes(c, r.changes)).fits, r.plan.fits);
      QCOMPARE(shortfall(r.plan) > 0 || r.plan.fits, true);
    }
  }

  // Ranking says what it plans, and stops before the next plan once asked: here after the second report.
  void rankingReportsAndStops() {
    const Config c = capped_config(8);
    std::stop_source stop;
    std::vector<std::string> said;
    const PlanningProgress progress{.report =
                                        [&](const std::string& what) {
                                          said.push_back(what);
                                          if (said.size() == 2) stop.request_stop();
                                        },
                                    .stop = stop.get_token()};
    const MemoryPlan planned = plan_memory(c);
    try {
      rank_remedies(c, &planned, &progress);
      QFAIL("ranking went on after the stop");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::cancelled);
    }
    QCOMPARE(said.size(), std::size_t{2});
    QVERIFY(said.front().starts_with("remedy: "));
  }
};

QTEST_GUILESS_MAIN(TestMemoryRemedies)
#include "test_memory_remedies.moc"
