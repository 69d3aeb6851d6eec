#include "gui/main_window.h"

#include <cmath>
#include <filesystem>

#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include "gui/augment_preview.h"
#include "gui/charts/memory_charts.h"
#include "gui/charts/training_charts.h"
#include "gui/config_panel.h"
#include "gui/dataset_browser.h"
#include "gui/devices_tab.h"
#include "gui/dialogs/guide.h"
#include "gui/dialogs/oom_dialog.h"
#include "gui/dialogs/run_folder_dialog.h"
#include "gui/dialogs/run_summary_dialog.h"
#include "gui/estimate_link.h"
#include "gui/estimate_panel.h"
#include "gui/file_tasks.h"
#include "gui/log_view.h"
#include "gui/model_tab.h"
#include "gui/predict_window.h"
#include "gui/predictions_tab.h"
#include "gui/run_settings_switch.h"
#include "gui/run_status.h"
#include "gui/setting_labels.h"
#include "gui/termination_signals.h"
#include "unet/io/checkpoint.h"
#include "unet/plan/memory_planner.h"
#include "unet/train/metrics_log.h"
#include "unet/train/run_folder.h"

// The icons and the guide are compiled into the unet_gui static library; a linker keeps that object only
// when something refers to it, which Q_INIT_RESOURCE does (it must be called outside any namespace).
static void init_workbench_resources() {
  Q_INIT_RESOURCE(resources);
}

