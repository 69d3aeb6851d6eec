#include "gui/object_overlay.h"

#include <QObject>

#include <cmath>
#include <unordered_map>

namespace unet::gui {

QColor object_colour(ObjectId id) {
  constexpr double kGoldenFraction = 0.6180339887498949;  // (sqrt(5) - 1) / 2
  const double hue = std::fmod(static_cast<double>(id) * kGoldenFraction, 1.0);
  return QColor::fromHsvF(static_cast<float>(hue), 0.75F, 0.95F);
}

QImage object_layer(const LabelImage& labels) {
  QImage layer(static_cast<int>(labels.width), static_cast<int>(labels.height), QImage::Format_ARGB32);
  std::unordered_map<ObjectId, QRgb> colours;  // each id's colour, computed once
  for (int y = 0; y < layer.height(); ++y) {
    auto* line = reinterpret_cast<QRgb*>(layer.scanLine(y));
    for (int x = 0; x < layer.width(); ++x) {
      const ObjectId id = labels.at(y, x);
      if (id == 0) {
        line[x] = qRgba(0, 0, 0, 0);
        continue;
      }
      auto [at, added] = colours.try_emplace(id);
      if (added) at->second = object_colour(id).rgb();
      line[x] = at->second;
    }
  }
  return layer;
}

QString object_row_text(const ObjectDescription& o) {
  QString text = QObject::tr("Object %1: %2 px, centroid (y %3, x %4), box y0 %5, x0 %6, y1 %7, x1 %8")
                     .arg(o.id)
                     .arg(o.area)
                     .arg(o.centroid_y, 0, 'f', 1)
                     .arg(o.centroid_x, 0, 'f', 1)
                     .arg(o.y0)
                     .arg(o.x0)
                     .arg(o.y1)
                     .arg(o.x1);
  if (o.mean_probability) text += QObject::tr(", mean probability %1").arg(*o.mean_probability, 0, 'f', 3);
  return text;
}

}  // namespace unet::gui
