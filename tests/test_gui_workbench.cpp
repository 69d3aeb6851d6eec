// The workbench window driven through its real widgets, offscreen: the memory estimate follows the settings
// (width, batch, precision, a cap) and its remedies apply with one click; a short CPU training fills the loss
// and memory charts, the predictions and the model tab; save-checkpoint, pause, resume and stop act on the
// running trainer; an out-of-memory under a cap shows its report and remedies in a dialog, and the window
// lives on.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPointer>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QStatusTipEvent>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTimer>
#include <QTreeWidget>

#include <functional>
#include <memory>
#include <optional>

#include "gui/charts/memory_charts.h"
#include "gui/charts/training_charts.h"
#include "gui/config_panel.h"
#include "gui/devices_tab.h"
#include "gui/estimate_panel.h"
#include "gui/log_view.h"
#include "gui/main_window.h"
#include "gui/model_tab.h"
#include "gui/predict_window.h"
#include "gui/predictions_tab.h"
#include "gui/prompter.h"
#include "gui/task.h"
#include "gui/termination_signals.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/devices.h"
#include "unet/infer/predictor.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/io/onnx_export.h"
#include "unet/model/unet.h"
#include "unet/train/run_folder.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

class TestGuiWorkbench : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_workbench"); }

  void estimateFollowsTheSettings() {
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    ConfigPanel& panel = *window.config_panel();
    const EstimatePanel& estimate = *window.estimate_panel();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 20000);
    QCOMPARE(estimate.bar_count(), 1);
    const double demo = worst_fraction(estimate);
    QVERIFY(demo > 0 && demo < 1);
    QVERIFY(window.model_tab()->table()->rowCount() > 20);

    // Makes a change, waits for the estimate of the new settings, returns its worst bar; nothing when the
    // change failed (recorded) or no new estimate came within 20 s.
    auto next = [&](const std::function<bool()>& change) -> std::optional<double> {
      const int before = window.estimates_shown();
      if (!change()) return std::nullopt;
      if (!QTest::qWaitFor([&] { return window.estimates_shown() > before; }, 20000)) return std::nullopt;
      return worst_fraction(estimate);
    };
    const char* no_estimate = "no estimate of the changed settings within 20 s";
    const std::optional<double> wider = next([&] { return set_field(panel, "model.width", 32); });
    QVERIFY2(wider, no_estimate);
    QVERIFY2(*wider > demo, qPrintable(QString("%1 -> %2").arg(demo).arg(*wider)));
    const std::optional<double> bigger = next([&] { return set_field(panel, "train.batch_size", 16); });
    QVERIFY2(bigger, no_estimate);
    QVERIFY2(*bigger > *wider, qPrintable(QString("%1 -> %2").arg(*wider).arg(*bigger)));
    if (cpu_has_native_bf16()) {
      const std::optional<double> half = next([&] { return set_field(panel, "precision", "mixed-bf16"); });
      QVERIFY2(half, no_estimate);
      QVERIFY2(*half < *bigger, qPrintable(QString("%1 -> %2").arg(*bigger).arg(*half)));
    }
    // A cap it does not fit: the bar goes red and remedies appear; the first one applied makes it fit.
    const std::optional<double> capped = next([&] { return set_field(panel, "memory.cap_mib", 200); });
    QVERIFY2(capped, no_estimate);
    QVERIFY2(*capped > 1.0, qPrintable(QString("%1").arg(*capped)));
    QVERIFY(estimate.bar(0)->color() == QColor(0xd6, 0x45, 0x45));
    QVERIFY(estimate.remedy_count() > 0);
    const std::optional<double> remedied = next([&] {
      estimate.apply_button(0)->click();
      return true;
    });
    QVERIFY2(remedied, no_estimate);
    QVERIFY2(*remedied <= 1.0,
             qPrintable(QString("%1 after %2").arg(*remedied).arg(panel.problems().join(", "))));
  }

  // Several devices: a bar each, with each device's share of the batch, uneven where the batch does not
  // divide.
  void estimateShowsEachDevicesShare() {
    MainWindow window({.demo = true});
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 20000);
    Config c;
    c.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}};
    c.train.batch_size = 8;
    const int before = window.estimates_shown();
    window.config_panel()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() > before, 20000);
    const EstimatePanel& estimate = *window.estimate_panel();
    QCOMPARE(estimate.bar_count(), 3);
    const QStringList want{"cpu:0  3 img", "cpu:1  3 img", "cpu:2  2 img"};
    for (int i = 0; i < 3; ++i)
      QVERIFY2(estimate.bar(i)->text().startsWith(want[i]), qPrintable(estimate.bar(i)->text()));
  }

  void trainingFillsChartsAndTabs() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    window.config_panel()->set_config(small_run(dir.path(), 2));
    QVERIFY(window.start_training());
    QVERIFY(window.training());
    QTRY_VERIFY_WITH_TIMEOUT(window.training_charts()->loss_points() > 0, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(window.memory_charts()->samples("cpu:0") > 0, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QCOMPARE(window.training_charts()->validation_points(), 2);
    QCOMPARE(window.predictions_tab()->sample_count(), 4);
    QVERIFY(window.memory_charts()->samples("cpu:0") >= 3);
    QVERIFY(QFile::exists(dir.filePath("last.safetensors")));
    QVERIFY(window.status_text().contains("img/s"));
    // Issue 12, "a run summary when a run ends": best validation IoU and its checkpoint, time, images/s,
    // peak memory per device.
    QVERIFY(window.run_summary() && window.run_summary()->isVisible());
    const QString summary = qobject_cast<QMessageBox*>(window.run_summary())->text();
    for (const QString& part :
         {QString("finished at step"), QString("Best validation IoU"), dir.filePath("best.safetensors"),
          QString("images/s"), QString("Peak memory on cpu:0")})
      QVERIFY2(summary.contains(part), qPrintable(summary));
  }

  void saveCheckpointPauseResumeStop() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    window.config_panel()->set_config(small_run(dir.path(), 200));
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(window.training_charts()->loss_points() >= 2, 30000);
    QVERIFY(window.save_checkpoint_action()->isEnabled());
    window.save_checkpoint_action()->trigger();
    auto manual_files = [&] {
      return QDir(dir.path()).entryList({"manual-step-*.safetensors"}, QDir::Files);
    };
    QTRY_VERIFY_WITH_TIMEOUT(!manual_files().isEmpty(), 30000);
    const Checkpoint saved = load_checkpoint(dir.filePath(manual_files().first()).toStdString());
    QVERIFY(saved.position.step >= 2);

    // Issue 12, defect 7: Pause (F6) and Stop (Shift+F5) have keys; paused, the button says Continue, not
    // "Resume" as Resume from checkpoint… does.
    QCOMPARE(window.pause_action()->shortcut(), QKeySequence(Qt::Key_F6));
    QCOMPARE(window.stop_action()->shortcut(), QKeySequence(Qt::SHIFT | Qt::Key_F5));
    window.pause_action()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(window.trainer_state(), TrainerState::paused, 30000);
    QCOMPARE(window.pause_action()->text(), QString("Continue"));
    const int paused_at = window.training_charts()->loss_points();
    // Saved while paused, at the step it paused on.
    window.save_checkpoint_action()->trigger();
    const QString paused_file = QString("manual-step-%1.safetensors").arg(paused_at, 6, 10, QChar('0'));
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(dir.filePath(paused_file)), 30000);
    // Issue 12, defect 7: confirmed while still paused, not only after the resume.
    QTRY_VERIFY_WITH_TIMEOUT(window.statusBar()->currentMessage().contains(paused_file), 30000);
    QCOMPARE(window.trainer_state(), TrainerState::paused);
    QTest::qWait(300);
    QCOMPARE(window.training_charts()->loss_points(), paused_at);  // no step while paused

    window.pause_action()->trigger();  // resume
    QTRY_VERIFY_WITH_TIMEOUT(window.training_charts()->loss_points() > paused_at, 30000);
    window.stop_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 60000);
    QCOMPARE(window.trainer_state(), TrainerState::stopped);
    const Checkpoint last = load_checkpoint(dir.filePath("last.safetensors").toStdString());
    QCOMPARE(last.position.step, static_cast<std::int64_t>(window.training_charts()->loss_points()));
  }

  // Stop a run, resume it from its last.safetensors on two CPU replicas: it goes on from the step it stopped
  // at to the end of the planned run; then the weights export is the run's parameters without the optimizer.
  void resumeOnOtherDevicesAndExportWeights() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(train_two_steps_and_stop(window, small_run(dir.path(), 2)));
    const QString last = dir.filePath("last.safetensors");
    const std::int64_t stopped_at = load_checkpoint(last.toStdString()).position.step;
    QVERIFY(stopped_at >= 2);

    Config two = small_run(dir.path(), 2);
    two.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}};
    window.config_panel()->set_config(two);
    // Issue 12, defect 4: the charts go on from the run's history (its metrics.jsonl), not from nothing.
    QVERIFY(run_begins(window, window.resume_from(last)));
    QCOMPARE(static_cast<std::int64_t>(window.training_charts()->loss_points()), stopped_at);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const Checkpoint finished = load_checkpoint(last.toStdString());
    QCOMPARE(finished.config.devices.size(), std::size_t{2});
    QCOMPARE(finished.position.epoch, std::int64_t{2});
    QCOMPARE(static_cast<std::int64_t>(window.training_charts()->loss_points()), finished.position.step);
    QCOMPARE(window.training_charts()->validation_points(), 2);

    const QString weights = dir.filePath("weights.safetensors");
    QVERIFY(succeeds(window.export_weights_of(last, weights)));
    const Checkpoint exported = load_checkpoint(weights.toStdString());
    QVERIFY(exported.adam_m.empty() && exported.adam_v.empty());
    QVERIFY(exported.parameters == finished.parameters);

    // A file that is not a checkpoint is refused, in the log, and nothing is written.
    const QString not_a_checkpoint = dir.filePath("config.json");
    log.expect_error("cannot export the weights of " + not_a_checkpoint.toStdString());
    log.expect_error("cannot resume from " + not_a_checkpoint.toStdString());
    const int errors = window.log_view()->errors();
    QFile file(not_a_checkpoint);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write("{}") == 2);
    file.close();
    QVERIFY(!succeeds(window.export_weights_of(not_a_checkpoint, dir.filePath("nothing.safetensors"))));
    QVERIFY(!run_begins(window, window.resume_from(not_a_checkpoint)));
    QCOMPARE(window.log_view()->errors(), errors + 2);
    // A safetensors file of another program (a tensor, no run in its metadata) is refused the same way.
    const QString foreign = dir.filePath("foreign.safetensors");
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string bytes(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    bytes += header + std::string(4, '\0');
    QFile foreign_file(foreign);
    QVERIFY(foreign_file.open(QIODevice::WriteOnly) &&
            foreign_file.write(bytes.data(), static_cast<qint64>(bytes.size())) ==
                static_cast<qint64>(bytes.size()));
    foreign_file.close();
    log.expect_error("cannot resume from " + foreign.toStdString());
    QVERIFY(!run_begins(window, window.resume_from(foreign)));
    QCOMPARE(window.log_view()->errors(), errors + 3);
    QVERIFY(!QFile::exists(dir.filePath("nothing.safetensors")));
    QVERIFY(!window.training());
  }

  void outOfMemoryShowsTheReport() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    Config c = small_run(dir.path(), 1);
    c.memory.cap_mib = 3;  // the parameters fit, a training step does not
    log.expect_error("cpu:0: out of memory: ");
    window.config_panel()->set_config(c);
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(window.oom_dialog() != nullptr && window.oom_dialog()->isVisible(), 60000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 60000);
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    const QLabel* report = window.oom_dialog()->findChild<QLabel*>("report");
    QVERIFY(report);
    QVERIFY2(report->text().contains("cpu:0") && report->text().contains("3.0 MiB"),
             qPrintable(report->text()));
    // A fresh run has no checkpoint to resume: the report must not promise one.
    QVERIFY2(report->text().contains("No checkpoint of this run was saved"), qPrintable(report->text()));
    const auto applies = window.oom_dialog()->findChildren<QPushButton*>();
    QVERIFY(applies.size() >= 2);  // remedies' Apply buttons and Close
    // Applying one changes the settings; the window is still usable.
    const std::optional<Config> before = window.config_panel()->config();
    applies.front()->click();
    QVERIFY(window.config_panel()->config() != before);
    QVERIFY(window.start_action()->isEnabled());
  }

  // Issue 12, defect 1: a config whose parameters alone exceed the cap once killed the window from the
  // worker thread; now F5 ends in the out-of-memory report with its remedies, and the window lives on.
  void parametersBeyondTheCapShowTheReport() {
    QTemporaryDir dir;
    test::LogWatch log;
    log.expect_error("cpu:0: out of memory: refused before training");
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    window.config_panel()->set_config(
        config_from_json({{"model", {{"width", 8}, {"depth", 3}}},
                          {"data", {{"synthetic_samples", 64}, {"image_size", {32, 32}}}},
                          {"memory", {{"cap_mib", 1}}},
                          {"checkpoint", {{"dir", dir.path().toStdString()}}}}));
    window.start_action()->trigger();  // F5
    QTRY_VERIFY_WITH_TIMEOUT(window.oom_dialog() != nullptr && window.oom_dialog()->isVisible(), 60000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 60000);
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    QVERIFY(window.oom_dialog()->findChildren<QPushButton*>().size() >= 2);
    QVERIFY(window.isVisible() && window.start_action()->isEnabled());
  }

  // Issue 12, "Start guarded by the planner": Start on settings the estimate shows do not fit asks first;
  // Cancel starts nothing (no run folder is made), "Apply and Start" applies the best remedy that fits and
  // trains with it to the end.
  void startOnSettingsThatDoNotFitAsksFirst() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    Config c = small_run(dir.filePath("run"), 1);
    c.memory.cap_mib = 3;  // the parameters fit, a training step does not
    window.config_panel()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(window.estimate_panel()->status_text().contains("Does not fit"), 30000);

    answer_next_message_box("Cancel");
    QVERIFY(!window.start_training());
    QVERIFY(!window.training());
    QVERIFY(!QFileInfo::exists(dir.filePath("run")));

    answer_next_message_box("Apply and Start");
    QVERIFY(window.start_training());
    QVERIFY(window.config_panel()->config() != c);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QVERIFY(QFileInfo::exists(dir.filePath("run/last.safetensors")));
  }

  // Runs that the engine refuses or stops (issue 11's hostile cases) end in the log and the "training
  // stopped" state, and the window lives on, ready for the next Start: a run folder another run holds, a
  // diverging run, something that is not a file where the log goes.
  void hostileRunsEndWithAReasonAndTheWindowLives_data() {
    QTest::addColumn<QString>("hostility");
    QTest::addColumn<QString>("reason");
    QTest::newRow("folder in use") << "locked"
                                   << "in use by another run";
    QTest::newRow("divergence") << "lr 1e3"
                                << "diverged";
    QTest::newRow("FIFO as the log") << "fifo"
                                     << "not a regular file";
    QTest::newRow("saves that fail") << "last is a folder"
                                     << "not saved";
    QTest::newRow("full disk") << "full disk"
                               << "bytes are free";
  }
  void hostileRunsEndWithAReasonAndTheWindowLives() {
    QFETCH(QString, hostility);
    QFETCH(QString, reason);
    QTemporaryDir dir;
    // A 64 KiB tmpfs: room for the log, not for a checkpoint (root only).
    struct TinyDisk {
      std::string path;
      bool mounted = false;
      ~TinyDisk() {
        if (mounted) ::umount2(path.c_str(), MNT_DETACH);
      }
    } disk{dir.filePath("disk").toStdString()};
    if (hostility == "full disk") {
      if (::geteuid() != 0) QSKIP("mounting a tmpfs needs root");
      QVERIFY(QDir().mkpath(QString::fromStdString(disk.path)));
      disk.mounted = ::mount("tmpfs", disk.path.c_str(), "tmpfs", 0, "size=64k") == 0;
      if (!disk.mounted) QSKIP("cannot mount a tmpfs here");
    }
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    Config c = small_run(hostility == "full disk" ? QString::fromStdString(disk.path) : dir.path(), 1);
    if (hostility == "last is a folder") QVERIFY(QDir(dir.path()).mkpath("last.safetensors/occupied"));
    std::optional<RunLock> other_run;
    if (hostility == "locked") other_run.emplace(dir.path().toStdString());
    if (hostility == "lr 1e3") c.train.lr = 1e3;
    if (hostility == "fifo")
      QCOMPARE(::mkfifo(dir.filePath("metrics.jsonl").toLocal8Bit().constData(), 0644), 0);
    log.expect_error(reason.toStdString());
    // A save that fails is a warning while the run goes on; the run then fails, naming each file.
    if (hostility == "last is a folder" || hostility == "full disk")
      log.expect_warning("checkpoint not saved");
    QVERIFY(train_to_the_end(window, c));
    QCOMPARE(window.trainer_state(), TrainerState::failed);
    // Issue 12, defect 5: each warning and error is in the log once, not once from the engine's report and
    // again from its log line or the run's end.
    QCOMPARE(log.count(LogLevel::error, ""), std::size_t{1});
    QCOMPARE(window.log_view()->errors(), 1);
    if (hostility == "last is a folder" || hostility == "full disk")
      QCOMPARE(log.count(LogLevel::warning, "last.safetensors"), std::size_t{1});
    QVERIFY(window.log_view()->errors() >= 1);
    QVERIFY(window.isVisible());
    QVERIFY(window.start_action()->isEnabled());
    if (hostility == "lr 1e3" && QFileInfo::exists(dir.filePath("last.safetensors")))
      QVERIFY(load_checkpoint(dir.filePath("last.safetensors").toStdString()).position.step >= 0);  // finite
  }

  // Issue 12, defect 7: a config file on the command line that cannot be read is said in a dialog, not only
  // in the log tab (one that can is shown once read); Save config says where it saved; the demo's "Press
  // Start" hint goes when a run starts.
  void feedbackIsGivenWhereItIsSeen() {
    QTemporaryDir dir;
    const QString bad = dir.filePath("bad.json");
    QFile file(bad);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write(R"({"model": {"width": -3}})") > 0);
    file.close();
    {
      test::LogWatch log;
      log.expect_error(bad.toStdString());
      MainWindow window({.config_file = bad});
      watch_log(window, log);
      window.show();
      QTRY_VERIFY(window.findChild<QMessageBox*>("config_error") != nullptr &&
                  window.findChild<QMessageBox*>("config_error")->isVisible());
      QVERIFY(window.findChild<QMessageBox*>("config_error")->text().contains(bad));
    }
    {
      // A good one is read off the GUI thread (the window is up before the file is read) and then shown.
      const QString good = dir.filePath("good.json");
      QFile g(good);
      QVERIFY(g.open(QIODevice::WriteOnly) && g.write(R"({"model": {"width": 24}})") > 0);
      g.close();
      MainWindow window({.config_file = good});
      window.show();
      QVERIFY(tasks_end(window));
      QVERIFY(window.config_panel()->config().has_value());
      QCOMPARE(window.config_panel()->config()->model.width, 24);
      QVERIFY(window.findChild<QMessageBox*>("config_error") == nullptr);
    }
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(window.statusBar()->currentMessage().contains("Press Start"));
    const QString saved = dir.filePath("saved.json");
    QVERIFY(succeeds(window.save_config_to(saved)));
    QVERIFY(QFileInfo::exists(saved));
    QVERIFY(window.statusBar()->currentMessage().contains(saved));
    window.config_panel()->set_config(small_run(dir.filePath("run"), 1));
    QVERIFY(window.start_training());
    QVERIFY(!window.statusBar()->currentMessage().contains("Press Start"));
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
  }

  // Issue 12, defect 6: the window fits the screen (the offscreen one is 800x800, smaller than the 1280x720
  // the issue names), remedies appearing do not widen the dock, every device row shows whole, and the form
  // never scrolls sideways.
  void theLayoutFitsTheScreenAndKeepsItsShape() {
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const QRect room = window.screen()->availableGeometry();
    // (The offscreen screen is narrower than the window's smallest width, 917 pixels: there it is that wide.)
    QVERIFY2(window.width() <= std::max(room.width(), window.minimumSizeHint().width()) &&
                 window.height() <= room.height(),
             qPrintable(QString("%1x%2 in %3x%4")
                            .arg(window.width())
                            .arg(window.height())
                            .arg(room.width())
                            .arg(room.height())));
    QVERIFY2(
        window.minimumSizeHint().width() <= 1280 && window.minimumSizeHint().height() <= 720,
        qPrintable(
            QString("%1x%2").arg(window.minimumSizeHint().width()).arg(window.minimumSizeHint().height())));
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    auto* dock = window.findChild<QDockWidget*>("configuration");
    QVERIFY(dock);
    const int dock_width = dock->width();

    Config c = *window.config_panel()->config();
    c.memory.cap_mib = 1;  // little fits: every remedy is listed, with Apply or apart
    window.config_panel()->set_config(c);
    QTRY_VERIFY_WITH_TIMEOUT(
        window.estimate_panel()->remedy_count() + window.estimate_panel()->missing_remedies().size() >= 2,
        30000);
    QTest::qWait(50);
    QCOMPARE(dock->width(), dock_width);

    auto* devices = window.findChild<QTreeWidget*>("devices");
    QVERIFY(devices);
    for (int i = 0; i < devices->topLevelItemCount(); ++i)
      QVERIFY(devices->visualItemRect(devices->topLevelItem(i)).bottom() < devices->viewport()->height());
    for (auto* scroll : window.config_panel()->findChildren<QScrollArea*>())
      QVERIFY(!scroll->horizontalScrollBar()->isVisible());
  }

  // Issue 12, defect 5: no figure of other settings stays shown: "largest batch" goes when the settings
  // change, and settings that are not valid show no bars and no "Fits"; a single validation sample is
  // "1 validation sample".
  void theEstimateShowsOnlyTheSettingsAsTheyAre() {
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() >= 1, 30000);
    window.estimate_panel()->fit_button()->click();
    QTRY_VERIFY_WITH_TIMEOUT(window.estimate_panel()->fit_text().contains("largest batch"), 60000);
    const int shown = window.estimates_shown();
    QVERIFY(set_field(*window.config_panel(), "model.width", 8));
    QVERIFY(!window.estimate_panel()->fit_text().contains("largest batch"));
    QTRY_VERIFY_WITH_TIMEOUT(window.estimates_shown() > shown, 30000);
    QVERIFY(window.estimate_panel()->bar_count() >= 1);

    QVERIFY(set_field(*window.config_panel(), "train.lr", "-1"));
    QTRY_VERIFY(window.estimate_panel()->bar_count() == 0);
    QVERIFY(window.estimate_panel()->status_text().contains("No estimate"));
    QVERIFY(!window.estimate_panel()->status_text().contains("Fits"));
    // The pointer over the field shows its problem in the status bar; fixed, the problem leaves the bar at
    // once, not at the next hover.
    QWidget* lr = window.config_panel()->field("train.lr");
    QStatusTipEvent hover(lr->statusTip());
    QApplication::sendEvent(lr, &hover);
    QVERIFY(window.statusBar()->currentMessage().contains("train.lr"));
    QVERIFY(set_field(*window.config_panel(), "train.lr", "0.001"));
    QVERIFY(!window.statusBar()->currentMessage().contains("train.lr"));
    QTRY_VERIFY_WITH_TIMEOUT(window.estimate_panel()->bar_count() >= 1, 30000);

    PredictionsReport one;
    one.epoch = 1;
    one.step = 2;
    one.samples.resize(1);
    one.samples[0] = {2, 2, 1, {0, 1, 2, 3}, {0, 1, 0, 1}, 1, {0.1F, 0.9F, 0.2F, 0.8F}};
    window.predictions_tab()->show_predictions(one);
    QCOMPARE(window.predictions_tab()->caption(), QString("After epoch 1 (step 2): 1 validation sample"));
  }

  // Issue 12, "Runs as first-class objects": File → Open run… shows a finished run's curves and settings
  // in a fresh window, and a folder without a run is refused by name.
  void openRunShowsItsCurvesAndSettings() {
    QTemporaryDir dir;
    test::LogWatch log;
    std::int64_t steps = 0;
    {
      const auto prompts = std::make_shared<PromptRecorder>();
      MainWindow window({.demo = true, .prompter = prompts});
      watch_log(window, log);
      window.show();
      QVERIFY(train_to_the_end(window, small_run(dir.filePath("run"), 2)));
      steps = window.training_charts()->loss_points();
    }
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(succeeds(window.open_run(dir.filePath("run"))));
    QCOMPARE(static_cast<std::int64_t>(window.training_charts()->loss_points()), steps);
    QCOMPARE(window.training_charts()->validation_points(), 2);
    QCOMPARE(window.config_panel()->config()->model.width, 8);
    QCOMPARE(window.config_panel()->config()->train.epochs, 2);

    log.expect_error("holds no run");
    QVERIFY(!succeeds(window.open_run(dir.path())));
    QCOMPARE(window.training_charts()->loss_points(), static_cast<int>(steps));

    // Another run over this one: its curves as graphs of their own, named by its folder.
    QVERIFY(succeeds(window.compare_with_run(dir.filePath("run"))));
    QCOMPARE(window.training_charts()->comparison_count(), 1);
    QCOMPARE(static_cast<std::int64_t>(window.training_charts()->comparison_graphs()[0][0]->dataCount()),
             steps);
    QVERIFY(window.training_charts()->comparison_graphs()[0][0]->name().startsWith("run: "));
    log.expect_error("no run's curves to compare");
    QVERIFY(!succeeds(window.compare_with_run(dir.path())));
  }

  // Issue 12, "GPU monitor": the Devices tab reads every device, training or not: the host's load and memory
  // here (a GPU's utilisation, memory, other processes, temperature and power where there is one).
  void theDevicesTabShowsEveryDevice() {
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    window.devices_tab()->refresh();
    QTableWidget* table = window.devices_tab()->table();
    QCOMPARE(table->rowCount(), 1 + static_cast<int>(list_devices().gpus.size()));
    QCOMPARE(table->item(0, 0)->text(), QString("cpu"));
    QVERIFY2(table->item(0, 3)->text().contains(" of "), qPrintable(table->item(0, 3)->text()));
    QTest::qWait(150);                // a few of the kernel's ticks
    window.devices_tab()->refresh();  // the second reading knows the load
    QVERIFY2(table->item(0, 2)->text().endsWith("%"), qPrintable(table->item(0, 2)->text()));
  }

  // Issue 12, "Prediction from the workbench": the run's checkpoint segments the user's images on a thread of
  // its own; the view's mask is the engine's class_mask at the slider's threshold; the masks are saved as PNG
  // (foreground 255), and saving again over them is asked about (No keeps them); a file that
  // is not an image is named and the others are segmented.
  void predictionFromTheWorkbench() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(train_two_steps_and_stop(window, small_run(dir.filePath("run"), 2)));
    QVERIFY(QDir(dir.path()).mkpath("mine") && QDir(dir.path()).mkpath("masks"));
    QStringList images;
    for (int i = 0; i < 3; ++i) {
      std::vector<std::uint8_t> pixels(40 * 48 * 3);
      for (std::size_t p = 0; p < pixels.size(); ++p)
        pixels[p] = static_cast<std::uint8_t>((p * (7 + i)) % 251);
      images << dir.filePath(QString("mine/cell-%1.png").arg(i));
      write_png(images.back().toStdString(), Image{40, 48, 3, pixels});
    }
    QFile text(dir.filePath("mine/notes.png"));
    QVERIFY(text.open(QIODevice::WriteOnly) && text.write("not an image") > 0);
    text.close();

    PredictWindow* predict = window.show_predict_window();
    QVERIFY(predict->isVisible());
    QSignalSpy finished(predict, &PredictWindow::finished);
    QVERIFY(predict->predict(dir.filePath("run/last.safetensors"),
                             images + QStringList{dir.filePath("mine/notes.png")}));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 60000);
    QCOMPARE(predict->prediction_count(), 3);
    QVERIFY2(predict->status_text().contains("notes.png"), qPrintable(predict->status_text()));
    QVERIFY(predict->legend_text().contains("foreground"));

    // The view's mask is the engine's, at the slider's threshold.
    Predictor reference(load_checkpoint(dir.filePath("run/last.safetensors").toStdString()));
    const Prediction expected =
        reference.predict({read_image(images[1].toStdString())}, {images[1].toStdString()}).front();
    predict->set_threshold(0.3);
    QCOMPARE(predict->mask(1), class_mask(expected, 0.3));

    // The masks are written by a task, off the GUI thread.
    Task* saving = predict->save_masks(dir.filePath("masks"));
    QVERIFY(saving && saving->running());
    QVERIFY2(succeeds(saving), qPrintable(predict->status_text()));
    const Image saved = read_image(dir.filePath("masks/cell-1_mask.png").toStdString());
    std::vector<std::uint8_t> as_saved = class_mask(expected, 0.3);
    for (auto& v : as_saved) v = v ? 255 : 0;
    QCOMPARE(saved.height, expected.height);
    QVERIFY(saved.pixels == as_saved);
    const auto before = test::read_all(dir.filePath("masks/cell-1_mask.png").toStdString());
    predict->set_threshold(0.9);
    QVERIFY(!succeeds(predict->save_masks(dir.filePath("masks"))));
    QVERIFY(predict->status_text().contains("would replace"));
    QCOMPARE(prompts->count(PromptRecorder::Kind::question), 1);
    QVERIFY(prompts->asked.back().title.contains("Replace"));
    QVERIFY(test::read_all(dir.filePath("masks/cell-1_mask.png").toStdString()) == before);
  }

  // Issue 13, "inference on real images": the prediction window's mode, overlap and flips controls are the
  // engine's PredictOptions (the overlap only where there are tiles); an image larger than the training size
  // is segmented from tiles as the engine does it with those options; the progress bar counts the images,
  // and Stop ends a long folder between forward passes, keeping the images done.
  void predictionWindowTilesWithItsOptionsAndShowsProgress() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    const QString checkpoint = small_model(dir);  // trained at 32 x 32, as `unet-train init` writes one
    QStringList images;
    for (int i = 0; i < 3; ++i) {
      std::vector<std::uint8_t> pixels(70 * 90 * 3);
      for (std::size_t p = 0; p < pixels.size(); ++p)
        pixels[p] = static_cast<std::uint8_t>((p * (5 + i)) % 253);
      images << dir.filePath(QString("large-%1.png").arg(i));
      write_png(images.back().toStdString(), Image{70, 90, 3, pixels});
    }

    PredictWindow* predict = window.show_predict_window();
    auto* mode = predict->findChild<QComboBox*>("predict_mode");
    auto* overlap = predict->findChild<QDoubleSpinBox*>("predict_overlap");
    auto* flips = predict->findChild<QCheckBox*>("predict_flips");
    auto* stop = predict->findChild<QPushButton*>("predict_stop");
    QVERIFY(mode && overlap && flips && stop);
    QCOMPARE(predict->options().mode, PredictMode::automatic);
    QCOMPARE(overlap->value(), 0.5);
    mode->setCurrentIndex(mode->findText("Resize to the training size"));
    QCOMPARE(predict->options().mode, PredictMode::resize);
    QVERIFY(!overlap->isEnabled());
    mode->setCurrentIndex(mode->findText("Tiles at native scale"));
    QVERIFY(overlap->isEnabled());
    overlap->setValue(0.25);
    flips->setChecked(true);
    const PredictOptions chosen = predict->options();
    QCOMPARE(chosen.mode, PredictMode::tiled);
    QCOMPARE(chosen.overlap, 0.25);
    QCOMPARE(chosen.augmentation, PredictAugmentation::flips);

    QSignalSpy progressed(predict, &PredictWindow::progressed);
    QSignalSpy finished(predict, &PredictWindow::finished);
    QVERIFY(predict->predict(checkpoint, images));
    QVERIFY(stop->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 60000);
    QCOMPARE(progressed.count(), 3);
    QCOMPARE(progressed.last().at(0).toInt(), 3);
    QCOMPARE(predict->progress_value(), 3);
    QCOMPARE(predict->progress_maximum(), 3);
    QVERIFY(!stop->isEnabled());
    QVERIFY2(predict->status_text() == "3 images segmented.", qPrintable(predict->status_text()));
    // The view's mask is the engine's for those options, at a threshold (the median probability, to the
    // slider's 0.01) where it holds both classes and differs from what resizing would give.
    Predictor reference(load_checkpoint(checkpoint.toStdString()));
    const Image large = read_image(images[1].toStdString());
    const Prediction expected = reference.predict({large}, {"large-1"}, chosen).front();
    std::vector<float> sorted = expected.probabilities;
    std::nth_element(sorted.begin(), sorted.begin() + std::ssize(sorted) / 2, sorted.end());
    predict->set_threshold(sorted[sorted.size() / 2]);
    const std::vector<std::uint8_t> mask = class_mask(expected, predict->threshold());
    QCOMPARE(predict->mask(1), mask);
    QVERIFY(std::count(mask.begin(), mask.end(), 1) > 0 && std::count(mask.begin(), mask.end(), 0) > 0);
    PredictOptions resize;
    resize.mode = PredictMode::resize;
    QVERIFY(class_mask(reference.predict({large}, {"large-1"}, resize).front(), predict->threshold()) !=
            mask);

    // A long folder, stopped once the first image is through.
    QStringList many;
    for (int i = 0; i < 300; ++i) many << images[i % 3];
    progressed.clear();
    QVERIFY(predict->predict(checkpoint, many));
    QTRY_VERIFY_WITH_TIMEOUT(progressed.count() >= 1, 60000);
    stop->click();
    QVERIFY(!stop->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 2, 60000);
    QVERIFY2(predict->prediction_count() >= 1 && predict->prediction_count() < 300,
             qPrintable(QString::number(predict->prediction_count())));
    QVERIFY2(predict->status_text().startsWith(
                 QString("Stopped: %1 of 300 images").arg(predict->prediction_count())),
             qPrintable(predict->status_text()));
  }

  // Issue 12, "Help": the user guide opens from Help (F1) and on the first launch only, and says what the
  // panels do, the keys and where runs are kept.
  void theGuideOpensFromHelpAndOnTheFirstLaunch() {
    QSettings().remove("guide/shown");
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QVERIFY(window.show_guide_on_first_launch());
    QVERIFY(window.guide_dialog() && window.guide_dialog()->isVisible());
    const QString text = window.guide_dialog()->findChild<QTextBrowser*>("guide_text")->toPlainText();
    for (const char* part : {"Memory per device", "Shift+F5", "F6", "run folder", "metrics.jsonl", "Resume"})
      QVERIFY2(text.contains(part), part);
    window.guide_dialog()->close();
    QVERIFY(!window.show_guide_on_first_launch());
    QVERIFY(!window.guide_dialog()->isVisible());
    QAction* help = nullptr;
    for (QAction* a : window.findChildren<QAction*>())
      if (a->shortcut() == QKeySequence(QKeySequence::HelpContents)) help = a;
    QVERIFY(help);
    help->trigger();
    QVERIFY(window.guide_dialog()->isVisible());
  }

  // SIGTERM (or SIGINT, SIGHUP) while training: the run stops at its next step boundary, saves
  // last.safetensors, and the window closes without asking; the process would otherwise die unsaved.
  void terminationSignalStopsSavesAndCloses() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    TerminationSignals termination;
    QVERIFY(termination.installed());
    connect(&termination, &TerminationSignals::received, &window, &MainWindow::close_on_signal);
    window.show();
    window.config_panel()->set_config(small_run(dir.path(), 50));
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(window.training_charts()->loss_points() >= 2, 30000);
    QCOMPARE(::raise(SIGTERM), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!window.isVisible(), 60000);
    QVERIFY(!window.training());
    QCOMPARE(window.trainer_state(), TrainerState::stopped);
    QVERIFY(load_checkpoint(dir.filePath("last.safetensors").toStdString()).position.step >= 2);
  }

  // A run folder moved elsewhere (or copied from another machine) resumes where its checkpoint now is: the
  // folder it was trained in is not re-created, and the moved run's log goes on.
  void resumeContinuesInTheCheckpointsFolder() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(train_two_steps_and_stop(window, small_run(dir.filePath("trained"), 2)));
    QVERIFY(QDir(dir.path()).rename("trained", "moved"));
    // The form names the old folder, the run goes on in the new one: continued with the run's settings.
    prompts->run_settings_answer = true;
    QVERIFY(window.resume_from(dir.filePath("moved/last.safetensors")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QVERIFY(!QFileInfo::exists(dir.filePath("trained")));
    QCOMPARE(load_checkpoint(dir.filePath("moved/last.safetensors").toStdString()).position.epoch, 2);
    QFile metrics(dir.filePath("moved/metrics.jsonl"));
    QVERIFY(metrics.open(QIODevice::ReadOnly));
    QVERIFY(metrics.readAll().contains(R"("kind":"resume")"));
  }

  // Issue 13: File → Export ONNX… asks for a checkpoint and a file, and writes the checkpoint's model as the
  // engine's export does; an existing file is replaced only when the user says Yes, the
  // checkpoint itself never; a file that is not a checkpoint is an error dialog, and the window lives on.
  void exportOnnxFromTheFileMenu() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QAction* action = window.export_onnx_action();
    QVERIFY(action);
    QMenu* file_menu = window.menuBar()->actions().first()->menu();
    QVERIFY(file_menu && file_menu->actions().contains(action));

    Checkpoint c;
    c.config = small_run(dir.path(), 1);
    c.parameters = UNet::initial_slab(c.config.model, 3);
    const QString checkpoint = dir.filePath("trained.safetensors");
    save_checkpoint(checkpoint.toStdString(), c, CheckpointKind::weights_only);
    const QString expected_file = dir.filePath("expected.onnx");
    export_onnx(load_checkpoint(checkpoint.toStdString()), expected_file.toStdString(),
                {.source = "trained.safetensors"});
    const std::vector<std::byte> expected = test::read_all(expected_file.toStdString());

    const QString target = dir.filePath("model.onnx");
    auto unanswered = answer_next_dialogs({checkpoint, target});
    action->trigger();
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QVERIFY(test::read_all(target.toStdString()) == expected);
    QVERIFY(window.statusBar()->currentMessage().contains(target));

    // A file there already: No keeps it, Yes replaces it.
    QFile keep(target);
    QVERIFY(keep.open(QIODevice::WriteOnly) && keep.write("keep me") == 7);
    keep.close();
    unanswered = answer_next_dialogs({checkpoint, target, "&No"});
    action->trigger();
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QCOMPARE(test::read_all(target.toStdString()).size(), std::size_t{7});
    unanswered = answer_next_dialogs({checkpoint, target, "&Yes"});
    action->trigger();
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QVERIFY(test::read_all(target.toStdString()) == expected);
    // Cancelling the first dialog does nothing.
    unanswered = answer_next_dialogs({QString()});
    action->trigger();
    QVERIFY(unanswered->isEmpty());

    // Exported directly, an existing file is asked about too (kept: the task ends without writing), and the
    // checkpoint itself is refused; nothing changes.
    unanswered = answer_next_dialogs({"&No"});
    QVERIFY(!succeeds(window.export_onnx_of(checkpoint, expected_file)));
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QVERIFY(test::read_all(expected_file.toStdString()) == expected);
    log.expect_error("is the checkpoint being exported");
    unanswered = answer_next_dialogs({"OK"});
    QVERIFY(!succeeds(window.export_onnx_of(checkpoint, dir.filePath("./trained.safetensors"))));
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QCOMPARE(load_checkpoint(checkpoint.toStdString()).parameters, c.parameters);

    // A file that is not a checkpoint: an error dialog, an error in the log, no file, and the window lives
    // on.
    const QString not_a_checkpoint = dir.filePath("config.json");
    QFile json(not_a_checkpoint);
    QVERIFY(json.open(QIODevice::WriteOnly) && json.write("{}") == 2);
    json.close();
    log.expect_error("cannot export " + not_a_checkpoint.toStdString() + " as ONNX");
    const int errors = window.log_view()->errors();
    unanswered = answer_next_dialogs({not_a_checkpoint, dir.filePath("nothing.onnx"), "OK"});
    action->trigger();
    QVERIFY(tasks_end(window));
    QVERIFY2(unanswered->isEmpty(), qPrintable(unanswered->join(", ")));
    QCOMPARE(window.log_view()->errors(), errors + 1);
    QVERIFY(!QFileInfo::exists(dir.filePath("nothing.onnx")));
    QVERIFY(window.isVisible());
  }

  // Issue 12, defect 2: after a relaunch, the run that was stopped (or killed) is offered for resuming, and
  // Yes resumes it in its folder; a run that finished is not offered.
  void aRelaunchOffersTheUnfinishedRun() {
    QTemporaryDir dir;
    test::LogWatch log;
    {
      MainWindow window({.demo = true});
      watch_log(window, log);
      window.show();
      QVERIFY(train_two_steps_and_stop(window, small_run(dir.path(), 2)));
    }
    MainWindow relaunched({.demo = true});
    watch_log(relaunched, log);
    relaunched.show();
    // Yes, then (the demo's form differs from the run's settings) continue with the run's settings.
    const auto pending = answer_next_dialogs({"&Yes", "Continue with the run's settings"});
    // The checkpoint is read in a task, then the question asked and the run resumed.
    QVERIFY(relaunched.offer_to_resume_unfinished_run() != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(relaunched.trainer_state() == TrainerState::finished, 120000);
    QTRY_VERIFY_WITH_TIMEOUT(!relaunched.training(), 120000);
    QCOMPARE(relaunched.trainer_state(), TrainerState::finished);
    QCOMPARE(load_checkpoint(dir.filePath("last.safetensors").toStdString()).position.epoch, 2);
    QVERIFY(pending->isEmpty());
    QVERIFY(!relaunched.offer_to_resume_unfinished_run());  // finished: nothing to offer, no question
  }

  // Start into a folder that holds a finished run asks; "New folder" starts the run beside it, leaving the
  // previous run's files as they were, and Cancel starts nothing.
  void startIntoAPreviousRunOffersANewFolder() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QVERIFY(train_to_the_end(window, small_run(dir.filePath("run"), 1)));
    const auto before = test::read_all(dir.filePath("run/last.safetensors").toStdString());

    answer_next_message_box("Cancel");
    QVERIFY(!run_begins(window, window.start_training()));
    QVERIFY(!window.training());

    answer_next_message_box("New folder");
    QVERIFY(run_begins(window, window.start_training()));
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QCOMPARE(QString::fromStdString(window.config_panel()->config()->checkpoint.dir), dir.filePath("run-2"));
    QVERIFY(QFileInfo::exists(dir.filePath("run-2/last.safetensors")));
    QVERIFY(test::read_all(dir.filePath("run/last.safetensors").toStdString()) == before);
  }

  // Resuming an earlier checkpoint of a run in its own folder, where the run is further along, asks;
  // "Branch off" goes on in a new folder, and the later state stays.
  void resumingAnEarlierCheckpointBranchesOff() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    Config c = small_run(dir.filePath("run"), 2);
    c.checkpoint.every_epochs = 1;
    c.checkpoint.filename_template = "p-{epoch:02d}.safetensors";
    QVERIFY(train_to_the_end(window, c));
    const auto later = test::read_all(dir.filePath("run/last.safetensors").toStdString());
    const std::int64_t step =
        load_checkpoint(dir.filePath("run/p-01.safetensors").toStdString()).position.step;

    // Cancelled, nothing starts; "Branch off" (a new folder) goes on beside the run.
    QVERIFY(!run_begins(window, window.resume_from(dir.filePath("run/p-01.safetensors"))));
    QCOMPARE(prompts->count(PromptRecorder::Kind::run_folder), 1);
    QVERIFY2(prompts->asked.back().text.contains("holds this run further along"),
             qPrintable(prompts->asked.back().text));
    prompts->run_folder_answer = RunFolderDialog::Choice::new_folder;
    QVERIFY(run_begins(window, window.resume_from(dir.filePath("run/p-01.safetensors"))));
    QCOMPARE(prompts->count(PromptRecorder::Kind::run_folder), 2);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const QString branch = dir.filePath(QString("run-from-step-%1").arg(step));
    QCOMPARE(load_checkpoint((branch + "/last.safetensors").toStdString()).position.epoch, 2);
    QVERIFY(test::read_all(dir.filePath("run/last.safetensors").toStdString()) == later);
  }

  // Start into a folder that holds a finished run does not replace it unasked (asked and cancelled, it
  // changes no file); exporting a checkpoint onto itself is refused too.
  void startDoesNotReplaceAPreviousRunUnasked() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(train_to_the_end(window, small_run(dir.path(), 1)));
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const std::vector<std::byte> last = test::read_all(dir.filePath("last.safetensors").toStdString());
    const std::vector<std::byte> metrics = test::read_all(dir.filePath("metrics.jsonl").toStdString());

    QVERIFY(!run_begins(window, window.start_training()));
    QVERIFY(!window.training());
    QCOMPARE(prompts->count(PromptRecorder::Kind::run_folder), 1);
    QVERIFY2(prompts->asked.back().text.contains("holds a previous run"),
             qPrintable(prompts->asked.back().text));
    QVERIFY(test::read_all(dir.filePath("last.safetensors").toStdString()) == last);
    QVERIFY(test::read_all(dir.filePath("metrics.jsonl").toStdString()) == metrics);

    log.expect_error("is the checkpoint being exported");
    QVERIFY(!succeeds(
        window.export_weights_of(dir.filePath("last.safetensors"), dir.filePath("./last.safetensors"))));
    QVERIFY(test::read_all(dir.filePath("last.safetensors").toStdString()) == last);
  }
};

QTEST_MAIN(TestGuiWorkbench)
#include "test_gui_workbench.moc"
