// The unet-workbench program run as a user runs it from a terminal (issue 25, item 13): --help and --version
// print and exit 0 on a machine with no display (no DISPLAY, no WAYLAND_DISPLAY, no QT_QPA_PLATFORM), where
// a QApplication cannot start.
#include <QProcess>
#include <QProcessEnvironment>
#include <QtTest/QtTest>

#include "test_support.h"

class TestGuiCommandLine : public QObject {
  Q_OBJECT

  struct Outcome {
    int code = -1;  // -1: it crashed or did not end
    QString out, err;
  };

  // unet-workbench with `arguments` in an environment without any display or platform choice.
  static Outcome run_without_display(const QStringList& arguments) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
    QProcess program;
    program.setProcessEnvironment(env);
    program.start(UNET_WORKBENCH_BINARY, arguments);
    Outcome outcome;
    if (!program.waitForFinished(60000)) {
      program.kill();
      program.waitForFinished();
      return outcome;
    }
    outcome.out = QString::fromUtf8(program.readAllStandardOutput());
    outcome.err = QString::fromUtf8(program.readAllStandardError());
    if (program.exitStatus() == QProcess::NormalExit) outcome.code = program.exitCode();
    return outcome;
  }

 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  void versionPrintsWithoutADisplay() {
    for (const QString& flag : {QString("--version"), QString("-v")}) {
      const Outcome o = run_without_display({flag});
      QVERIFY2(o.code == 0, qPrintable(flag + ": exit " + QString::number(o.code) + "; " + o.err));
      QCOMPARE(o.out.trimmed(), QString("unet-workbench " UNET_VERSION));
    }
  }

  void helpListsTheOptionsWithoutADisplay() {
    const Outcome o = run_without_display({"--help"});
    QVERIFY2(o.code == 0, qPrintable("exit " + QString::number(o.code) + "; " + o.err));
    for (const QString& part : {QString("Usage:"), QString("--demo"), QString("--help"), QString("--version"),
                                QString("config.json")})
      QVERIFY2(o.out.contains(part), qPrintable(part + " not in:\n" + o.out));
  }
};

QTEST_GUILESS_MAIN(TestGuiCommandLine)
#include "test_gui_command_line.moc"
