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
};

QTEST_MAIN(TestGuiFormChoices)
#include "test_gui_form_choices.moc"
