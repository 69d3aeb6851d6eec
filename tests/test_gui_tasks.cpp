// The workbench's long work off the GUI thread, all as Tasks (gui/task.h): a training task takes a stop given
// while it still prepares (the checkpoint it resumes from being read), the planner answers through estimate
// tasks, and the window's exports, run opening, config files and the prediction window's model run on their
// own thread while the GUI thread's event loop keeps turning. Driven offscreen, with a seam (the training
// task's checkpoint loader) that holds a load until the test has acted, instead of a sleep.
#include <QDir>
#include <QFileInfo>
#include <QSettings>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>

#include <future>

#include "gui/charts/training_charts.h"
#include "gui/config_files.h"
#include "gui/config_panel.h"
#include "gui/estimate_tasks.h"
#include "gui/log_view.h"
#include "gui/main_window.h"
#include "gui/predict_window.h"
#include "gui/prompter.h"
#include "gui/qt_types.h"
#include "gui/task.h"
#include "gui/training_task.h"
#include "test_support.h"
#include "unet/io/checkpoint.h"
#include "unet/train/trainer.h"

using namespace unet;
using namespace unet::gui;

namespace {

// A small, quick run in `dir`.
Config small_run(const QString& dir, std::int64_t epochs) {
  return config_from_json({{"model", {{"width", 8}, {"depth", 3}}},
                           {"data", {{"image_size", {64, 64}}, {"synthetic_samples", 48}}},
                           {"train", {{"epochs", epochs}, {"batch_size", 8}}},
                           {"checkpoint", {{"dir", dir.toStdString()}, {"every_epochs", 0}}}});
}

// A task whose work counts how often it ran, and fails when told to.
class CountingTask : public Task {
 public:
  explicit CountingTask(bool fail) : fail_(fail) {}
  std::atomic<int> runs{0};

 protected:
  void execute() override {
    ++runs;
    report_progress(1, 1);
    if (fail_) throw std::runtime_error("told to fail");
  }

 private:
  const bool fail_;
};

// Shows `window`, its log's warnings and errors going to `log` (unexpected ones fail the test).
void watch_log(MainWindow& window, test::LogWatch& log) {
  QObject::connect(window.log_view(), &LogView::added, window.log_view(),
                   [&log](LogLevel level, const QString& message) { log.record(level, message); });
  window.show();
}

// Waits for `task` to end (60 s at most); its final state, or running when it did not end.
Task::State outcome(Task& task) {
  QSignalSpy ended(&task, &Task::finished);
  if (task.running()) (void)ended.wait(60000);
  return task.state();
}

}  // namespace

