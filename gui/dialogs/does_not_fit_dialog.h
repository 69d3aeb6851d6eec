// The question Start asks when the planner predicts that the settings do not fit: which devices go over,
// and the best remedy that fits, offered as "Apply and Start".
#pragma once

#include <QWidget>

#include "gui/estimate_tasks.h"

namespace unet::gui {

class DoesNotFitDialog {
 public:
  // Asks modally about `e` (a plan that does not fit); the remedy to apply and start with, or nullptr when
  // the user cancels or no single remedy fits. The pointer is into `e.remedies`.
  static const Remedy* ask(QWidget* parent, const Estimate& e);
};

}  // namespace unet::gui
