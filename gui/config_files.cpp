// Open config… (and the file named on the command line) and Save config as… (see config_files.h): the reading
// task, and what the window says of both.
#include "gui/config_files.h"

#include <QMessageBox>
#include <QStatusBar>

#include <filesystem>
#include <stdexcept>

#include "gui/config_panel.h"
#include "gui/config_panel_text.h"
#include "gui/log_view.h"

namespace unet::gui {

unet::Config read_config_file(const QString& path) {
  const std::filesystem::path file = to_path(path);
  const nlohmann::json doc = read_config_document(file);  // its errors name the file already
  try {
    std::error_code ec;
    std::filesystem::path folder = std::filesystem::absolute(file, ec).parent_path();
    if (ec) folder = file.parent_path();
    return config_from_json(doc, folder);
  } catch (const std::exception& e) {
    throw std::runtime_error(path.toStdString() + ": " + e.what());
  }
}

ReadConfigTask::ReadConfigTask(QString path, QObject* parent) : Task(parent), path_(std::move(path)) {}

ReadConfigTask::~ReadConfigTask() {
  end_work();
}

void ReadConfigTask::execute() {
  config_ = read_config_file(path_);
}

ConfigFiles::ConfigFiles(QMainWindow* window, ConfigPanel* config, LogView* log, Prompter& prompter)
    : QObject(window), window_(window), config_(config), log_(log), prompter_(prompter) {}

Task* ConfigFiles::open(const QString& path) {
  return read(path, [this](const QString& why) { prompter_.warn(window_, tr("Cannot open"), why); });
}

Task* ConfigFiles::open_at_launch(const QString& path) {
  return read(path, [this](const QString& why) {
    // Said in a box too: a red line in the log tab under the demo's settings is easily missed.
    log_->add(LogLevel::error, why);
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot open the config"),
                                tr("%1\n\nThe window shows the demo settings instead.").arg(why),
                                QMessageBox::Close, window_);
    box->setObjectName("config_error");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->show();
  });
}

Task* ConfigFiles::read(const QString& path, std::function<void(const QString& why)> failed) {
  auto* task = new ReadConfigTask(path);
  return start_owned(task, this, [this, task, failed = std::move(failed)] {
    QString error = task->failure();
    if (task->state() == Task::State::succeeded) {
      if (config_->is_read_only()) {  // Start was pressed while the file was read: the run's settings stay
        log_->add(LogLevel::info, tr("did not open %1: a run started meanwhile").arg(task->path()));
        return;
      }
      if (config_->show_loaded(task->path(), task->config(), &error)) return;
    }
    failed(error);
  });
}

Task* ConfigFiles::save(const QString& path) {
  QString error;
  std::optional<std::string> text = config_->text_to_save(path, &error);
  if (!text) {
    say_not_saved(path, error);
    return nullptr;
  }
  auto* task = new WriteFileTask(path, QByteArray::fromStdString(*text));
  return start_owned(task, this, [this, task, path] {
    if (task->state() != Task::State::succeeded) return say_not_saved(path, task->failure());
    log_->add(LogLevel::info, tr("saved the config to %1").arg(path));
    window_->statusBar()->showMessage(tr("Saved the config to %1").arg(path), 10000);
  });
}

void ConfigFiles::say_not_saved(const QString& path, const QString& why) const {
  say_failure(prompter_, window_, log_, tr("Cannot save"),
              tr("cannot save the config to %1: %2").arg(path, why), why);
}

}  // namespace unet::gui