class TestGuiTasks : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() {
    test::fail_on_warnings();
    register_engine_types();
    QCoreApplication::setOrganizationName("UNet Workbench tests");
    QCoreApplication::setApplicationName("test_gui_tasks");
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, home_.path());
    QDir::setCurrent(home_.path());
  }

  // The Task's states: Running at once after start() (every change happens on the GUI thread), then
  // Succeeded with its progress, or Failed with the reason; aborted before its work began, it never runs.
  void taskStates() {
    CountingTask ok(false);
    QSignalSpy progress(&ok, &Task::progress);
    QSignalSpy succeeded(&ok, &Task::succeeded);
    QCOMPARE(ok.state(), Task::State::inactive);
    ok.start();
    QCOMPARE(ok.state(), Task::State::running);
    QCOMPARE(outcome(ok), Task::State::succeeded);
    QCOMPARE(succeeded.size(), 1);
    QCOMPARE(progress.size(), 1);

    CountingTask failing(true);
    QSignalSpy failed(&failing, &Task::failed);
    failing.start();
    QCOMPARE(outcome(failing), Task::State::failed);
    QCOMPARE(failed.size(), 1);
    QCOMPARE(failed.at(0).at(0).toString(), QString("told to fail"));
    QCOMPARE(failing.failure(), QString("told to fail"));

    CountingTask never(false);
    QSignalSpy aborted(&never, &Task::aborted);
    never.abort();
    never.start();
    QCOMPARE(outcome(never), Task::State::aborted);
    QCOMPARE(aborted.size(), 1);
    QCOMPARE(never.runs.load(), 0);
  }

  // Issue 24: the window's weights export and File → Open run… run as Tasks off the GUI thread: each call
  // returns a running task and the window's event loop keeps turning (a timer posted before the call fires
  // while the task is still running); the result shows once the task has succeeded.
  void exportAndOpenRunCompleteThroughTasks() {
    QTemporaryDir dir;
    const QString run = dir.filePath("run");
    std::int64_t steps = 0;
    {
      Trainer first(small_run(run, 1));
      first.run();
      QCOMPARE(first.state(), TrainerState::finished);
      steps = load_checkpoint(QDir(run).filePath("last.safetensors").toStdString()).position.step;
    }
    test::LogWatch log;
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    watch_log(window, log);

    Task* task = nullptr;
    bool turned_while_running = false;
    QTimer::singleShot(0, &window, [&] { turned_while_running = task && task->running(); });
    const QString weights = dir.filePath("weights.safetensors");
    task = window.export_weights_of(QDir(run).filePath("last.safetensors"), weights);
    QVERIFY(task && task->running());
    QCOMPARE(outcome(*task), Task::State::succeeded);
    QVERIFY(turned_while_running);
    const Checkpoint exported = load_checkpoint(weights.toStdString());
    QVERIFY(exported.adam_m.empty() && !exported.parameters.empty());

    turned_while_running = false;
    QTimer::singleShot(0, &window, [&] { turned_while_running = task && task->running(); });
    task = window.open_run(run);
    QVERIFY(task && task->running());
    QCOMPARE(window.training_charts()->loss_points(), 0);  // nothing shown until the folder has been read
    QCOMPARE(outcome(*task), Task::State::succeeded);
    QVERIFY(turned_while_running);
    QCOMPARE(static_cast<std::int64_t>(window.training_charts()->loss_points()), steps);

    // The prediction window opens at once; the opened run's model, looked for in a task, becomes its
    // checkpoint (best, else last: this run kept both).
    PredictWindow* predict = window.show_predict_window();
    QVERIFY(predict->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(!predict->checkpoint().isEmpty(), 60000);
    QVERIFY2(predict->checkpoint().endsWith(QFileInfo::exists(QDir(run).filePath("best.safetensors"))
                                                ? "best.safetensors"
                                                : "last.safetensors"),
             qPrintable(predict->checkpoint()));
  }

  // A Stop (the task's abort) given while the checkpoint of a resume loads ends the run before its first
  // step: the training task ends Aborted, the trainer stopped.
  void stopWhileTheCheckpointLoadsEndsTheRun() {
    QTemporaryDir dir;
    {
      Trainer first(small_run(dir.path(), 1));
      first.run();
      QCOMPARE(first.state(), TrainerState::finished);
    }
    const QString last = dir.filePath("last.safetensors");

    TrainingTask task(small_run(dir.path(), 2), last, false);
    std::promise<void> loading, release;
    std::shared_future<void> released = release.get_future().share();
    task.set_checkpoint_loader([&loading, released](const std::filesystem::path& file) {
      loading.set_value();
      released.wait();
      return load_checkpoint(file);
    });
    QSignalSpy steps(&task, &TrainingTask::step);
    QSignalSpy aborted(&task, &Task::aborted);
    task.start();
    QVERIFY(loading.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    task.abort();
    release.set_value();
    QCOMPARE(outcome(task), Task::State::aborted);
    QCOMPARE(aborted.size(), 1);
    QCOMPARE(static_cast<int>(task.final_state()), static_cast<int>(TrainerState::stopped));
    QCOMPARE(steps.size(), 0);
  }

  // Aborted before its work began, a training task never trains, and says the run stopped.
  void trainingAbortedBeforeItBeganNeverTrains() {
    QTemporaryDir dir;
    TrainingTask task(small_run(dir.path(), 1), {}, false);
    QSignalSpy started(&task, &TrainingTask::started);
    task.abort();
    task.start();
    QCOMPARE(outcome(task), Task::State::aborted);
    QCOMPARE(static_cast<int>(task.final_state()), static_cast<int>(TrainerState::stopped));
    QCOMPARE(started.size(), 0);
    QVERIFY(QDir(dir.path()).isEmpty());
  }

  // Training and estimating run as Tasks too: Start's run ends Succeeded with its progress counted in steps,
  // and the estimate panel's answer comes from an EstimateTask (a config the planner cannot plan fails it,
  // the reason in the result).
  void trainingAndEstimatingAreTasks() {
    QTemporaryDir dir;
    TrainingTask training(small_run(dir.filePath("run"), 1), {}, false);
    QSignalSpy progress(&training, &Task::progress);
    training.start();
    QCOMPARE(outcome(training), Task::State::succeeded);
    QCOMPARE(static_cast<int>(training.final_state()), static_cast<int>(TrainerState::finished));
    QVERIFY(!progress.isEmpty());
    QCOMPARE(progress.last().at(0).toLongLong(), progress.last().at(1).toLongLong());

    EstimateTask estimate(small_run(dir.filePath("other"), 1), 7);
    estimate.start();
    QCOMPARE(outcome(estimate), Task::State::succeeded);
    QCOMPARE(estimate.result().request, 7);
    QVERIFY(estimate.result().error.isEmpty());
    QVERIFY(estimate.result().plan.fits);
  }

  // No file work on the GUI thread: Start checks the run's folder, Resume from checkpoint… reads the
  // checkpoint (then checks the folder and reads the run's curves), each in a task; the window is busy
  // meanwhile (Start disabled, the settings read-only, the status "preparing"), and the run begins once they
  // have ended. Stop while they run gives the start up.
  void startAndResumeReadTheirFilesInTasks() {
    QTemporaryDir dir;
    const QString run = dir.filePath("run");
    test::LogWatch log;
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    watch_log(window, log);

    window.config_panel()->set_config(small_run(run, 1));
    Task* preparing = window.start_training();
    QVERIFY(preparing && preparing->running());
    QVERIFY(window.training() && !window.start_action()->isEnabled() && !window.pause_action()->isEnabled());
    QVERIFY(window.training_task() == nullptr);
    QVERIFY2(window.status_text().contains("Preparing", Qt::CaseInsensitive),
             qPrintable(window.status_text()));
    QCOMPARE(outcome(*preparing), Task::State::succeeded);
    QVERIFY(window.training_task() != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);
    const std::int64_t steps =
        load_checkpoint(QDir(run).filePath("last.safetensors").toStdString()).position.step;

    // Resumed: the checkpoint is read in a task, then the folder checked and its curves read in another;
    // the charts show the run's history once the run begins (a run at its end: nothing more to train).
    window.training_charts()->reset();
    log.expect_warning("nothing is trained");
    Task* reading = window.resume_from(QDir(run).filePath("last.safetensors"));
    QVERIFY(reading && reading->running());
    QVERIFY(window.training() && window.training_task() == nullptr);
    QCOMPARE(window.training_charts()->loss_points(), 0);
    QSignalSpy ended(reading, &Task::finished);
    QVERIFY(ended.wait(60000));
    QCOMPARE(ended.at(0).at(0).value<Task::State>(), Task::State::succeeded);
    QTRY_VERIFY_WITH_TIMEOUT(window.training_task() != nullptr, 60000);
    QVERIFY(static_cast<std::int64_t>(window.training_charts()->loss_points()) >= steps);
    QTRY_VERIFY_WITH_TIMEOUT(!window.training(), 120000);
    QCOMPARE(window.trainer_state(), TrainerState::finished);

    // Stop while the folder is checked: no run begins, and the window is no longer busy.
    window.config_panel()->set_config(small_run(dir.filePath("other"), 1));
    preparing = window.start_training();
    QVERIFY(preparing && window.stop_action()->isEnabled());
    window.stop_action()->trigger();
    const Task::State ended_as = outcome(*preparing);  // aborted, or it had read the folder by then
    QVERIFY(ended_as == Task::State::aborted || ended_as == Task::State::succeeded);
    QVERIFY(!window.training() && window.training_task() == nullptr && window.start_action()->isEnabled());
    QVERIFY(!QFileInfo::exists(dir.filePath("other")));
  }

  // Issue 24: Open config… and Save config as… read and write their file in a task while the window's event
  // loop turns; the form shows the file once it has been read, the file holds the form once written. A file
  // that cannot be read, or a place that cannot be written, is said by the prompter (and, saving, the log),
  // and nothing is lost: the form keeps what it had, the file saved before stays.
  void openAndSaveConfigCompleteThroughTasks() {
    QTemporaryDir dir;
    test::LogWatch log;
    const auto prompts = std::make_shared<PromptRecorder>();
    MainWindow window({.demo = true, .prompter = prompts});
    watch_log(window, log);
    const auto epochs = [&window] { return window.config_panel()->config().value().train.epochs; };

    window.config_panel()->set_config(small_run(dir.filePath("run"), 3));
    const QString saved = dir.filePath("saved.json");
    Task* task = nullptr;
    bool turned_while_running = false;
    QTimer::singleShot(0, &window, [&] { turned_while_running = task && task->running(); });
    task = window.save_config_to(saved);
    QVERIFY(task && task->running());
    QCOMPARE(outcome(*task), Task::State::succeeded);
    QVERIFY(turned_while_running);
    QCOMPARE(read_config_file(saved).train.epochs, 3);
    QVERIFY(window.statusBar()->currentMessage().contains(saved));

    window.config_panel()->set_config(small_run(dir.filePath("other"), 1));
    task = window.open_config_file(saved);
    QVERIFY(task && task->running());
    QCOMPARE(epochs(), 1);  // shown once read, not before
    QCOMPARE(outcome(*task), Task::State::succeeded);
    QCOMPARE(epochs(), 3);
    QCOMPARE(window.config_panel()->base_dir(), std::filesystem::absolute(dir.path().toStdString()));
    QVERIFY(prompts->asked.empty());

    const QString broken = dir.filePath("broken.json");
    QFile file(broken);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write("{ not json") > 0);
    file.close();
    window.config_panel()->set_config(small_run(dir.filePath("kept"), 2));
    task = window.open_config_file(broken);
    QCOMPARE(outcome(*task), Task::State::failed);
    QCOMPARE(prompts->count(PromptRecorder::Kind::warning), 1);
    QVERIFY2(prompts->asked.back().text.contains(broken), qPrintable(prompts->asked.back().text));
    QCOMPARE(epochs(), 2);

    log.expect_error("cannot save the config to");
    const QString nowhere = dir.filePath("no/such/folder/config.json");
    task = window.save_config_to(nowhere);
    QCOMPARE(outcome(*task), Task::State::failed);
    QCOMPARE(prompts->count(PromptRecorder::Kind::warning), 2);
    QVERIFY(prompts->asked.back().text.contains(nowhere));
    QVERIFY(!QFileInfo::exists(nowhere));
    QCOMPARE(read_config_file(saved).train.epochs, 3);
    QCOMPARE(epochs(), 2);
  }

  // The prediction window's Folder…: the folder is listed in a task; its images are the inputs once listed.
  void aPredictionFolderIsListedInATask() {
    QTemporaryDir dir;
    for (const char* name : {"a.png", "b.PNG", "notes.txt"}) {
      QFile file(dir.filePath(name));
      QVERIFY(file.open(QIODevice::WriteOnly));
    }
    PromptRecorder prompts;
    PredictWindow predict(prompts);
    Task* task = predict.list_images_in(dir.path());
    QVERIFY(task && task->running());
    QCOMPARE(outcome(*task), Task::State::succeeded);
    QVERIFY2(predict.status_text().startsWith("2 images"), qPrintable(predict.status_text()));
  }
};

QTEST_MAIN(TestGuiTasks)
#include "test_gui_tasks.moc"
