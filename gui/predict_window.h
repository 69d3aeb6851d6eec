// Prediction from the workbench: a checkpoint, images (files or a folder), how to run them (the engine's
// PredictOptions: auto, resize, tiles at native scale with their overlap, or the whole image; flip test-time
// augmentation), and the model's segmentation of each over the image in an ImageView (zoom, pan, the
// overlay's opacity), with a legend and a threshold slider for binary models; the images listed in natural
// order (img1, img2, img10), and a "stale" mark while the results were computed with other settings than
// the window's. The masks are saved as PNG files (class indices; a binary model's foreground as 255) into a
// new folder beside the inputs unless the user names another, never into a training set's folders, never
// replacing a file unasked. The model runs in a Task (gui/task.h), on a thread of its own: the window stays
// responsive, a progress bar counts the images, Stop ends the run between forward passes, and one prediction
// runs at a time.
// A task-instances checkpoint's results are objects (issue 27): found in the task as `unet-train predict`
// finds them (infer/instance_output.h, the checkpoint's instances.*), each drawn in a colour of its own,
// their count shown, a click on one showing its row of the table (id, area, centroid, box, mean probability),
// and Save writing each image's <stem>_labels.png (or .tif, as the label format says) and <stem>_objects.csv
// as the CLI does.
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "gui/prompter.h"
#include "gui/task.h"
#include "unet/data/dataset_folders.h"
#include "unet/infer/instance_output.h"
#include "unet/infer/predictor.h"

namespace unet::gui {

class ImageView;

class PredictWindow : public QDialog {
  Q_OBJECT
 public:
  // `prompter` asks before masks replace files; it must outlive the window (the main window's does).
  explicit PredictWindow(Prompter& prompter, QWidget* parent = nullptr);
  ~PredictWindow() override;

  // Runs `checkpoint` on `images` (image files, taken in natural order of their names) on `device`, as the
  // window's options say; false (why in status_text()) when it cannot start. The results arrive later:
  // progressed() after each image, then finished(), and then prediction_count() holds them, and the masks'
  // folder offered is a new one beside the first image's (<folder>-masks, numbered when it exists) unless
  // the user has named one.
  bool predict(const QString& checkpoint, const QStringList& images, const DeviceId& device = {});
  // Asks a running prediction to stop before its next forward pass; the images finished are kept.
  void stop();
  // Writes each prediction's mask as <folder>/<stem>_mask.png, as a task off the GUI thread (nullptr when
  // there is nothing to save), making the folder if need be; refuses, naming it, a folder that belongs to a
  // dataset (the training set's, or one on disk: dataset_membership); asks before replacing files (then a
  // second task writes them, the first ending Aborted). The outcome is in status_text(); the task succeeds
  // when all were written.
  Task* save_masks(const QString& folder);
  // Where the training set is now (the main window's config; nullopt for none), asked at each prediction
  // and each save: its folders are never offered or written to.
  void set_training_set(std::function<std::optional<DatasetLocation>()> current);

  void set_checkpoint(const QString& checkpoint);
  QString checkpoint() const;
  // The model the run in `run_dir` offers (its best checkpoint, else its last), looked for by a task off the
  // GUI thread; it becomes the checkpoint unless one has been set by then.
  Task* suggest_model_of_run(const std::filesystem::path& run_dir);
  // Folder… once its dialog has answered: the folder's images, listed by a task off the GUI thread, become
  // the inputs (unless other images are chosen meanwhile).
  Task* list_images_in(const QString& folder);
  void set_threshold(double threshold);  // binary models: the foreground probability, 0..1
  double threshold() const;
  // The options the mode, overlap and flips controls say (the rest the engine's defaults); setting them sets
  // those controls.
  PredictOptions options() const;
  void set_options(const PredictOptions& options);
  int progress_value() const { return progress_->value(); }
  int progress_maximum() const { return progress_->maximum(); }
  bool busy() const { return task_ && task_->running(); }
  int prediction_count() const { return static_cast<int>(results_.size()); }
  QString status_text() const { return status_->text(); }
  QString legend_text() const { return legend_->text(); }
  // The class indices the view shows for prediction `i` at the current threshold.
  std::vector<std::uint8_t> mask(int i) const;
  // A task-instances checkpoint's prediction `i` as objects; nullptr for a semantic model's.
  const InstanceOutput* objects(int i) const;
  // The selected prediction's object count ("12 objects"; empty for a semantic model) and the row of the
  // object last clicked ("Object 3: …", "Background at …", or how to pick one).
  QString object_count_text() const { return object_count_->text(); }
  QString object_row_text() const { return object_row_->text(); }
  // What a click on the view does: the row of the object at `image_point` (image pixels) of the selected
  // prediction.
  void select_object_at(QPointF image_point);

 signals:
  // `done` of `total` images through (segmented or not readable).
  void progressed(int done, int total);
  void finished();

 private:
  struct Result {
    QString path;
    Image image;
    Prediction prediction;
    std::shared_ptr<const InstanceOutput> objects;  // task instances; shared with a save's task
  };
  // What results depend on besides the images: whether results are stale.
  struct Settings {
    QString checkpoint;
    PredictOptions options;
  };
  void choose_images();
  void choose_folder();
  void show_selected();
  void done(std::vector<Result> results, const QString& error, bool stopped);
  void step(int done, int total, const QString& what);
  void update_option_controls();
  Task* start_saving_masks(const QString& folder, bool replace);
  Settings current_settings() const;
  QString describe(const Settings& settings) const;
  void update_stale_mark();
  void offer_masks_folder(const QString& folder);

  QLineEdit* checkpoint_ = nullptr;
  QListWidget* list_ = nullptr;
  ImageView* view_ = nullptr;
  QLabel* stale_ = nullptr;
  QLineEdit* masks_folder_ = nullptr;
  QString offered_masks_folder_;  // the folder last offered: replaced by the next unless the user changed it
  QLabel* legend_ = nullptr;
  QLabel* masks_folder_label_ = nullptr;  // "Labels folder" for an instances checkpoint
  QLabel* object_count_ = nullptr;
  QLabel* object_row_ = nullptr;
  QLabel* status_ = nullptr;
  QSlider* threshold_ = nullptr;
  QPushButton* run_ = nullptr;
  QPushButton* save_ = nullptr;
  QPushButton* stop_ = nullptr;
  QComboBox* mode_ = nullptr;
  QComboBox* label_format_ = nullptr;  // an instances checkpoint's label images: PNG or TIFF
  QDoubleSpinBox* overlap_ = nullptr;
  QCheckBox* flips_ = nullptr;
  Prompter& prompter_;
  QProgressBar* progress_ = nullptr;
  QStringList inputs_;
  QPointer<Task> listing_;  // the listing of a folder whose images are wanted
  DeviceId device_;
  std::vector<Result> results_;
  std::optional<Settings> results_settings_;  // what results_ were computed with
  std::function<std::optional<DatasetLocation>()> training_set_ = [] { return std::nullopt; };
  std::int64_t classes_ = 1;
  bool instances_ = false;  // the results are objects
  class PredictTask;
  QPointer<Task> task_;  // the prediction under way, or the last one until it is deleted
};

}  // namespace unet::gui
