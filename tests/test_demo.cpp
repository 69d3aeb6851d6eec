// The built-in demo, as the README promises: `unet-train train` with `{}` (synthetic cells, width 16,
// 128x128, batch 8, CPU, 10 epochs) reaches validation IoU >= 0.80. A few minutes on two cores: labelled
// slow.
#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>

#include <fstream>

#include "test_support.h"

class TestDemo : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  void demoReachesIoU() {
    QTemporaryDir dir;
    const QString config = dir.filePath("demo.json");
    std::ofstream(config.toStdString()) << "{}";
    QProcess p;
    p.setWorkingDirectory(dir.path());
    QElapsedTimer timer;
    timer.start();
    p.start(UNET_TRAIN_BINARY, {"train", "--config", config});
    QVERIFY(p.waitForFinished(1800000));
    const QByteArray err = p.readAllStandardError();
    unet::test::LogWatch log;
    log.record_output(QString::fromUtf8(err));
    QVERIFY2(p.exitCode() == 0, err.constData());
    std::ifstream in((dir.path() + "/runs/demo/metrics.jsonl").toStdString());
    std::string line;
    double last_iou = -1;
    int epochs = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.at("kind") == "epoch") {
        last_iou = j.at("val_iou").get<double>();
        ++epochs;
      }
    }
    qInfo("demo: %d epochs, final val_iou %.4f, %.0f s", epochs, last_iou, timer.elapsed() / 1000.0);
    QCOMPARE(epochs, 10);
    QVERIFY2(last_iou >= 0.80, qPrintable(QString("val_iou %1").arg(last_iou)));
  }
};

QTEST_GUILESS_MAIN(TestDemo)
#include "test_demo.moc"
