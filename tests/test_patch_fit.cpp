// Issue 26, item 6: memory planning for patches. Fit patch proposes the largest patch (a multiple of
// 2^depth, no larger than the images) and a batch that fit each device with Fit batch's margin, checked
// against the planner's own answers under injected memory figures: the fitted patch fits and the next
// multiple does not; your batch is kept when it fits; a batch of 2 when it does not; and in patch mode the
// out-of-memory remedies shrink data.patch_size, never data.image_size.
#include "test_support.h"
#include "unet/plan/memory_planner.h"
#include "unet/plan/patch_fit.h"
#include "unet/plan/remedy_search.h"
#include "unet/train/training_set.h"

using namespace unet;

namespace {

constexpr std::int64_t GiB = std::int64_t{1} << 30;

// The demo's data in patch mode with a small model (depth 3: patches in multiples of 8).
Config patch_config(std::int64_t batch) {
  return config_from_json(
      {{"model", {{"width", 8}, {"depth", 3}}},
       {"data", {{"mode", "patch"}, {"patch_size", {64, 64}}, {"image_size", {128, 128}}}},
       {"train", {{"batch_size", batch}}}});
}

// One CPU of 8 GiB (a margin of 1 GiB) with `usable` bytes free beyond the margin, and images of h x w.
PatchBounds bounds(std::int64_t usable, std::int64_t h, std::int64_t w) {
  PatchBounds b;
  b.memory = {{8 * GiB, GiB + usable}};
  b.image_height = h;
  b.image_width = w;
  return b;
}

// What a CPU shows for `c` with data.patch_size h x w and batch `batch`: its allocator's reservation.
std::int64_t reserved(Config c, std::int64_t h, std::int64_t w, std::int64_t batch) {
  c.data.patch_height = h;
  c.data.patch_width = w;
  c.train.batch_size = batch;
  return plan_memory(c).devices.at(0).peak_reserved;
}

// The proposal in a line, to compare whole: "64x104 batch 4, yours".
std::string proposal(const PatchFit& fit) {
  return std::to_string(fit.patch_height) + "x" + std::to_string(fit.patch_width) + " batch " +
         std::to_string(fit.batch) + (fit.batch_kept ? ", yours" : "");
}

}  // namespace

