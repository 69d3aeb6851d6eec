// Prediction from the workbench: a checkpoint, images (files or a folder), and the model's segmentation of
// each over the image, with a legend and a threshold slider for binary models; the masks saved as PNG files
// (class indices; a binary model's foreground as 255), never replacing a file unasked. The model runs on a
// thread of its own: the window stays responsive, and one prediction runs at a time.
#pragma once

#include <QDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSlider>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "unet/infer/predictor.h"

namespace unet::gui {

class PredictWindow : public QDialog {
  Q_OBJECT
 public:
  explicit PredictWindow(QWidget* parent = nullptr);
  ~PredictWindow() override;

  // Runs `checkpoint` on `images` (image files) on `device`; false (why in status_text()) when it cannot
  // start. The results arrive later: finished() is emitted, and then prediction_count() holds them.
  bool predict(const QString& checkpoint, const QStringList& images, const DeviceId& device = {});
  // Writes each prediction's mask as <folder>/<stem>_mask.png; asks before replacing files unless `quiet`
  // (which refuses instead). False (why in status_text()) when nothing or not all was written.
  bool save_masks(const QString& folder, bool quiet = false);

  void set_checkpoint(const QString& checkpoint);
  void set_threshold(double threshold);  // binary models: the foreground probability, 0..1
  double threshold() const;
  bool busy() const { return worker_.joinable() && !done_; }
  int prediction_count() const { return static_cast<int>(results_.size()); }
  QString status_text() const { return status_->text(); }
  QString legend_text() const { return legend_->text(); }
  // The class indices the view shows for prediction `i` at the current threshold.
  std::vector<std::uint8_t> mask(int i) const;

 signals:
  void finished();

 private:
  struct Result {
    QString path;
    Image image;
    Prediction prediction;
  };
  void choose_images();
  void choose_folder();
  void show_selected();
  void done(std::vector<Result> results, const QString& error);

  QLineEdit* checkpoint_ = nullptr;
  QListWidget* list_ = nullptr;
  QLabel* view_ = nullptr;
  QLabel* legend_ = nullptr;
  QLabel* status_ = nullptr;
  QSlider* threshold_ = nullptr;
  QPushButton* run_ = nullptr;
  QPushButton* save_ = nullptr;
  QStringList inputs_;
  DeviceId device_;
  std::vector<Result> results_;
  std::int64_t classes_ = 1;
  std::thread worker_;
  std::atomic<bool> done_{true};
};

}  // namespace unet::gui