namespace unet::gui {
namespace {

// Where the window keeps the folder of a run that started and has not finished.
const QString kUnfinishedRunKey = QStringLiteral("runs/unfinished");

}  // namespace

MainWindow::MainWindow(const WindowOptions& options, QWidget* parent)
    : QMainWindow(parent),
      prompter_(options.prompter ? options.prompter : std::make_shared<MessageBoxPrompter>()) {
  init_workbench_resources();
  register_engine_types();
  setWindowTitle(tr("UNet Workbench"));
  setWindowIcon(QIcon(":/unet-workbench-256.png"));
  build_layout();
  build_actions();
  connect_workers();

  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  restoreState(settings.value("window/state").toByteArray());
  if (!options.config_file.isEmpty()) {
    config_files_->open_at_launch(options.config_file);  // read on a task's thread, shown when read
  } else if (!options.demo) {
    config_->restore_settings(settings);
  }
  set_running(false);
  estimates_->schedule();
  if (options.demo) {
    const QString hint =
        tr("Demo: 512 synthetic cell images, U-Net width 16, depth 4. Press Start (F5) to train.");
    log_->add(LogLevel::info, hint);
    statusBar()->showMessage(hint);
  }
}

MainWindow::~MainWindow() {
  delete training_.data();  // ends the run (a stop) and waits for it, while the window is whole
}

void MainWindow::build_layout() {
  // 1400x900 where the screen has room; on a smaller one (1280x720, a laptop) the window fits it, status bar
  // included.
  const QRect screen_room = screen()->availableGeometry();
  resize(std::min(1400, screen_room.width() * 9 / 10), std::min(900, screen_room.height() * 9 / 10));
  config_ = new ConfigPanel(this);
  estimate_ = new EstimatePanel(this);

  // The settings above, the estimate and its remedies below, each scrolling on its own, with a splitter
  // between: however many remedies there are, the dock keeps its size.
  auto* left = new QSplitter(Qt::Vertical, this);
  left->setObjectName("configuration_split");
  left->setChildrenCollapsible(false);
  auto* scroll = new QScrollArea(left);
  scroll->setWidget(config_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* estimate_box = new QWidget(left);
  auto* estimate_layout = new QVBoxLayout(estimate_box);
  estimate_layout->setContentsMargins(0, 0, 0, 0);
  auto* estimate_title = new QLabel(tr("<b>Memory per device</b>"), estimate_box);
  estimate_layout->addWidget(estimate_title);
  auto* estimate_scroll = new QScrollArea(estimate_box);
  estimate_scroll->setObjectName("estimate_scroll");
  estimate_scroll->setWidget(estimate_);
  estimate_scroll->setWidgetResizable(true);
  estimate_scroll->setFrameShape(QFrame::NoFrame);
  estimate_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  estimate_layout->addWidget(estimate_scroll, 1);
  left->addWidget(scroll);
  left->addWidget(estimate_box);
  // The estimate keeps room for its status, a few devices' bars and Fit batch; the settings take the rest,
  // and a long list of remedies scrolls (or the splitter gives it more).
  estimate_scroll->setMinimumHeight(160);
  left->setStretchFactor(0, 1);
  left->setStretchFactor(1, 0);
  auto* dock = new QDockWidget(tr("Configuration"), this);
  dock->setObjectName("configuration");
  dock->setWidget(left);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  dock->setMinimumWidth(430);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

  tabs_ = new QTabWidget(this);
  training_charts_ = new TrainingCharts(tabs_);
  memory_charts_ = new MemoryCharts(tabs_);
  model_ = new ModelTab(tabs_);
  predictions_ = new PredictionsTab(tabs_);
  log_ = new LogView(tabs_);
  tabs_->addTab(training_charts_, tr("Training"));
  tabs_->addTab(memory_charts_, tr("Memory"));
  tabs_->addTab(model_, tr("Model"));
  tabs_->addTab(predictions_, tr("Predictions"));
  dataset_ = new DatasetBrowser(*config_, tabs_);
  tabs_->addTab(dataset_, tr("Dataset"));
  tabs_->addTab(augment_preview_ = new AugmentPreview(*config_, tabs_), tr("Augmentation"));
  devices_ = new DevicesTab(tabs_);
  tabs_->addTab(devices_, tr("Devices"));
  tabs_->addTab(log_, tr("Log"));
  setCentralWidget(tabs_);

  status_ = new RunStatus(statusBar());
  connect(config_, &ConfigPanel::classes_adjusted, this,
          [this](const QString& message) { statusBar()->showMessage(message, 10000); });
  exporter_ = new Exporter(this, log_, statusBar(), *prompter_);
  config_files_ = new ConfigFiles(this, config_, log_, *prompter_);
  settings_switch_ = new RunSettingsSwitch(this, config_, log_, prompter_.get());
  runs_ = new RunOpener(
      {this, config_, training_charts_, predictions_, log_, tabs_, prompter_.get(), settings_switch_},
      [this] { return running_; });
  connect(runs_, &RunOpener::opened, this, [this](const QString& dir) {
    run_ = {};
    run_.run_dir = dir.toStdString();
  });
}

void MainWindow::build_actions() {
  auto* bar = addToolBar(tr("Training"));
  bar->setObjectName("training");
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  auto action = [&](const QString& text, QStyle::StandardPixmap icon, const QString& tip) {
    auto* a = new QAction(style()->standardIcon(icon), text, this);
    a->setToolTip(tip);
    return a;
  };
  start_ = action(tr("Start"), QStyle::SP_MediaPlay, tr("Train with these settings (F5)"));
  start_->setShortcut(Qt::Key_F5);
  pause_ = action(tr("Pause"), QStyle::SP_MediaPause,
                  tr("Pause at the next step boundary (F6); press again to continue"));
  pause_->setCheckable(true);
  pause_->setShortcut(Qt::Key_F6);
  stop_ = action(tr("Stop"), QStyle::SP_MediaStop,
                 tr("Stop at the next step boundary and save last.safetensors (Shift+F5)"));
  stop_->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F5));
  save_ = action(tr("Save checkpoint"), QStyle::SP_DialogSaveButton,
                 tr("Save the model now (Ctrl+S), while training or paused"));
  save_->setShortcut(QKeySequence::Save);
  resume_from_ = action(tr("Resume from checkpoint…"), QStyle::SP_DialogOpenButton,
                        tr("Continue a run from a checkpoint, on the devices selected now"));
  export_weights_ =
      action(tr("Export weights…"), QStyle::SP_ArrowDown, tr("Write a checkpoint's weights alone"));
  export_onnx_ =
      action(tr("Export ONNX…"), QStyle::SP_ArrowRight,
             tr("Write a checkpoint's model as ONNX, for other runtimes (pixels in, probabilities out)"));
  export_charts_ = action(tr("Export charts…"), QStyle::SP_FileDialogDetailedView,
                          tr("Save the charts of the current tab as PNG or PDF"));
  open_config_ = action(tr("Open config…"), QStyle::SP_DirOpenIcon, tr("Open a JSON config"));
  open_config_->setShortcut(QKeySequence::Open);
  save_config_ =
      action(tr("Save config as…"), QStyle::SP_DriveFDIcon, tr("Save the settings as a JSON config"));
  for (QAction* a : {start_, pause_, stop_, save_}) bar->addAction(a);
  bar->addSeparator();
  for (QAction* a : {resume_from_, export_weights_, export_charts_}) bar->addAction(a);

