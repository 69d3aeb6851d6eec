// The window's file work as Tasks (gui/task.h), off the GUI thread: writing a file the GUI thread has made
// (a saved config, exported charts); exporting a checkpoint's weights or its
// model as ONNX; reading a run folder (its newest readable checkpoint's settings and its metrics.jsonl) for
// File → Open run… and Compare with run…; finding the model a run folder offers for prediction and listing a
// folder's images; reading the checkpoint a run resumes from; checking the folder a run goes into before it
// starts; and writing the prediction window's masks and label images. Each does the reading and writing only;
// what the window shows, asks and logs of the outcome stays in the window.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "gui/task.h"
#include "unet/data/dataset_folders.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"
#include "unet/train/metrics_log.h"
#include "unet/train/run_folder.h"

namespace unet::gui {

// `bytes` into `path`, atomically (QSaveFile: a failed write leaves the file as it was). Throws why it
// failed,
// "<path>: <reason>".
void write_file_atomically(const QString& path, const QByteArray& bytes);

// A folder beside `dir` that does not exist yet: <dir><suffix>, else <dir><suffix>-2, -3, ...; with no
// suffix, <dir>-2 first. (A few existence checks: for a task's thread, or a folder known to be near.)
std::filesystem::path free_folder_beside(const std::filesystem::path& dir, const std::string& suffix);

// write_file_atomically(path, bytes) on the task's thread.
class WriteFileTask : public Task {
  Q_OBJECT
 public:
  WriteFileTask(QString path, QByteArray bytes, QObject* parent = nullptr);
  ~WriteFileTask() override;

 protected:
  void execute() override;

 private:
  const QString path_;
  const QByteArray bytes_;
};

// The checkpoint's weights alone (no optimizer state) into `target`, never over the checkpoint itself.
class ExportWeightsTask : public Task {
  Q_OBJECT
 public:
  ExportWeightsTask(QString source, QString target, QObject* parent = nullptr);
  ~ExportWeightsTask() override;

 protected:
  void execute() override;

 private:
  const QString source_, target_;
};

// The checkpoint's model as an ONNX graph (its input as onnx_input_contract says, probabilities out). The
// checkpoint is read first, so that a file that is not one is said so before anything about the target.
class ExportOnnxTask : public Task {
  Q_OBJECT
 public:
  // What to do when `target` exists: end Aborted with target_exists() (the window asks, then starts another
  // task with `replace`), or replace it.
  enum class Existing { ask, replace };
  ExportOnnxTask(QString source, QString target, Existing existing, QObject* parent = nullptr);
  ~ExportOnnxTask() override;
  bool target_exists() const { return target_exists_; }
  // Once succeeded: what the graph's input must hold (onnx_input_contract), as `unet-train export` prints it.
  QString input_contract() const { return input_contract_; }

 protected:
  void execute() override;

 private:
  const QString source_, target_;
  const Existing existing_;
  bool target_exists_ = false;
  QString input_contract_;
};

// A run folder read for File → Open run… (`open`: the settings of its newest checkpoint that can be read,
// last else best, and its curves; fails when it has neither) or Compare with run… (`compare`: its curves;
// fails when metrics.jsonl has none). history() holds what was read, its warnings too, also after a failure.
class ReadRunTask : public Task {
  Q_OBJECT
 public:
  enum class Purpose { open, compare };
  ReadRunTask(const QString& folder, Purpose purpose, QObject* parent = nullptr);
  ~ReadRunTask() override;

  const std::filesystem::path& folder() const { return dir_; }
  const std::optional<CheckpointInfo>& checkpoint() const { return checkpoint_; }
  const RunHistory& history() const { return history_; }

 protected:
  void execute() override;

 private:
  const QString folder_text_;
  const std::filesystem::path dir_;
  const Purpose purpose_;
  std::optional<CheckpointInfo> checkpoint_;
  RunHistory history_;
};

// The model a run folder offers for prediction: its best checkpoint, else its last; found() is empty when it
// has neither. Never fails.
class FindRunModelTask : public Task {
  Q_OBJECT
 public:
  explicit FindRunModelTask(std::filesystem::path dir, QObject* parent = nullptr);
  ~FindRunModelTask() override;
  const QString& found() const { return found_; }

 protected:
  void execute() override;

 private:
  const std::filesystem::path dir_;
  QString found_;
};

// The files of `folder` that `filters` match (QDir name filters), by name: the prediction window's Folder….
// An unreadable folder lists none. Never fails.
class ListFilesTask : public Task {
  Q_OBJECT
 public:
  ListFilesTask(QString folder, QStringList filters, QObject* parent = nullptr);
  ~ListFilesTask() override;
  const QStringList& files() const { return files_; }  // their paths

