// File → Open config… and Save config as…: the config file read (ReadConfigTask) or written (WriteFileTask,
// gui/file_tasks.h) by a Task, off the GUI thread, the configuration form showing what was read once the task
// has ended. The form keeps the binding (what it can hold, what it writes: ConfigPanel::show_loaded and
// text_to_save); here are the file work and what the window says of its outcome, so that the window keeps its
// layout and wiring only.
#pragma once

#include <QMainWindow>
#include <QString>

#include <functional>

#include "gui/file_tasks.h"
#include "gui/prompter.h"
#include "unet/config/config.h"

namespace unet::gui {

class ConfigPanel;
class LogView;

// A config file read and validated, its relative paths resolving against its folder. Throws what is wrong,
// naming the file (and the key).
unet::Config read_config_file(const QString& path);

// read_config_file(path) on the task's thread; config() once it has succeeded.
class ReadConfigTask : public Task {
  Q_OBJECT
 public:
  explicit ReadConfigTask(QString path, QObject* parent = nullptr);
  ~ReadConfigTask() override;
  const QString& path() const { return path_; }
  const unet::Config& config() const { return config_; }

 protected:
  void execute() override;

 private:
  const QString path_;
  unet::Config config_;
};

class ConfigFiles : public QObject {
  Q_OBJECT
 public:
  // The outcome goes to the window's `config`, `log` and status bar, a failure also to `prompter`; they must
  // outlive this (the window's children and its prompter do).
  ConfigFiles(QMainWindow* window, ConfigPanel* config, LogView* log, Prompter& prompter);

  // The reading task; once it has succeeded the form shows the file (unless it is read-only: a run started
  // meanwhile keeps its settings). A file that cannot be read or shown is said by the prompter.
  Task* open(const QString& path);
  // The same for the file named on the command line, while the window shows the demo's settings: a failure
  // goes to the log and to a non-modal box (object name "config_error") saying the demo settings stay.
  Task* open_at_launch(const QString& path);
  // The writing task, of the form's config as it is now; nullptr (said as a failure) while the form has
  // problems. A success is said in the status bar and the log, a failure in the log and by the prompter.
  Task* save(const QString& path);

 private:
  // Reads `path` on a task's thread and shows it in the form; `failed(why)` when it cannot.
  Task* read(const QString& path, std::function<void(const QString& why)> failed);
  void say_not_saved(const QString& path, const QString& why) const;

  QMainWindow* window_;
  ConfigPanel* config_;
  LogView* log_;
  Prompter& prompter_;
};

}  // namespace unet::gui
