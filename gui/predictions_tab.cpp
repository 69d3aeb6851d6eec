#include "gui/predictions_tab.h"

#include <QPixmap>
#include <QScrollArea>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

#include "gui/image_view.h"

namespace unet::gui {

// Distinct colours for classes 1.., repeating after eight.
QColor class_colour(std::int64_t k) {
  static const QColor colours[] = {{0xe6, 0x4b, 0x3c}, {0x2e, 0xcc, 0x71}, {0x34, 0x98, 0xdb},
                                   {0xf1, 0xc4, 0x0f}, {0x9b, 0x59, 0xb6}, {0x1a, 0xbc, 0x9c},
                                   {0xe6, 0x7e, 0x22}, {0xec, 0x70, 0xa0}};
  return colours[(k - 1) % 8];
}

QImage rgb_image(const std::uint8_t* pixels, std::int64_t height, std::int64_t width, std::int64_t channels) {
  QImage image(static_cast<int>(width), static_cast<int>(height), QImage::Format_RGB32);
  for (int y = 0; y < image.height(); ++y) {
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(y));
    for (int x = 0; x < image.width(); ++x) {
      const std::uint8_t* p = pixels + (y * width + x) * channels;
      line[x] = channels >= 3 ? qRgb(p[0], p[1], p[2]) : qRgb(p[0], p[0], p[0]);
    }
  }
  return image;
}

QImage class_layer(const std::uint8_t* classes, std::int64_t height, std::int64_t width) {
  QImage layer(static_cast<int>(width), static_cast<int>(height), QImage::Format_ARGB32);
  for (int y = 0; y < layer.height(); ++y) {
    auto* line = reinterpret_cast<QRgb*>(layer.scanLine(y));
    for (int x = 0; x < layer.width(); ++x) {
      const std::uint8_t k = classes[y * width + x];
      line[x] = k == 0 ? qRgba(0, 0, 0, 0) : class_colour(k).rgb();
    }
  }
  return layer;
}

namespace {

constexpr int kThumbnailSide = 192;

}  // namespace

QImage PredictionsTab::input_image(const PredictionSample& s) {
  return rgb_image(s.image.data(), s.height, s.width, s.channels);
}

QImage PredictionsTab::truth_image(const PredictionSample& s) {
  QImage image(static_cast<int>(s.width), static_cast<int>(s.height), QImage::Format_RGB32);
  for (std::int64_t y = 0; y < s.height; ++y)
    for (std::int64_t x = 0; x < s.width; ++x) {
      const std::uint8_t k = s.mask[static_cast<std::size_t>(y * s.width + x)];
      image.setPixel(static_cast<int>(x), static_cast<int>(y),
                     k == 0 ? qRgb(20, 20, 20) : class_colour(k).rgb());
    }
  return image;
}

QImage PredictionsTab::prediction_layer(const PredictionSample& s) {
  QImage layer(static_cast<int>(s.width), static_cast<int>(s.height), QImage::Format_ARGB32);
  for (std::int64_t y = 0; y < s.height; ++y)
    for (std::int64_t x = 0; x < s.width; ++x) {
      const float* p = s.probabilities.data() + (y * s.width + x) * s.classes;
      std::int64_t k = 0;
      float certainty = 0;  // the chosen class's probability: the more certain, the more opaque
      if (s.classes == 1) {
        k = p[0] >= 0.5f ? 1 : 0;
        certainty = p[0];
      } else {
        for (std::int64_t c = 1; c < s.classes; ++c)
          if (p[c] > p[k]) k = c;
        certainty = p[k];
      }
      const QColor c = k == 0 ? QColor(0, 0, 0) : class_colour(k);
      const int alpha = k == 0 ? 0 : static_cast<int>(std::lround(255 * std::clamp(certainty, 0.0f, 1.0f)));
      layer.setPixel(static_cast<int>(x), static_cast<int>(y), qRgba(c.red(), c.green(), c.blue(), alpha));
    }
  return layer;
}

QImage PredictionsTab::overlay_image(const PredictionSample& s) {
  return ImageView::compose(input_image(s), prediction_layer(s), ImageView::default_opacity / 100.0);
}

