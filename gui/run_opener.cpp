#include "gui/run_opener.h"

#include <QStatusBar>

#include "gui/charts/training_charts.h"
#include "gui/config_panel.h"
#include "gui/log_view.h"
#include "gui/predictions_tab.h"
#include "gui/run_settings_switch.h"

namespace unet::gui {

RunOpener::RunOpener(const Parts& parts, std::function<bool()> training)
    : QObject(parts.window), parts_(parts), training_(std::move(training)) {}

void RunOpener::log_warnings(const RunHistory& history) const {
  for (const std::string& w : history.warnings) parts_.log->add(LogLevel::warning, QString::fromStdString(w));
}

Task* RunOpener::compare(const QString& folder) {
  auto* task = new ReadRunTask(folder, ReadRunTask::Purpose::compare);
  return start_owned(task, this, [this, task] {
    const RunHistory& history = task->history();
    log_warnings(history);
    if (task->state() != Task::State::succeeded) {
      say_failure(*parts_.prompter, parts_.window, parts_.log, tr("Cannot compare"), task->failure(),
                  task->failure());
      return;
    }
    const std::filesystem::path& dir = task->folder();
    parts_.charts->add_comparison(QString::fromStdString(dir.filename().string()), history);
    parts_.log->add(LogLevel::info, tr("comparing with the run in %1 (%2 steps, %3 epochs)")
                                        .arg(QString::fromStdString(dir.string()))
                                        .arg(history.steps.size())
                                        .arg(history.epochs.size()));
    parts_.tabs->setCurrentWidget(parts_.charts);
  });
}

Task* RunOpener::open(const QString& folder) {
  auto* task = new ReadRunTask(folder, ReadRunTask::Purpose::open);
  return start_owned(task, this, [this, task] {
    if (task->state() != Task::State::succeeded) {
      say_failure(*parts_.prompter, parts_.window, parts_.log, tr("Cannot open the run"), task->failure(),
                  task->failure());
      return;
    }
    const QString dir = QString::fromStdString(task->folder().string());
    if (training_()) {  // Start was pressed while the folder was read: the run's settings stay
      parts_.log->add(LogLevel::info, tr("did not open the run in %1: a run started meanwhile").arg(dir));
      return;
    }
    const std::optional<CheckpointInfo>& checkpoint = task->checkpoint();
    if (checkpoint) parts_.settings->show_run(checkpoint->config);
    const RunHistory& history = task->history();
    log_warnings(history);
    parts_.charts->reset();
    for (const StepReport& r : history.steps) parts_.charts->add_step(r);
    for (const EpochReport& r : history.epochs) parts_.charts->add_epoch(r);
    parts_.predictions->clear();
    emit opened(dir);
    const std::int64_t last_step = history.steps.empty() ? 0 : history.steps.back().step;
    parts_.log->add(LogLevel::info,
                    tr("opened the run in %1: %2 steps, %3 epochs logged%4")
                        .arg(dir)
                        .arg(last_step)
                        .arg(history.epochs.size())
                        .arg(checkpoint ? tr("; its settings are in the configuration") : QString()));
    parts_.window->statusBar()->showMessage(tr("Run %1: %2 steps").arg(dir).arg(last_step), 10000);
    parts_.tabs->setCurrentWidget(parts_.charts);
  });
}

}  // namespace unet::gui
