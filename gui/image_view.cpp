#include "gui/image_view.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

namespace unet::gui {

namespace {

constexpr double kZoomStep = 1.25;  // one click of +, -, or one notch of the wheel
constexpr double kMinScale = 1.0 / 64, kMaxScale = 64;
constexpr int kWheelNotch = 120;  // QWheelEvent's angleDelta of one notch

}  // namespace

// The picture itself: where it lies (origin_: the image's top-left corner in the canvas, whole pixels) and
// at what scale, and the mouse and keys that change those.
class ImageView::Canvas : public QWidget {
 public:
  Canvas(std::function<void()> zoomed, std::function<void(QPointF)> clicked, QWidget* parent)
      : QWidget(parent), zoomed_(std::move(zoomed)), clicked_(std::move(clicked)) {
    setMinimumSize(200, 200);
    setFocusPolicy(Qt::StrongFocus);
    setCursor(Qt::OpenHandCursor);
  }

  void show_image(const QImage& base, const QImage& layer) {
    const bool same_size = !base_.isNull() && base.size() == base_.size();
    base_ = base.convertToFormat(QImage::Format_RGB32);
    layer_ = layer;
    recompose();
    if (same_size)
      update();
    else
      fit();
  }

  void clear() {
    base_ = layer_ = composed_ = QImage();
    update();
  }

  void set_opacity(double opacity) {
    opacity_ = opacity;
    recompose();
    update();
  }

  const QImage& composed() const { return composed_; }
  double scale() const { return scale_; }
  bool fitted() const { return fitted_; }
  QPointF image_point_at(QPointF p) const { return (p - origin_) / scale_; }
  QPointF canvas_point_of(QPointF p) const { return origin_ + p * scale_; }
  QPointF centre() const { return {width() / 2.0, height() / 2.0}; }

  // `steps` steps of kZoomStep in (> 0) or out (< 0), the image point under `anchor` staying there.
  void zoom(int steps, QPointF anchor) {
    double scale = scale_;
    for (int i = 0; i < steps; ++i) scale *= kZoomStep;
    for (int i = 0; i > steps; --i) scale /= kZoomStep;
    zoom_to(scale, anchor);
  }

  void zoom_to(double scale, QPointF anchor) {
    const QPointF under = image_point_at(anchor);
    scale_ = std::clamp(scale, kMinScale, kMaxScale);
    fitted_ = false;
    place(anchor - under * scale_);
  }

  void fit() {
    fitted_ = true;
    if (!base_.isNull() && width() > 0 && height() > 0)
      scale_ = std::clamp(std::min(static_cast<double>(width()) / base_.width(),
                                   static_cast<double>(height()) / base_.height()),
                          kMinScale, kMaxScale);
    place(origin_);
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter painter(this);
    painter.fillRect(rect(), QColor(48, 48, 48));
    if (composed_.isNull()) return;
    // Only the image pixels in view are drawn: at a high zoom the whole image scaled would be enormous.
    const QRectF in_view(image_point_at(QPointF(0, 0)), image_point_at(QPointF(width(), height())));
    const QRectF visible = in_view.intersected(QRectF(composed_.rect()));
    if (visible.isEmpty()) return;
    const QRect source(
        QPoint(static_cast<int>(std::floor(visible.left())), static_cast<int>(std::floor(visible.top()))),
        QPoint(static_cast<int>(std::ceil(visible.right())) - 1,
               static_cast<int>(std::ceil(visible.bottom())) - 1));
    // Zoomed in, each image pixel a sharp square (what a microscopist checks); zoomed out, smoothed.
    painter.setRenderHint(QPainter::SmoothPixmapTransform, scale_ < 1);
    painter.drawImage(QRectF(canvas_point_of(source.topLeft()), QSizeF(source.size()) * scale_), composed_,
                      source);
  }

  void resizeEvent(QResizeEvent*) override {
    if (fitted_)
      fit();
    else
      place(origin_);
  }

