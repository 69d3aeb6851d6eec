// The window's file work as Tasks (gui/task.h), off the GUI thread: exporting a checkpoint's weights or its
// model as ONNX, and reading a run folder (its newest readable checkpoint's settings and its metrics.jsonl)
// for File → Open run… and Compare with run…. Each does the reading and writing only; what the window shows
// and logs of the outcome stays in the window.
#pragma once

#include <QString>

#include <filesystem>
#include <optional>

#include "gui/task.h"
#include "unet/io/checkpoint.h"
#include "unet/train/metrics_log.h"

namespace unet::gui {

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

// The checkpoint's model as an ONNX graph (pixels 0..255 in, probabilities out). The checkpoint is read
// first, so that a file that is not one is said so before anything about the target.
class ExportOnnxTask : public Task {
  Q_OBJECT
 public:
  // What to do when `target` exists: fail saying so, end Aborted with target_exists() (the window asks,
  // then starts another task with `replace`), or replace it.
  enum class Existing { refuse, ask, replace };
  ExportOnnxTask(QString source, QString target, Existing existing, QObject* parent = nullptr);
  ~ExportOnnxTask() override;
  bool target_exists() const { return target_exists_; }

 protected:
  void execute() override;

 private:
  const QString source_, target_;
  const Existing existing_;
  bool target_exists_ = false;
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

}  // namespace unet::gui
