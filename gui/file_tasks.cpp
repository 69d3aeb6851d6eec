#include "gui/file_tasks.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>

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

std::filesystem::path free_folder_beside(const std::filesystem::path& dir, const std::string& suffix) {
  std::error_code ec;
  const std::string base = dir.string() + suffix;
  if (!suffix.empty() && !std::filesystem::exists(base, ec)) return base;
  for (int n = 2;; ++n) {
    std::filesystem::path candidate = base + "-" + std::to_string(n);
    if (!std::filesystem::exists(candidate, ec)) return candidate;
  }
}

void write_file_atomically(const QString& path, const QByteArray& bytes) {
  QSaveFile out(path);
  if (!out.open(QIODevice::WriteOnly) || out.write(bytes) != bytes.size() || !out.commit())
    throw std::runtime_error((path + QStringLiteral(": ") + out.errorString()).toStdString());
}

WriteFileTask::WriteFileTask(QString path, QByteArray bytes, QObject* parent)
    : Task(parent), path_(std::move(path)), bytes_(std::move(bytes)) {}

WriteFileTask::~WriteFileTask() {
  end_work();
}

void WriteFileTask::execute() {
  write_file_atomically(path_, bytes_);
}

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
    target_exists_ = true;
    ended_aborted();
    return;
  }
  export_onnx(checkpoint, target_.toStdString(), {.source = QFileInfo(source_).fileName().toStdString()});
  input_contract_ = QString::fromStdString(onnx_input_contract(checkpoint.config.data.normalize));
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

ReadCheckpointTask::ReadCheckpointTask(QString file, QObject* parent)
    : Task(parent), file_(std::move(file)) {}

ReadCheckpointTask::~ReadCheckpointTask() {
  end_work();
}

void ReadCheckpointTask::execute() {
  info_ = inspect_checkpoint(file_.toStdString());
  folder_ = std::filesystem::absolute(file_.toStdString()).parent_path();
  std::error_code ec;
  in_its_run_folder_ =
      std::filesystem::equivalent(folder_, info_.config.resolve(info_.config.checkpoint.dir), ec);
}

FindRunModelTask::FindRunModelTask(std::filesystem::path dir, QObject* parent)
    : Task(parent), dir_(std::move(dir)) {}

FindRunModelTask::~FindRunModelTask() {
  end_work();
}

void FindRunModelTask::execute() {
  for (const std::string_view name : {kBestCheckpointName, kLastCheckpointName}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir_ / name, ec)) {
      found_ = QString::fromStdString((dir_ / name).string());
      return;
    }
  }
}

ListFilesTask::ListFilesTask(QString folder, QStringList filters, QObject* parent)
    : Task(parent), folder_(std::move(folder)), filters_(std::move(filters)) {}

ListFilesTask::~ListFilesTask() {
  end_work();
}

void ListFilesTask::execute() {
  const QDir dir(folder_);
  for (const QString& name : dir.entryList(filters_, QDir::Files, QDir::Name)) files_ << dir.filePath(name);
}

PrepareRunTask::PrepareRunTask(std::filesystem::path dir, std::string checkpoint_template, QString checkpoint,
                               std::filesystem::path shown_run_dir, QObject* parent)
    : Task(parent),
      dir_(std::move(dir)),
      checkpoint_template_(std::move(checkpoint_template)),
      checkpoint_(std::move(checkpoint)),
      shown_run_dir_(std::move(shown_run_dir)) {}

PrepareRunTask::~PrepareRunTask() {
  end_work();
}

void PrepareRunTask::execute() {
  try {
    if (!checkpoint_.isEmpty()) {
      const std::filesystem::path file = std::filesystem::absolute(checkpoint_.toStdString());
      resumed_ = ResumedRun{{dir_, file.parent_path()}, file, inspect_checkpoint(file).position.step};
    }
    conflict_ = run_folder_conflict(dir_, checkpoint_template_, resumed_);
    if (conflict_) {
      const bool later_state = conflict_->kind == RunFolderConflict::Kind::later_state;
      new_folder_ = free_folder_beside(
          conflict_->folder, later_state ? "-from-step-" + std::to_string(conflict_->resumed_step) : "");
      std::error_code ec;
      can_continue_ = conflict_->kind == RunFolderConflict::Kind::previous_run &&
                      std::filesystem::exists(conflict_->folder / kLastCheckpointName, ec);
    }
  } catch (const Error&) {
    // The trainer will say what is wrong with the folder or the checkpoint.
  }
  if (!resumed_) return;
  const std::filesystem::path from = resumed_->checkpoint.parent_path();
  history_ = read_run_history(from / kMetricsFileName, resumed_->step);
  std::error_code ec;
  same_run_ = !shown_run_dir_.empty() && std::filesystem::equivalent(from, shown_run_dir_, ec);
}

SavePredictionsTask::SavePredictionsTask(std::filesystem::path folder, std::vector<PredictionFile> files,
                                         std::optional<DatasetLocation> training, bool replace,
                                         QObject* parent)
    : Task(parent),
      folder_(std::move(folder)),
      files_(std::move(files)),
      training_(std::move(training)),
      replace_(replace) {}

SavePredictionsTask::~SavePredictionsTask() {
  end_work();
}

void SavePredictionsTask::execute() {
  dataset_ = dataset_membership(folder_, training_);
  if (dataset_) return ended_aborted();
  std::filesystem::create_directories(folder_);
  if (!replace_) {
    for (const PredictionFile& file : files_) {
      std::error_code ec;
      if (std::filesystem::exists(file.target, ec)) existing_ << QString::fromStdString(file.target.string());
    }
    if (!existing_.isEmpty()) return ended_aborted();
  }
  for (const PredictionFile& file : files_) file.write(file.target);
}

}  // namespace unet::gui