 protected:
  void execute() override;

 private:
  const QString folder_;
  const QStringList filters_;
  QStringList files_;
};

// A checkpoint's settings and where it stands (inspect_checkpoint: its header, not its weights), for Resume
// from checkpoint…; fails when the file is not a checkpoint.
class ReadCheckpointTask : public Task {
  Q_OBJECT
 public:
  explicit ReadCheckpointTask(QString file, QObject* parent = nullptr);
  ~ReadCheckpointTask() override;
  const CheckpointInfo& info() const { return info_; }
  // The checkpoint's folder (absolute), and whether it is the one its run was trained in (its settings'
  // checkpoint.dir): a run folder moved or copied elsewhere is not.
  const std::filesystem::path& folder() const { return folder_; }
  bool in_its_run_folder() const { return in_its_run_folder_; }

 protected:
  void execute() override;

 private:
  const QString file_;
  CheckpointInfo info_;
  std::filesystem::path folder_;
  bool in_its_run_folder_ = false;
};

// Before a run starts: whether its folder `dir` holds another run, or (resuming from `checkpoint`) this run
// further along (run_folder_conflict), what the question about it offers (RunFolderDialog: a free folder
// beside it, and whether that run can be continued), and, resuming, the run's curves up to the checkpoint's
// step. A folder
// or checkpoint that cannot be read is no conflict: the trainer says what is wrong with it. Never fails.
class PrepareRunTask : public Task {
  Q_OBJECT
 public:
  // `shown_run_dir`: the run on show in the window (empty for none): same_run() tells whether the resumed
  // checkpoint is in it.
  PrepareRunTask(std::filesystem::path dir, std::string checkpoint_template, QString checkpoint,
                 std::filesystem::path shown_run_dir, QObject* parent = nullptr);
  ~PrepareRunTask() override;
  const std::filesystem::path& folder() const { return dir_; }
  const std::optional<RunFolderConflict>& conflict() const { return conflict_; }
  const std::optional<ResumedRun>& resumed() const { return resumed_; }
  const RunHistory& history() const { return history_; }  // resuming: up to the checkpoint's step
  bool same_run() const { return same_run_; }
  // With a conflict: the answer "new folder" (or "branch off"), a folder beside the conflict's that does not
  // exist yet, <folder>-2, -3, ...; branching off a later state, <folder>-from-step-N first.
  const std::filesystem::path& new_folder() const { return new_folder_; }
  // With a conflict: whether "continue that run" is offered (a previous run that left a last.safetensors).
  bool can_continue() const { return can_continue_; }

 protected:
  void execute() override;

 private:
  const std::filesystem::path dir_;
  const std::string checkpoint_template_;
  const QString checkpoint_;
  const std::filesystem::path shown_run_dir_;
  std::optional<RunFolderConflict> conflict_;
  std::optional<ResumedRun> resumed_;
  RunHistory history_;
  bool same_run_ = false;
  std::filesystem::path new_folder_;
  bool can_continue_ = false;
};

// A file the Predict window saves: where, and how it is written there (on the task's thread: what it writes
// is held by the function, never the window's).
struct PredictionFile {
  std::filesystem::path target;
  std::function<void(const std::filesystem::path&)> write;
};

// The Predict window's outputs (masks as PNG files; a task-instances model's label images and object tables)
// written into `folder` (made if it does not exist). A folder that belongs to a dataset (dataset_membership:
// `training`, or one on disk) is refused before anything is written or made: it ends Aborted and dataset()
// says which. Unless `replace`, a target that exists stops it before anything is written: it ends Aborted and
// existing() names them (the window asks, then starts another task with `replace`). Fails with the first file
// that cannot be written (those before it stay written).
class SavePredictionsTask : public Task {
  Q_OBJECT
 public:
  SavePredictionsTask(std::filesystem::path folder, std::vector<PredictionFile> files,
                      std::optional<DatasetLocation> training, bool replace, QObject* parent = nullptr);
  ~SavePredictionsTask() override;
  const std::optional<DatasetMembership>& dataset() const { return dataset_; }
  const QStringList& existing() const { return existing_; }

 protected:
  void execute() override;

 private:
  const std::filesystem::path folder_;
  const std::vector<PredictionFile> files_;
  const std::optional<DatasetLocation> training_;
  const bool replace_;
  std::optional<DatasetMembership> dataset_;
  QStringList existing_;
};

}  // namespace unet::gui
