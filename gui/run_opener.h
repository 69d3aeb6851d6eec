// File → Open run… and Compare with run…: a run folder read by a ReadRunTask (gui/file_tasks.h), off the
// GUI thread, then shown: opened, its settings go into the configuration and its curves into the charts;
// compared, its curves go over this run's, named by its folder. Out of the window so that it keeps its layout
// and wiring only.
#pragma once

#include <QMainWindow>
#include <QTabWidget>

#include <functional>

#include "gui/file_tasks.h"
#include "gui/prompter.h"

namespace unet::gui {

class ConfigPanel;
class LogView;
class PredictionsTab;
class RunSettingsSwitch;
class TrainingCharts;

class RunOpener : public QObject {
  Q_OBJECT
 public:
  // The window's parts that show a run; they must outlive the opener (the window's children do).
  struct Parts {
    QMainWindow* window = nullptr;
    ConfigPanel* config = nullptr;
    TrainingCharts* charts = nullptr;
    PredictionsTab* predictions = nullptr;
    LogView* log = nullptr;
    QTabWidget* tabs = nullptr;
    Prompter* prompter = nullptr;           // tells a failure
    RunSettingsSwitch* settings = nullptr;  // shows the run's settings, keeping the form's for undo
  };
  // `training`: whether a run goes on, when a folder has been read (a run started meanwhile keeps its
  // settings: the folder is not shown).
  RunOpener(const Parts& parts, std::function<bool()> training);

  // The reading task; it fails (why in the log and a message box) when the folder holds no run (no curves,
  // to compare). opened() follows a success.
  Task* open(const QString& folder);
  Task* compare(const QString& folder);

 signals:
  // The run in `run_dir` is on show: Resume from checkpoint… starts there.
  void opened(const QString& run_dir);

 private:
  void log_warnings(const RunHistory& history) const;

  Parts parts_;
  std::function<bool()> training_;
};

}  // namespace unet::gui
