// A picture at full size with a layer of classes laid over it: zoomed (the wheel about the pointer, + and -,
// Fit, 100 %, and the keys +, -, 0 for fit, 1 for 100 %), panned by dragging, the layer blended at the
// opacity its slider sets. The Predictions tab shows a validation sample in one and the Predict window the
// selected image (issue 25: 190-px thumbnails with no zoom and no opacity control were all there was).
// A click (a press and release without a drag) reports the image point under it: clicked(), which the
// Predict window uses to show the object there. The blend is computed here, per pixel, base * (1 - a) +
// colour * a with a = the layer pixel's alpha times the opacity, so that what is drawn at 100 % is exactly
// composed().
#pragma once

#include <QImage>
#include <QLabel>
#include <QSlider>
#include <QWidget>

namespace unet::gui {

class ImageView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int default_opacity = 60;  // percent: the classes show, the picture under them still does

  explicit ImageView(QWidget* parent = nullptr);

  // `base` with `layer` over it (ARGB32 of base's size: each pixel's colour and, in its alpha, how strongly
  // it covers the base at full opacity; a null layer: none). A picture of the size on show keeps the zoom and
  // the position (the threshold moved, the next epoch's sample, the next image of a series); one of another
  // size is fitted to the view.
  void show_image(const QImage& base, const QImage& layer = {});
  void clear();

  void set_opacity(int percent);  // the layer's, 0..100
  int opacity() const;
  double scale() const;  // screen pixels per image pixel
  bool fitted() const;   // the image follows the view's size
  void zoom_in();
  void zoom_out();
  void fit();
  void actual_size();  // 100 %

  // Where a point of the canvas lies in the image, in image pixels (outside the image too), and back.
  QPointF image_point_at(QPointF canvas_point) const;
  QPointF canvas_point_of(QPointF image_point) const;
  QWidget* canvas() const;
  // The image with its layer blended at the current opacity (null when nothing is shown).
  const QImage& composed() const;

  // base * (1 - a) + layer colour * a per pixel, a = layer alpha / 255 * opacity, rounded to the nearest.
  static QImage compose(const QImage& base, const QImage& layer, double opacity);

 signals:
  // The left button pressed and released on the canvas within the drag distance of each other: the image
  // point under the release, in image pixels (outside the image too; nothing shown: not emitted).
  void clicked(QPointF image_point);

 private:
  class Canvas;
  void show_zoom();

  Canvas* canvas_ = nullptr;
  QSlider* opacity_ = nullptr;
  QLabel* zoom_ = nullptr;
};

}  // namespace unet::gui