  auto* file = menuBar()->addMenu(tr("&File"));
  for (QAction* a : {open_config_, save_config_, settings_switch_->restore_action()}) file->addAction(a);
  open_run_ = file->addAction(tr("Open run…"), this, [this] {
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Open a run folder"),
                                                             QString::fromStdString(run_.run_dir));
    if (!folder.isEmpty()) open_run(folder);
  });
  open_run_->setToolTip(tr("Show a run's settings and curves from its folder"));
  file->addAction(tr("Compare with run…"), this, [this] {
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Compare with a run"),
                                                             QString::fromStdString(run_.run_dir));
    if (!folder.isEmpty()) compare_with_run(folder);
  });
  file->addAction(tr("Clear compared runs"), this, [this] { training_charts_->clear_comparisons(); });
  file->addSeparator();
  for (QAction* a : {resume_from_, export_weights_, export_onnx_, export_charts_}) file->addAction(a);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  auto* train = menuBar()->addMenu(tr("&Training"));
  for (QAction* a : {start_, pause_, stop_, save_}) train->addAction(a);
  train->addSeparator();
  auto* predict = train->addAction(tr("&Predict…"), this, &MainWindow::show_predict_window);
  predict->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
  predict->setToolTip(tr("Segment your own images with a checkpoint, and save the masks"));
  auto* help = menuBar()->addMenu(tr("&Help"));
  guide_ = help->addAction(tr("User &guide"), this, &MainWindow::show_guide);
  guide_->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About"), this, [this] {
    QMessageBox::about(
        this, tr("About UNet Workbench"),
        tr("<b>UNet Workbench %1</b><p>Train U-Net segmentation models on GPUs or the CPU, and see "
           "what fits in memory before you start.</p>")
            .arg(UNET_VERSION));
  });

  connect(start_, &QAction::triggered, this, [this] { start_training(); });
  connect(pause_, &QAction::toggled, this, [this](bool paused) {
    if (!running_) return;
    if (training_) paused ? training_->pause() : training_->resume();
    show_paused(paused);
  });
  connect(stop_, &QAction::triggered, this, [this] {
    if (training_) training_->abort();
    if (preparing_) preparing_->abort();
  });
  connect(save_, &QAction::triggered, this, [this] {
    if (training_) training_->save_now();
    statusBar()->showMessage(tr("Saving a checkpoint at the next step boundary…"), 5000);
  });
  connect(resume_from_, &QAction::triggered, this, &MainWindow::resume_from_checkpoint);
  connect(export_weights_, &QAction::triggered, this,
          [this] { exporter_->export_weights(QString::fromStdString(run_.run_dir)); });
  connect(export_onnx_, &QAction::triggered, this,
          [this] { exporter_->export_onnx(QString::fromStdString(run_.run_dir)); });
  connect(export_charts_, &QAction::triggered, this, &MainWindow::export_charts);
  connect(open_config_, &QAction::triggered, this, &MainWindow::open_config);
  connect(save_config_, &QAction::triggered, this, &MainWindow::save_config);
}

void MainWindow::connect_workers() {
  estimates_ = new EstimateLink(config_, estimate_, model_, log_, this);
  connect(estimate_, &EstimatePanel::apply_requested, this, &MainWindow::apply_remedy);
}

