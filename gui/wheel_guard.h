// Value editors (spin boxes, combo boxes) that take the mouse wheel only once they have the focus: scrolling
// the config panel over them scrolls the panel instead of changing the settings under the pointer, as in
// most desktop applications' settings pages.
#pragma once

#include <QWidget>

namespace unet::gui {

// Makes `editor` take the focus only by click or Tab (not by the wheel) and pass wheel events on to its
// parent (the scroll area) while it does not have the focus.
void take_wheel_only_with_focus(QWidget* editor);

}  // namespace unet::gui
