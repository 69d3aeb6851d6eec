#include "gui/file_tasks.h"

#include <QFileInfo>

#include <stdexcept>

#include "unet/io/onnx_export.h"

namespace unet::gui {
namespace {

// The save dialogs ask before replacing a file, but not whether it is the checkpoint itself.
void refuse_the_checkpoint_itself(const QString& source, const QString& target, const char* what_is_lost) {
  std::error_code ec;
  if (std::filesystem::equivalent(source.toStdString(), target.toStdString(), ec))
    throw Error(ErrorKind::usage, target.toStdString() + " is the checkpoint being exported: " +
                                      what_is_lost + "; choose another file");
}

}  // namespace

ExportWeightsTask::ExportWeightsTask(QString source, QString target, QObject* parent)
    : Task(parent), source_(std::move(source)), target_(std::move(target)) {}

ExportWeightsTask::~ExportWeightsTask() {
  end_work();
}

void ExportWeightsTask::execute() {
  refuse_the_checkpoint_itself(source_, target_, "its optimizer state would be lost");
  save_checkpoint(target_.toStdString(), load_checkpoint(source_.toStdString()),
                  CheckpointKind::weights_only);
}

ExportOnnxTask::ExportOnnxTask(QString source, QString target, Existing existing, QObject* parent)
    : Task(parent), source_(std::move(source)), target_(std::move(target)), existing_(existing) {}

ExportOnnxTask::~ExportOnnxTask() {
  end_work();
}

void ExportOnnxTask::execute() {
  refuse_the_checkpoint_itself(source_, target_, "the ONNX model would replace it");
  if (QFileInfo(target_).isDir())
    throw Error(ErrorKind::usage, target_.toStdString() + " is a folder; choose a file name");
  const Checkpoint checkpoint = load_checkpoint(source_.toStdString());
  if (existing_ != Existing::replace && (QFileInfo::exists(target_) || QFileInfo(target_).isSymLink())) {
    if (existing_ == Existing::refuse)
      throw Error(ErrorKind::usage,
                  target_.toStdString() + " exists; the export does not replace a file unasked");
    target_exists_ = true;
    ended_aborted();
    return;
  }
  export_onnx(checkpoint, target_.toStdString(), {.source = QFileInfo(source_).fileName().toStdString()});
}

ReadRunTask::ReadRunTask(const QString& folder, Purpose purpose, QObject* parent)
    : Task(parent),
      folder_text_(folder),
      dir_(std::filesystem::absolute(folder.toStdString())),
      purpose_(purpose) {}

ReadRunTask::~ReadRunTask() {
  end_work();
}

void ReadRunTask::execute() {
  const std::filesystem::path metrics = dir_ / kMetricsFileName;
  if (purpose_ == Purpose::compare) {
    history_ = read_run_history(metrics);
    if (history_.steps.empty() && history_.epochs.empty())
      throw std::runtime_error(tr("%1 holds no run's curves to compare (no metrics.jsonl with steps)")
                                   .arg(folder_text_)
                                   .toStdString());
    return;
  }
  std::error_code ec;
  for (const std::string_view name : {kLastCheckpointName, kBestCheckpointName}) {
    try {
      checkpoint_ = inspect_checkpoint(dir_ / name);
      break;
    } catch (const Error&) {
    }
  }
  if (!std::filesystem::is_regular_file(metrics, ec) && !checkpoint_)
    throw std::runtime_error(tr("%1 holds no run: neither metrics.jsonl nor a readable last.safetensors or "
                                "best.safetensors")
                                 .arg(folder_text_)
                                 .toStdString());
  history_ = read_run_history(metrics);
}

}  // namespace unet::gui
