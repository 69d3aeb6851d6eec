// Fit patch in the workbench, driven through the real MainWindow offscreen (issue 26, item 6): beside Fit
// batch, usable in patch mode only (in resize mode greyed out, its tooltip saying why); it sets the form's
// data.patch_size and train.batch_size to what the engine's fit_patch proposes and says which limit set them;
// and in patch mode the estimate's remedies shrink the patch, never data.image_size.
#include <QPushButton>
#include <QTemporaryDir>

#include "gui/config_panel.h"
#include "gui/estimate_panel.h"
#include "gui/main_window.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/plan/patch_fit.h"
#include "unet/train/training_set.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

// A small run on patches of `patch` x `patch` of 32 x 32 synthetic images.
Config patch_run(const QString& dir, std::int64_t patch) {
  Config c = small_run(dir, 1);
  c.model.width = 4;
  c.model.depth = 2;
  c.data.image_height = c.data.image_width = 32;
  c.data.synthetic_samples = 30;
  c.data.mode = DataMode::patch;
  c.data.patch_height = c.data.patch_width = patch;
  c.train.batch_size = 4;
  return c;
}

// The estimate panel's remedy whose Apply sets `key` (its tooltip is the changes), or nullptr.
QPushButton* remedy_setting(const EstimatePanel& panel, const QString& key) {
  for (int i = 0; i < panel.remedy_count(); ++i)
    if (panel.apply_button(i)->toolTip().contains('"' + key + '"')) return panel.apply_button(i);
  return nullptr;
}

}  // namespace

class TestGuiFitPatch : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_fit_patch"); }

  // Resize mode has no patch: Fit patch is greyed out and says why, in key_applies' words; choosing patch
  // mode makes it usable, and Fit batch stays beside it.
  void fitPatchIsForPatchModeOnly() {
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    window.show();
    QPushButton* fit_patch = window.estimate_panel()->fit_patch_button();
    QCOMPARE(fit_patch->text(), QString("Fit patch"));
    QVERIFY(!fit_patch->isEnabled());
    QVERIFY2(fit_patch->toolTip().contains(R"(data.mode "resize" does not use it (patch does))"),
             qPrintable(fit_patch->toolTip()));
    QVERIFY(set_field(*window.config_panel(), "data.mode", "patch"));
    QTRY_VERIFY(fit_patch->isEnabled());
    QVERIFY(window.estimate_panel()->fit_button()->isEnabled());
  }

  // With memory to spare, the largest image (32 x 32) bounds the patch and your batch is kept: the form
  // holds what the engine's fit_patch proposes for these settings, and the panel says which limit set it.
  void fitPatchSetsThePatchAndTheBatch() {
    QTemporaryDir dir;
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    window.show();
    const Config c = patch_run(dir.filePath("run"), 16);
    window.config_panel()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    const PatchFit expected = fit_patch(c, patch_bounds_for_run(c));
    QCOMPARE(expected.patch_height, std::int64_t{32});
    QCOMPARE(expected.limit, FitLimit::largest_image);

    window.estimate_panel()->fit_patch_button()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimate_panel()->fit_text().contains("largest patch"), 60000);
    const QString text = window.estimate_panel()->fit_text();
    QVERIFY2(text.contains(QString::fromStdString(expected.reason)), qPrintable(text));
    QVERIFY2(text.contains("the patch covers the largest training image (32x32)"), qPrintable(text));
    const std::optional<Config> now = window.config_panel()->config();
    QVERIFY(now.has_value());
    QCOMPARE(now->data.patch_height, expected.patch_height);
    QCOMPARE(now->data.patch_width, expected.patch_width);
    QCOMPARE(now->train.batch_size, expected.batch);
    QCOMPARE(now->data.image_height, std::int64_t{32});  // patch mode does not read it: left alone
  }

  // A patch mode config that does not fit its cap: the remedies offer a smaller patch (Apply sets
  // data.patch_size) and none changes data.image_size.
  void theRemediesShrinkThePatch() {
    QTemporaryDir dir;
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    window.show();
    Config c = small_run(dir.filePath("run"), 1);
    c.data.mode = DataMode::patch;
    c.data.patch_height = c.data.patch_width = 64;
    c.memory.cap_mib = 8;
    window.config_panel()->set_config(c);
    EstimatePanel& panel = *window.estimate_panel();
    QTRY_VERIFY_WITH_TIMEOUT(panel.status_text() == "Does not fit." && panel.remedy_count() > 0, 60000);
    QVERIFY(remedy_setting(panel, "data.image_size") == nullptr);
    QPushButton* smaller = remedy_setting(panel, "data.patch_size");
    QVERIFY(smaller != nullptr);
    smaller->click();
    const std::optional<Config> now = window.config_panel()->config();
    QVERIFY(now.has_value());
    QVERIFY(now->data.patch_height < 64);
    QCOMPARE(now->data.image_height, std::int64_t{64});
  }
};

QTEST_MAIN(TestGuiFitPatch)
#include "test_gui_fit_patch.moc"
