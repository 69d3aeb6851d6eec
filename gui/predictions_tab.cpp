#include "gui/predictions_tab.h"

#include <QPixmap>
#include <QScrollArea>
#include <QVBoxLayout>

namespace unet::gui {

// Distinct colours for classes 1.., repeating after eight.
QColor class_colour(std::int64_t k) {
  static const QColor colours[] = {{0xe6, 0x4b, 0x3c}, {0x2e, 0xcc, 0x71}, {0x34, 0x98, 0xdb},
                                   {0xf1, 0xc4, 0x0f}, {0x9b, 0x59, 0xb6}, {0x1a, 0xbc, 0x9c},
                                   {0xe6, 0x7e, 0x22}, {0xec, 0x70, 0xa0}};
  return colours[(k - 1) % 8];
}

namespace {

QPixmap scaled(const QImage& image, int side) {
  return QPixmap::fromImage(image.scaled(side, side, Qt::KeepAspectRatio, Qt::FastTransformation));
}

}  // namespace

QImage PredictionsTab::input_image(const PredictionSample& s) {
  QImage image(static_cast<int>(s.width), static_cast<int>(s.height), QImage::Format_RGB32);
  for (std::int64_t y = 0; y < s.height; ++y)
    for (std::int64_t x = 0; x < s.width; ++x) {
      const std::uint8_t* p = s.image.data() + (y * s.width + x) * s.channels;
      const int r = p[0], g = s.channels >= 3 ? p[1] : r, b = s.channels >= 3 ? p[2] : r;
      image.setPixel(static_cast<int>(x), static_cast<int>(y), qRgb(r, g, b));
    }
  return image;
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

QImage PredictionsTab::overlay_image(const PredictionSample& s) {
  QImage image = input_image(s);
  for (std::int64_t y = 0; y < s.height; ++y)
    for (std::int64_t x = 0; x < s.width; ++x) {
      const float* p = s.probabilities.data() + (y * s.width + x) * s.classes;
      std::int64_t k = 0;
      float alpha = 0;
      if (s.classes == 1) {
        k = p[0] >= 0.5f ? 1 : 0;
        alpha = p[0];  // the more certain, the more opaque
      } else {
        for (std::int64_t c = 1; c < s.classes; ++c)
          if (p[c] > p[k]) k = c;
        alpha = p[k];
      }
      if (k == 0) continue;
      const QColor c = class_colour(k), under(image.pixel(static_cast<int>(x), static_cast<int>(y)));
      const float a = 0.25f + 0.5f * alpha;
      image.setPixel(static_cast<int>(x), static_cast<int>(y),
                     qRgb(static_cast<int>(under.red() * (1 - a) + c.red() * a),
                          static_cast<int>(under.green() * (1 - a) + c.green() * a),
                          static_cast<int>(under.blue() * (1 - a) + c.blue() * a)));
    }
  return image;
}

PredictionsTab::PredictionsTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  caption_ = new QLabel(tr("Validation samples appear here after each epoch."), this);
  layout->addWidget(caption_);
  auto* scroll = new QScrollArea(this);
  auto* inner = new QWidget(scroll);
  grid_ = new QGridLayout(inner);
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  layout->addWidget(scroll, 1);
  int column = 0;
  for (const QString& title : {tr("Input"), tr("Ground truth"), tr("Prediction")}) {
    auto* header = new QLabel("<b>" + title + "</b>", inner);
    header->setAlignment(Qt::AlignCenter);
    grid_->addWidget(header, 0, column++);
  }
}

void PredictionsTab::clear() {
  while (grid_->count() > 3) {
    QLayoutItem* item = grid_->takeAt(3);
    delete item->widget();
    delete item;
  }
  samples_ = 0;
}

void PredictionsTab::show_predictions(const PredictionsReport& report) {
  clear();
  const int side = 192;
  int row = 1;
  for (const PredictionSample& s : report.samples) {
    const QImage pictures[] = {input_image(s), truth_image(s), overlay_image(s)};
    for (int column = 0; column < 3; ++column) {
      auto* label = new QLabel(grid_->parentWidget());
      label->setPixmap(scaled(pictures[column], side));
      label->setAlignment(Qt::AlignCenter);
      grid_->addWidget(label, row, column);
    }
    ++row;
  }
  samples_ = static_cast<int>(report.samples.size());
  caption_->setText(tr("After epoch %1 (step %2): %3 %4")
                        .arg(report.epoch)
                        .arg(report.step)
                        .arg(samples_)
                        .arg(samples_ == 1 ? tr("validation sample") : tr("validation samples")));
}

}  // namespace unet::gui
