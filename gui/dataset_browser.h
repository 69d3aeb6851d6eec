// The Dataset tab: the configured dataset's image/mask pairs as the preflight scan (engine/unet/data/
// preflight.h) finds them, before any training: each pair with its status and its problems, the problems
// about no pair (a mask without an image), a summary (pairs, bad ones, the classes found and their share of
// the pixels), and the selected pair previewed, its mask over the image in the classes' colours. Today's
// first sign of a bad pair would otherwise be Start failing.
//
// No file is read on the GUI thread: the scan and the preview's decoding are Tasks. The tab rescans when the
// data settings change (source, folder, size, channels, classes...), while it is shown; hidden, it rescans
// when it is shown next. Rescan reads the files again (after they were fixed on disk).
#pragma once

#include <QImage>
#include <QLabel>
#include <QPointer>
#include <QTreeWidget>
#include <QWidget>

#include <optional>

#include "gui/task.h"
#include "unet/data/preflight.h"

class QPushButton;

namespace unet::gui {

class ConfigPanel;

// scan_dataset(options) on the task's thread; a stop ends it at once. Keeps no decoded sample (the browser
// shows statuses, not training data).
class ScanDatasetTask : public Task {
  Q_OBJECT
 public:
  explicit ScanDatasetTask(DataSourceOptions options, QObject* parent = nullptr);
  ~ScanDatasetTask() override;
  const DataSourceOptions& options() const { return options_; }
  // Once succeeded.
  const PreflightResult& result() const { return result_; }

 protected:
  void execute() override;

 private:
  DataSourceOptions options_;
  PreflightResult result_;
};

// One pair's files as stored, the mask over the image (class k > 0 blended half-way to class_colour(k),
// the ignore label grey; with task instances each object blended half-way to object_colour(id), and note()
// counting them), scaled to fit `max_side`. A mask that is missing, cannot be read, or is not the
// image's size is not drawn, and note() says why. Fails when the image cannot be read.
class PreviewPairTask : public Task {
  Q_OBJECT
 public:
  PreviewPairTask(FilePair pair, FileDatasetOptions target, int max_side, QObject* parent = nullptr);
  ~PreviewPairTask() override;
  const FilePair& pair() const { return pair_; }
  QImage image() const { return image_; }
  QString note() const { return note_; }

 protected:
  void execute() override;

 private:
  const FilePair pair_;
  const FileDatasetOptions target_;
  const int max_side_;
  QImage image_;
  QString note_;
};

class DatasetBrowser : public QWidget {
  Q_OBJECT
 public:
  // The columns of pairs().
  enum Column { image_column, mask_column, status_column, problems_column };

  DatasetBrowser(const ConfigPanel& config, QWidget* parent = nullptr);

  // Scans the configured dataset now; the scan's task, or nullptr when there is nothing to scan (the
  // synthetic source, settings with problems: the summary says so).
  Task* rescan();
  // One row per sample found, then one per problem about no sample.
  QTreeWidget* pairs() const { return pairs_; }
  QString summary() const { return summary_->text(); }
  // The selected pair's preview as drawn (before it is scaled to the tab), and what it could not draw.
  QImage preview() const { return preview_image_; }
  QString preview_note() const { return preview_note_->text(); }

 signals:
  // A scan's rows are shown (or its failure said).
  void scanned();
  // The selected row's preview is shown (or why it cannot be).
  void previewed();

 protected:
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // The settings changed: rescan when they are the data's and the tab is shown.
  void settings_changed();
  void show_scan(const ScanDatasetTask& task);
  void preview_selected();
  void show_preview(const PreviewPairTask& task);
  void fit_preview();

  const ConfigPanel& config_;
  QLabel* summary_ = nullptr;
  QPushButton* rescan_button_ = nullptr;
  QTreeWidget* pairs_ = nullptr;
  QLabel* preview_ = nullptr;
  QLabel* preview_note_ = nullptr;
  QImage preview_image_;
  QPointer<ScanDatasetTask> scan_;  // the scan under way; its answer is dropped once another starts
  QPointer<PreviewPairTask> preview_task_;
  // What the rows show (the last scan's options), and whether the settings have changed since.
  std::optional<DataSourceOptions> shown_;
  bool stale_ = true;
  // The pairs of the rows, by row (problems about no sample have none).
  std::vector<std::optional<FilePair>> row_pairs_;
};

}  // namespace unet::gui