  void wheelEvent(QWheelEvent* event) override {
    if (composed_.isNull()) return;
    wheel_ += event->angleDelta().y();
    const int steps = wheel_ / kWheelNotch;  // a touchpad's small deltas add up to notches
    wheel_ -= steps * kWheelNotch;
    if (steps != 0) zoom(steps, event->position());
    event->accept();
  }

  void mousePressEvent(QMouseEvent* event) override {
    if (event->button() != Qt::LeftButton) return;
    drag_from_ = event->position();
    origin_at_press_ = origin_;
    setCursor(Qt::ClosedHandCursor);
  }

  void mouseMoveEvent(QMouseEvent* event) override {
    if (!drag_from_ || !(event->buttons() & Qt::LeftButton)) return;
    place(origin_at_press_ + event->position() - *drag_from_);
  }

  void mouseReleaseEvent(QMouseEvent* event) override {
    if (event->button() != Qt::LeftButton) return;
    // A press and release close together is a click, not a drag: it picks what is under it.
    if (drag_from_ && !composed_.isNull() &&
        (event->position() - *drag_from_).manhattanLength() < QApplication::startDragDistance())
      clicked_(image_point_at(event->position()));
    drag_from_.reset();
    setCursor(Qt::OpenHandCursor);
  }

  void keyPressEvent(QKeyEvent* event) override {
    switch (event->key()) {
      case Qt::Key_Plus:
      case Qt::Key_Equal:
        zoom(1, centre());
        break;
      case Qt::Key_Minus:
        zoom(-1, centre());
        break;
      case Qt::Key_0:
        fit();
        break;
      case Qt::Key_1:
        zoom_to(1, centre());
        break;
      default:
        QWidget::keyPressEvent(event);
    }
  }

 private:
  void recompose() { composed_ = base_.isNull() ? QImage() : compose(base_, layer_, opacity_); }

  // The image at `origin`, kept in view: centred on an axis where it is smaller than the canvas, else with
  // no empty band on either side; whole pixels, so that 100 % draws each pixel as it is.
  void place(QPointF origin) {
    const QSizeF shown = QSizeF(base_.size()) * scale_;
    auto axis = [](double at, double size, double room) {
      return size <= room ? (room - size) / 2 : std::clamp(at, room - size, 0.0);
    };
    origin_ = QPointF(std::round(axis(origin.x(), shown.width(), width())),
                      std::round(axis(origin.y(), shown.height(), height())));
    update();
    zoomed_();
  }

