#include "gui/wheel_guard.h"

#include <QEvent>

namespace unet::gui {

namespace {

class WheelGuard final : public QObject {
 public:
  explicit WheelGuard(QObject* parent) : QObject(parent) {}

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::Wheel) return false;
    const auto* editor = qobject_cast<QWidget*>(watched);
    if (!editor || editor->hasFocus()) return false;
    // Not for this editor: ignored, so that QApplication offers it to the parent (the scroll area).
    event->ignore();
    return true;
  }
};

}  // namespace

void take_wheel_only_with_focus(QWidget* editor) {
  editor->setFocusPolicy(Qt::StrongFocus);
  editor->installEventFilter(new WheelGuard(editor));
}

}  // namespace unet::gui
