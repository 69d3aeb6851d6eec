// The predictions tab: a few validation samples after each epoch, each as the input image, its ground truth,
// and the model's prediction laid over the input (foreground probability as a translucent colour; the most
// likely class per pixel for a multi-class model).
#pragma once

#include <QGridLayout>
#include <QImage>
#include <QLabel>
#include <QWidget>

#include "unet/train/observer.h"

namespace unet::gui {

// The colour of class k >= 1 wherever the workbench draws a segmentation (class 0, the background, has none).
QColor class_colour(std::int64_t k);

class PredictionsTab : public QWidget {
  Q_OBJECT
 public:
  explicit PredictionsTab(QWidget* parent = nullptr);
  void show_predictions(const PredictionsReport& report);
  void clear();
  int sample_count() const { return samples_; }
  QString caption() const { return caption_->text(); }

  // The three pictures of a sample, as shown (before scaling): input, ground truth, prediction overlay.
  static QImage input_image(const PredictionSample& s);
  static QImage truth_image(const PredictionSample& s);
  static QImage overlay_image(const PredictionSample& s);

 private:
  QLabel* caption_;
  QGridLayout* grid_;
  int samples_ = 0;
};

}  // namespace unet::gui