  std::function<void()> zoomed_;
  std::function<void(QPointF)> clicked_;
  QImage base_, layer_, composed_;
  double opacity_ = default_opacity / 100.0;
  double scale_ = 1;
  bool fitted_ = true;
  QPointF origin_;
  std::optional<QPointF> drag_from_;
  QPointF origin_at_press_;
  int wheel_ = 0;
};

ImageView::ImageView(QWidget* parent) : QWidget(parent) {
  zoom_ = new QLabel(this);
  zoom_->setMinimumWidth(48);
  canvas_ = new Canvas([this] { show_zoom(); }, [this](QPointF at) { emit clicked(at); }, this);
  auto button = [this](const QString& text, const char* name, const QString& tip, auto act) {
    auto* b = new QToolButton(this);
    b->setText(text);
    b->setObjectName(name);
    b->setToolTip(tip);
    connect(b, &QToolButton::clicked, this, act);
    return b;
  };
  opacity_ = new QSlider(Qt::Horizontal, this);
  opacity_->setObjectName("overlay_opacity");
  opacity_->setRange(0, 100);
  opacity_->setValue(default_opacity);
  opacity_->setMaximumWidth(160);
  opacity_->setToolTip(tr("How strongly the classes' colours cover the picture: 0 %, the picture alone"));
  auto* opacity_value = new QLabel(tr("%1 %").arg(default_opacity), this);
  opacity_value->setMinimumWidth(40);
  connect(opacity_, &QSlider::valueChanged, this, [this, opacity_value](int percent) {
    opacity_value->setText(tr("%1 %").arg(percent));
    canvas_->set_opacity(percent / 100.0);
  });

  auto* controls = new QHBoxLayout;
  controls->addWidget(button(tr("−"), "zoom_out", tr("Zoom out (-, or the wheel)"), &ImageView::zoom_out));
  controls->addWidget(button(tr("+"), "zoom_in", tr("Zoom in (+, or the wheel)"), &ImageView::zoom_in));
  controls->addWidget(button(tr("Fit"), "zoom_fit", tr("The whole image in the view (0)"), &ImageView::fit));
  controls->addWidget(button(tr("100 %"), "zoom_actual", tr("One screen pixel per image pixel (1)"),
                             &ImageView::actual_size));
  controls->addWidget(zoom_);
  controls->addStretch(1);
  controls->addWidget(new QLabel(tr("Overlay"), this));
  controls->addWidget(opacity_);
  controls->addWidget(opacity_value);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(canvas_, 1);
  canvas_->setToolTip(tr("Drag to pan; the wheel zooms about the pointer"));
  show_zoom();
}

void ImageView::show_image(const QImage& base, const QImage& layer) {
  canvas_->show_image(base, layer);
}

void ImageView::clear() {
  canvas_->clear();
  show_zoom();
}

void ImageView::set_opacity(int percent) {
  opacity_->setValue(percent);
}

int ImageView::opacity() const {
  return opacity_->value();
}

double ImageView::scale() const {
  return canvas_->scale();
}

bool ImageView::fitted() const {
  return canvas_->fitted();
}

void ImageView::zoom_in() {
  canvas_->zoom(1, canvas_->centre());
}

void ImageView::zoom_out() {
  canvas_->zoom(-1, canvas_->centre());
}

void ImageView::fit() {
  canvas_->fit();
}

void ImageView::actual_size() {
  canvas_->zoom_to(1, canvas_->centre());
}

QPointF ImageView::image_point_at(QPointF canvas_point) const {
  return canvas_->image_point_at(canvas_point);
}

QPointF ImageView::canvas_point_of(QPointF image_point) const {
  return canvas_->canvas_point_of(image_point);
}

QWidget* ImageView::canvas() const {
  return canvas_;
}

const QImage& ImageView::composed() const {
  return canvas_->composed();
}

void ImageView::show_zoom() {
  zoom_->setText(canvas_->composed().isNull() ? QString()
                                              : tr("%1 %").arg(std::lround(canvas_->scale() * 100)));
}

QImage ImageView::compose(const QImage& base, const QImage& layer, double opacity) {
  QImage out = base.convertToFormat(QImage::Format_RGB32);
  if (layer.isNull() || opacity <= 0) return out;
  const QImage over = layer.convertToFormat(QImage::Format_ARGB32);  // straight, not premultiplied, alpha
  const int width = std::min(out.width(), over.width()), height = std::min(out.height(), over.height());
  for (int y = 0; y < height; ++y) {
    auto* pixel = reinterpret_cast<QRgb*>(out.scanLine(y));
    const auto* colour = reinterpret_cast<const QRgb*>(over.constScanLine(y));
    for (int x = 0; x < width; ++x) {
      const double a = qAlpha(colour[x]) / 255.0 * opacity;
      if (a <= 0) continue;
      auto mix = [a](int under, int over_it) {
        return static_cast<int>(std::lround(under + (over_it - under) * a));
      };
      pixel[x] = qRgb(mix(qRed(pixel[x]), qRed(colour[x])), mix(qGreen(pixel[x]), qGreen(colour[x])),
                      mix(qBlue(pixel[x]), qBlue(colour[x])));
    }
  }
  return out;
}

}  // namespace unet::gui