PredictionsTab::PredictionsTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  caption_ = new QLabel(this);
  layout->addWidget(caption_);
  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* scroll = new QScrollArea(split);
  auto* inner = new QWidget(scroll);
  grid_ = new QGridLayout(inner);
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  auto* full_size = new QWidget(split);
  auto* full_size_layout = new QVBoxLayout(full_size);
  full_size_layout->setContentsMargins(0, 0, 0, 0);
  view_caption_ = new QLabel(full_size);
  view_ = new ImageView(full_size);
  full_size_layout->addWidget(view_caption_);
  full_size_layout->addWidget(view_, 1);
  split->addWidget(scroll);
  split->addWidget(full_size);
  split->setStretchFactor(1, 1);
  layout->addWidget(split, 1);
  int column = 0;
  for (const QString& title : {tr("Input"), tr("Ground truth"), tr("Prediction")}) {
    auto* header = new QLabel("<b>" + title + "</b>", inner);
    header->setAlignment(Qt::AlignCenter);
    grid_->addWidget(header, 0, column++);
  }
  clear();
}

QAbstractButton* PredictionsTab::thumbnail(int sample, int column) const {
  if (sample < 0 || sample >= std::ssize(thumbnails_) || column < 0 || column >= 3) return nullptr;
  return thumbnails_[static_cast<std::size_t>(sample)][static_cast<std::size_t>(column)];
}

void PredictionsTab::remove_samples() {
  while (grid_->count() > 3) {
    QLayoutItem* item = grid_->takeAt(3);
    delete item->widget();
    delete item;
  }
  thumbnails_.clear();
  samples_.clear();
}

void PredictionsTab::clear() {
  remove_samples();
  shown_ = -1;
  truth_shown_ = false;
  caption_->setText(tr("Validation samples appear here after each epoch."));
  view_caption_->setText(tr("Click a sample to see it at full size."));
  view_->clear();
}

void PredictionsTab::show_predictions(const PredictionsReport& report) {
  remove_samples();  // the view keeps its picture, and its zoom, until the new one replaces it
  samples_ = report.samples;
  int row = 1;
  for (const PredictionSample& s : samples_) {
    const QImage pictures[] = {input_image(s), truth_image(s), overlay_image(s)};
    std::array<QAbstractButton*, 3>& buttons = thumbnails_.emplace_back();
    for (int column = 0; column < 3; ++column) {
      auto* button = new QToolButton(grid_->parentWidget());
      button->setIcon(QPixmap::fromImage(pictures[column].scaled(
          kThumbnailSide, kThumbnailSide, Qt::KeepAspectRatio, Qt::FastTransformation)));
      button->setIconSize(QSize(kThumbnailSide, kThumbnailSide));
      button->setAutoRaise(true);
      button->setToolTip(column == 1 ? tr("Show the ground truth over the input at full size")
                                     : tr("Show the prediction over the input at full size"));
      const int sample = row - 1;
      connect(button, &QToolButton::clicked, this,
              [this, sample, column] { show_sample(sample, column == 1); });
      grid_->addWidget(button, row, column);
      buttons[static_cast<std::size_t>(column)] = button;
    }
    ++row;
  }
  caption_->setText(tr("After epoch %1 (step %2): %3 %4")
                        .arg(report.epoch)
                        .arg(report.step)
                        .arg(sample_count())
                        .arg(sample_count() == 1 ? tr("validation sample") : tr("validation samples")));
  // The sample on show stays on show (at the same zoom) through the next epochs.
  if (!samples_.empty()) show_sample(shown_ >= 0 && shown_ < sample_count() ? shown_ : 0, truth_shown_);
}

void PredictionsTab::show_sample(int sample, bool truth) {
  const PredictionSample& s = samples_.at(static_cast<std::size_t>(sample));
  shown_ = sample;
  truth_shown_ = truth;
  view_->show_image(input_image(s),
                    truth ? class_layer(s.mask.data(), s.height, s.width) : prediction_layer(s));
  view_caption_->setText(truth ? tr("Sample %1: the ground truth over the input").arg(sample + 1)
                               : tr("Sample %1: the prediction over the input").arg(sample + 1));
}

}  // namespace unet::gui
