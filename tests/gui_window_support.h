// What the workbench's window tests share: setting a form field as a user would, watching the log, a small
// quick run, starting and stopping training through the window, waiting for its tasks, and answering the
// modal dialogs (message boxes, file dialogs) that open next. Header-only: each test_gui_*.cpp is its own
// program.
#pragma once

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPointer>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTimer>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "gui/charts/training_charts.h"
#include "gui/config_panel.h"
#include "gui/estimate_panel.h"
#include "gui/log_view.h"
#include "gui/main_window.h"
#include "gui/predict_window.h"
#include "gui/task.h"
#include "test_support.h"
#include "unet/io/checkpoint.h"
#include "unet/model/unet.h"

namespace unet::gui::window_test {

// What a window test program does first (its initTestCase): warnings fail the test, and the window's
// settings (QSettings) and working folder are in `home`, the program's own temporary folder, never the
// user's.
inline void isolate_window_tests(const QTemporaryDir& home, const char* program) {
  test::fail_on_warnings();
  QCoreApplication::setOrganizationName("UNet Workbench tests");
  QCoreApplication::setApplicationName(program);
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, home.path());
  QDir::setCurrent(home.path());
}

// Sets a config key through its editor, as a user would; false (the failure recorded) when it cannot.
[[nodiscard]] inline bool set_field(ConfigPanel& panel, const QString& key, const QVariant& value) {
  QWidget* w = panel.field(key);
  HELPER_VERIFY2(w, qPrintable("no editor for " + key));
  if (auto* spin = qobject_cast<QSpinBox*>(w)) {
    spin->setValue(value.toInt());
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    combo->setCurrentIndex(combo->findText(value.toString()));
    HELPER_VERIFY2(combo->currentText() == value.toString(),
                   qPrintable(key + ": no choice " + value.toString()));
  } else if (auto* check = qobject_cast<QCheckBox*>(w)) {
    check->setChecked(value.toBool());
  } else if (auto* line = qobject_cast<QLineEdit*>(w)) {
    line->selectAll();
    QTest::keyClicks(line, value.toString());
    QTest::keyClick(line, Qt::Key_Enter);
  } else {
    HELPER_VERIFY2(false, qPrintable(key + ": an editor of an unexpected kind"));
  }
  return true;
}

// A small untrained model, as `unet-train init` writes one, trained (nominally) at 32 x 32 on RGB images.
inline QString small_model(const QTemporaryDir& dir) {
  Checkpoint model;
  model.config =
      config_from_json({{"model", {{"width", 4}, {"depth", 2}}}, {"data", {{"image_size", {32, 32}}}}});
  model.parameters = UNet::initial_slab(model.config.model, 3);
  model.adam_m.assign(model.parameters.size(), 0.0F);
  model.adam_v.assign(model.parameters.size(), 0.0F);
  const QString path = dir.filePath("model.safetensors");
  save_checkpoint(path.toStdString(), model, CheckpointKind::full);
  return path;
}

// Warnings and errors in the window's log tab (the engine's, relayed from its observer, and the workbench's
// own) go to `log`, which fails the test on those it does not expect. `log` must outlive the window.
inline void watch_log(const MainWindow& window, test::LogWatch& log) {
  QObject::connect(window.log_view(), &LogView::added, window.log_view(),
                   [&log](LogLevel level, const QString& message) { log.record(level, message); });
}

inline double worst_fraction(const EstimatePanel& e) {
  double worst = 0;
  for (int i = 0; i < e.bar_count(); ++i) worst = std::max(worst, e.bar(i)->fraction());
  return worst;
}

// A small, quick run in `dir`.
inline Config small_run(const QString& dir, std::int64_t epochs) {
  return config_from_json({{"model", {{"width", 8}, {"depth", 3}}},
                           {"data", {{"image_size", {64, 64}}, {"synthetic_samples", 48}}},
                           {"train", {{"epochs", epochs}, {"batch_size", 8}}},
                           {"checkpoint", {{"dir", dir.toStdString()}, {"every_epochs", 0}}}});
}

// Starts `config` as Start does and waits for the run to end; false (the failure recorded) when it does not
// start or end in time. The caller checks how it ended.
[[nodiscard]] inline bool train_to_the_end(MainWindow& window, const Config& config) {
  window.config_panel()->set_config(config);
  HELPER_VERIFY(window.start_training());
  HELPER_VERIFY(QTest::qWaitFor([&] { return !window.training(); }, 120000));
  return true;
}

// Starts `config` as Start does, lets it take two steps and stops it (last.safetensors saved); false (the
// failure recorded) when any of that does not happen in time.
[[nodiscard]] inline bool train_two_steps_and_stop(MainWindow& window, const Config& config) {
  window.config_panel()->set_config(config);
  HELPER_VERIFY(window.start_training());
  HELPER_VERIFY(QTest::qWaitFor([&] { return window.training_charts()->loss_points() >= 2; }, 30000));
  window.stop_action()->trigger();
  HELPER_VERIFY(QTest::qWaitFor([&] { return !window.training(); }, 60000));
  return true;
}