void MainWindow::run_training(const Config& config, const QString& checkpoint, bool replace_previous_run) {
  auto* task = new TrainingTask(config, checkpoint, replace_previous_run);
  training_ = task;
  connect(task, &TrainingTask::started, this, &MainWindow::on_started);
  connect(task, &TrainingTask::step, this, &MainWindow::on_step);
  connect(task, &TrainingTask::epoch, this, &MainWindow::on_epoch);
  connect(task, &TrainingTask::memory, memory_charts_, &MemoryCharts::add_sample);
  connect(task, &TrainingTask::memory, this, [this](const MemoryReport& r) {
    std::int64_t& peak = summary_.peak_by_device[QString::fromStdString(r.device)];
    peak = std::max(peak, r.stats.peak_in_use);
  });
  connect(task, &TrainingTask::error, this, &MainWindow::on_error);
  connect(task, &TrainingTask::predictions, predictions_, &PredictionsTab::show_predictions);
  connect(task, &TrainingTask::log, log_, &LogView::add);
  connect(task, &TrainingTask::state_changed, this, [this](TrainerState s) {
    state_ = s;
    status_->show_state(s);
    if (s == TrainerState::running || s == TrainerState::paused) {
      const QSignalBlocker block(pause_);
      pause_->setChecked(s == TrainerState::paused);
      show_paused(s == TrainerState::paused);
    }
  });
  connect(task, &TrainingTask::checkpoint_saved, this, [this](const CheckpointReport& c) {
    const QString path = QString::fromStdString(c.path);
    log_->add(LogLevel::info,
              tr("saved %1 (step %2, %3)").arg(path).arg(c.step).arg(QString::fromStdString(c.reason)));
    if (c.reason == "requested") statusBar()->showMessage(tr("Saved %1").arg(path), 10000);
    summary_.add_checkpoint(c);
  });
  start_owned(task, this, [this, task] { on_finished(task->final_state(), task->failure()); });
}

void MainWindow::apply_remedy(const QString& changes) {
  config_->apply_changes(nlohmann::json::parse(changes.toStdString()));
  log_->add(LogLevel::info, tr("applied %1").arg(changes));
}

