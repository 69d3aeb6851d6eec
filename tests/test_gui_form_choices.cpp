// The configuration form as the user's own, driven through the real window (offscreen): the keys that the
// other settings leave unread are greyed out, their tooltips saying why in the engine's words
// (key_applies()), and their values are still saved (issue 25, item 10); continuing a run from the run
// folder dialog, or Resume from checkpoint…, says which of the run's settings differ from the form before
// the form changes, leaves the form alone when cancelled at any dialog, and the switch can be undone (issue
// 25, item 1).
#include <QApplication>
#include <QDir>
#include <QSettings>
#include <QTemporaryDir>

#include <memory>

#include "gui/config_files.h"
#include "gui/config_panel.h"
#include "gui/main_window.h"
#include "gui/prompter.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/io/checkpoint.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

class TestGuiFormChoices : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() {
    test::fail_on_warnings();
    QCoreApplication::setOrganizationName("UNet Workbench tests");
    QCoreApplication::setApplicationName("test_gui_form_choices");
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, home_.path());
    QDir::setCurrent(home_.path());
  }

  // One row per rule: the controlling fields set through the form ("key=value", in order), then the key
  // looked at and the reason its tooltip gives (empty: it applies, enabled and without a reason).
  void keysThatDoNotApplyAreGreyedOutSayingWhy_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("why");
    const QString schedule = R"(schedule.kind "%1" does not use it (%2 does))";
    QTest::newRow("gamma under constant") << QStringList{"schedule.kind=constant"} << "schedule.gamma"
                                          << schedule.arg("constant", "step or plateau");
    QTest::newRow("gamma under step") << QStringList{"schedule.kind=step"} << "schedule.gamma" << QString();
    QTest::newRow("power under cosine")
        << QStringList{"schedule.kind=cosine"} << "schedule.power" << schedule.arg("cosine", "poly");
    QTest::newRow("patience under one_cycle") << QStringList{"schedule.kind=one_cycle"} << "schedule.patience"
                                              << schedule.arg("one_cycle", "plateau");
    QTest::newRow("warm-up under one_cycle")
        << QStringList{"schedule.kind=one_cycle"} << "schedule.warmup_steps"
        << schedule.arg("one_cycle", "constant, step, cosine, poly or plateau");
    QTest::newRow("pct_start under plateau") << QStringList{"schedule.kind=plateau"} << "schedule.pct_start"
                                             << schedule.arg("plateau", "one_cycle");
    QTest::newRow("warm-up start without warm-up")
        << QStringList{"schedule.kind=cosine", "schedule.warmup_steps=0"} << "schedule.warmup_start_factor"
        << "schedule.warmup_steps is 0 (no warm-up)";
    QTest::newRow("warm-up start with warm-up")
        << QStringList{"schedule.kind=cosine", "schedule.warmup_steps=5"} << "schedule.warmup_start_factor"
        << QString();
    QTest::newRow("momentum under adamw") << QStringList{"optimizer.kind=adamw"} << "optimizer.momentum"
                                          << R"(optimizer.kind "adamw" does not use it (sgd does))";
    QTest::newRow("nesterov under adam") << QStringList{"optimizer.kind=adam"} << "optimizer.nesterov"
                                         << R"(optimizer.kind "adam" does not use it (sgd does))";
    QTest::newRow("momentum under sgd")
        << QStringList{"optimizer.kind=sgd"} << "optimizer.momentum" << QString();
    QTest::newRow("beta1 under sgd") << QStringList{"optimizer.kind=sgd"} << "optimizer.beta1"
                                     << R"(optimizer.kind "sgd" does not use it (adam or adamw does))";
    QTest::newRow("eps under sgd") << QStringList{"optimizer.kind=sgd"} << "optimizer.eps"
                                   << R"(optimizer.kind "sgd" does not use it (adam or adamw does))";
    QTest::newRow("focal gamma under cross-entropy")
        << QStringList{"loss.kind=cross_entropy"} << "loss.focal_gamma"
        << R"(loss.kind "cross_entropy" does not use it (focal or focal_dice does))";
    QTest::newRow("focal alpha, softmax focal")
        << QStringList{"model.classes=3", "loss.kind=focal"} << "loss.focal_alpha"
        << "model.classes is 3: it applies to binary models only (model.classes 1)";
    QTest::newRow("focal alpha, binary focal")
        << QStringList{"model.classes=1", "loss.kind=focal_dice"} << "loss.focal_alpha" << QString();
    QTest::newRow("Dice weight without Dice")
        << QStringList{"loss.kind=focal"} << "loss.dice_weight"
        << R"(loss.kind "focal" does not use it (dice, cross_entropy_dice or focal_dice does))";
    QTest::newRow("Dice smoothing with Dice")
        << QStringList{"loss.kind=dice"} << "loss.dice_smooth" << QString();
    QTest::newRow("cross-entropy weight under Dice alone")
        << QStringList{"loss.kind=dice"} << "loss.cross_entropy_weight"
        << R"(loss.kind "dice" does not use it (cross_entropy, cross_entropy_dice, focal or focal_dice does))";
    // The test machine's devices are CPUs: the form selects cpu:0.
    QTest::newRow("TF32 without a GPU") << QStringList{} << "cuda.tf32"
                                        << "no GPU is among the devices: it is for GPUs only";
    QTest::newRow("GPU communicator without a GPU") << QStringList{} << "cuda.communicator"
                                                    << "no GPU is among the devices: it is for GPUs only";
    QTest::newRow("synthetic samples from a folder")
        << QStringList{"data.source=folder"} << "data.synthetic_samples"
        << R"(data.source "folder" does not use it (synthetic does))";
    QTest::newRow("dataset folder, synthetic")
        << QStringList{"data.source=synthetic"} << "data.path"
        << R"(data.source "synthetic" does not use it (folder or dsb2018 does))";
    QTest::newRow("epochs under steps") << QStringList{"train.steps=40"} << "train.epochs"
                                        << "train.steps is 40: it overrides epochs";
    QTest::newRow("early-stopping monitor, off")
        << QStringList{"early_stopping.patience=0"} << "early_stopping.monitor"
        << "early_stopping.patience is 0 (early stopping is off)";
    QTest::newRow("early-stopping monitor, on")
        << QStringList{"early_stopping.patience=3"} << "early_stopping.monitor" << QString();
    QTest::newRow("keep last without periodic checkpoints")
        << QStringList{"checkpoint.every_epochs=0"} << "checkpoint.keep_last"
        << "checkpoint.every_epochs is 0 (no periodic checkpoints)";
  }
  void keysThatDoNotApplyAreGreyedOutSayingWhy() {
    QFETCH(QStringList, sets);
    QFETCH(QString, key);
    QFETCH(QString, why);
    MainWindow window({.demo = true});
    window.show();
    ConfigPanel& panel = *window.config_panel();
    for (const QString& set : sets) {
      const qsizetype eq = set.indexOf('=');
      QVERIFY(set_field(panel, set.left(eq), set.mid(eq + 1)));
    }
    QWidget* editor = panel.field(key);
    QVERIFY(editor);
    QCOMPARE(editor->isEnabled(), why.isEmpty());
    if (why.isEmpty()) {
      QVERIFY2(!editor->toolTip().contains("Not used"), qPrintable(editor->toolTip()));
    } else {
      QVERIFY2(editor->toolTip().startsWith("Not used: " + why + "."), qPrintable(editor->toolTip()));
      // The help that follows the reason is the key's own.
      QVERIFY(editor->toolTip().contains(key));
    }
  }

  // A greyed-out key keeps its value: the config, the file saved and the next launch hold it unchanged, and
  // it is back in use once the controlling value reads it again.
  void aDisabledFieldsValueIsStillSaved() {
    QTemporaryDir dir;
    MainWindow window({.demo = true});
    window.show();
    ConfigPanel& panel = *window.config_panel();
    QVERIFY(set_field(panel, "schedule.kind", "step"));
    QVERIFY(set_field(panel, "schedule.gamma", "0.5"));
    QVERIFY(set_field(panel, "optimizer.kind", "sgd"));
    QVERIFY(set_field(panel, "optimizer.momentum", "0.8"));
    QVERIFY(set_field(panel, "schedule.kind", "constant"));
    QVERIFY(set_field(panel, "optimizer.kind", "adamw"));
    QVERIFY(!panel.field("schedule.gamma")->isEnabled());
    QVERIFY(!panel.field("optimizer.momentum")->isEnabled());
    const std::optional<Config> c = panel.config();
    QVERIFY(c);
    QCOMPARE(c->schedule.gamma, 0.5);
    QCOMPARE(c->optimizer.momentum, 0.8);
    const QString file = dir.filePath("config.json");
    QVERIFY(succeeds(window.save_config_to(file)));
    const Config saved = read_config_file(file);
    QCOMPARE(saved.schedule.gamma, 0.5);
    QCOMPARE(saved.optimizer.momentum, 0.8);
    QVERIFY(set_field(panel, "schedule.kind", "plateau"));
    QVERIFY(panel.field("schedule.gamma")->isEnabled());
    QCOMPARE(panel.config()->schedule.gamma, 0.5);
  }

  // Issue 25, item 1: a new set-up in the form, then Start into the folder of a stopped run and "Continue
  // that run". The run goes on with its own settings, so the window lists what differs first; Cancel there
  // starts nothing and leaves the form as it was; continuing shows the run's settings in the form while it
  // trains, and File → Restore the form's settings brings the set-up back.
  void continueThatRunAsksFirstAndCanBeUndone() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QVERIFY(stopped_run_then_new_set_up(window, dir.path()));
    const QString last = dir.filePath("run/last.safetensors");
    const std::int64_t stopped_at = load_checkpoint(last.toStdString()).position.step;
    ConfigPanel& panel = *window.config_panel();
    const nlohmann::json form = panel.document();

    auto pending = answer_next_dialogs({"Continue that run", "Cancel"});
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(pending->isEmpty(), 30000);
    QVERIFY(tasks_end(window));
    QVERIFY(!window.training() && window.training_task() == nullptr);
    QCOMPARE(panel.document(), form);
    QCOMPARE(load_checkpoint(last.toStdString()).position.step, stopped_at);

    pending = answer_next_dialogs({"Continue that run", kContinue});
    QVERIFY(window.start_training());
    QTRY_VERIFY_WITH_TIMEOUT(pending->isEmpty(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(window.training_task() != nullptr, 60000);
    QAction* restore = restore_action(window);
    QVERIFY(restore && !restore->isEnabled());  // not while the run goes on
    QCOMPARE(panel.config()->train.epochs, 2);  // the form shows what trains
    QCOMPARE(panel.config()->train.batch_size, 8);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    QCOMPARE(load_checkpoint(last.toStdString()).position.epoch, 2);
    QVERIFY(restore->isEnabled());
    restore->trigger();
    QCOMPARE(panel.document(), form);
    QVERIFY(!restore->isEnabled());
  }

  // The list names each setting that differs, with its label, its key, the form's value and the run's, and
  // nothing else (the devices are the form's: a resume runs on the devices selected now).
  void theQuestionListsWhatDiffers() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    window.show();
    QVERIFY(stopped_run_then_new_set_up(window, dir.path()));
    ConfigPanel& panel = *window.config_panel();
    Config two_cpus = *panel.config();
    two_cpus.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}};
    panel.set_config(two_cpus);
    const nlohmann::json form = panel.document();
    QVERIFY(!run_begins(window, window.resume_from(dir.filePath("run/last.safetensors"))));
    QVERIFY(tasks_end(window));
    QCOMPARE(prompts->count(PromptRecorder::Kind::run_settings), 1);
    QCOMPARE(prompts->asked.back().title, dir.filePath("run"));
    QCOMPARE(prompts->asked.back().text, QString("Synthetic samples (data.synthetic_samples): 40 -> 48\n"
                                                 "Epochs (train.epochs): 3 -> 2\n"
                                                 "Batch size (train.batch_size): 4 -> 8"));
    QCOMPARE(panel.document(), form);
  }

  // The same pattern: File → Open run… shows the run's settings in the form, and that can be undone too.
  void openRunCanBeUndone() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    QVERIFY(stopped_run_then_new_set_up(window, dir.path()));
    ConfigPanel& panel = *window.config_panel();
    const nlohmann::json form = panel.document();
    QVERIFY(succeeds(window.open_run(dir.filePath("run"))));
    QCOMPARE(panel.config()->train.epochs, 2);
    QAction* restore = restore_action(window);
    QVERIFY(restore && restore->isEnabled());
    restore->trigger();
    QCOMPARE(panel.document(), form);
  }

  // Resume from checkpoint…, cancelled at any of its dialogs (the file, the list of differences, the run
  // folder question), leaves the form exactly as it was; continued, the form shows the run's settings (in the
  // folder it branched into) until File → Restore the form's settings.
  void resumeCancelledAtAnyDialogLeavesTheForm() {
    QTemporaryDir dir;
    test::LogWatch log;
    MainWindow window({.demo = true});
    watch_log(window, log);
    window.show();
    Config c = small_run(dir.filePath("run"), 2);
    c.checkpoint.every_epochs = 1;
    c.checkpoint.filename_template = "p-{epoch:02d}.safetensors";
    QVERIFY(train_to_the_end(window, c));
    ConfigPanel& panel = *window.config_panel();
    QVERIFY(set_field(panel, "train.epochs", 5));
    QVERIFY(set_field(panel, "model.width", 12));
    const nlohmann::json form = panel.document();
    QAction* resume = nullptr;
    for (QAction* a : window.findChildren<QAction*>())
      if (a->text() == "Resume from checkpoint…") resume = a;
    QVERIFY(resume);
    const QString earlier = dir.filePath("run/p-01.safetensors");
    const QStringList cancelled[] = {{""}, {earlier, "Cancel"}, {earlier, kContinue, "Cancel"}};
    for (const QStringList& answers : cancelled) {
      auto pending = answer_next_dialogs(answers);
      resume->trigger();
      QTRY_VERIFY_WITH_TIMEOUT(pending->isEmpty(), 30000);
      QVERIFY(tasks_end(window));
      QVERIFY2(!window.training() && window.training_task() == nullptr, qPrintable(answers.join(", ")));
      QVERIFY2(panel.document() == form, qPrintable(answers.join(", ")));
    }

    auto pending = answer_next_dialogs({earlier, kContinue, "Branch off"});
    resume->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(pending->isEmpty(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(window.training_task() != nullptr, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const std::int64_t step = load_checkpoint(earlier.toStdString()).position.step;
    QCOMPARE(QString::fromStdString(panel.config()->checkpoint.dir),
             dir.filePath(QString("run-from-step-%1").arg(step)));
    QCOMPARE(panel.config()->model.width, 8);
    restore_action(window)->trigger();
    QCOMPARE(panel.document(), form);
  }

 private:
  // A run in `dir`/run stopped after two steps of its two epochs (batch 8, 48 samples), then a new set-up
  // typed into the form: 3 epochs, batch 4, 40 samples. False (the failure recorded) when any of it fails.
  [[nodiscard]] static bool stopped_run_then_new_set_up(MainWindow& window, const QString& dir) {
    HELPER_VERIFY(train_two_steps_and_stop(window, small_run(dir + "/run", 2)));
    ConfigPanel& panel = *window.config_panel();
    HELPER_VERIFY(set_field(panel, "train.epochs", 3));
    HELPER_VERIFY(set_field(panel, "train.batch_size", 4));
    HELPER_VERIFY(set_field(panel, "data.synthetic_samples", 40));
    return true;
  }

  // The button of the list of differences that continues with the run's settings.
  static constexpr const char* kContinue = "Continue with the run's settings";

  static QAction* restore_action(const MainWindow& window) {
    for (QAction* a : window.findChildren<QAction*>())
      if (a->text() == "Restore the form's settings") return a;
    return nullptr;
  }
};

QTEST_MAIN(TestGuiFormChoices)
#include "test_gui_form_choices.moc"
