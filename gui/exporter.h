// File → Export weights…, Export ONNX… and Export charts…: the file dialogs, the export tasks
// (gui/file_tasks.h) off the GUI thread, and what the window shows of their outcome (the log, the status bar,
// a message box, the question before an ONNX model replaces a file: both through the Prompter). Out of the
// window so that it keeps its layout and wiring only.
#pragma once

#include <QObject>
#include <QStatusBar>

#include "gui/file_tasks.h"
#include "gui/log_view.h"
#include "gui/prompter.h"

namespace unet::gui {

class MemoryCharts;
class TrainingCharts;

class Exporter : public QObject {
  Q_OBJECT
 public:
  // Dialogs open over `window`; the parts and `prompter` must outlive the exporter (the window's children and
  // its prompter do).
  Exporter(QWidget* window, LogView* log, QStatusBar* status_bar, Prompter& prompter);

  // The file dialogs (starting in `folder`, the run's), then the export.
  void export_weights(const QString& folder);
  void export_onnx(const QString& folder);
  // File → Export charts…: the training charts, or with `memory` the memory charts, as PNG or PDF, named
  // and captioned with the run (`run_dir`, empty for none) and the date, so that exports of several runs
  // tell themselves apart. Widgets render on the GUI thread only: the charts are drawn there, then written by
  // a WriteFileTask (returned; nullptr when nothing is written: no file chosen, or drawing failed).
  Task* export_charts(const QString& run_dir, bool memory, const TrainingCharts& training,
                      const MemoryCharts& memory_charts);

  // The checkpoint's weights alone into `target`, as a task (owned here until it ends). When it fails, the
  // reason goes to the log and a message box.
  Task* weights_of(const QString& source, const QString& target);
  // The checkpoint's model as an ONNX graph (its input as onnx_input_contract says, probabilities out), as a
  // task. A `target` that exists is replaced only when the user says so once the checkpoint has been read
  // (then a second task writes it; the first ends Aborted); the checkpoint itself never is. When nothing was
  // written, the reason is in the log (and a message box when it failed); when it was, the log and the status
  // bar say what its input must hold.
  Task* onnx_of(const QString& source, const QString& target);

 private:
  // Charts drawn (`bytes`, TrainingCharts::render_for) written into `path`, as a task; when it fails, the
  // reason goes to a message box; when it succeeds, to the status bar.
  Task* charts_to(const QString& path, QByteArray bytes);
  Task* start_onnx(const QString& source, const QString& target, ExportOnnxTask::Existing existing);

  QWidget* window_;
  LogView* log_;
  QStatusBar* status_bar_;
  Prompter& prompter_;
};

}  // namespace unet::gui