// Paused, the button continues the run: it says so and shows the play icon ("Resume" is the toolbar's
// resume from a checkpoint).
void MainWindow::show_paused(bool paused) {
  pause_->setText(paused ? tr("Continue") : tr("Pause"));
  pause_->setIcon(style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
}

int MainWindow::estimates_shown() const {
  return estimates_->shown_count();
}

QString MainWindow::status_text() const {
  return status_->text();
}

void MainWindow::set_running(bool running) {
  running_ = running;
  start_->setEnabled(!running);
  resume_from_->setEnabled(!running);
  pause_->setEnabled(running);
  stop_->setEnabled(running);
  save_->setEnabled(running);
  open_config_->setEnabled(!running);
  if (open_run_) open_run_->setEnabled(!running);
  config_->set_read_only(running);
  settings_switch_->set_running(running);
  estimates_->set_running(running);
  if (!running) {
    const QSignalBlocker block(pause_);
    pause_->setChecked(false);
    show_paused(false);
  }
}

Task* MainWindow::start_training(const QString& checkpoint, const std::optional<Config>& resumed) {
  if (running_) return nullptr;
  const std::optional<Config> config = resumed ? resumed : config_->config();
  if (!config) {
    status_->show_refused(tr("settings to fix: %1").arg(config_->problems().join("; ")));
    prompter_->warn(this, tr("Settings to fix"),
                    tr("Fix these settings first:\n%1").arg(config_->problems().join("\n")));
    return nullptr;
  }
  // Start guarded by the planner: settings it predicts do not fit are not started on a click; the best
  // remedy that fits is offered instead.
  const Estimate* shown = estimates_->shown_for(*config);
  if (shown && shown->error.isEmpty() && !shown->plan.fits) {
    const Remedy* best = prompter_->choose_remedy(this, *shown);
    if (!best) return nullptr;
    apply_remedy(QString::fromStdString(best->changes.dump()));
    return start_training(checkpoint);
  }
  // The run's folder is checked (and, resuming, its curves read) off the GUI thread; the window is busy
  // meanwhile, and Stop gives the start up.
  const std::filesystem::path dir =
      std::filesystem::absolute(config->resolve(config->checkpoint.dir)).lexically_normal();
  auto* task = new PrepareRunTask(dir, config->checkpoint.filename_template, checkpoint, run_.run_dir);
  show_busy_preparing(task);
  return start_owned(task, this, [this, task, run_config = *config, checkpoint] {
    begin_run(*task, run_config, checkpoint);
  });
}

void MainWindow::show_busy_preparing(Task* task) {
  preparing_ = task;
  set_running(true);
  pause_->setEnabled(false);  // nothing to pause or save before the run begins
  save_->setEnabled(false);
  status_->show_new_start();
}

void MainWindow::end_busy_preparing() {
  set_running(false);
  status_->show_state(state_);
}

void MainWindow::begin_run(const PrepareRunTask& prepared, Config run_config, const QString& checkpoint) {
  end_busy_preparing();
  // Stopped before it began (also when the folder had been read by then).
  if (prepared.state() != Task::State::succeeded || prepared.abort_requested()) return;
  // A run would replace the history and checkpoints of a run in its folder, or a resumed one its own later
  // state: only if the user says so; else a new folder, or (a previous run) that run continued.
  bool replace_previous_run = false;
  if (const std::optional<RunFolderConflict>& conflict = prepared.conflict()) {
    switch (prompter_->choose_run_folder(this, *conflict, prepared.can_continue())) {
      case RunFolderDialog::Choice::cancel:
        return;
      case RunFolderDialog::Choice::replace:
        replace_previous_run = true;
        break;
      case RunFolderDialog::Choice::continue_run:
        resume_from(QString::fromStdString((prepared.folder() / kLastCheckpointName).string()));
        return;
      case RunFolderDialog::Choice::new_folder: {
        run_config.checkpoint.dir = prepared.new_folder().string();
        if (checkpoint.isEmpty()) config_->set_config(run_config);  // a resume's: show_run() below
        log_->add(LogLevel::info,
                  tr("this run goes into %1").arg(QString::fromStdString(run_config.checkpoint.dir)));
        break;
      }
    }
  }
  if (!checkpoint.isEmpty()) settings_switch_->show_run(run_config);
  training_charts_->reset();
  if (prepared.resumed()) {
    // The charts go on from the run's history up to the checkpoint's step; the predictions of this run's
    // last epoch stay until the next one replaces them.
    const RunHistory& history = prepared.history();
    for (const std::string& w : history.warnings) log_->add(LogLevel::warning, QString::fromStdString(w));
    for (const StepReport& r : history.steps) training_charts_->add_step(r);
    for (const EpochReport& r : history.epochs) training_charts_->add_epoch(r);
    if (!prepared.same_run()) predictions_->clear();
  } else {
    predictions_->clear();
  }
  oom_reported_ = false;
  fatal_error_logged_ = false;
  run_began_ = false;
  summary_ = {};
  summary_.clock.start();
  if (oom_dialog_) oom_dialog_->close();
  set_running(true);
  statusBar()->clearMessage();  // the demo's "Press Start" hint, an earlier run's messages
  status_->show_new_start();
  log_->add(LogLevel::info, checkpoint.isEmpty() ? tr("starting") : tr("resuming from %1").arg(checkpoint));
  QSettings settings;
  config_->save_settings(settings);
  run_training(run_config, checkpoint, replace_previous_run);
}

void MainWindow::on_started(const RunInfo& info) {
  run_ = info;
  run_began_ = true;
  summary_.add_start(info);
  // Until it finishes, a run is one to offer at the next launch (stopped, failed, or the app killed).
  QSettings().setValue(kUnfinishedRunKey, QString::fromStdString(info.run_dir));
  status_->show_start(info);
  std::vector<std::string> devices;
  std::vector<std::int64_t> capacities;
  const std::optional<Config> config = config_->config();
  const std::int64_t cap = config ? config->memory.cap_bytes() : 0;
  // Each device charted against the capacity the planner counts (a CPU replica: its share of the host).
  const auto cpu_replicas = std::count_if(info.devices.begin(), info.devices.end(),
                                          [](const DeviceInfo& d) { return d.kind == DeviceKind::cpu; });
  for (const DeviceInfo& d : info.devices) {
    devices.push_back(d.id);
    capacities.push_back(device_capacity(d, cpu_replicas, cap));
  }
  memory_charts_->reset(devices, capacities);
  log_->add(LogLevel::info,
            tr("%1 parameters; %2; %3 train / %4 %5; %6 steps per epoch; run folder %7")
                .arg(info.parameter_count)
                .arg(QString::fromStdString(info.dataset))
                .arg(info.train_samples)
                .arg(info.val_samples)
                .arg(info.val_samples == 1 ? tr("validation sample") : tr("validation samples"))
                .arg(info.steps_per_epoch)
                .arg(QString::fromStdString(info.run_dir)));
}

void MainWindow::on_step(const StepReport& r) {
  training_charts_->add_step(r);
  summary_.steps = r.step;
  if (std::isfinite(r.img_per_s_avg)) summary_.img_per_s = r.img_per_s_avg;
  status_->show_step(r, run_.epochs);
}

void MainWindow::on_epoch(const EpochReport& r) {
  training_charts_->add_epoch(r);
  summary_.add_epoch(r);
  log_->add(LogLevel::info, epoch_log_line(r));
}

void MainWindow::on_error(const ErrorReport& e) {
  if (!e.fatal) {
    // Its words come through the log relay as a warning (observer.h): here only the status bar.
    if (e.out_of_memory)
      statusBar()->showMessage(tr("Out of memory on %1: recovered with smaller micro-batches")
                                   .arg(QString::fromStdString(e.device)),
                               10000);
    return;
  }
  // The log keeps where the engine raised it in the line's details, for a bug report; dialogs show the
  // message only.
  log_->add_raised(LogLevel::error, QString::fromStdString(e.message), QString::fromStdString(e.where));
  fatal_error_logged_ = true;
  if (e.out_of_memory) {
    oom_reported_ = true;
    show_oom(e);
  }
}

void MainWindow::show_oom(const ErrorReport& e) {
  if (oom_dialog_) oom_dialog_->close();
  auto* dialog = new OomDialog(e, this);
  connect(dialog, &OomDialog::apply_requested, this, &MainWindow::apply_remedy);
  oom_dialog_ = dialog;
  dialog->show();  // not modal: the window stays usable
}

void MainWindow::on_finished(TrainerState state, const QString& message) {
  set_running(false);
  if (state == TrainerState::finished) QSettings().remove(kUnfinishedRunKey);
  if ((state == TrainerState::finished || state == TrainerState::stopped) && !closing_on_signal_ &&
      summary_.steps > 0)
    show_run_summary(state);
  state_ = state;
  if (state == TrainerState::failed && !run_began_)
    status_->show_refused(message.isEmpty() ? tr("see the log") : message);
  else
    status_->show_state(state);
  // The engine's report of the error that ended the run is in the log already (on_error); an error from
  // before the trainer could report (a checkpoint that cannot be read) is not.
  const bool log_message = state == TrainerState::failed && !message.isEmpty() && !fatal_error_logged_;
  if (closing_on_signal_) {
    if (log_message) log_->add(LogLevel::error, message);
    close();
    return;
  }
  if (state == TrainerState::failed && !message.isEmpty() && !oom_reported_) {
    if (log_message) log_->add(LogLevel::error, message);
    auto* box = new QMessageBox(QMessageBox::Critical, tr("Training stopped"), {}, QMessageBox::Close, this);
    set_labelled_text(*box, message);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->show();
  }
  estimates_->schedule();
}

void MainWindow::resume_from_checkpoint() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Resume from checkpoint"), QString::fromStdString(run_.run_dir),
                                   tr("Checkpoints (*.safetensors)"));
  if (!path.isEmpty()) resume_from(path);
}