// Runs the Predict window on `images` and waits for it to finish; false (the failure recorded) when it does
// not start or finish within 60 s.
[[nodiscard]] inline bool predict_and_wait(PredictWindow& predict, const QString& checkpoint,
                                           const QStringList& images) {
  QSignalSpy finished(&predict, &PredictWindow::finished);
  HELPER_VERIFY(predict.predict(checkpoint, images));
  HELPER_VERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, 60000));
  return true;
}

// The epoch records of a run's metrics.jsonl, in order; none when the file cannot be read.
inline std::vector<nlohmann::json> epoch_records(const QString& file) {
  QFile f(file);
  if (!f.open(QIODevice::ReadOnly)) return {};
  std::vector<nlohmann::json> epochs;
  while (!f.atEnd()) {
    const nlohmann::json j = nlohmann::json::parse(f.readLine().toStdString());
    if (j.value("kind", std::string()) == "epoch") epochs.push_back(j);
  }
  return epochs;
}

// Waits until the window's tasks (exports, reading a run folder) have all ended and their answers been given;
// false (the failure recorded) when that takes over 60 s.
[[nodiscard]] inline bool tasks_end(const MainWindow& window) {
  HELPER_VERIFY(QTest::qWaitFor([&] { return window.findChildren<Task*>().isEmpty(); }, 60000));
  return true;
}

// Waits for `task` (one of the window's, just started) to end; true when it succeeded.
[[nodiscard]] inline bool succeeds(Task* task) {
  if (!task) return false;
  QSignalSpy ended(task, &Task::finished);
  return QTest::qWaitFor([&] { return !ended.isEmpty(); }, 60000) &&
         ended.at(0).at(0).value<Task::State>() == Task::State::succeeded;
}

// Waits until the run that `preparing` (start_training's or resume_from's task) reads files for has begun,
// or the window has given it up (refused, cancelled, failed); true when it has begun.
[[nodiscard]] inline bool run_begins(const MainWindow& window, Task* preparing) {
  if (!preparing) return false;
  HELPER_VERIFY(QTest::qWaitFor([&] { return window.training_task() || !window.training(); }, 60000));
  return window.training_task() != nullptr;
}

// Clicks the button labelled `text` of the next message box that opens modally (within 30 s).
inline void answer_next_message_box(const QString& text) {
  auto* poll = new QTimer;
  auto* waited = new QElapsedTimer;
  waited->start();
  QObject::connect(poll, &QTimer::timeout, poll, [poll, waited, text] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      for (QAbstractButton* b : box->buttons())
        if (b->text() == text) {
          b->click();
          break;
        }
    } else if (waited->elapsed() < 30000) {
      return;
    }
    poll->stop();
    poll->deleteLater();
    delete waited;
  });
  poll->start(20);
}

// Answers the modal dialogs that open next, in order (each within 30 s of the previous): a file dialog with
// the path given (an empty one cancels it), a message box by clicking the button of that text. Returns the
// answers not given yet, for the test to check that every dialog it expected came.
inline std::shared_ptr<QStringList> answer_next_dialogs(const QStringList& answers) {
  auto pending = std::make_shared<QStringList>(answers);
  auto* poll = new QTimer;
  auto* waited = new QElapsedTimer;
  auto answered = std::make_shared<QPointer<QWidget>>();
  waited->start();
  QObject::connect(poll, &QTimer::timeout, poll, [poll, waited, pending, answered] {
    QWidget* modal = QApplication::activeModalWidget();
    // A dialog just answered stays the active modal widget until its event loop returns.
    const bool fresh = modal && modal->isVisible() && modal != answered->data();
    if (fresh && !pending->isEmpty()) {
      const QString answer = pending->takeFirst();
      *answered = modal;
      waited->restart();
      if (auto* files = qobject_cast<QFileDialog*>(modal)) {
        if (answer.isEmpty()) {
          files->reject();
        } else {
          // selectFile alone does not always reach the name box (offscreen, in a folder the dialog shows
          // already): the name is typed there too, as a user would.
          files->selectFile(answer);
          if (auto* name = files->findChild<QLineEdit*>("fileNameEdit")) name->setText(answer);
          // QFileDialog::accept (which reads the chosen name) is protected; through QDialog it is public.
          static_cast<QDialog*>(files)->accept();
        }
      } else if (auto* box = qobject_cast<QMessageBox*>(modal)) {
        for (QAbstractButton* b : box->buttons())
          if (b->text() == answer) b->click();
      }
    }
    if (!pending->isEmpty() && waited->elapsed() < 30000) return;
    poll->stop();
    poll->deleteLater();
    delete waited;
  });
  poll->start(20);
  return pending;
}

}  // namespace unet::gui::window_test
