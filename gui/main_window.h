// The workbench window: the configuration and the memory estimate on the left, the tabs (training curves,
// live memory, model, predictions, log) in the middle, a toolbar to start, pause, stop, save a checkpoint,
// resume from one and export, and a status bar with progress, throughput and ETA.
//
// The engine never runs on the GUI thread: training, the memory planner (gui/estimate_link.h), exports and
// the reading of a run folder (open, compare) run as Tasks (gui/task.h) on threads of their own, and answer
// with signals carrying value types.
#pragma once

#include <QAction>
#include <QDialog>
#include <QMainWindow>
#include <QPointer>
#include <QTabWidget>

#include <memory>
#include <optional>

#include "gui/config_files.h"
#include "gui/dialogs/run_summary_dialog.h"
#include "gui/estimate_tasks.h"
#include "gui/exporter.h"
#include "gui/file_tasks.h"
#include "gui/prompter.h"
#include "gui/qt_types.h"
#include "gui/run_opener.h"
#include "gui/training_task.h"
#include "unet/train/run_folder.h"

namespace unet::gui {

class ConfigPanel;
class EstimatePanel;
class TrainingCharts;
class MemoryCharts;
class ModelTab;
class PredictionsTab;
class AugmentPreview;
class DatasetBrowser;
class LogView;
class DevicesTab;
class EstimateLink;
class RunStatus;
class PredictWindow;
class RunSettingsSwitch;

struct WindowOptions {
  bool demo = false;         // open on the built-in demo, not the last config
  QString config_file = {};  // open this config
  // What asks and tells the user in modal boxes; message boxes unless set (the tests set a PromptRecorder).
  std::shared_ptr<Prompter> prompter = {};
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const WindowOptions& options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  // The parts, for the GUI tests (and nothing else).
  ConfigPanel* config_panel() const { return config_; }
  EstimatePanel* estimate_panel() const { return estimate_; }
  TrainingCharts* training_charts() const { return training_charts_; }
  MemoryCharts* memory_charts() const { return memory_charts_; }
  ModelTab* model_tab() const { return model_; }
  PredictionsTab* predictions_tab() const { return predictions_; }
  DatasetBrowser* dataset_browser() const { return dataset_; }
  AugmentPreview* augment_preview() const { return augment_preview_; }
  LogView* log_view() const { return log_; }
  DevicesTab* devices_tab() const { return devices_; }
  QAction* start_action() const { return start_; }
  QAction* pause_action() const { return pause_; }
  QAction* stop_action() const { return stop_; }
  QAction* save_checkpoint_action() const { return save_; }
  QDialog* oom_dialog() const { return oom_dialog_; }
  bool training() const { return running_; }
  TrainerState trainer_state() const { return state_; }
  int estimates_shown() const;
  QString status_text() const;
  // Starts a run as the Start button does, resuming from `checkpoint` when not empty: the task that checks
  // its folder off the GUI thread (the window busy meanwhile; Stop gives it up), after which the run begins
  // (training_task()). Nullptr when the config is not valid (the prompter says why) or the planner says it
  // does not fit and the user declined its remedy. A start into a checkpoint.dir that holds another run, or
  // a resume into its own folder where the run is further along, asks once the folder is read: a new folder
  // beside it, that run continued, or replacing it. `resumed`: a resume's settings (the checkpoint's), run
  // instead of the form's, which shows them once the run begins (gui/run_settings_switch.h).
  Task* start_training(const QString& checkpoint = {}, const std::optional<Config>& resumed = {});
  // Resume from checkpoint… once its file dialog has answered: the task that reads the checkpoint's settings
  // off the GUI thread; then, when they differ from the form's, the question whether to continue with them
  // (the form unchanged if not), then start_training(). When reading fails, the reason goes to the log and
  // the prompter.
  Task* resume_from(const QString& checkpoint);
  // The run under way once it has begun (after start_training's preparation); nullptr otherwise.
  Task* training_task() const { return training_; }
  // Export weights… and Export ONNX… once their file dialogs have answered: the export as a Task, off the
  // GUI thread (gui/exporter.h says what each does and reports).
  Task* export_weights_of(const QString& source, const QString& target) {
    return exporter_->weights_of(source, target);
  }
  Task* export_onnx_of(const QString& source, const QString& target) {
    return exporter_->onnx_of(source, target);
  }
  QAction* export_onnx_action() const { return export_onnx_; }
  // After a relaunch: when the last run started here did not finish (stopped, failed, or the app was killed):
  // the task that reads its last.safetensors off the GUI thread; once it has, asks whether to resume it, and
  // does (resume_from). nullptr when there is nothing to offer.
  Task* offer_to_resume_unfinished_run();
  // File → Open run… and Compare with run… once their folder dialogs have answered: the folder read by a
  // Task, then shown (gui/run_opener.h). open_run gives nullptr while a run goes on.
  Task* open_run(const QString& folder);
  Task* compare_with_run(const QString& folder) { return runs_->compare(folder); }
  // Training → Predict… (Ctrl+P): the prediction window, its checkpoint the run's best (or last).
  PredictWindow* show_predict_window();
  // Help → User guide (F1): what each panel does, the keys, where runs are kept; a window of its own.
  void show_guide();
  // The guide, the first time the workbench opens for this user; true when it showed it.
  bool show_guide_on_first_launch();
  QDialog* guide_dialog() const { return guide_dialog_; }
  QDialog* run_summary() const { return summary_dialog_; }
  // Open config… once its file dialog has answered: the file read by a Task, then shown in the configuration
  // (gui/config_files.h); a file that cannot be read or shown is said by the prompter.
  Task* open_config_file(const QString& path) { return config_files_->open(path); }
  // Save config as… once its file dialog has answered: the file written by a Task; it says so in the status
  // bar and the log, or (the reason in the log and the prompter) that it cannot; nullptr when the settings
  // have problems (said the same way).
  Task* save_config_to(const QString& path) { return config_files_->save(path); }
  // What SIGINT, SIGTERM and SIGHUP do (TerminationSignals): a run stops at its next step boundary and saves
  // last.safetensors, then the window closes without asking.
  void close_on_signal(int signal_number);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void build_actions();
  void build_layout();
  void connect_workers();
  // Between Start (or Resume) and the run's beginning, while `task` reads files: busy, Stop gives it up.
  void show_busy_preparing(Task* task);
  void end_busy_preparing();
  // The run, once its folder has been checked: the question when it holds another run, then the charts and
  // the training task.
  void begin_run(const PrepareRunTask& prepared, Config run_config, const QString& checkpoint);
  // The run as a TrainingTask, its reports wired to the window; on_finished() once it has ended.
  void run_training(const Config& config, const QString& checkpoint, bool replace_previous_run);
  // A remedy's changes (JSON text) into the settings, said in the log.
  void apply_remedy(const QString& changes);
  void set_running(bool running);
  void show_paused(bool paused);
  void show_run_summary(TrainerState state);
  void on_started(const RunInfo& info);
  void on_step(const StepReport& r);
  void on_epoch(const EpochReport& r);
  void on_error(const ErrorReport& e);
  void on_finished(TrainerState state, const QString& message);
  void show_oom(const ErrorReport& e);
  void resume_from_checkpoint();
  void export_charts();
  void open_config();
  void save_config();