Task* MainWindow::resume_from(const QString& checkpoint) {
  if (running_) return nullptr;
  auto* task = new ReadCheckpointTask(checkpoint);
  show_busy_preparing(task);
  return start_owned(task, this, [this, task, checkpoint] {
    end_busy_preparing();
    if (task->state() == Task::State::aborted || task->abort_requested()) return;  // stopped before it began
    if (task->state() == Task::State::failed) {
      say_failure(*prompter_, this, log_, tr("Cannot resume"),
                  tr("cannot resume from %1: %2").arg(checkpoint, task->failure()), task->failure());
      return;
    }
    const CheckpointInfo& info = task->info();
    // The checkpoint's own settings, but on the devices selected now, and in the folder the checkpoint is in:
    // a run folder moved or copied elsewhere continues there, never in the folder it was trained in (which
    // may be gone, on another machine, or hold that run further along).
    Config config = info.config;
    if (const std::optional<Config> now = config_->config()) config.devices = now->devices;
    if (!task->in_its_run_folder()) {
      log_->add(LogLevel::info, tr("resuming in %1, the checkpoint's folder (its run was trained in %2)")
                                    .arg(QString::fromStdString(task->folder().string()),
                                         QString::fromStdString(config.checkpoint.dir)));
      config.checkpoint.dir = task->folder().string();
    }
    // The form changes only once the user has agreed and the run begins (begin_run()).
    if (!settings_switch_->agree(config, QString::fromStdString(task->folder().string()))) return;
    if (lacks_optimizer_state(info))
      log_->add(LogLevel::warning, tr("%1 holds weights only: the optimizer starts afresh").arg(checkpoint));
    start_training(checkpoint, config);
  });
}

