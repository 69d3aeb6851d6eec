// Issue 25, items 7 and 8, through the real window offscreen. Item 7: under a cap the settings do not fit,
// the remedies offered with Apply under "what would fit" each make them fit once applied, among them the cap
// raised and a smaller image; those that would not fit are listed apart, without Apply, saying by how much
// they miss; a long estimate says what it is planning and is stopped by newer settings. Item 8: without a
// GPU, the Devices tab gives the engine's reason and what to install.
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>

#include "gui/config_panel.h"
#include "gui/devices_tab.h"
#include "gui/estimate_panel.h"
#include "gui/estimate_tasks.h"
#include "gui/main_window.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/backend/devices.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

// Whether one of `parent`'s labels says `text`.
bool some_label_says(const QWidget& parent, const QString& text) {
  const auto labels = parent.findChildren<QLabel*>();
  return std::any_of(labels.begin(), labels.end(), [&](const QLabel* l) { return l->text().contains(text); });
}

// The demo's window, shown, its log watched (the log outlives the window).
struct DemoWindow {
  test::LogWatch log;
  MainWindow window{{.demo = true}};
  DemoWindow() {
    watch_log(window, log);
    window.show();
  }
};

}  // namespace

class TestGuiAdvice : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_advice"); }

  // A cap the settings do not fit: every remedy offered with Apply, applied to those settings, makes them fit
  // (the estimate of the result says "Fits" and no bar is over); the raised cap and a smaller image are among
  // them; the others are listed apart, with how far they miss, and no Apply.
  void everyRemedyOfferedAsFittingFits() {
    DemoWindow demo;
    MainWindow& window = demo.window;
    ConfigPanel& panel = *window.config_panel();
    const EstimatePanel& estimate = *window.estimate_panel();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    // Sets `config` and waits for its estimate; false when none came within 60 s.
    const auto estimated = [&](const Config& config) {
      const int before = window.estimates_shown();
      panel.set_config(config);
      return QTest::qWaitFor([&] { return window.estimates_shown() > before; }, 60000);
    };
    Config capped = *panel.config();
    capped.memory.cap_mib = 64;  // under the demo's peak; a smaller image or a lower precision fits it
    QVERIFY(estimated(capped));
    QVERIFY2(estimate.status_text().startsWith("Does not fit"), qPrintable(estimate.status_text()));
    const int offered = estimate.remedy_count();
    QVERIFY(offered > 0);
    QStringList changes;
    for (int i = 0; i < offered; ++i) changes << estimate.apply_button(i)->toolTip();
    QVERIFY2(changes.filter("memory.cap_mib").size() == 1, qPrintable(changes.join("; ")));
    QVERIFY2(changes.filter("data.image_size").size() == 1, qPrintable(changes.join("; ")));
    // The others: apart, each with how far it misses, without an Apply.
    QVERIFY(!estimate.missing_remedies().isEmpty());
    for (const QString& text : estimate.missing_remedies())
      QVERIFY2(text.contains("misses by"), qPrintable(text));
    QVERIFY(some_label_says(estimate, "Would not fit"));

    for (int i = 0; i < offered; ++i) {
      if (i > 0) QVERIFY(estimated(capped));
      QCOMPARE(estimate.remedy_count(), offered);  // the same settings, the same advice
      const int before = window.estimates_shown();
      estimate.apply_button(i)->click();
      QVERIFY(QTest::qWaitFor([&] { return window.estimates_shown() > before; }, 60000));
      QVERIFY2(estimate.status_text().startsWith("Fits") && worst_fraction(estimate) <= 1.0,
               qPrintable(changes[i] + ": " + estimate.status_text()));
    }
  }

  // An estimate that takes long (a 4096x4096 image: many remedies to plan) shows a busy bar saying what it
  // plans; newer settings stop it (its task ends Aborted) and their estimate is the one shown.
  void aLongEstimateSaysWhatItPlansAndGivesWay() {
    DemoWindow demo;
    MainWindow& window = demo.window;
    ConfigPanel& panel = *window.config_panel();
    const EstimatePanel& estimate = *window.estimate_panel();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    const int shown = window.estimates_shown();
    QVERIFY(!estimate.busy()->isVisible());
    Config large = *panel.config();
    large.data.image_height = large.data.image_width = 4096;
    panel.set_config(large);
    QTRY_VERIFY_WITH_TIMEOUT(estimate.busy()->isVisible() && estimate.busy()->format().contains("remedy: "),
                             60000);
    auto* planning = window.findChild<EstimateTask*>();
    QVERIFY(planning);
    QSignalSpy aborted(planning, &Task::aborted);
    Config smaller = *panel.config();
    smaller.data.image_height = smaller.data.image_width = 64;
    panel.set_config(smaller);
    QTRY_COMPARE_WITH_TIMEOUT(aborted.count(), 1, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() > shown, 60000);
    QCOMPARE(window.estimates_shown(), shown + 1);  // only the newer settings' estimate was shown
    QVERIFY2(estimate.status_text().startsWith("Fits"), qPrintable(estimate.status_text()));
    QVERIFY(!estimate.busy()->isVisible());
  }

  // Without a GPU (this machine, unless it has one), the Devices tab says why, in the engine's words, and
  // what to install.
  void devicesTabSaysWhyThereIsNoGpu() {
    const DeviceListing listing = list_devices();
    if (listing.cuda_unavailable_reason.empty()) QSKIP("this machine has a usable GPU");
    MainWindow window({.demo = true});
    window.show();
    // The window's tabs: the tab widget that holds the Devices tab.
    const auto all_tabs = window.findChildren<QTabWidget*>();
    const auto tabs = std::find_if(all_tabs.begin(), all_tabs.end(),
                                   [&](QTabWidget* t) { return t->indexOf(window.devices_tab()) >= 0; });
    QVERIFY(tabs != all_tabs.end());
    (*tabs)->setCurrentWidget(window.devices_tab());
    const QString reason = QString::fromStdString(listing.cuda_unavailable_reason);
    QTRY_VERIFY(some_label_says(*window.devices_tab(), reason));
    const std::string_view install = cuda_requirement_text(listing.cuda_requirement);
    QVERIFY(!install.empty());
    QVERIFY(some_label_says(*window.devices_tab(),
                            QString::fromUtf8(install.data(), static_cast<qsizetype>(install.size()))));
    QVERIFY(window.devices_tab()->gpu_note()->isVisible());
  }
};

QTEST_MAIN(TestGuiAdvice)
#include "test_gui_advice.moc"