  std::shared_ptr<Prompter> prompter_;
  ConfigPanel* config_ = nullptr;
  EstimatePanel* estimate_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  TrainingCharts* training_charts_ = nullptr;
  MemoryCharts* memory_charts_ = nullptr;
  ModelTab* model_ = nullptr;
  PredictionsTab* predictions_ = nullptr;
  DatasetBrowser* dataset_ = nullptr;
  AugmentPreview* augment_preview_ = nullptr;
  LogView* log_ = nullptr;
  Exporter* exporter_ = nullptr;
  RunOpener* runs_ = nullptr;
  ConfigFiles* config_files_ = nullptr;
  RunSettingsSwitch* settings_switch_ = nullptr;
  DevicesTab* devices_ = nullptr;
  QAction *start_ = nullptr, *pause_ = nullptr, *stop_ = nullptr, *save_ = nullptr, *resume_from_ = nullptr;
  QAction *export_weights_ = nullptr, *export_onnx_ = nullptr, *export_charts_ = nullptr,
          *open_config_ = nullptr, *save_config_ = nullptr;
  RunStatus* status_ = nullptr;
  QPointer<QDialog> oom_dialog_;
  QPointer<QDialog> guide_dialog_;
  QPointer<QDialog> summary_dialog_;
  QPointer<PredictWindow> predict_window_;
  QAction* guide_ = nullptr;
  QAction* open_run_ = nullptr;

  QPointer<TrainingTask> training_;  // the run under way, until it has ended
  QPointer<Task> preparing_;         // the file work before it begins
  EstimateLink* estimates_ = nullptr;
  bool running_ = false;
  TrainerState state_ = TrainerState::idle;
  RunInfo run_;
  bool oom_reported_ = false;
  // The run's ending error came through on_error and is in the log.
  bool fatal_error_logged_ = false;
  // The run under way reported its start (on_started): it trains, rather than being refused first.
  bool run_began_ = false;
  // Close once the run has stopped, without the question.
  bool closing_on_signal_ = false;
  // What the summary at a run's end says, gathered as the run reports.
  RunSummary summary_;
};

}  // namespace unet::gui