void MainWindow::export_charts() {
  exporter_->export_charts(QString::fromStdString(run_.run_dir), tabs_->currentWidget() == memory_charts_,
                           *training_charts_, *memory_charts_);
}

void MainWindow::show_run_summary(TrainerState state) {
  const QStringList lines = run_summary_lines(summary_, state, QString::fromStdString(run_.run_dir));
  log_->add(LogLevel::info, tr("run summary: %1").arg(lines.join("; ")));
  if (summary_dialog_) summary_dialog_->close();
  summary_dialog_ = new RunSummaryDialog(lines, this);
  summary_dialog_->show();
}

Task* MainWindow::open_run(const QString& folder) {
  return running_ ? nullptr : runs_->open(folder);
}

void MainWindow::open_config() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open config"), QString(), tr("Configs (*.json)"));
  if (!path.isEmpty()) open_config_file(path);
}

void MainWindow::save_config() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save config as"), "config.json", tr("Configs (*.json)"));
  if (!path.isEmpty()) save_config_to(path);
}

PredictWindow* MainWindow::show_predict_window() {
  if (!predict_window_) {
    predict_window_ = new PredictWindow(*prompter_, this);
    // The form's training set: never offered or written to as a masks folder.
    predict_window_->set_training_set([this]() -> std::optional<DatasetLocation> {
      const std::optional<Config> config = config_->config();
      return config ? dataset_location(*config) : std::nullopt;
    });
    // The run's best model, else where it stands.
    if (!run_.run_dir.empty()) predict_window_->suggest_model_of_run(run_.run_dir);
  }
  predict_window_->show();
  return predict_window_;
}

void MainWindow::show_guide() {
  if (!guide_dialog_) guide_dialog_ = new GuideDialog(this);
  // Not modal: the guide can stay open beside the window.
  if (guide_dialog_->isVisible())
    guide_dialog_->raise();
  else
    guide_dialog_->show();
}

bool MainWindow::show_guide_on_first_launch() {
  QSettings settings;
  if (settings.value("guide/shown", false).toBool()) return false;
  settings.setValue("guide/shown", true);
  show_guide();
  return true;
}

Task* MainWindow::offer_to_resume_unfinished_run() {
  const QString folder = QSettings().value(kUnfinishedRunKey).toString();
  if (folder.isEmpty() || running_) return nullptr;
  const QString last =
      QString::fromStdString((std::filesystem::path(folder.toStdString()) / kLastCheckpointName).string());
  auto* task = new ReadCheckpointTask(last);
  return start_owned(task, this, [this, task, folder, last] {
    QSettings settings;
    if (task->state() != Task::State::succeeded) {
      settings.remove(kUnfinishedRunKey);  // nothing to resume (no checkpoint, or one that cannot be read)
      return;
    }
    if (running_) return;  // a run started while the checkpoint was read
    if (!prompter_->confirm(
            this, tr("Resume the unfinished run?"),
            tr("The run in %1 did not finish: its last checkpoint is at step %2 (epoch %3). Resume it?")
                .arg(folder)
                .arg(task->info().position.step)
                .arg(task->info().position.epoch),
            true)) {
      settings.remove(kUnfinishedRunKey);
      return;
    }
    resume_from(last);
  });
}

void MainWindow::close_on_signal(int signal_number) {
  const QString name = signal_name(signal_number);
  if (closing_on_signal_) return;  // a second one ends the process in the handler
  closing_on_signal_ = true;
  if (!running_) {
    log_->add(LogLevel::info, tr("%1 received: closing").arg(name));
    close();
    return;
  }
  log_->add(LogLevel::info, tr("%1 received: stopping the run at the next step boundary and saving "
                               "last.safetensors, then closing (a second one quits at once, losing the steps "
                               "since the last checkpoint)")
                                .arg(name));
  statusBar()->showMessage(tr("Stopping, then closing (%1)").arg(name));
  training_->abort();  // on_finished() closes
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (running_ && !closing_on_signal_) {
    if (!prompter_->confirm(this, tr("Training is running"),
                            tr("Stop training and quit? The model is saved as last.safetensors."), true)) {
      event->ignore();
      return;
    }
    if (training_) training_->abort();
  }
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  config_->save_settings(settings);
  QMainWindow::closeEvent(event);
}

}  // namespace unet::gui
