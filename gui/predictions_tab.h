// The predictions tab: a few validation samples after each epoch, each as thumbnails of the input image, its
// ground truth, and the model's prediction laid over the input (the most likely class per pixel, the more
// certain the more opaque), and the chosen sample at full size in an ImageView (zoom, pan, the overlay's
// opacity), the prediction or (its thumbnail clicked) the ground truth over the input. The view keeps its
// zoom from one epoch to the next, so that a user can watch one region improve.
#pragma once

#include <QAbstractButton>
#include <QGridLayout>
#include <QImage>
#include <QLabel>
#include <QWidget>

#include <array>
#include <vector>

#include "unet/train/observer.h"

namespace unet::gui {

class ImageView;

// The colour of class k >= 1 wherever the workbench draws a segmentation (class 0, the background, has none).
QColor class_colour(std::int64_t k);
// `pixels` ([height, width, channels], 8 bits each) as an RGB picture; fewer than 3 channels: grey.
QImage rgb_image(const std::uint8_t* pixels, std::int64_t height, std::int64_t width, std::int64_t channels);
// An ImageView layer of class indices ([height, width]): each class > 0 in its colour, fully covering; class
// 0 clear.
QImage class_layer(const std::uint8_t* classes, std::int64_t height, std::int64_t width);

class PredictionsTab : public QWidget {
  Q_OBJECT
 public:
  explicit PredictionsTab(QWidget* parent = nullptr);
  void show_predictions(const PredictionsReport& report);
  // No samples: the caption and the view of a tab that has not shown any (a new run, a run opened).
  void clear();
  int sample_count() const { return static_cast<int>(samples_.size()); }
  QString caption() const { return caption_->text(); }
  ImageView* view() const { return view_; }
  // Sample `sample`'s thumbnail in `column` (0 input, 1 ground truth, 2 prediction), which shows it at full
  // size when clicked; nullptr when there is none.
  QAbstractButton* thumbnail(int sample, int column) const;

  // The pictures of a sample, as shown (before scaling): input, ground truth, prediction over the input (the
  // thumbnail: prediction_layer() at the view's default opacity), and the prediction as an ImageView layer.
  static QImage input_image(const PredictionSample& s);
  static QImage truth_image(const PredictionSample& s);
  static QImage overlay_image(const PredictionSample& s);
  static QImage prediction_layer(const PredictionSample& s);

 private:
  void show_sample(int sample, bool truth);
  void remove_samples();  // the thumbnails and the samples

  QLabel* caption_;
  QGridLayout* grid_;
  QLabel* view_caption_;
  ImageView* view_;
  std::vector<PredictionSample> samples_;
  std::vector<std::array<QAbstractButton*, 3>> thumbnails_;
  int shown_ = -1;  // the sample in the view
  bool truth_shown_ = false;
};

}  // namespace unet::gui
