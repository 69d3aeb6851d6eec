#include "gui/exporter.h"

#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>

#include <filesystem>

#include "gui/charts/memory_charts.h"
#include "gui/charts/training_charts.h"
#include "unet/io/onnx_export.h"

namespace unet::gui {

Exporter::Exporter(QWidget* window, LogView* log, QStatusBar* status_bar, Prompter& prompter)
    : QObject(window), window_(window), log_(log), status_bar_(status_bar), prompter_(prompter) {}

void Exporter::export_weights(const QString& folder) {
  const QString source = QFileDialog::getOpenFileName(window_, tr("Export the weights of a checkpoint"),
                                                      folder, tr("Checkpoints (*.safetensors)"));
  if (source.isEmpty()) return;
  const QString target = QFileDialog::getSaveFileName(
      window_, tr("Save the weights as"),
      QFileInfo(source).dir().filePath(QFileInfo(source).completeBaseName() + "-weights.safetensors"),
      tr("Safetensors (*.safetensors)"));
  if (!target.isEmpty()) weights_of(source, target);
}

Task* Exporter::weights_of(const QString& source, const QString& target) {
  auto* task = new ExportWeightsTask(source, target);
  return start_owned(task, this, [this, task, source, target] {
    if (task->state() != Task::State::succeeded) {
      say_failure(prompter_, window_, log_, tr("Cannot export"),
                  tr("cannot export the weights of %1: %2").arg(source, task->failure()), task->failure());
      return;
    }
    status_bar_->showMessage(tr("Exported the weights to %1").arg(target), 10000);
    log_->add(LogLevel::info, tr("exported the weights of %1 to %2").arg(source, target));
  });
}

void Exporter::export_onnx(const QString& folder) {
  const QString source = QFileDialog::getOpenFileName(window_, tr("Export the model as ONNX"), folder,
                                                      tr("Checkpoints (*.safetensors)"));
  if (source.isEmpty()) return;
  // onnx_of asks before replacing a file, so that a replacement is asked about the same way however the
  // export was started; the dialog does not ask too.
  const QString target = QFileDialog::getSaveFileName(
      window_, tr("Save the ONNX model as"),
      QFileInfo(source).dir().filePath(QFileInfo(source).completeBaseName() + ".onnx"),
      tr("ONNX models (*.onnx)"), nullptr, QFileDialog::DontConfirmOverwrite);
  if (!target.isEmpty()) onnx_of(source, target);
}

Task* Exporter::onnx_of(const QString& source, const QString& target) {
  return start_onnx(source, target, ExportOnnxTask::Existing::ask);
}

Task* Exporter::start_onnx(const QString& source, const QString& target, ExportOnnxTask::Existing existing) {
  auto* task = new ExportOnnxTask(source, target, existing);
  return start_owned(task, this, [this, task, source, target] {
    if (task->state() == Task::State::failed) {
      say_failure(prompter_, window_, log_, tr("Cannot export"),
                  tr("cannot export %1 as ONNX: %2").arg(source, task->failure()), task->failure());
    } else if (task->state() == Task::State::succeeded) {
      // What the graph's input must hold, in the words `unet-train export` prints: a consumer that feeds it
      // other values gets wrong masks without any error.
      const QString input = QString::fromUtf8(kOnnxInputName.data(), kOnnxInputName.size());
      status_bar_->showMessage(
          tr("Exported the model as ONNX to %1; input %2: %3").arg(target, input, task->input_contract()),
          30000);
      log_->add(LogLevel::info, tr("exported the model of %1 as ONNX to %2; input %3: %4")
                                    .arg(source, target, input, task->input_contract()));
    } else if (task->target_exists()) {
      if (prompter_.confirm(window_, tr("Replace the file?"),
                            tr("%1 exists. Replace it with the ONNX model?").arg(target), false))
        start_onnx(source, target, ExportOnnxTask::Existing::replace);
      else
        log_->add(LogLevel::info, tr("did not export %1: %2 exists and was kept").arg(source, target));
    }
  });
}

Task* Exporter::export_charts(const QString& run_dir, bool memory, const TrainingCharts& training,
                              const MemoryCharts& memory_charts) {
  const QString run =
      run_dir.isEmpty()
          ? tr("no run")
          : QString::fromStdString(std::filesystem::path(run_dir.toStdString()).filename().string());
  const QString date = QDateTime::currentDateTime().toString("yyyy-MM-dd HH:mm");
  const QString name =
      QString("%1-%2-%3.png")
          .arg(run_dir.isEmpty() ? QString("charts") : run,
               QDateTime::currentDateTime().toString("yyyyMMdd-HHmm"), memory ? "memory" : "training");
  const QString path = QFileDialog::getSaveFileName(window_, tr("Export charts"), name,
                                                    tr("PNG image (*.png);;PDF document (*.pdf)"));
  if (path.isEmpty()) return nullptr;
  const QString caption =
      tr("%1 — %2, exported %3")
          .arg(run_dir.isEmpty() ? run : run_dir, memory ? tr("memory") : tr("training"), date);
  QString error;
  std::optional<QByteArray> bytes =
      memory ? memory_charts.render_for(path, &error, caption) : training.render_for(path, &error, caption);
  if (!bytes) {
    prompter_.warn(window_, tr("Cannot export"), error);
    return nullptr;
  }
  return charts_to(path, std::move(*bytes));
}

Task* Exporter::charts_to(const QString& path, QByteArray bytes) {
  auto* task = new WriteFileTask(path, std::move(bytes));
  return start_owned(task, this, [this, task, path] {
    if (task->state() != Task::State::succeeded)
      prompter_.warn(window_, tr("Cannot export"), QStringLiteral("cannot write ") + task->failure());
    else
      status_bar_->showMessage(tr("Exported %1").arg(path), 5000);
  });
}

}  // namespace unet::gui
