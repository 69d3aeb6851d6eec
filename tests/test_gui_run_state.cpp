// What the window says about a run, driven through the real MainWindow offscreen (issue 25, items 4, 5 and
// 6): a new start clears what the window showed of the previous run (epoch, speed, ETA, the step progress)
// and a refused start shows the refusal, not that run's "step 90/90 … Failed"; a refused start leaves no run
// folder of its own behind; Fit batch says which limit set the batch it chose.
#include <QDir>
#include <QFileInfo>
#include <QStatusBar>
#include <QTemporaryDir>

#include <fstream>

#include "gui/estimate_panel.h"
#include "gui/main_window.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "test_support.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

// A folder dataset the preflight refuses (an image that is no image, without its mask) in `root`/data; a run
// of it into `run_dir`.
Config refused_by_the_preflight(const QString& root, const QString& run_dir) {
  QDir(root).mkpath("data/images");
  QDir(root).mkpath("data/masks");
  std::ofstream(QDir(root).filePath("data/images/a.png").toStdString()) << "not an image";
  Config c = small_run(run_dir, 1);
  c.data.source = DataSource::folder;
  c.data.path = QDir(root).filePath("data").toStdString();
  return c;
}

// The window as these tests drive it: shown, its log watched (`refusals`: the preflight's error expected),
// its prompts recorded.
struct WatchedWindow {
  explicit WatchedWindow(bool refusals) {
    if (refusals) log.expect_error("a.png");
    watch_log(window, log);
    window.show();
  }
  test::LogWatch log;  // outlives the window
  MainWindow window{{.demo = true, .prompter = std::make_shared<PromptRecorder>()}};
};

}  // namespace

class TestGuiRunState : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_run_state"); }

  // Item 6: a run trained to its end, then a start the preflight refuses: the status shows the refusal, and
  // nothing of the finished run (its epoch, speed, ETA, its "step 6 / 6" progress).
  void aRefusedStartShowsTheRefusalNotThePreviousRun() {
    QTemporaryDir dir;
    WatchedWindow watched(/*refusals=*/true);
    MainWindow& window = watched.window;
    QVERIFY(train_to_the_end(window, small_run(dir.filePath("first"), 1)));
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const QString finished = window.status_text();
    for (const QString& part :
         {QString("epoch 1/1"), QString("img/s"), QString("ETA"), QString("step 6 / 6"), QString("Finished")})
      QVERIFY2(finished.contains(part), qPrintable(finished + " lacks " + part));

    QVERIFY(train_to_the_end(window, refused_by_the_preflight(dir.path(), dir.filePath("second"))));
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    const QString refused = window.status_text();
    QVERIFY2(refused.contains("Refused before training"), qPrintable(refused));
    for (const QString& old : {QString("epoch"), QString("img/s"), QString("ETA"), QString("step 6"),
                               QString("Finished"), QString("Failed")})
      QVERIFY2(!refused.contains(old), qPrintable(refused + " still holds " + old));
    // Why, in the bar: the preflight's headline (its problems are in the log).
    const QString message = window.statusBar()->currentMessage();
    QVERIFY2(message.startsWith("Not started: folder ") && message.contains("no usable sample"),
             qPrintable(message));
  }

  // Item 6: a new start clears the previous run's epoch and ETA at once, before its own first step.
  void aNewStartClearsThePreviousRun() {
    QTemporaryDir dir;
    WatchedWindow watched(/*refusals=*/false);
    MainWindow& window = watched.window;
    QVERIFY(train_to_the_end(window, small_run(dir.filePath("first"), 1)));
    QVERIFY(window.status_text().contains("epoch 1/1"));
    Config next = small_run(dir.filePath("second"), 1);
    next.data.synthetic_samples = 64;
    window.config_panel()->set_config(next);
    Task* preparing = window.start_training();
    QVERIFY(preparing);
    // The window is busy from the click on: what it shows is this start's, not the finished run's.
    const QString starting = window.status_text();
    QVERIFY2(starting.contains("Preparing"), qPrintable(starting));
    for (const QString& old : {QString("epoch"), QString("img/s"), QString("ETA"), QString("step 6")})
      QVERIFY2(!starting.contains(old), qPrintable(starting + " still holds " + old));
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QVERIFY2(window.status_text().contains("step 8 / 8"), qPrintable(window.status_text()));
  }

  // Item 4: the refused start made its run folder (and the folder above it): both are gone again; in a folder
  // that holds the user's files, a refused start leaves them all.
  void aRefusedStartLeavesNoRunFolder() {
    QTemporaryDir dir;
    WatchedWindow watched(/*refusals=*/true);
    MainWindow& window = watched.window;
    const QString made = dir.filePath("runs"), run_dir = dir.filePath("runs/new");
    QVERIFY(train_to_the_end(window, refused_by_the_preflight(dir.path(), run_dir)));
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    QVERIFY2(!QFileInfo::exists(run_dir), qPrintable(run_dir));
    QVERIFY2(!QFileInfo::exists(made), qPrintable(made));

    const QString mine = dir.filePath("mine");
    QDir().mkpath(mine);
    std::ofstream(QDir(mine).filePath("notes.txt").toStdString()) << "the user's notes";
    QVERIFY(train_to_the_end(window, refused_by_the_preflight(dir.path(), mine)));
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    QFile notes(QDir(mine).filePath("notes.txt"));
    QVERIFY(notes.open(QIODevice::ReadOnly));
    QCOMPARE(notes.readAll(), QByteArray("the user's notes"));
  }

  // Item 5: Fit batch on 30 synthetic images, a fifth of them for validation, with a model small enough that
  // memory allows far more: the batch is the training set's 24 images, and the panel says that this is the
  // limit that applied.
  void fitBatchSaysWhichLimitApplied() {
    QTemporaryDir dir;
    WatchedWindow watched(/*refusals=*/false);
    MainWindow& window = watched.window;
    Config c = small_run(dir.filePath("run"), 1);
    c.model.width = 4;
    c.model.depth = 2;
    c.data.image_height = c.data.image_width = 32;
    c.data.synthetic_samples = 30;
    c.data.val_fraction = 0.2;
    window.config_panel()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    window.estimate_panel()->fit_button()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimate_panel()->fit_text().contains("largest batch"), 60000);
    const QString text = window.estimate_panel()->fit_text();
    QVERIFY2(text.contains("batch 24: the training set has 24 images"), qPrintable(text));
    QCOMPARE(window.config_panel()->config()->train.batch_size, std::int64_t{24});
  }
};

QTEST_MAIN(TestGuiRunState)
#include "test_gui_run_state.moc"