class TestPatchFit : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // Hand-computed: the config's patch is square, so the patch is n * 8 on both sides, each side at most
  // the images' (here 40 x 100, rounded up to multiples: 40 x 104).
  void patchesAreSquareMultiplesBoundedByTheImages() {
    const Config c = patch_config(4);
    QCOMPARE(scaled_patch_size(c, 3, 40, 104), (std::pair<std::int64_t, std::int64_t>{24, 24}));
    QCOMPARE(scaled_patch_size(c, 7, 40, 104), (std::pair<std::int64_t, std::int64_t>{40, 56}));
    QCOMPARE(scaled_patch_size(c, 20, 40, 104), (std::pair<std::int64_t, std::int64_t>{40, 104}));
  }

  // Plenty of memory: your batch fits at the patch that covers the largest image, which bounds it; a side
  // that is not a multiple of 8 is rounded up (the images are padded to the patch).
  void theLargestImageBoundsThePatchAndYourBatchIsKept() {
    const PatchFit fit = fit_patch(patch_config(4), bounds(6 * GiB, 60, 100));
    QCOMPARE(proposal(fit), std::string("64x104 batch 4, yours"));
    QCOMPARE(fit.limit, FitLimit::largest_image);
    QCOMPARE(
        fit.reason,
        std::string("patch 64x104, batch 4 (yours): the patch covers the largest training image (60x100)"));
    QCOMPARE(fit.plans, 1);  // the patch at the bound, planned once
  }

  // The free memory less the margin, to the byte what your batch of 2 reserves at 48x48: the fitted patch
  // is 48x48 (it fits), 56x56 does not, your batch is kept, and the search took few plans.
  void theFittedPatchFitsAndTheNextMultipleDoesNot() {
    const Config c = patch_config(2);
    const std::int64_t usable = reserved(c, 48, 48, 2);
    QVERIFY(reserved(c, 56, 56, 2) > usable);
    const PatchFit fit = fit_patch(c, bounds(usable, 256, 256));
    QCOMPARE(proposal(fit), std::string("48x48 batch 2, yours"));
    QCOMPARE(fit.limit, FitLimit::free_memory);
    QVERIFY2(
        fit.reason.starts_with("patch 48x48, batch 2 (yours): the free memory less a margin: cpu:0 has "),
        fit.reason.c_str());
    QVERIFY2(fit.reason.ends_with("; a patch of 56x56 with batch 2 would need " +
                                  format_bytes(reserved(c, 56, 56, 2))),
             fit.reason.c_str());
    // The bound (32 multiples of 8) once, then doubling 1, 2, 4, 8 and bisection 6, 7: not 32 plans.
    QCOMPARE(fit.plans, 7);
  }

  // Your batch of 64 does not fit: the patch is the largest at which a batch of 2 fits (the memory is what
  // batch 2 reserves at 40x40), and the batch the largest up to yours that fits there.
  void aMinimumBatchOfTwoWhenYoursDoesNotFit() {
    const Config c = patch_config(64);
    const std::int64_t usable = reserved(c, 40, 40, 2);
    const PatchFit fit = fit_patch(c, bounds(usable, 128, 128));
    QCOMPARE(fit.patch_height, std::int64_t{40});
    QCOMPARE(fit.patch_width, std::int64_t{40});
    QVERIFY(reserved(c, 48, 48, 2) > usable);
    QVERIFY(fit.batch >= kMinimumPatchBatch && fit.batch < 64);
    QVERIFY(reserved(c, 40, 40, fit.batch) <= usable);
    QVERIFY(reserved(c, 40, 40, fit.batch + 1) > usable);
    QVERIFY(!fit.batch_kept);
    QVERIFY2(
        fit.reason.find("your batch of 64 does not fit at 40x40, so the patch is the largest at which a "
                        "batch of 2 fits (a U-Net learns poorly from smaller batches)") != std::string::npos,
        fit.reason.c_str());
  }

  // Not even 8x8 with batch 2 under a cap of 1 MiB: no proposal, and why.
  void nothingFitsSaysSo() {
    Config c = patch_config(4);
    c.memory.cap_mib = 1;
    const PatchFit fit = fit_patch(c, bounds(6 * GiB, 128, 128));
    QCOMPARE(fit.batch, std::int64_t{0});
    QCOMPARE(fit.patch_height, std::int64_t{0});
    QCOMPARE(fit.limit, FitLimit::memory_cap);
    QVERIFY2(fit.reason.starts_with("not even a patch of 8x8 with batch 2 fits: the memory cap you set"),
             fit.reason.c_str());
  }

  // Unmeasured images: the search limit bounds the patch, and the reason says why they were not measured.
  void theSearchLimitWhenTheImagesAreNotMeasured() {
    PatchBounds b = bounds(6 * GiB, 0, 0);
    b.not_measured = "no data yet";
    b.search_limit = 100;  // 96 on a side, the largest multiple of 8 in it
    const PatchFit fit = fit_patch(patch_config(2), b);
    QCOMPARE(fit.patch_height, std::int64_t{96});
    QCOMPARE(fit.limit, FitLimit::search_limit);
    QVERIFY2(fit.reason.ends_with("the training images' size was not measured (no data yet)"),
             fit.reason.c_str());
  }

  // The generated images are data.image_size; resize mode has no patch to fit.
  void boundsOfTheRunAndResizeMode() {
    const PatchBounds b = patch_bounds_for_run(patch_config(4));
    QCOMPARE(b.image_height, std::int64_t{128});
    QCOMPARE(b.image_width, std::int64_t{128});
    Config resize = patch_config(4);
    resize.data.mode = DataMode::resize;
    QVERIFY_THROWS_EXCEPTION(Error, fit_patch(resize, bounds(GiB, 128, 128)));
  }

  // In patch mode a step takes data.patch_size: the smaller-size remedy shrinks the patch (it fits, the next
  // multiple up does not) and leaves data.image_size, which patch mode does not read, alone.
  void theRemedyInPatchModeIsASmallerPatch() {
    Config c = patch_config(4);
    c.memory.cap_mib = 8;
    QVERIFY(!plan_memory(c).fits);
    const std::optional<Remedy> patch = smaller_image_remedy(c, {});
    QVERIFY(patch.has_value());
    QVERIFY(patch->plan.fits);
    QVERIFY(!patch->changes.contains("data.image_size"));
    const auto size = patch->changes.at("data.patch_size").get<std::vector<std::int64_t>>();
    QVERIFY(size[0] < 64 && size[0] == size[1]);
    QVERIFY(!plan_memory(apply_changes(c, {{"data.patch_size", {size[0] + 8, size[1] + 8}}})).fits);
    QVERIFY2(patch->name == "patch size " + std::to_string(size[0]) + "x" + std::to_string(size[1]),
             patch->name.c_str());
    QVERIFY2(patch->description.find("(was 64x64)") != std::string::npos, patch->description.c_str());
    bool named_patch = false;
    for (const Remedy& r : rank_remedies(c)) {
      QVERIFY2(!r.changes.contains("data.image_size"), r.name.c_str());
      named_patch = named_patch || r.changes.contains("data.patch_size");
    }
    QVERIFY(named_patch);
  }
};

QTEST_GUILESS_MAIN(TestPatchFit)
#include "test_patch_fit.moc"
